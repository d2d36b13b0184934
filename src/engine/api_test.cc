// The public API (include/llamay/llamay.h): sessions continue, fork, snapshot and restore exactly, carry
// their constraint, and report errors leaving the session as it was.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "llamay/llamay.h"

namespace llamay {
namespace {

std::unique_ptr<Engine> OpenDemo() {
  auto e = Engine::Open(Options{});
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return std::move(*e);
}

GenerateOptions Greedy(int n) {
  GenerateOptions g;
  g.sampling.temperature = 0;
  g.sampling.repeat_penalty = 1.0f;
  g.max_tokens = n;
  return g;
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(Api, ASessionContinuesExactlyAsOneLongGeneration) {
  auto engine = OpenDemo();
  auto whole = engine->NewSession()->Generate("The fork of a context", Greedy(30));
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  ASSERT_EQ(whole->tokens.size(), 30u);
  auto s = engine->NewSession();
  auto a = s->Generate("The fork of a context", Greedy(12));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->finish_reason, "length");
  auto b = s->Generate("", Greedy(18));  // nothing new: continue
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(Concat(a->tokens, b->tokens), whole->tokens);
  EXPECT_EQ(a->text + b->text, whole->text);
  // The second turn computed nothing it had already: only the pending token.
  EXPECT_EQ(b->prompt_tokens - b->cached_tokens, 1u);
  EXPECT_EQ(s->tokens(), a->prompt_tokens + 30);
}

TEST(Api, ForksAndRestoredSnapshotsContinueExactly) {
  auto engine = OpenDemo();
  auto s = engine->NewSession();
  ASSERT_TRUE(s->Generate("Branch here:", Greedy(8)).ok());
  const auto path = (std::filesystem::path(::testing::TempDir()) / "api_test.llamayctx").string();
  ASSERT_TRUE(s->Snapshot(path).ok());
  auto forks = s->Fork(3);
  ASSERT_EQ(forks.size(), 3u);
  auto parent = s->Generate("", Greedy(16));
  ASSERT_TRUE(parent.ok());
  for (auto& f : forks) {
    auto c = f->Generate("", Greedy(16));
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->tokens, parent->tokens);
  }
  auto restored = engine->Restore(path);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  auto r = (*restored)->Generate("", Greedy(16));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->tokens, parent->tokens);
  // A branch that writes does not disturb its siblings: new input diverges one, not the others.
  auto other = forks[0]->Generate(" and elsewhere", Greedy(8));
  ASSERT_TRUE(other.ok());
  auto same = forks[1]->Generate("", Greedy(8));
  auto same2 = forks[2]->Generate("", Greedy(8));
  ASSERT_TRUE(same.ok() && same2.ok());
  EXPECT_EQ(same->tokens, same2->tokens);
  std::filesystem::remove(path);
}

TEST(Api, TheConstraintCarriesAcrossCallsAndIntoForks) {
  auto engine = OpenDemo();
  auto s = engine->NewSession();
  ASSERT_TRUE(s->ConstrainToJsonSchema(R"({"type":"object","properties":{"a":{"type":"string","minLength":20,
      "maxLength":24},"b":{"type":"integer","minimum":0,"maximum":9}},"required":["a","b"],"additionalProperties":false})").ok());
  GenerateOptions g;
  g.sampling.seed = 5;
  g.sampling.temperature = 1;
  g.max_tokens = 10;  // the answer needs more: it arrives over several calls
  auto first = s->Generate("JSON:", g);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->finish_reason, "length");
  auto forks = s->Fork(2);
  std::string text = first->text;
  for (int i = 0; i < 20; ++i) {
    auto more = s->Generate("", g);
    ASSERT_TRUE(more.ok()) << more.status().ToString();
    text += more->text;
    if (more->finish_reason == "stop") break;
  }
  auto j = nlohmann::json::parse(text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << text;
  EXPECT_EQ(j.size(), 2u);
  EXPECT_GE(j["a"].get<std::string>().size(), 20u);
  // A fork carries its own copy of the constraint's state.
  std::string fork_text = first->text;
  for (int i = 0; i < 20; ++i) {
    auto more = forks[0]->Generate("", g);
    ASSERT_TRUE(more.ok());
    fork_text += more->text;
    if (more->finish_reason == "stop") break;
  }
  EXPECT_FALSE(nlohmann::json::parse(fork_text, nullptr, false).is_discarded()) << fork_text;
}

TEST(Api, ErrorsAreClearAndLeaveTheSessionAsItWas) {
  auto engine = OpenDemo();
  auto s = engine->NewSession();
  ASSERT_TRUE(s->Generate("Hello", Greedy(4)).ok());
  const size_t before = s->tokens();
  Status bad = s->ConstrainToJsonSchema(R"({"type":"object","patternProperties":{}})");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("patternProperties"), std::string::npos);
  GenerateOptions wrong = Greedy(4);
  wrong.sampling.top_p = 2;
  EXPECT_EQ(s->Generate("x", wrong).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s->tokens(), before);
  EXPECT_FALSE(engine->Restore("/nonexistent/file.llamayctx").ok());
  EXPECT_EQ(engine->NewSession()->Snapshot("/tmp/never").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine->NewSession()->Generate(std::span<const int32_t>(), Greedy(2)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(engine->NewSession()->Generate("", Greedy(2)).ok());  // text "" is BOS alone
  // Stopping from the callback: "cancelled", and the session goes on.
  int pieces = 0;
  auto cut = s->Generate("", Greedy(50), [&](std::string_view) { return ++pieces < 3; });
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->finish_reason, "cancelled");
  EXPECT_TRUE(s->Generate("", Greedy(2)).ok());
  EXPECT_FALSE(Engine::Open(Options{.model_path = "/nonexistent.gguf"}).ok());
}

}  // namespace
}  // namespace llamay
