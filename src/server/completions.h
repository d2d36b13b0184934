// POST /v1/completions and POST /v1/chat/completions.
#ifndef LLAMAY_SERVER_COMPLETIONS_H_
#define LLAMAY_SERVER_COMPLETIONS_H_

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "server/server.h"

namespace llamay::server {

void HandleCompletion(Server& server, const std::string& body, httplib::Response& res, bool chat);

// Renders chat messages with the model's template and tokenizes the prompt (BOS once).
Result<std::vector<int32_t>> ChatPromptTokens(engine::Engine& engine, const nlohmann::json& messages, bool session);

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_COMPLETIONS_H_
