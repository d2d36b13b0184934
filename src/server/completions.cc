#include "server/completions.h"

#include <atomic>
#include <chrono>

#include "server/conversation.h"
#include "server/generation.h"
#include "server/http_util.h"
#include "server/logprobs_json.h"
#include "server/openai_common.h"
#include "server/respond.h"

namespace llamay::server {
namespace {

// `prompt`: a string, one string in an array, or an array of token ids.
Status ParsePrompt(const json& pr, Conversation* c) {
  if (pr.is_string() || (pr.is_array() && pr.size() == 1 && pr[0].is_string())) {
    c->prompt_text = pr.is_string() ? pr.get<std::string>() : pr[0].get<std::string>();
    c->prompt_is_text = true;
    return Status::Ok();
  }
  if (pr.is_array() && !pr.empty() && pr[0].is_number_integer()) {
    for (const auto& t : pr) {
      if (!t.is_number_integer()) return InvalidArgumentError("'prompt' token arrays hold integers");
      // Checked as 64 bits: get<int32_t> would wrap 4294967298 to token 2.
      const bool in_range = t.is_number_unsigned() ? t.get<uint64_t>() <= uint64_t{INT32_MAX}
                                                   : (t.get<int64_t>() >= 0 && t.get<int64_t>() <= INT32_MAX);
      if (!in_range) return InvalidArgumentError("'prompt' token id " + t.dump() + " is out of range");
      c->prompt_tokens.push_back(t.get<int32_t>());
    }
    return Status::Ok();
  }
  return InvalidArgumentError("'prompt' must be a string, one string in an array, or an array of token ids");
}

Status ParseRequest(const json& body, const std::string& raw, Conversation* c, bool* include_usage) {
  c->chat = false;
  c->max_tokens = 16;
  try {
    LLAMAY_RETURN_IF_ERROR(ParseLlamayExtensions(body, c));
    if (!body.contains("prompt")) return InvalidArgumentError("'prompt' is required");
    LLAMAY_RETURN_IF_ERROR(ParsePrompt(body["prompt"], c));
    LLAMAY_RETURN_IF_ERROR(ParseOpenAiGeneration(body, c, include_usage));
    LLAMAY_RETURN_IF_ERROR(OptInt(body, "logprobs", 0, 20, &c->top_logprobs));
    c->echo = Opt(body, "echo", false);
  } catch (const json::exception& e) {
    return InvalidArgumentError(std::string("a field has the wrong type: ") + e.what());
  }
  LLAMAY_ASSIGN_OR_RETURN(c->format, RequestFormat(body, raw));
  return Status::Ok();
}

// The Completions API's wire format.
class CompletionWire : public OpenAiWire {
 public:
  CompletionWire(Server& server, bool include_usage) : OpenAiWire(server, "cmpl-", include_usage) {}

  json Body(const Generation& g) override {
    json choices = json::array();
    for (size_t i = 0; i < g.n(); ++i) {
      const ChoiceResult& r = g.result(i);
      choices.push_back({{"index", i}, {"text", r.content}, {"logprobs", Logprobs(g, r.logprobs)},
                         {"finish_reason", FinishName(r.finish)}});
    }
    return Answer("text_completion", std::move(choices), g);
  }

  std::string Update(const Generation& g, const ChoiceUpdate& u) override {
    std::string out = FailureLine(g, u);
    std::string text;
    for (const OutputEvent& e : u.events)
      if (e.kind == OutputEvent::Kind::kText) text += e.text;
    const json logprobs = u.logprobs.empty() ? json(nullptr) : Logprobs(g, u.logprobs);
    if (!text.empty() || u.first || !logprobs.is_null()) out += SseData(Chunk(u.choice, text, logprobs, nullptr));
    if (u.finished) out += SseData(Chunk(u.choice, "", nullptr, FinishName(g.result(u.choice).finish)));
    return out;
  }

 private:
  json Logprobs(const Generation& g, std::span<const LogprobEntry> entries) const {
    if (g.request().top_logprobs < 0) return nullptr;
    return CompletionLogprobsJson(server_.engine().tokenizer(), entries);
  }
  json Chunk(size_t i) const override { return Chunk(i, "", nullptr, nullptr); }
  json Chunk(size_t i, const std::string& text, const json& logprobs, const json& finish) const {
    json out = Head("text_completion");
    out["choices"] = json::array({{{"index", i}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", finish}}});
    return out;
  }

};

}  // namespace

void HandleCompletion(Server& server, const httplib::Request& req, const std::string& raw, httplib::Response& res) {
  json body;
  if (!ParseBody(raw, res, &body)) return;
  Conversation c;
  bool include_usage = false;
  if (Status s = ParseRequest(body, raw, &c, &include_usage); !s.ok()) return SendStatus(res, s);
  auto gen = Generation::Start(server, std::move(c), WatchConnection(req));
  if (!gen.ok()) return SendStatus(res, gen.status());
  Respond(std::move(*gen), std::make_shared<CompletionWire>(server, include_usage), res);
}

}  // namespace llamay::server
