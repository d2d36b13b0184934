// The public API (include/llamay/llamay.h): sessions continue, fork, snapshot and restore exactly, carry
// their constraint, and report errors leaving the session as it was.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <fstream>
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

// Taking input in without generating (max_tokens 0, what `llamay ctx build` does) keeps the next token's
// logits: a snapshot stores them and a restore samples its first token from them, computing nothing. The
// stats count what the session holds, and a fork allocates no page.
TEST(Api, InputTakenInKeepsItsLogitsAndForksAllocateNothing) {
  auto engine = OpenDemo();
  auto s = engine->NewSession();
  auto in = s->Generate("A system prompt that every branch shares.", Greedy(0));
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_TRUE(in->tokens.empty());
  const SessionStats held = s->Stats();
  EXPECT_EQ(held.tokens, in->prompt_tokens);
  EXPECT_EQ(held.tokens, s->tokens());
  EXPECT_EQ(held.pages, 1u);  // fewer than 64 tokens
  EXPECT_EQ(held.bytes, engine->Memory().page_bytes);

  const auto dir = std::filesystem::path(::testing::TempDir());
  const std::string native = (dir / "api_native.llamayctx").string(), f32 = (dir / "api_f32.llamayctx").string();
  ASSERT_TRUE(s->Snapshot(native).ok());
  ASSERT_TRUE(s->Snapshot(f32, {.f32 = true}).ok());
  EXPECT_GT(std::filesystem::file_size(f32), std::filesystem::file_size(native));  // f16 cache: half the KV bytes

  const MemoryStats before = engine->Memory();
  auto forks = s->Fork(4);
  const MemoryStats after = engine->Memory();
  EXPECT_EQ(after.pages_allocated_total, before.pages_allocated_total);
  EXPECT_EQ(after.pages_live, before.pages_live);
  EXPECT_EQ(forks[3]->Stats().pages, held.pages);

  auto want = s->Generate("", Greedy(12));
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(want->prompt_tokens, want->cached_tokens);  // the stored logits gave the first token
  for (const std::string& path : {native, f32}) {
    auto restored = engine->Restore(path);
    ASSERT_TRUE(restored.ok()) << restored.status().ToString();
    EXPECT_EQ((*restored)->tokens(), held.tokens);
    auto got = (*restored)->Generate("", Greedy(12));
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(got->tokens, want->tokens) << path;
    EXPECT_EQ(got->prompt_tokens, got->cached_tokens) << path;
  }
  auto branch = forks[0]->Generate("", Greedy(12));
  ASSERT_TRUE(branch.ok());
  EXPECT_EQ(branch->tokens, want->tokens);
  std::filesystem::remove(native);
  std::filesystem::remove(f32);
}

// A refused snapshot says why (SnapshotRefusal), and other failures are not called refusals.
TEST(Api, RefusedSnapshotsSayWhy) {
  auto engine = OpenDemo();
  auto s = engine->NewSession();
  ASSERT_TRUE(s->Generate("Something worth keeping", Greedy(2)).ok());
  const auto dir = std::filesystem::path(::testing::TempDir());
  const std::string path = (dir / "api_refused.llamayctx").string();
  ASSERT_TRUE(s->Snapshot(path).ok());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 10);
  auto truncated = engine->Restore(path);
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(SnapshotRefusal(truncated.status()), "truncated");
  {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << "not a snapshot at all, just some bytes";
  }
  auto junk = engine->Restore(path);
  ASSERT_FALSE(junk.ok());
  EXPECT_EQ(SnapshotRefusal(junk.status()), "bad_magic");
  auto missing = engine->Restore((dir / "api_missing.llamayctx").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(SnapshotRefusal(missing.status()), "");
  std::filesystem::remove(path);
  SamplingOptions bad;
  bad.top_p = 2;
  EXPECT_EQ(bad.Validate().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(SamplingOptions{}.Validate().ok());
}

// A caller's logits processor runs in the engine's decode loop: it sees every step, its mask holds, and its
// error ends the call leaving the session as it was.
class BanToken : public LogitsProcessor {
 public:
  explicit BanToken(int32_t banned) : banned_(banned) {}
  Status Process(std::span<float> logits) override {
    ++steps;
    if (fail) return InternalError("the processor failed");
    logits[static_cast<size_t>(banned_)] = -std::numeric_limits<float>::infinity();
    return Status::Ok();
  }
  Status Accept(int32_t token) override {
    accepted.push_back(token);
    return Status::Ok();
  }
  std::unique_ptr<LogitsProcessor> Clone() const override { return std::make_unique<BanToken>(*this); }
  int steps = 0;
  bool fail = false;
  std::vector<int32_t> accepted;

 private:
  int32_t banned_;
};

TEST(Api, CallersLogitsProcessorsRunInTheDecodeLoop) {
  auto engine = OpenDemo();
  auto free = engine->NewSession()->Generate("Processors filter", Greedy(16));
  ASSERT_TRUE(free.ok());
  ASSERT_FALSE(free->tokens.empty());
  const int32_t banned = free->tokens.front();  // what greedy picks first without the processor
  BanToken ban(banned);
  GenerateOptions g = Greedy(16);
  g.processors = {&ban};
  auto s = engine->NewSession();
  auto out = s->Generate("Processors filter", g);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(std::count(out->tokens.begin(), out->tokens.end(), banned), 0);
  EXPECT_NE(out->tokens, free->tokens);
  EXPECT_EQ(ban.steps, static_cast<int>(out->tokens.size()));
  EXPECT_EQ(ban.accepted, out->tokens);
  const size_t before = s->tokens();
  ban.fail = true;
  auto failed = s->Generate(" more", g);
  EXPECT_EQ(failed.status().code(), StatusCode::kInternal);
  EXPECT_EQ(s->tokens(), before);
  g.processors = {nullptr};
  EXPECT_EQ(s->Generate("", g).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(s->Generate("", Greedy(2)).ok());
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
