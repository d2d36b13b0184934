// POST /v1/messages and POST /v1/messages/count_tokens: Anthropic's Messages API, as Claude Code and the
// Anthropic SDKs use it, translated to a Conversation and back. Errors are Anthropic's shape:
// {"type": "error", "error": {"type": ..., "message": ...}}.
#ifndef LLAMAY_SERVER_MESSAGES_H_
#define LLAMAY_SERVER_MESSAGES_H_

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "server/conversation.h"
#include "server/server.h"

namespace llamay::server {

// The body's system, messages, tools and tool_choice into c. Content blocks: text, tool_use, tool_result
// (a string or text blocks), thinking and redacted_thinking (reasoning sent back); image and document
// blocks are refused by name. Claude Code's per-request `x-anthropic-billing-header` line in the system
// prompt is dropped, so the prompt (and the prefix tree's reuse) is the same on every turn;
// cache_control changes nothing.
Status ParseAnthropicConversation(const nlohmann::json& body, Conversation* c);

// Anthropic's error object for a status, with the HTTP status it maps to.
void SendAnthropicError(httplib::Response& res, int http_status, const std::string& message);

void HandleMessages(Server& server, const httplib::Request& req, const std::string& body, httplib::Response& res);
void HandleCountTokens(Server& server, const std::string& body, httplib::Response& res);

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_MESSAGES_H_
