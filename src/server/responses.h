// POST /v1/responses: OpenAI's Responses API (what Codex CLI and the Agents SDK's default model speak),
// translated to a Conversation and back, with state: a stored response is a held llamay context.
//
// A response stored (`store`, true unless the request says false) keeps its context as a held session whose
// id is the response's id. `previous_response_id` continues a fork of that context with only the new input
// items rendered, so the turn prefills its new input and nothing else (usage.input_tokens_details.
// cached_tokens counts the rest); the earlier response stays as it was and can be continued again (an agent
// that backtracks). Stored responses are held contexts like any other: /v1/contexts lists them, --state-dir
// saves them, --share-sessions writes each through to the store so that another instance continues it, and
// Server::HoldResponse bounds how many stay in memory. A previous response that is not held (never stored,
// deleted, evicted without a store) is 404 `previous_response_not_found`.
//
// docs/server.md ("Responses") lists what is supported and what is accepted but ignored.
// Thread-safety: handlers run on the HTTP library's threads; the state is the server's held contexts.
#ifndef LLAMAY_SERVER_RESPONSES_H_
#define LLAMAY_SERVER_RESPONSES_H_

#include <httplib.h>

#include <string>

#include "server/server.h"

namespace llamay::server {

// POST /v1/responses. `req` is only watched: a client that leaves cancels the work.
void HandleResponses(Server& server, const httplib::Request& req, const std::string& body, httplib::Response& res);
// DELETE /v1/responses/{id}: releases a stored response's context.
void HandleDeleteResponse(Server& server, const std::string& id, httplib::Response& res);
// GET /v1/responses/{id}: the stored response as it was answered (kept in memory with its context by the
// instance that answered it; a response restored from --state-dir or another instance's is 404 here,
// though previous_response_id continues it).
void HandleGetResponse(Server& server, const std::string& id, httplib::Response& res);
// POST /v1/responses/input_tokens: the input tokens a request would have (usage.input_tokens), counted
// without running it: what its previous response holds and its input rendered after that.
void HandleInputTokens(Server& server, const std::string& body, httplib::Response& res);

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_RESPONSES_H_
