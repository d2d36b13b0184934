// GrammarConstraint after a marker (a reasoning model's "</think>"), over a small hand-made vocabulary
// whose tokens spell the marker whole, in pieces, and run into what follows it; and the whitespace mask
// over a synthetic byte-level vocabulary.
#include "engine/grammar_constraint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "grammar/synthetic_vocab.h"

namespace llamay::engine {
namespace {

const std::vector<std::string> kTokens = {
    "<",         "/",           "think",   ">", "</think>", "think>\n", "</think>\n\n{",
    "</think>x", "\n",          "\n\n",    " ", " {",       "{",        "}",
    "\"",        "a",           ":",       "1", "2",        " x",       "\n\n{\"",
    "hello",     "<tool_call>", "{\"a\":", "",  // a control token
    "<eos>"};

class AfterMarker : public ::testing::Test {
 protected:
  void SetUp() override {
    auto v = grammar::Vocabulary::Build(kTokens, {static_cast<int32_t>(kTokens.size()) - 1});
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    vocab_ = *v;
    auto g = grammar::ParseGbnf(R"(root ::= "{\"a\":" [0-9] "}")");
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    json_ = *g;
    auto c = grammar::ParseGbnf(R"(root ::= "<tool_call>" [0-9])");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    call_ = *c;
  }

  int32_t Id(const std::string& text) const {
    for (size_t i = 0; i < kTokens.size(); ++i)
      if (kTokens[i] == text) return static_cast<int32_t>(i);
    ADD_FAILURE() << "no token \"" << text << "\"";
    return 0;
  }
  int32_t Eos() const { return static_cast<int32_t>(kTokens.size()) - 1; }

  // The texts of the tokens the constraint allows next.
  std::vector<std::string> Allowed(GrammarConstraint& c) const {
    std::vector<float> logits(kTokens.size(), 0.0f);
    EXPECT_TRUE(c.Process(logits).ok());
    std::vector<std::string> out;
    for (size_t i = 0; i < kTokens.size(); ++i)
      if (!std::isinf(logits[i])) out.push_back(kTokens[i]);
    return out;
  }
  std::vector<std::string> AllBut(const std::vector<std::string>& except) const {
    std::vector<std::string> out;
    for (const std::string& t : kTokens)
      if (std::find(except.begin(), except.end(), t) == except.end()) out.push_back(t);
    return out;
  }
  void Feed(GrammarConstraint& c, const std::vector<std::string>& texts) const {
    for (const std::string& t : texts) ASSERT_TRUE(c.Accept(Id(t)).ok()) << t;
  }

  std::shared_ptr<const grammar::Vocabulary> vocab_;
  std::shared_ptr<const grammar::Grammar> json_, call_;
};

TEST_F(AfterMarker, FreeUntilTheMarkerThenWhitespaceThenTheGrammar) {
  GrammarConstraint c(json_, vocab_, {}, "</think>");
  EXPECT_FALSE(c.active());
  EXPECT_FALSE(c.marker_seen());
  // Reasoning: anything but the end (the answer is required), even what the grammar would refuse.
  for (const char* t : {"hello", "}", " x", "<", "/", "think"}) {
    EXPECT_EQ(Allowed(c), AllBut({"<eos>"}));
    ASSERT_TRUE(c.Accept(Id(t)).ok());
  }
  EXPECT_FALSE(c.marker_seen());
  ASSERT_TRUE(c.Accept(Id(">")).ok());  // "...</" "think" ">": the marker, in pieces
  EXPECT_TRUE(c.marker_seen());
  EXPECT_TRUE(c.active());
  // Whitespace, the grammar's first bytes, or both in one token; not the end, not other text.
  const std::vector<std::string> first = {"\n", "\n\n", " ", " {", "{", "\n\n{\"", "{\"a\":"};
  EXPECT_EQ(Allowed(c), first);
  Feed(c, {"\n\n"});
  EXPECT_EQ(Allowed(c), first);
  Feed(c, {" {"});
  EXPECT_EQ(Allowed(c), std::vector<std::string>{"\""});
  Feed(c, {"\"", "a", "\"", ":"});
  EXPECT_EQ(Allowed(c), (std::vector<std::string>{"1", "2"}));
  Feed(c, {"2"});
  EXPECT_EQ(Allowed(c), std::vector<std::string>{"}"});
  Feed(c, {"}"});
  EXPECT_EQ(Allowed(c), std::vector<std::string>{"<eos>"});
  ASSERT_TRUE(c.Accept(Eos()).ok());
  EXPECT_TRUE(c.matcher().IsTerminated());
}

TEST_F(AfterMarker, WhitespaceBeforeTheGrammarIsBounded) {
  GrammarConstraint c(json_, vocab_, {}, "</think>");
  Feed(c, {"</think>"});
  for (int i = 0; i < 7; ++i) Feed(c, {"\n\n"});  // 14 bytes
  EXPECT_EQ(Allowed(c), (std::vector<std::string>{"\n", "\n\n", " ", " {", "{", "\n\n{\"", "{\"a\":"}));
  Feed(c, {"\n", " "});  // 16
  EXPECT_EQ(Allowed(c), (std::vector<std::string>{"{", "{\"a\":"}));
  const Status s = c.Accept(Id("\n"));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_EQ(c.Accept(Id(" {")).code(), StatusCode::kFailedPrecondition);
  Feed(c, {"{"});
  EXPECT_EQ(Allowed(c), std::vector<std::string>{"\""});
}

TEST_F(AfterMarker, ATokenThatRunsPastTheMarker) {
  {  // the marker and the grammar's first byte in one token
    GrammarConstraint c(json_, vocab_, {}, "</think>");
    Feed(c, {"hello", "</think>\n\n{"});
    EXPECT_TRUE(c.active());
    EXPECT_EQ(Allowed(c), std::vector<std::string>{"\""});
  }
  {  // the marker's end and whitespace in one token: still before the grammar
    GrammarConstraint c(json_, vocab_, {}, "</think>");
    Feed(c, {"<", "/", "think>\n"});
    EXPECT_TRUE(c.marker_seen());
    EXPECT_EQ(Allowed(c).size(), 7u);
    Feed(c, {"{\"a\":", "1", "}"});
    EXPECT_TRUE(c.matcher().CanEnd());
  }
  {  // the marker then text the grammar refuses: an error, as a trigger's
    GrammarConstraint c(json_, vocab_, {}, "</think>");
    const Status s = c.Accept(Id("</think>x"));
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
    EXPECT_NE(s.message().find("after \"</think>\""), std::string::npos) << s.ToString();
  }
  {  // the marker straddling tokens with text before it: "<" "/" are not "</think>" until "think>"
    GrammarConstraint c(json_, vocab_, {}, "</think>");
    Feed(c, {"<", "/", "think", "<", "/"});
    EXPECT_FALSE(c.marker_seen());
    Feed(c, {"think", ">"});
    EXPECT_TRUE(c.marker_seen());
  }
}

TEST_F(AfterMarker, LazyTriggersCountOnlyAfterTheMarker) {
  GrammarConstraint c(call_, vocab_, {GrammarConstraint::Trigger("<tool_call>")}, "</think>");
  // In the reasoning a trigger means nothing, and the model may stop.
  Feed(c, {"hello", "<tool_call>"});
  EXPECT_FALSE(c.active());
  EXPECT_EQ(Allowed(c), kTokens);
  Feed(c, {"</think>"});
  EXPECT_TRUE(c.marker_seen());
  EXPECT_FALSE(c.active());
  Feed(c, {"\n\n", "hello", " "});
  EXPECT_EQ(Allowed(c), kTokens);
  Feed(c, {"<tool_call>"});
  EXPECT_TRUE(c.active());
  EXPECT_EQ(Allowed(c), (std::vector<std::string>{"1", "2"}));
}

TEST_F(AfterMarker, AnAtStartTriggerCountsFromTheMarker) {
  for (const auto& [after, fires] : std::vector<std::pair<std::vector<std::string>, bool>>{
           {{"{\"a\":"}, true}, {{"\n\n", "{\"a\":"}, true}, {{"hello", "{\"a\":"}, false}}) {
    GrammarConstraint c(json_, vocab_, {GrammarConstraint::Trigger("{\"a\":", /*at_start=*/true)},
                        "</think>");
    Feed(c, {"hello", " "});  // reasoning before the marker is not "the start's" text
    Feed(c, {"</think>"});
    Feed(c, after);
    EXPECT_EQ(c.active(), fires) << after.back();
    if (fires) {
      EXPECT_EQ(Allowed(c), (std::vector<std::string>{"1", "2"}));
    }
  }
}

TEST_F(AfterMarker, CopiesAreIndependent) {
  GrammarConstraint c(json_, vocab_, {}, "</think>");
  Feed(c, {"<", "/", "think"});
  GrammarConstraint before = c;
  Feed(c, {">", "\n"});
  GrammarConstraint spaced = c;
  Feed(c, {"{"});
  EXPECT_FALSE(before.marker_seen());
  EXPECT_EQ(Allowed(before), AllBut({"<eos>"}));
  EXPECT_EQ(Allowed(spaced).size(), 7u);
  EXPECT_EQ(Allowed(c), std::vector<std::string>{"\""});
  std::unique_ptr<LogitsProcessor> clone = spaced.Clone();
  ASSERT_TRUE(clone->Accept(Id("{\"a\":")).ok());
  EXPECT_EQ(Allowed(spaced).size(), 7u);
}

TEST_F(AfterMarker, WithoutAMarkerNothingChanges) {
  GrammarConstraint c(json_, vocab_);
  EXPECT_TRUE(c.active());
  EXPECT_TRUE(c.marker_seen());
  EXPECT_EQ(Allowed(c), (std::vector<std::string>{"{", "{\"a\":"}));  // no whitespace first
  GrammarConstraint lazy(call_, vocab_, {GrammarConstraint::Trigger("<tool_call>")});
  EXPECT_FALSE(lazy.active());
  Feed(lazy, {"hello", "<tool_call>"});
  EXPECT_TRUE(lazy.active());
}

// Over a byte-level vocabulary: after the marker a token is allowed exactly when accepting it succeeds,
// and that is exactly the tokens that are whitespace, or whitespace and then bytes the grammar takes.
TEST(GrammarConstraintAfterMarker, TheWhitespaceMaskIsExact) {
  auto vocab = grammar::SyntheticVocabulary(4096, 3);
  for (const std::string& gbnf : {std::string(R"(root ::= "{" [a-z]* "}")"),
                                  std::string(R"(root ::= [a-z]+)"), std::string(R"(root ::= "x"?)")}) {
    auto g = grammar::ParseGbnf(gbnf);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    GrammarConstraint c(*g, vocab, {}, "</think>");
    for (char ch : std::string("</think>")) {
      int32_t id = -1;
      for (int32_t t = 0; t < vocab->size() && id < 0; ++t)
        if (vocab->token_bytes(t) == std::string(1, ch)) id = t;
      ASSERT_GE(id, 0);
      ASSERT_TRUE(c.Accept(id).ok());
    }
    ASSERT_TRUE(c.marker_seen());
    std::vector<float> logits(static_cast<size_t>(vocab->size()), 0.0f);
    ASSERT_TRUE(c.Process(logits).ok());
    int allowed = 0, spaced = 0;
    for (int32_t t = 0; t < vocab->size(); ++t) {
      const std::string& b = vocab->token_bytes(t);
      const size_t lead = b.find_first_not_of(" \n\t\r");
      bool want;
      if (vocab->is_end_token(t)) {
        grammar::Matcher m(*g, vocab);
        want = m.CanEnd();
      } else if (b.empty()) {
        want = false;
      } else if (lead == std::string::npos) {
        want = b.size() <= GrammarConstraint::kMaxSpace;
      } else {
        grammar::Matcher m(*g, vocab);
        want = lead <= GrammarConstraint::kMaxSpace && m.AcceptBytes(std::string_view(b).substr(lead)).ok();
      }
      const bool got = !std::isinf(logits[static_cast<size_t>(t)]);
      EXPECT_EQ(got, want) << gbnf << " token " << t << " \"" << b << "\"";
      GrammarConstraint copy = c;
      EXPECT_EQ(copy.Accept(t).ok(), want) << gbnf << " token " << t << " \"" << b << "\"";
      allowed += got;
      spaced += got && lead != 0 && lead != std::string::npos;
    }
    EXPECT_GT(allowed, 0) << gbnf;
    if (gbnf.find("[a-z]+") != std::string::npos) {
      EXPECT_GT(spaced, 100) << gbnf;  // " the", " of", ...
    }
  }
}

}  // namespace
}  // namespace llamay::engine
