// Speculative decoding through the server (docs/server.md, "Speculative decoding"): on every surface a request
// with drafts answers exactly what the same request answers with `llamay_speculative: false`, and its usage
// reports the drafted and accepted tokens; a required tool call and n > 1 too; /metrics counts them.
#include <gtest/gtest.h>

#include <string>

#include "server/server_test_util.h"
#include "server/template_test_util.h"

namespace llamay::server {
namespace {

// Text that repeats itself, so that the request's own tokens give drafts.
const char* kRepeating = "abc abc abc abc abc abc abc abc abc abc abc abc abc abc abc abc";

class SpeculativeServerTest : public ServerTest {
 protected:
  void SetUp() override {
    engine::EngineOptions eo;
    eo.draft_token_cost = 0;  // drafting pays whatever this machine's timing
    Start({}, eo);
  }
  // Posts `body` with llamay_speculative false and then without it; returns both answers.
  std::pair<json, json> Both(const std::string& path, json body) {
    body["llamay_speculative"] = false;
    json plain = Post(path, body);
    body.erase("llamay_speculative");
    json spec = Post(path, body);
    return {plain, spec};
  }
};

TEST_F(SpeculativeServerTest, EverySurfaceAnswersTheSameAndReportsItsDrafts) {
  const json sampling = {{"temperature", 0.7}, {"seed", 11}};
  size_t accepted = 0;
  auto check_usage = [&](const json& plain_usage, const json& spec_usage, const std::string& what) {
    EXPECT_EQ(plain_usage["llamay_draft_tokens"], 0) << what;
    EXPECT_EQ(plain_usage["llamay_accepted_draft_tokens"], 0) << what;
    EXPECT_LE(spec_usage["llamay_accepted_draft_tokens"].get<size_t>(), spec_usage["llamay_draft_tokens"].get<size_t>())
        << what;
    accepted += spec_usage["llamay_accepted_draft_tokens"].get<size_t>();
  };
  {
    json body = {{"messages", {{{"role", "user"}, {"content", kRepeating}}}}, {"max_tokens", 80}};
    body.update(sampling);
    auto [plain, spec] = Both("/v1/chat/completions", body);
    EXPECT_EQ(spec["choices"][0]["message"], plain["choices"][0]["message"]);
    EXPECT_EQ(spec["usage"]["completion_tokens"], plain["usage"]["completion_tokens"]);
    check_usage(plain["usage"], spec["usage"], "chat");
  }
  {
    json body = {{"prompt", kRepeating}, {"max_tokens", 80}, {"logprobs", 2}};
    body.update(sampling);
    auto [plain, spec] = Both("/v1/completions", body);
    EXPECT_EQ(spec["choices"][0]["text"], plain["choices"][0]["text"]);
    EXPECT_EQ(spec["choices"][0]["logprobs"], plain["choices"][0]["logprobs"]);  // floats, compared exactly
    check_usage(plain["usage"], spec["usage"], "completions");
  }
  {
    json body = {{"input", kRepeating}, {"max_output_tokens", 80}};
    body.update(sampling);
    auto [plain, spec] = Both("/v1/responses", body);
    EXPECT_EQ(spec["output"][0]["content"], plain["output"][0]["content"]);  // (the ids differ)
    check_usage(plain["usage"], spec["usage"], "responses");
  }
  {
    json body = {{"model", "m"}, {"max_tokens", 80}, {"messages", {{{"role", "user"}, {"content", kRepeating}}}}};
    body.update(sampling);
    auto [plain, spec] = Both("/v1/messages", body);
    EXPECT_EQ(spec["content"], plain["content"]);
    check_usage(plain["usage"], spec["usage"], "messages");
  }
  {
    json body = {{"model", "m"}, {"prompt", kRepeating}, {"stream", false},
                 {"options", {{"num_predict", 80}, {"temperature", 0.7}, {"seed", 11}}}};
    auto [plain, spec] = Both("/api/generate", body);
    EXPECT_EQ(spec["response"], plain["response"]);
    check_usage(plain, spec, "ollama");
  }
  EXPECT_GT(accepted, 0u);
  // Counted in /metrics.
  auto m = client_->Get("/metrics");
  ASSERT_TRUE(m);
  const size_t at = m->body.find("\nllamay_accepted_draft_tokens_total ");
  ASSERT_NE(at, std::string::npos) << m->body;
  EXPECT_GT(std::stod(m->body.substr(at + 36)), 0.0);
  EXPECT_NE(m->body.find("\nllamay_draft_tokens_total "), std::string::npos);
  EXPECT_NE(m->body.find("\nllamay_speculative_steps_total "), std::string::npos);
}

TEST_F(SpeculativeServerTest, ChoicesAndStreamsAreTheSame) {
  // n > 1: each choice its own seed, all with drafts.
  json body = {{"prompt", kRepeating}, {"max_tokens", 60}, {"n", 3}, {"temperature", 0.9}, {"seed", 5}};
  auto [plain, spec] = Both("/v1/completions", body);
  ASSERT_EQ(spec["choices"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(spec["choices"][i]["text"], plain["choices"][i]["text"]) << i;
  EXPECT_GT(spec["usage"]["llamay_accepted_draft_tokens"].get<size_t>(), 0u);
  // A stream carries the same text, and its usage chunk the draft counts.
  json stream = {{"messages", {{{"role", "user"}, {"content", kRepeating}}}}, {"max_tokens", 60}, {"seed", 3},
                 {"temperature", 0.5}, {"stream", true}, {"stream_options", {{"include_usage", true}}}};
  std::string texts[2];
  json usage;
  for (int spec_on = 0; spec_on < 2; ++spec_on) {
    stream["llamay_speculative"] = spec_on == 1;
    auto r = client_->Post("/v1/chat/completions", stream.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    for (size_t at = 0; (at = r->body.find("data: {", at)) != std::string::npos; ++at) {
      const json chunk = json::parse(r->body.substr(at + 6, r->body.find('\n', at) - at - 6));
      if (!chunk["choices"].empty() && chunk["choices"][0]["delta"].contains("content"))
        texts[spec_on] += chunk["choices"][0]["delta"]["content"].get<std::string>();
      if (chunk.contains("usage") && !chunk["usage"].is_null()) usage = chunk["usage"];
    }
  }
  EXPECT_EQ(texts[1], texts[0]);
  EXPECT_FALSE(texts[0].empty());
  EXPECT_TRUE(usage.contains("llamay_draft_tokens")) << usage.dump();
}

TEST_F(SpeculativeServerTest, ABadValueIsRefused) {
  json r = Post("/v1/chat/completions",
                {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"llamay_speculative", "yes"}}, 400);
  EXPECT_NE(r.dump().find("llamay_speculative"), std::string::npos) << r.dump();
  Post("/v1/messages", {{"model", "m"}, {"max_tokens", 4}, {"messages", {{{"role", "user"}, {"content", "hi"}}}},
                        {"llamay_speculative", 1}}, 400);
}

// A required tool call: the grammar constrains drafts as it constrains plain decode; the calls are the same.
TEST(SpeculativeServerTools, ARequiredToolCallIsTheSame) {
  const char* tmpl = R"TPL({%- if tools %}<|im_start|>system
Tools: {% for t in tools %}{{ t | tojson }}{% endfor %}
Call one as <tool_call>{"name": ..., "arguments": ...}</tool_call><|im_end|>
{% endif %}
{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %})TPL";
  auto m = model::Model::FromFile(std::move(*gguf::File::FromBuffer(DemoWithTemplate(tmpl))));
  ASSERT_TRUE(m.ok());
  engine::EngineOptions eo;
  eo.draft_token_cost = 0;
  Served s = Serve(std::move(*m), eo);
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "lookup", "parameters": {
      "type": "object", "properties": {"word": {"type": "string", "maxLength": 12}, "lang": {"enum": ["en", "fr"]}},
      "required": ["word", "lang"], "additionalProperties": false}}}])");
  size_t accepted = 0;
  for (int seed = 1; seed <= 6; ++seed) {
    json body = {{"messages", {{{"role", "user"}, {"content", std::string("lookup lookup ") + kRepeating}}}},
                 {"tools", tools}, {"tool_choice", "required"}, {"max_tokens", 200}, {"temperature", 0.8},
                 {"seed", seed}, {"llamay_speculative", false}};
    const json plain = PostJson(*s.client, "/v1/chat/completions", body);
    body.erase("llamay_speculative");
    const json spec = PostJson(*s.client, "/v1/chat/completions", body);
    ASSERT_EQ(plain["choices"][0]["finish_reason"], "tool_calls") << plain.dump();
    EXPECT_EQ(spec["choices"][0]["message"]["tool_calls"][0]["function"],
              plain["choices"][0]["message"]["tool_calls"][0]["function"])
        << "seed " << seed;
    accepted += spec["usage"]["llamay_accepted_draft_tokens"].get<size_t>();
  }
  EXPECT_GT(accepted, 0u);
}

}  // namespace
}  // namespace llamay::server
