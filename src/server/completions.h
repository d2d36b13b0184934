// POST /v1/completions and POST /v1/chat/completions.
#ifndef LLAMAY_SERVER_COMPLETIONS_H_
#define LLAMAY_SERVER_COMPLETIONS_H_

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "server/server.h"

namespace llamay::server {

// `req` is only watched: a client that leaves before the answer is complete cancels its work.
void HandleCompletion(Server& server, const httplib::Request& req, const std::string& body, httplib::Response& res,
                      bool chat);

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_COMPLETIONS_H_
