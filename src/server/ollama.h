// Ollama's API (/api/*), for the IDE plugins and tools that speak only it: discovery (version, tags, show,
// ps) and chat and generate, streamed as NDJSON, translated to a Conversation and back.
//
// docs/server.md ("Ollama") lists what is supported and what is accepted but ignored.
// Thread-safety: handlers run on the HTTP library's threads.
#ifndef LLAMAY_SERVER_OLLAMA_H_
#define LLAMAY_SERVER_OLLAMA_H_

#include <httplib.h>

#include "server/server.h"

namespace llamay::server {

// GET /api/version, GET /api/tags, POST /api/show, GET /api/ps, POST /api/chat, POST /api/generate.
void RegisterOllamaRoutes(Server& server, httplib::Server& http);

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_OLLAMA_H_
