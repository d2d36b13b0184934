// libFuzzer target: HTTP request bodies through the server's shared request readers, in process and
// without a server (the request-parsing seam): a Server over the demo model costs an HTTP round trip and,
// for every body that parses, a generation per input, far slower than libFuzzer needs.
//
// Input: the request body. ParseBody (every POST route's first step) must accept a JSON object or answer a
// 400. Then, as the routes call them: ParseOpenAiTools (Chat Completions' tools, tool_choice,
// parallel_tool_calls), ParseSeed, ParseStop of "stop", OptIntImpl of "max_tokens", RequestFormat
// (response_format, json_schema or grammar, compiled), and ParseToolsDroppingUnsupported of the "tools"
// (the Messages and Responses routes' reader), on the body's key order as OrderedBody reads it.
//
// Properties: nothing crashes and nothing throws but nlohmann::json::exception from the readers that the
// routes call inside their `catch (const json::exception&)` (answered as a 400, "a field has the wrong
// type"); RequestFormat, which Chat Completions and Completions call outside it, throws nothing (a throw
// there is a 500), and neither does ParseToolsDroppingUnsupported, which reads tools already parsed.
// Every refusal has a message and maps (HttpStatusFor) to a 4xx status.
// Not reached here: each route's own ParseRequest (chat_completions.cc, completions.cc, messages.cc,
// responses.cc, ollama.cc) sits in an anonymous namespace and takes a Server; openai_common.cc's readers
// link against the generation code (OpenAiWire), which would bring the engine and model into the fuzz build.
// Build: cmake --preset fuzz && cmake --build build/fuzz --target request_fuzz
// Run:   build/fuzz/fuzz/request_fuzz -max_len=4096 CORPUS_DIR   (see docs/fuzzing.md)
#include <httplib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "sampling/sampling_params.h"
#include "server/conversation.h"
#include "server/http_util.h"
#include "server/structured_output.h"

namespace {

using llamay::Status;
using nlohmann::json;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "request_fuzz: property failed: %s\n", what);
    __builtin_trap();
  }
}

void CheckRefusal(const Status& s) {
  if (s.ok()) return;
  Check(!s.message().empty(), "a refusal has a message");
  const int http = llamay::server::HttpStatusFor(s);
  if (http >= 500) std::fprintf(stderr, "request_fuzz: %d for %s\n", http, s.ToString().c_str());
  Check(http >= 400 && http < 500, "a refusal of a request is a 4xx");
}

// Runs a reader the routes call inside their json::exception handler: that exception is a 400.
template <typename F>
void Guarded(F f) {
  try {
    f();
  } catch (const json::exception&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace server = llamay::server;
  const std::string raw(reinterpret_cast<const char*>(data), size);
  httplib::Response res;
  json body;
  if (!server::ParseBody(raw, res, &body)) {
    Check(res.status == 400 && !res.body.empty(), "an unreadable body is answered with a 400");
    return 0;
  }
  Check(body.is_object(), "ParseBody gives an object");

  server::Conversation c;
  Guarded([&] { CheckRefusal(server::ParseOpenAiTools(body, raw, &c)); });
  Guarded([&] { CheckRefusal(server::ParseSeed(body, &c.sampling)); });
  Guarded([&] {
    if (body.contains("stop")) CheckRefusal(server::ParseStop(body["stop"], "stop", 4, &c.stop));
  });
  Guarded([&] { CheckRefusal(server::OptInt(body, "max_tokens", 1, INT32_MAX, &c.max_tokens)); });

  // Outside any handler in two routes: must not throw at all. It compiles through the server's grammar
  // cache (server state shared by every input); emptied every 256 inputs, so that what the fuzzer holds stays
  // bounded (a first 10M-execution run grew to 1.8 GB with the cache's 256 MiB of grammars under ASan).
  static uint64_t inputs = 0;
  if (++inputs % 256 == 0) server::CompiledGrammars().Clear();
  auto format = server::RequestFormat(body, raw);
  if (!format.ok()) CheckRefusal(format.status());

  // It edits a copy of tools that toolcall::ParseTools has read, at the place its error names: a throw
  // means it misread that error, and answers a 400 "a field has the wrong type" for a well-typed request.
  const nlohmann::ordered_json ordered = server::OrderedBody(raw);
  if (ordered.is_object() && ordered.contains("tools")) {
    auto tools = server::ParseToolsDroppingUnsupported(ordered["tools"]);
    if (!tools.ok()) CheckRefusal(tools.status());
  }
  return 0;
}
