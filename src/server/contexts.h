// The /v1/contexts routes: build, list, fork, snapshot, restore and delete held contexts.
#ifndef LLAMAY_SERVER_CONTEXTS_H_
#define LLAMAY_SERVER_CONTEXTS_H_

#include <httplib.h>

#include "server/server.h"

namespace llamay::server {

void RegisterContextRoutes(Server& server, httplib::Server& http);

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_CONTEXTS_H_
