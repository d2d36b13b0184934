// The engine's one decode loop: detokenized text in events, stop sequences, logits processors and the
// grammar constraint.
#include <gtest/gtest.h>

#include <future>
#include <limits>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "engine/grammar_constraint.h"
#include "engine/reasoning_budget.h"
#include "grammar/json_schema.h"
#include "model/demo_model.h"

namespace llamay::engine {
namespace {

std::unique_ptr<Engine> MakeEngine() {
  auto f = gguf::File::FromBuffer(model::BuildDemoModel());
  EXPECT_TRUE(f.ok());
  auto m = model::Model::FromFile(std::move(*f));
  EXPECT_TRUE(m.ok());
  auto tok = tokenizer::Tokenizer::FromGguf((*m)->file());
  EXPECT_TRUE(tok.ok());
  auto e = Engine::Create(std::move(*m), std::move(*tok), EngineOptions{});
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return std::move(*e);
}

Request Make(const std::string& prompt_text, const Engine& e, int max_tokens, float temperature = 0, uint64_t seed = 1) {
  return test_util::TextRequest(e, prompt_text, max_tokens, temperature, seed);
}

std::string Pieces(const Engine& e, const std::vector<int32_t>& tokens) {
  std::string s;
  for (int32_t t : tokens) s += e.tokenizer().TokenToPiece(t);
  return s;
}

// Every event's text, in order, and the completion.
struct Streamed {
  std::vector<std::string> texts;
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::kNone;
  Status error;
};

Streamed Stream(Engine& e, Request r) {
  std::promise<Streamed> done;
  auto out = std::make_shared<Streamed>();
  auto id = e.Submit(std::move(r), [&done, out](Event& ev) {
    out->texts.push_back(ev.text);
    if (ev.token >= 0) out->tokens.push_back(ev.token);
    if (ev.finished) {
      out->reason = ev.reason;
      out->error = ev.error;
      done.set_value(*out);
    }
    return true;
  });
  EXPECT_TRUE(id.ok());
  return done.get_future().get();
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x;
  return s;
}

TEST(EngineText, EventsCarryTheDetokenizedText) {
  auto e = MakeEngine();
  auto c = e->Generate(Make("Hello", *e, 40));
  ASSERT_TRUE(c.ok());
  ASSERT_FALSE(c->tokens.empty());
  EXPECT_EQ(c->text, Pieces(*e, c->tokens));
}

TEST(EngineText, AStopSequenceCutsTheTextAndEndsTheRequest) {
  auto e = MakeEngine();
  auto full = e->Generate(Make("The answer", *e, 60));
  ASSERT_TRUE(full.ok());
  const std::string text = full->text;
  ASSERT_GE(text.size(), 30u);
  // Stops that start at every offset and span token boundaries: the text ends where the stop first
  // appears, and the tokens end with the one that completed it.
  for (size_t k = 1; k + 4 <= 30; ++k) {
    for (size_t len : {1, 2, 4}) {
      const std::string stop = text.substr(k, len);
      const size_t first = text.find(stop);
      Request r = Make("The answer", *e, 60);
      r.stop = {"\x01never", stop};
      Streamed s = Stream(*e, std::move(r));
      ASSERT_TRUE(s.error.ok()) << s.error.ToString();
      EXPECT_EQ(s.reason, FinishReason::kStop);
      EXPECT_EQ(Join(s.texts), text.substr(0, first)) << "stop \"" << stop << "\"";
      // The tokens are a prefix of the unstopped ones whose text first holds the stop.
      ASSERT_LE(s.tokens.size(), full->tokens.size());
      EXPECT_TRUE(std::equal(s.tokens.begin(), s.tokens.end(), full->tokens.begin()));
      const std::string pieces = Pieces(*e, s.tokens);
      EXPECT_NE(pieces.find(stop), std::string::npos);
      std::vector<int32_t> shorter(s.tokens.begin(), s.tokens.end() - 1);
      EXPECT_EQ(Pieces(*e, shorter).find(stop), std::string::npos);
    }
  }
}

TEST(EngineText, TextThatMightBeginAStopIsHeldBackNotLost) {
  auto e = MakeEngine();
  auto full = e->Generate(Make("Once", *e, 30));
  ASSERT_TRUE(full.ok());
  Request r = Make("Once", *e, 30);
  r.stop = {full->text.substr(0, 1) + "\x02\x03"};  // begins like the text, never completes
  Streamed s = Stream(*e, std::move(r));
  EXPECT_EQ(Join(s.texts), full->text);
  // Held back: the first token's text waits for the next ones.
  ASSERT_GE(s.texts.size(), 2u);
  EXPECT_EQ(s.texts[0], "");
}

// Bans one token and records what it saw.
class Ban : public LogitsProcessor {
 public:
  Ban(int32_t token, std::vector<int32_t>* accepted, bool* saw_banned) : token_(token), accepted_(accepted), saw_(saw_banned) {}
  Status Process(std::span<float> logits) override {
    if (logits[token_] == -std::numeric_limits<float>::infinity() && saw_) *saw_ = true;
    logits[token_] = -std::numeric_limits<float>::infinity();
    return Status::Ok();
  }
  Status Accept(int32_t t) override {
    if (accepted_) accepted_->push_back(t);
    return Status::Ok();
  }
  std::unique_ptr<LogitsProcessor> Clone() const override { return std::make_unique<Ban>(*this); }

 private:
  int32_t token_;
  std::vector<int32_t>* accepted_;
  bool* saw_;
};

class FailAfter : public LogitsProcessor {
 public:
  explicit FailAfter(int n) : n_(n) {}
  Status Process(std::span<float>) override {
    return n_-- > 0 ? Status::Ok() : FailedPreconditionError("processor gave up");
  }
  Status Accept(int32_t) override { return Status::Ok(); }
  std::unique_ptr<LogitsProcessor> Clone() const override { return std::make_unique<FailAfter>(*this); }

 private:
  int n_;
};

TEST(EngineProcessors, RunInOrderBeforeTheSamplerAndSeeEveryToken) {
  auto e = MakeEngine();
  auto plain = e->Generate(Make("Hello", *e, 20));
  ASSERT_TRUE(plain.ok());
  ASSERT_FALSE(plain->tokens.empty());
  const int32_t banned = plain->tokens[0];
  std::vector<int32_t> accepted;
  bool second_saw_ban = false;
  Request r = Make("Hello", *e, 20);
  r.processors.push_back(std::make_unique<Ban>(banned, &accepted, nullptr));
  r.processors.push_back(std::make_unique<Ban>(banned, nullptr, &second_saw_ban));
  auto c = e->Generate(std::move(r));
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(second_saw_ban);
  EXPECT_EQ(std::count(c->tokens.begin(), c->tokens.end(), banned), 0);
  EXPECT_NE(c->tokens, plain->tokens);
  // Accept saw every sampled token (an end token too, which is not in the completion).
  ASSERT_GE(accepted.size(), c->tokens.size());
  EXPECT_TRUE(std::equal(c->tokens.begin(), c->tokens.end(), accepted.begin()));
}

TEST(EngineProcessors, AnErrorEndsTheRequestWithIt) {
  auto e = MakeEngine();
  Request r = Make("Hello", *e, 20);
  r.processors.push_back(std::make_unique<FailAfter>(3));
  Streamed s = Stream(*e, std::move(r));
  EXPECT_EQ(s.reason, FinishReason::kError);
  EXPECT_EQ(s.tokens.size(), 3u);
  EXPECT_NE(s.error.message().find("processor gave up"), std::string::npos);
  // The engine goes on serving.
  EXPECT_TRUE(e->Generate(Make("Hello", *e, 4)).ok());
}

// A small check of an object against the schema below, independent of the grammar library.
bool Valid(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string() || !j.contains("n")) return false;
  if (!j["n"].is_number_integer() || j["n"].get<int64_t>() < 0 || j["n"].get<int64_t>() > 99) return false;
  for (auto& [k, v] : j.items()) {
    if (k == "tags") {
      if (!v.is_array() || v.size() > 2) return false;
      for (auto& t : v)
        if (t != "a" && t != "b") return false;
    } else if (k != "name" && k != "n") {
      return false;
    }
  }
  return j["name"].get<std::string>().size() <= 8;
}

TEST(EngineConstraint, EveryOutputMatchesTheSchemaWhateverTheSeed) {
  auto e = MakeEngine();
  auto schema = nlohmann::ordered_json::parse(R"({"type":"object","properties":{
      "name":{"type":"string","maxLength":8},"n":{"type":"integer","minimum":0,"maximum":99},
      "tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":2}},
      "required":["name","n"],"additionalProperties":false})");
  auto g = grammar::FromJsonSchema(schema);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto vocab = e->GrammarVocabulary();
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  int ended = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Request r = Make("Reply in JSON:", *e, 200, 1.0f, seed);
    r.processors.push_back(std::make_unique<GrammarConstraint>(*g, *vocab));
    auto c = e->Generate(std::move(r));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    if (c->reason != FinishReason::kStop) continue;  // cut by max_tokens: a prefix
    ++ended;
    auto j = nlohmann::json::parse(c->text, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "seed " << seed << ": " << c->text;
    EXPECT_TRUE(Valid(j)) << "seed " << seed << ": " << c->text;
  }
  EXPECT_GE(ended, 30);
}

TEST(EngineConstraint, WithoutTheConstraintTheOutputIsNotJson) {
  // The check above can fail: the same model unconstrained does not write valid JSON.
  auto e = MakeEngine();
  auto c = e->Generate(Make("Reply in JSON:", *e, 60, 1.0f, 3));
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(nlohmann::json::parse(c->text, nullptr, false).is_discarded()) << c->text;
}

TEST(EngineConstraint, ALazyGrammarWaitsForItsTrigger) {
  auto e = MakeEngine();
  auto vocab = e->GrammarVocabulary();
  ASSERT_TRUE(vocab.ok());
  auto g = grammar::ParseGbnf(R"(root ::= "<call>" [0-9]+ "</call>")");
  ASSERT_TRUE(g.ok());
  GrammarConstraint lazy(*g, *vocab, {GrammarConstraint::Trigger("<call>")});
  auto token = [&](char ch) {
    for (int32_t t = 0; t < (*vocab)->size(); ++t)
      if ((*vocab)->token_bytes(t) == std::string(1, ch)) return t;
    ADD_FAILURE() << "no token for '" << ch << "'";
    return int32_t{0};
  };
  std::vector<float> logits(static_cast<size_t>((*vocab)->size()), 0.0f);
  // Free text, even text that begins like the trigger.
  for (char ch : std::string("hi <ca")) {
    ASSERT_TRUE(lazy.Process(logits).ok());
    EXPECT_EQ(std::count(logits.begin(), logits.end(), -std::numeric_limits<float>::infinity()), 0);
    ASSERT_TRUE(lazy.Accept(token(ch)).ok());
  }
  EXPECT_FALSE(lazy.active());
  GrammarConstraint fork_before = lazy;  // a copy is independent
  ASSERT_TRUE(lazy.Accept(token('l')).ok());
  ASSERT_TRUE(lazy.Accept(token('l')).ok());
  ASSERT_TRUE(lazy.Accept(token('>')).ok());
  EXPECT_TRUE(lazy.active());
  EXPECT_FALSE(fork_before.active());
  // Now only digits may follow.
  std::fill(logits.begin(), logits.end(), 0.0f);
  ASSERT_TRUE(lazy.Process(logits).ok());
  for (int32_t t = 0; t < (*vocab)->size(); ++t) {
    const std::string& b = (*vocab)->token_bytes(t);
    const bool digit = b.size() == 1 && b[0] >= '0' && b[0] <= '9';
    EXPECT_EQ(logits[static_cast<size_t>(t)] == 0.0f, digit) << "token " << t << " \"" << b << "\"";
  }
  EXPECT_FALSE(lazy.Accept(token('x')).ok());

  // A trigger that counts only at the start of the output (after whitespace at most).
  auto json_call = grammar::ParseGbnf(R"(root ::= "{\"n\":" [0-9] "}")");
  ASSERT_TRUE(json_call.ok()) << json_call.status().ToString();
  for (const auto& [text, fires] : std::vector<std::pair<std::string, bool>>{
           {"{\"n\":", true}, {"  \n{\"n\":", true}, {"a{\"n\":", false}, {"ab  cd  ef  {\"n\":", false}}) {
    GrammarConstraint c(*json_call, *vocab, {GrammarConstraint::Trigger("{\"n\":", /*at_start=*/true)});
    for (char ch : text) ASSERT_TRUE(c.Accept(token(ch)).ok());
    EXPECT_EQ(c.active(), fires) << text;
  }
}

TEST(EngineConstraint, AReasoningBudgetThenTheGrammarAfterItsCloseMarker) {
  // A reasoning model's pieces in the one decode loop: the budget ends the reasoning after 6 tokens by
  // forcing "</think>", the grammar starts after it (whitespace allowed first), and the model cannot stop
  // before it.
  auto e = MakeEngine();
  auto vocab = e->GrammarVocabulary();
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  auto close = e->tokenizer().Encode("</think>", false, false, /*continuation=*/true);
  ASSERT_TRUE(close.ok());
  auto g = grammar::FromJsonSchema(nlohmann::ordered_json::parse(
      R"({"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false})"));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  constexpr int kBudget = 6;
  int ended = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    Request r = Make("Think, then reply in JSON:", *e, 120, 1.0f, seed);
    r.processors.push_back(std::make_unique<ReasoningBudget>(std::vector<int32_t>{}, *close, true, kBudget));
    r.processors.push_back(std::make_unique<GrammarConstraint>(*g, *vocab, std::vector<GrammarConstraint::Trigger>{},
                                                               "</think>"));
    auto c = e->Generate(std::move(r));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ASSERT_GE(c->tokens.size(), kBudget + close->size()) << "seed " << seed << ": " << c->text;
    const size_t at = c->text.find("</think>");
    ASSERT_NE(at, std::string::npos) << c->text;
    // The marker comes right after the budget's tokens (unless the model began it itself).
    EXPECT_EQ(Pieces(*e, std::vector<int32_t>(c->tokens.begin(), c->tokens.begin() + kBudget)).size(), at)
        << "seed " << seed << ": " << c->text;
    if (c->reason != FinishReason::kStop) continue;
    ++ended;
    const std::string answer = c->text.substr(at + 8);
    auto j = nlohmann::json::parse(answer, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "seed " << seed << ": " << c->text;
    EXPECT_TRUE(j.is_object() && j.size() == 1 && j["n"].is_number_integer()) << answer;
  }
  EXPECT_GE(ended, 6);
}

TEST(EngineConstraint, AGrammarWhoseParsesMultiplyEndsTheRequestQuickly) {
  // Found by grammar_fuzz: each "(" doubles the parses of this grammar (a or b at every level), and with
  // them the cost of a mask; unchecked, 14 tokens made one mask take 15 s on the engine's thread.
  auto e = MakeEngine();
  auto vocab = e->GrammarVocabulary();
  ASSERT_TRUE(vocab.ok());
  auto g = grammar::ParseGbnf("root ::= a\na ::= \"(\" ( a | b )*\nb ::= \"(\" ( a | b )*");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  int32_t open = -1;
  for (int32_t t = 0; t < (*vocab)->size(); ++t)
    if ((*vocab)->token_bytes(t) == "(") open = t;
  ASSERT_GE(open, 0);
  GrammarConstraint c(*g, *vocab);
  std::vector<float> logits(static_cast<size_t>((*vocab)->size()), 0.0f);
  Status s;
  int accepted = 0;
  for (; accepted < 40 && s.ok(); ++accepted) {
    ASSERT_TRUE(c.Process(logits).ok());
    s = c.Accept(open);
  }
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("too ambiguous"), std::string::npos) << s.ToString();
  EXPECT_LT(accepted, 12);
  // Through the engine: the request ends with that error and the engine goes on serving.
  Request r = Make("(", *e, 64, 1.0f, 3);
  // No end token: it keeps writing "(" until the check ends it.
  r.processors.push_back(std::make_unique<Ban>(e->tokenizer().eos(), nullptr, nullptr));
  r.processors.push_back(std::make_unique<GrammarConstraint>(*g, *vocab));
  Streamed out = Stream(*e, std::move(r));
  EXPECT_EQ(out.reason, FinishReason::kError);
  EXPECT_NE(out.error.message().find("too ambiguous"), std::string::npos) << out.error.ToString();
  EXPECT_TRUE(e->Generate(Make("ok", *e, 2)).ok());
}

}  // namespace
}  // namespace llamay::engine
