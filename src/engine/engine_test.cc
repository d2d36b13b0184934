#include "engine/engine.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "model/demo_model.h"

namespace llamay::engine {
namespace {

std::unique_ptr<model::Model> DemoModel() {
  auto f = gguf::File::FromBuffer(model::BuildDemoModel());
  EXPECT_TRUE(f.ok());
  auto m = model::Model::FromFile(std::move(*f));
  EXPECT_TRUE(m.ok());
  return std::move(*m);
}

std::unique_ptr<Engine> MakeEngine(EngineOptions o = {}) {
  auto m = DemoModel();
  auto tok = tokenizer::Tokenizer::FromGguf(m->file());
  EXPECT_TRUE(tok.ok());
  auto e = Engine::Create(std::move(m), std::move(*tok), o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return std::move(*e);
}

std::vector<int32_t> Prompt(int n, int salt) {
  std::vector<int32_t> p = {1};
  for (int i = 1; i < n; ++i) p.push_back(3 + (i * 31 + salt * 7) % 96);
  return p;
}

Request Greedy(std::vector<int32_t> prompt, int max_tokens) {
  Request r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.sampling.repeat_penalty = 1.0f;
  r.max_tokens = max_tokens;
  return r;
}

// Greedy decoding straight through the model, with no engine.
std::vector<int32_t> ManualGreedy(const model::Model& m, const std::vector<int32_t>& prompt, int n) {
  kv::CacheOptions co;
  co.layout = m.KvLayoutFor(64, kv::KvPrecision::kF16);
  auto cache = std::move(*kv::Cache::Create(co));
  kv::Context ctx = cache->NewContext();
  std::vector<float> logits;
  model::SeqInput in{&ctx, prompt, false};
  EXPECT_TRUE(m.Forward(std::span(&in, 1), &logits).ok());
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    const int32_t t = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (t == 2) break;  // </s>
    out.push_back(t);
    logits.clear();
    model::SeqInput step{&ctx, std::span(&out.back(), 1), false};
    EXPECT_TRUE(m.Forward(std::span(&step, 1), &logits).ok());
  }
  return out;
}

TEST(Engine, GreedyMatchesTheModelDirectly) {
  auto e = MakeEngine();
  const auto prompt = Prompt(40, 1);
  auto c = e->Generate(Greedy(prompt, 24));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->tokens, ManualGreedy(e->model(), prompt, 24));
  EXPECT_EQ(c->usage.prompt_tokens, prompt.size());
  EXPECT_EQ(c->usage.completion_tokens, c->tokens.size());
  EXPECT_EQ(c->reason, c->tokens.size() == 24 ? FinishReason::kLength : FinishReason::kStop);
}

TEST(Engine, ConcurrentRequestsGetExactlyTheirSoloResults) {
  EngineOptions o;
  o.prefill_chunk = 16;  // long prompts interleave with decodes
  auto e = MakeEngine(o);
  std::vector<std::vector<int32_t>> solo;
  for (int i = 0; i < 4; ++i) {
    auto c = e->Generate(Greedy(Prompt(20 + 15 * i, i + 10), 20));
    ASSERT_TRUE(c.ok());
    solo.push_back(c->tokens);
  }
  e->cache().ClearTree();  // no prefix hits: the batched run computes everything again
  std::vector<std::thread> threads;
  std::vector<std::vector<int32_t>> together(4);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] { together[static_cast<size_t>(i)] = e->Generate(Greedy(Prompt(20 + 15 * i, i + 10), 20))->tokens; });
  for (auto& t : threads) t.join();
  EXPECT_EQ(together, solo);
}

TEST(Engine, SeededSamplingIsReproducible) {
  auto e = MakeEngine();
  auto make = [](uint64_t seed) {
    Request r = Greedy(Prompt(30, 3), 30);
    r.sampling.temperature = 0.9f;
    r.sampling.seed = seed;
    r.sampling.has_seed = true;
    return r;
  };
  auto a = e->Generate(make(1234)), b = e->Generate(make(1234));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_NE(e->Generate(make(99))->tokens, a->tokens);
}

TEST(Engine, PrefixTreeServesRepeatedAndExtendedPrompts) {
  auto e = MakeEngine();
  const auto prompt = Prompt(100, 4);
  auto first = e->Generate(Greedy(prompt, 10));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->usage.cached_tokens, 0u);
  auto again = e->Generate(Greedy(prompt, 10));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->usage.cached_tokens, prompt.size() - 1);
  EXPECT_EQ(again->tokens, first->tokens);
  // The next turn: prompt + answer + more. Everything computed before is reused.
  auto next = prompt;
  next.insert(next.end(), first->tokens.begin(), first->tokens.end());
  for (int i = 0; i < 5; ++i) next.push_back(40 + i);
  auto turn = e->Generate(Greedy(next, 10));
  ASSERT_TRUE(turn.ok());
  EXPECT_GE(turn->usage.cached_tokens, prompt.size() + first->tokens.size() - 1);
  e->cache().ClearTree();
  auto cold = e->Generate(Greedy(next, 10));
  EXPECT_EQ(cold->usage.cached_tokens, 0u);
  EXPECT_EQ(cold->tokens, turn->tokens);  // reuse changes nothing in the result
}

TEST(Engine, SessionsContinueExactly) {
  auto e = MakeEngine();
  const auto prompt = Prompt(50, 5);
  Request build = Greedy(prompt, 0);
  auto built = e->Generate(std::move(build), /*keep_context=*/true);
  ASSERT_TRUE(built.ok());
  ASSERT_TRUE(built->context.valid());
  EXPECT_EQ(built->context.size(), prompt.size());
  std::vector<int32_t> more = {10, 11, 12};
  Request cont = Greedy(more, 12);
  cont.context = std::move(built->context);
  auto continued = e->Generate(std::move(cont), true);
  ASSERT_TRUE(continued.ok()) << continued.status().ToString();
  EXPECT_EQ(continued->usage.cached_tokens, prompt.size());
  auto full = prompt;
  full.insert(full.end(), more.begin(), more.end());
  e->cache().ClearTree();
  EXPECT_EQ(continued->tokens, e->Generate(Greedy(full, 12))->tokens);
}

TEST(Engine, CancellationStopsARequest) {
  auto e = MakeEngine();
  std::promise<Event> last;
  int seen = 0;
  Request r = Greedy(Prompt(10, 6), 1000);
  r.sampling.temperature = 1.0f;
  r.sampling.has_seed = true;
  e->Submit(std::move(r), [&](Event& ev) {
    if (ev.finished) {
      last.set_value(std::move(ev));
      return true;
    }
    return ++seen < 3;  // the third token cancels
  });
  Event fin = last.get_future().get();
  EXPECT_EQ(fin.reason, FinishReason::kCancelled);
  EXPECT_EQ(seen, 3);
}

TEST(Engine, BadRequestsFailAloneAndMemoryPressureIsAnError) {
  auto probe = MakeEngine();
  const size_t page = probe->cache().layout().page_bytes();
  probe.reset();
  EngineOptions o;
  o.kv_memory_bytes = 4 * page;  // 256 positions at 64 per page
  auto e = MakeEngine(o);
  auto bad_token = e->Generate(Greedy({1, 5000}, 4));
  EXPECT_EQ(bad_token.status().code(), StatusCode::kInvalidArgument);
  Request bad_params = Greedy(Prompt(5, 1), 4);
  bad_params.sampling.temperature = -1;
  EXPECT_EQ(e->Generate(std::move(bad_params)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e->Generate(Greedy({}, 4)).status().code(), StatusCode::kInvalidArgument);
  auto too_long = e->Generate(Greedy(Prompt(400, 2), 4));
  EXPECT_EQ(too_long.status().code(), StatusCode::kResourceExhausted) << too_long.status().ToString();
  // The engine goes on serving what fits.
  auto ok = e->Generate(Greedy(Prompt(30, 2), 4));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(e->cache().CheckInvariants().ok());
}

}  // namespace
}  // namespace llamay::engine
