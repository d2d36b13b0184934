// POST /v1/chat/completions: OpenAI's Chat Completions API, translated to a Conversation and back.
#ifndef LLAMAY_SERVER_CHAT_COMPLETIONS_H_
#define LLAMAY_SERVER_CHAT_COMPLETIONS_H_

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "server/conversation.h"
#include "server/server.h"

namespace llamay::server {

// OpenAI chat messages: role system, developer (taken as system), user, assistant or tool; content a
// string, null, or an array of text parts (joined with newlines, as vLLM and llama.cpp do for templates
// that take strings; other part types are refused by name); assistant tool_calls (arguments a JSON
// string or an object) and reasoning sent back (reasoning_content, or reasoning); tool_call_id; name.
Result<std::vector<Message>> ParseChatMessages(const nlohmann::json& messages);

// `req` is only watched: a client that leaves before the answer is complete cancels its work.
void HandleChatCompletion(Server& server, const httplib::Request& req, const std::string& body,
                          httplib::Response& res);

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_CHAT_COMPLETIONS_H_
