// /v1/completions logprobs in the Completions API format, `echo` (the prompt's text and its tokens'
// logprobs), n > 1 and streaming with logprobs, and the chat route's logprobs streamed; on the demo model,
// and the golden math on stories260K (skipped where the file is absent).
#include <gtest/gtest.h>
#include <httplib.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/logprobs_test_util.h"
#include "model/demo_model.h"
#include "server/server.h"
#include "server/server_test_util.h"

namespace llamay::server {
namespace {

using json = nlohmann::json;

// A server on loopback over an engine made from `m`.
class Served {
 public:
  explicit Served(std::unique_ptr<model::Model> m) {
    auto tok = tokenizer::Tokenizer::FromGguf(m->file());
    EXPECT_TRUE(tok.ok());
    engine_ = std::move(*engine::Engine::Create(std::move(m), std::move(*tok), {}));
    ServerOptions o;
    o.port = 0;
    server_ = std::make_unique<Server>(engine_.get(), o);
    EXPECT_TRUE(server_->Start().ok());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(kClientTimeoutSeconds, 0);
  }
  ~Served() {
    server_.reset();
    engine_.reset();
  }
  engine::Engine& engine() { return *engine_; }

  json Post(const std::string& path, const json& body, int want = 200) { return PostJson(*client_, path, body, want); }
  // The chunks of a streamed answer (the data lines before [DONE]).
  std::vector<json> Stream(const std::string& path, json body) {
    body["stream"] = true;
    auto r = client_->Post(path.c_str(), body.dump(), "application/json");
    std::vector<json> chunks;
    EXPECT_TRUE(r && r->status == 200);
    if (!r) return chunks;
    size_t pos = 0;
    bool done = false;
    while ((pos = r->body.find("data: ", pos)) != std::string::npos) {
      const size_t end = r->body.find("\n\n", pos);
      const std::string data = r->body.substr(pos + 6, end - pos - 6);
      pos = end;
      if (data == "[DONE]") done = true;
      if (data == "[DONE]") break;
      chunks.push_back(json::parse(data));
    }
    EXPECT_TRUE(done);
    return chunks;
  }

 private:
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<httplib::Client> client_;
};

std::unique_ptr<model::Model> DemoModel() {
  return std::move(*model::Model::FromFile(std::move(*gguf::File::FromBuffer(model::BuildDemoModel()))));
}

using engine::test_util::ReferenceLogSoftmax;

// The echoed prompt's token_logprobs (entry 0 null) against the reference, within 1e-6 (relative beyond 1).
void ExpectPromptLogprobsMatch(const json& lp, const std::vector<int32_t>& prompt, const model::Model& m) {
  const auto ref = ReferenceLogSoftmax(m, prompt);
  ASSERT_GE(lp["token_logprobs"].size(), prompt.size());
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  for (size_t i = 1; i < prompt.size(); ++i) {
    const double want = ref[i - 1][static_cast<size_t>(prompt[i])];
    EXPECT_NEAR(lp["token_logprobs"][i].get<double>(), want, 1e-6 * std::max(1.0, std::abs(want))) << i;
  }
}

// The four parallel arrays of the Completions format, each token's top_logprobs holding it.
void ExpectCompletionsFormat(const json& lp, size_t n, size_t top) {
  ASSERT_TRUE(lp.is_object()) << lp;
  EXPECT_FALSE(lp.contains("content"));
  for (const char* k : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
    ASSERT_TRUE(lp[k].is_array()) << k;
    EXPECT_EQ(lp[k].size(), n) << k;
  }
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) {
      EXPECT_GE(lp["text_offset"][i], lp["text_offset"][i - 1]);
    }
    if (lp["token_logprobs"][i].is_null()) continue;
    const json& t = lp["top_logprobs"][i];
    ASSERT_TRUE(t.is_object());
    EXPECT_GE(t.size(), std::min<size_t>(top, 1));
    EXPECT_LE(t.size(), top + 1);
    const std::string tok = lp["tokens"][i];
    ASSERT_TRUE(t.contains(tok)) << t;
    EXPECT_EQ(t[tok], lp["token_logprobs"][i]);
  }
}

json Slice(const json& lp, size_t from) {
  json out;
  for (auto& [k, v] : lp.items()) out[k] = json(v.begin() + static_cast<long>(from), v.end());
  return out;
}

TEST(ServerLogprobs, CompletionsUseTheCompletionsFormatAndChatKeepsItsOwn) {
  Served s(DemoModel());
  const json req = {
      {"prompt", "The quick brown fox"}, {"max_tokens", 8}, {"temperature", 0}, {"logprobs", 3}};
  const json c = s.Post("/v1/completions", req)["choices"][0];
  ExpectCompletionsFormat(c["logprobs"], 8, 3);
  std::string joined;
  for (size_t i = 0; i < 8; ++i) {
    // Greedy: the chosen token is the most probable; the offsets index the text (ASCII here).
    const json& top = c["logprobs"]["top_logprobs"][i];
    EXPECT_EQ(top.size(), 3u);
    double best = -INFINITY;
    for (auto& [k, v] : top.items()) best = std::max(best, v.get<double>());
    EXPECT_EQ(c["logprobs"]["token_logprobs"][i].get<double>(), best);
    EXPECT_EQ(c["logprobs"]["text_offset"][i], joined.size());
    joined += c["logprobs"]["tokens"][i].get<std::string>();
  }
  EXPECT_EQ(joined, c["text"]);
  json zero = req;
  zero["logprobs"] = 0;  // the chosen token only
  const json z = s.Post("/v1/completions", zero)["choices"][0]["logprobs"];
  ExpectCompletionsFormat(z, 8, 0);
  for (const auto& t : z["top_logprobs"]) EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(z["token_logprobs"], c["logprobs"]["token_logprobs"]);
  // No logprobs asked: null.
  json none = req;
  none.erase("logprobs");
  EXPECT_TRUE(s.Post("/v1/completions", none)["choices"][0]["logprobs"].is_null());
  // Chat: {"content": [{token, logprob, bytes, top_logprobs: [...]}]}.
  const json chat = s.Post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                                    {"max_tokens", 5},
                                                    {"temperature", 0},
                                                    {"logprobs", true},
                                                    {"top_logprobs", 2}})["choices"][0]["logprobs"];
  ASSERT_EQ(chat["content"].size(), 5u);
  for (const auto& e : chat["content"]) {
    EXPECT_TRUE(e["token"].is_string() && e["logprob"].is_number() && e["bytes"].is_array());
    EXPECT_EQ(e["top_logprobs"].size(), 2u);
  }
}

TEST(ServerLogprobs, EchoWithMaxTokensZeroReturnsThePromptAndItsLogprobs) {
  Served s(DemoModel());
  const std::string prompt = "Once upon a time";
  const std::vector<int32_t> ids = *s.engine().tokenizer().Encode(prompt, true, false);
  const json r =
      s.Post("/v1/completions", {{"prompt", prompt}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 2}});
  const json c = r["choices"][0];
  EXPECT_EQ(c["text"], prompt);
  EXPECT_EQ(c["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["completion_tokens"], 0);
  EXPECT_EQ(r["usage"]["prompt_tokens"], ids.size());
  ExpectCompletionsFormat(c["logprobs"], ids.size(), 2);
  ExpectPromptLogprobsMatch(c["logprobs"], ids, s.engine().model());
  // Each token's offset is where its piece starts in the prompt. Control and unknown tokens are not in the
  // text (BOS; the demo's vocabulary has no U+2581, so its spaces are "<unk>" tokens).
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string piece = s.engine().tokenizer().TokenToPiece(ids[i]);
    const size_t at = c["logprobs"]["text_offset"][i];
    if (!s.engine().tokenizer().IsControl(ids[i])) {
      EXPECT_EQ(prompt.substr(at, piece.size()), piece) << i;
    }
  }
  // Again: the prompt is in the prefix tree now, but its logits are not; the answer is the same.
  const json again =
      s.Post("/v1/completions", {{"prompt", prompt}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 2}});
  EXPECT_EQ(again["choices"][0], c);
  EXPECT_EQ(again["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  // Without logprobs, echo reuses the tree as any request does.
  const json plain = s.Post("/v1/completions", {{"prompt", prompt}, {"max_tokens", 0}, {"echo", true}});
  EXPECT_EQ(plain["choices"][0]["text"], prompt);
  EXPECT_TRUE(plain["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(plain["usage"]["prompt_tokens_details"]["cached_tokens"], ids.size() - 1);
  // A token-array prompt echoes its tokens' pieces, as generated text is written.
  const json arr =
      s.Post("/v1/completions", {{"prompt", ids}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 1}});
  EXPECT_EQ(arr["choices"][0]["logprobs"]["token_logprobs"], c["logprobs"]["token_logprobs"]);
  std::string pieces;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(arr["choices"][0]["logprobs"]["text_offset"][i], pieces.size());
    pieces += s.engine().tokenizer().TokenToPiece(ids[i]);
  }
  EXPECT_EQ(arr["choices"][0]["text"], pieces);
  s.Post("/v1/completions", {{"prompt", prompt}, {"echo", "yes"}}, 400);
}

TEST(ServerLogprobs, EchoWithGenerationIsThePromptThenTheSameCompletion) {
  Served s(DemoModel());
  const std::string prompt = "abc, abc";
  const json req = {
      {"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}, {"logprobs", 2}, {"stop", "abc"}};
  const json gen = s.Post("/v1/completions", req)["choices"][0];
  json echo_req = req;
  echo_req["echo"] = true;
  const json echo = s.Post("/v1/completions", echo_req)["choices"][0];
  // The stop string is in the prompt: only the generated text is searched.
  EXPECT_EQ(echo["text"], prompt + gen["text"].get<std::string>());
  EXPECT_EQ(echo["finish_reason"], gen["finish_reason"]);
  const size_t n = s.engine().tokenizer().Encode(prompt, true, false)->size();
  const json tail = Slice(echo["logprobs"], n);
  EXPECT_EQ(tail["tokens"], gen["logprobs"]["tokens"]);
  EXPECT_EQ(tail["token_logprobs"], gen["logprobs"]["token_logprobs"]);
  EXPECT_EQ(tail["top_logprobs"], gen["logprobs"]["top_logprobs"]);
  for (size_t i = 0; i < tail["text_offset"].size(); ++i)
    EXPECT_EQ(tail["text_offset"][i].get<size_t>(),
              gen["logprobs"]["text_offset"][i].get<size_t>() + prompt.size());
  ExpectPromptLogprobsMatch(echo["logprobs"], *s.engine().tokenizer().Encode(prompt, true, false),
                            s.engine().model());
}

TEST(ServerLogprobs, NChoicesEachCarryTheirLogprobs) {
  Served s(DemoModel());
  const json one = s.Post("/v1/completions", {{"prompt", "forks and knives"},
                                              {"max_tokens", 6},
                                              {"temperature", 0},
                                              {"logprobs", 2},
                                              {"echo", true}})["choices"][0];
  const json three = s.Post("/v1/completions", {{"prompt", "forks and knives"},
                                                {"max_tokens", 6},
                                                {"temperature", 0},
                                                {"logprobs", 2},
                                                {"echo", true},
                                                {"n", 3}});
  ASSERT_EQ(three["choices"].size(), 3u);
  for (const auto& c : three["choices"]) {
    EXPECT_EQ(c["text"], one["text"]);
    EXPECT_EQ(c["logprobs"], one["logprobs"]);
  }
  EXPECT_EQ(three["usage"]["completion_tokens"], 18);
  // Sampled choices without echo: each its own tokens, whose pieces make its text.
  const json sampled = s.Post("/v1/completions", {{"prompt", "forks and knives"},
                                                  {"max_tokens", 10},
                                                  {"temperature", 1},
                                                  {"seed", 5},
                                                  {"logprobs", 1},
                                                  {"n", 2}});
  ASSERT_EQ(sampled["choices"].size(), 2u);
  EXPECT_NE(sampled["choices"][0]["text"], sampled["choices"][1]["text"]);
  for (const auto& c : sampled["choices"]) {
    ExpectCompletionsFormat(c["logprobs"], c["logprobs"]["tokens"].size(), 1);
    std::string joined;
    for (const auto& t : c["logprobs"]["tokens"]) joined += t.get<std::string>();
    EXPECT_EQ(joined, c["text"]);
  }
}

TEST(ServerLogprobs, StreamedChunksCarryTheirTokensLogprobs) {
  Served s(DemoModel());
  for (const bool echo : {false, true}) {
    const json req = {{"prompt", "streams of logprobs"},
                      {"max_tokens", 7},
                      {"temperature", 0},
                      {"logprobs", 2},
                      {"echo", echo},
                      {"n", 2}};
    const json whole = s.Post("/v1/completions", req);
    std::vector<json> merged(2, json{{"tokens", json::array()},
                                     {"token_logprobs", json::array()},
                                     {"top_logprobs", json::array()},
                                     {"text_offset", json::array()}});
    std::vector<std::string> text(2);
    size_t with_logprobs = 0;
    for (const json& ch : s.Stream("/v1/completions", req)) {
      for (const auto& c : ch["choices"]) {
        const size_t i = c["index"];
        text[i] += c["text"].get<std::string>();
        if (c["logprobs"].is_null()) continue;
        ++with_logprobs;
        for (auto& [k, v] : c["logprobs"].items())
          for (const auto& x : v) merged[i][k].push_back(x);
      }
    }
    EXPECT_GE(with_logprobs, 2u * 2);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(text[i], whole["choices"][i]["text"]) << echo;
      EXPECT_EQ(merged[i], whole["choices"][i]["logprobs"]) << echo;
    }
  }
  // Chat: choices[0].logprobs.content, chunk by chunk.
  const json chat = {{"messages", {{{"role", "user"}, {"content", "hello"}}}},
                     {"max_tokens", 6},
                     {"temperature", 0},
                     {"logprobs", true},
                     {"top_logprobs", 2}};
  const json whole = s.Post("/v1/chat/completions", chat)["choices"][0]["logprobs"]["content"];
  json content = json::array();
  for (const json& ch : s.Stream("/v1/chat/completions", chat))
    for (const auto& c : ch["choices"])
      if (!c["logprobs"].is_null())
        for (const auto& e : c["logprobs"]["content"]) content.push_back(e);
  EXPECT_EQ(content, whole);
}

TEST(ServerLogprobs, StoriesEchoLogprobsAreTheModelsAndRankTheRightContinuationFirst) {
  const std::string path = std::string(LLAMAY_SHARED_DIR) + "/ref/models/stories260K.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  auto m = model::Model::Load(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  Served s(std::move(*m));
  auto score = [&](const std::string& text) {
    const json c =
        s.Post("/v1/completions",
               {{"prompt", text}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 1}})["choices"][0];
    EXPECT_EQ(c["text"], text);
    ExpectPromptLogprobsMatch(c["logprobs"], *s.engine().tokenizer().Encode(text, true, false),
                              s.engine().model());
    return c["logprobs"];
  };
  // As lm-evaluation-harness scores a choice: the continuation's tokens' logprobs summed.
  const std::string context = "Once upon a time,";
  const size_t ctxlen = s.engine().tokenizer().Encode(context, true, false)->size();
  auto sum = [&](const json& lp) {
    double total = 0;
    for (size_t i = ctxlen; i < lp["token_logprobs"].size(); ++i)
      total += lp["token_logprobs"][i].get<double>();
    return total;
  };
  const json right = score(context + " there was a little girl");
  const json wrong = score(context + " girl little a was there");
  for (size_t i = 0; i < ctxlen; ++i)
    ASSERT_EQ(right["tokens"][i], wrong["tokens"][i]) << "the context tokenizes alike";
  EXPECT_GT(sum(right), sum(wrong) + 5) << sum(right) << " vs " << sum(wrong);
}

}  // namespace
}  // namespace llamay::server
