// POST /v1/completions: OpenAI's (legacy) Completions API, translated to a Conversation and back.
#ifndef LLAMAY_SERVER_COMPLETIONS_H_
#define LLAMAY_SERVER_COMPLETIONS_H_

#include <httplib.h>

#include <string>

#include "server/server.h"

namespace llamay::server {

// `req` is only watched: a client that leaves before the answer is complete cancels its work.
void HandleCompletion(Server& server, const httplib::Request& req, const std::string& body, httplib::Response& res);

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_COMPLETIONS_H_
