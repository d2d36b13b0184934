// The engine on hybrid and windowed models (tiny-granitehybrid, tiny-mamba2, tiny-qwen35 and tiny-gemma3 from
// ../shared/ref):
// prefill steps cut at checkpoint boundaries, checkpoints at the prompt's and the output's end, and what
// an agent's next turn reuses, with tokens identical to a cold run.
#include <gtest/gtest.h>

#include <filesystem>
#include <future>

#include "engine/engine.h"

namespace llamay::engine {
namespace {

const std::string kModels = std::string(LLAMAY_SHARED_DIR) + "/ref/models/";

std::unique_ptr<Engine> LoadEngine(const std::string& file, EngineOptions o = {}) {
  auto m = model::Model::Load(kModels + file);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  auto tok = tokenizer::Tokenizer::FromGguf((*m)->file());
  EXPECT_TRUE(tok.ok());
  auto e = Engine::Create(std::move(*m), std::move(*tok), o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return std::move(*e);
}

std::vector<int32_t> Tokens(size_t n, int salt) {
  std::vector<int32_t> p = {1};
  for (size_t i = 1; i < n; ++i)
    p.push_back(static_cast<int32_t>(3 + (i * 37 + static_cast<size_t>(salt) * 11) % 500));
  return p;
}

Request Greedy(std::vector<int32_t> prompt, int max_tokens) {
  Request r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.sampling.repeat_penalty = 1.0f;
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  return r;
}

class HybridEngine : public testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kModels + GetParam())) GTEST_SKIP() << "../shared/ref is absent";
  }
};

// An agent's turns: each prompt is the previous prompt, the previous output and a new message. The
// second turn resumes at the first turn's output end (a checkpoint), the third at the second's; every
// turn's tokens equal a cold run's.
TEST_P(HybridEngine, NextTurnResumesAtTheOutputCheckpointAndMatchesACold) {
  EngineOptions o;
  o.prefill_chunk = 100;  // chunks that do not divide the checkpoint spacing
  auto e = LoadEngine(GetParam(), o);
  std::vector<int32_t> prompt = Tokens(300, 1);
  std::vector<std::vector<int32_t>> outputs;
  std::vector<size_t> cached;
  for (int turn = 0; turn < 3; ++turn) {
    auto c = e->Generate(Greedy(prompt, 8));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ASSERT_EQ(c->tokens.size(), 8u);
    cached.push_back(c->usage.cached_tokens);
    outputs.push_back(c->tokens);
    if (turn > 0) {
      // The retained context ends where the last output token was sampled (it was never run).
      const size_t prev_end = prompt.size() - 40 - 1;
      EXPECT_EQ(c->usage.cached_tokens, prev_end) << "turn " << turn;
    }
    prompt.insert(prompt.end(), c->tokens.begin(), c->tokens.end());
    const auto more = Tokens(40, turn + 7);
    prompt.insert(prompt.end(), more.begin() + 1, more.end());
    prompt.push_back(5);
  }
  EXPECT_EQ(cached[0], 0u);
  // Cold: a fresh engine for each turn's prompt.
  std::vector<int32_t> p = Tokens(300, 1);
  for (int turn = 0; turn < 3; ++turn) {
    auto cold = LoadEngine(GetParam(), o);
    auto c = cold->Generate(Greedy(p, 8));
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->usage.cached_tokens, 0u);
    EXPECT_EQ(c->tokens, outputs[static_cast<size_t>(turn)]) << "turn " << turn;
    p.insert(p.end(), c->tokens.begin(), c->tokens.end());
    const auto more = Tokens(40, turn + 7);
    p.insert(p.end(), more.begin() + 1, more.end());
    p.push_back(5);
  }
}

// A prompt sharing part of an earlier one resumes at the deepest checkpoint inside the shared part: the
// aligned ones a prefill takes every checkpoint_tokens (256 here), not at the first differing token.
TEST_P(HybridEngine, APartialMatchResumesAtTheDeepestAlignedCheckpoint) {
  EngineOptions o;
  o.prefill_chunk = 200;
  auto e = LoadEngine(GetParam(), o);
  const bool recurrent = e->cache().groups().has_recurrent();
  if (recurrent) {
    ASSERT_EQ(e->cache().layout().checkpoint_tokens, 256u);
  }
  std::vector<int32_t> a = Tokens(600, 2);
  auto first = e->Generate(Greedy(a, 2));
  ASSERT_TRUE(first.ok());
  std::vector<int32_t> b(a.begin(), a.begin() + 550);
  const auto tail = Tokens(30, 9);
  b.insert(b.end(), tail.begin() + 1, tail.end());
  auto second = e->Generate(Greedy(b, 6));
  ASSERT_TRUE(second.ok());
  // A windowed model resumes anywhere its window is still held (the first request kept positions from
  // 512 on: its pages behind the window of its last position were released).
  EXPECT_EQ(second->usage.cached_tokens, recurrent ? 512u : 550u);
  auto cold = LoadEngine(GetParam(), o);
  auto c = cold->Generate(Greedy(b, 6));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(second->tokens, c->tokens);
}

// The same prompt sent again (a retry, a "regenerate") resumes with one token to run: the prefill took a
// checkpoint before the prompt's last token. Short prompts too (no grid checkpoint below 256), and the
// tokens are a cold run's.
TEST_P(HybridEngine, TheSamePromptAgainResumesWithOneTokenToRun) {
  auto e = LoadEngine(GetParam());
  if (!e->cache().groups().has_recurrent())
    GTEST_SKIP() << "full or windowed attention resumes anywhere already";
  for (size_t n : {30u, 771u}) {
    SCOPED_TRACE(n);
    const std::vector<int32_t> p = Tokens(n, 4);
    auto first = e->Generate(Greedy(p, 4));
    ASSERT_TRUE(first.ok());
    auto again = e->Generate(Greedy(p, 4));
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->usage.cached_tokens, n - 1);
    EXPECT_EQ(again->tokens, first->tokens);
  }
}

// Request::checkpoints (where a chat template ends a message): a later prompt that shares the text up to
// one of them resumes there, not at the grid below it, and continues as a cold run does.
TEST_P(HybridEngine, ARequestedCheckpointIsWhereADivergingPromptResumes) {
  auto e = LoadEngine(GetParam());
  if (!e->cache().groups().has_recurrent())
    GTEST_SKIP() << "full or windowed attention resumes anywhere already";
  const std::vector<int32_t> system = Tokens(300, 5);  // past one grid checkpoint (256)
  std::vector<int32_t> a = system;
  const auto user_a = Tokens(40, 6);
  a.insert(a.end(), user_a.begin() + 1, user_a.end());
  Request first = Greedy(a, 2);
  first.checkpoints = {system.size()};
  ASSERT_TRUE(e->Generate(std::move(first)).ok());
  std::vector<int32_t> b = system;
  const auto user_b = Tokens(25, 7);
  b.insert(b.end(), user_b.begin() + 1, user_b.end());
  auto second = e->Generate(Greedy(b, 5));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->usage.cached_tokens, system.size());  // without the checkpoint: 256
  auto cold = LoadEngine(GetParam());
  auto c = cold->Generate(Greedy(b, 5));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(second->tokens, c->tokens);
}

// A session (a context held across requests) continues exactly as one cold run over all its tokens.
TEST_P(HybridEngine, ASessionContinuesExactly) {
  auto e = LoadEngine(GetParam());
  const std::vector<int32_t> start = Tokens(70, 3);
  auto made = e->Generate(Greedy(start, 0), /*keep_context=*/true);
  ASSERT_TRUE(made.ok());
  ASSERT_EQ(made->context.size(), 70u);  // max_tokens 0: the whole prompt is computed, no tail
  ASSERT_TRUE(made->tail.empty());
  Request next = Greedy({9, 10}, 8);
  next.context = std::move(made->context);
  auto cont = e->Generate(std::move(next), true);
  ASSERT_TRUE(cont.ok()) << cont.status().ToString();
  EXPECT_EQ(cont->usage.cached_tokens, 70u);
  std::vector<int32_t> all = start;
  all.push_back(9);
  all.push_back(10);
  auto cold = LoadEngine(GetParam())->Generate(Greedy(all, 8));
  ASSERT_TRUE(cold.ok());
  EXPECT_EQ(cont->tokens, cold->tokens);
}

// A session request that fails after admission hands the session back exactly as it came: a layout that
// cannot roll back anywhere returns to a fork taken at admission.
TEST_P(HybridEngine, AFailedSessionRequestHandsBackItsContextUnchanged) {
  auto e = LoadEngine(GetParam());
  if (!e->cache().groups().has_recurrent())
    GTEST_SKIP() << "the failure is provoked through a recurrent state";
  auto made = e->Generate(Greedy(Tokens(40, 6), 0), /*keep_context=*/true);
  ASSERT_TRUE(made.ok());
  kv::Context ctx = std::move(made->context);
  // A position appended behind the model's back: the forward step refuses the context (its recurrent
  // state does not cover it), after the engine admitted the request and the session's state was shared.
  ASSERT_TRUE(ctx.Append(std::vector<int32_t>{7}).ok());
  const std::vector<int32_t> came = ctx.tokens();
  const size_t bytes = ctx.bytes();
  std::vector<uint8_t> state(ctx.StateData(), ctx.StateData() + e->cache().layout().recurrent_bytes());
  Request r = Greedy({9, 10}, 4);
  r.context = std::move(ctx);
  std::promise<Event> fin;
  ASSERT_TRUE(e->Submit(std::move(r), [&](Event& ev) {
                 if (ev.finished) fin.set_value(std::move(ev));
                 return true;
               }).ok());
  Event ev = fin.get_future().get();
  ASSERT_TRUE(ev.context.valid());
  EXPECT_EQ(ev.reason, FinishReason::kError);
  EXPECT_EQ(ev.context.tokens(), came);
  EXPECT_EQ(ev.context.bytes(), bytes);
  EXPECT_EQ(std::vector<uint8_t>(ev.context.StateData(), ev.context.StateData() + state.size()), state);
}

// A prompt whose checkpoints (one every 256 positions, and at its end) would not all fit in memory with its
// KV: with nothing else to evict, the request gives up its own checkpoints as it goes, least loss first, and
// completes, with a cold run's tokens. (Before, it failed with "kv cache memory exhausted".)
TEST_P(HybridEngine, APromptWhoseCheckpointsDoNotFitGivesSomeUpAndCompletes) {
  auto roomy = LoadEngine(GetParam());
  if (!roomy->cache().groups().has_recurrent()) GTEST_SKIP() << "no recurrent state";
  const kv::KvLayout& l = roomy->cache().layout();
  const std::vector<int32_t> prompt = Tokens(1300, 4);  // checkpoints at 256, ..., 1280, 1299 and 1300
  auto want = roomy->Generate(Greedy(prompt, 4));
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  // The KV of every position and three states (the live slot and two checkpoints): not seven.
  EngineOptions o;
  o.kv_memory_bytes = ((prompt.size() + 4) / l.page_tokens + 2) * l.page_bytes() + 3 * l.recurrent_bytes();
  auto tight = LoadEngine(GetParam(), o);
  auto got = tight->Generate(Greedy(prompt, 4));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->tokens, want->tokens);
  EXPECT_LE(tight->cache().Stats().bytes_live, o.kv_memory_bytes);
}

INSTANTIATE_TEST_SUITE_P(Models, HybridEngine,
                         testing::Values("tiny-granitehybrid-f32.gguf", "tiny-mamba2-f32.gguf",
                                         "tiny-qwen35-f32.gguf", "tiny-gemma3-f32.gguf"),
                         [](const auto& info) {
                           std::string n = info.param;
                           n = n.substr(0, n.find('.'));
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace llamay::engine
