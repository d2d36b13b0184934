#include "engine/engine.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
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

size_t PageBytes() {
  auto probe = MakeEngine();
  return probe->cache().layout().page_bytes();
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
  ASSERT_TRUE(e->Submit(std::move(r), [&](Event& ev) {
                 if (ev.finished) {
                   last.set_value(std::move(ev));
                   return true;
                 }
                 return ++seen < 3;  // the third token cancels
               }).ok());
  Event fin = last.get_future().get();
  EXPECT_EQ(fin.reason, FinishReason::kCancelled);
  EXPECT_EQ(seen, 3);
}

TEST(Engine, BadRequestsFailAloneAndARequestTooBigForMemoryIsAnError) {
  const size_t page = PageBytes();
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
  EXPECT_NE(too_long.status().message().find("even when it runs alone"), std::string::npos);
  // The engine goes on serving what fits.
  auto ok = e->Generate(Greedy(Prompt(30, 2), 4));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(e->cache().CheckInvariants().ok());
}

TEST(Engine, MemoryPressurePreemptsAndEveryRequestFinishesExactly) {
  // Each request needs 3 pages (100 prompt + 60 generated positions); 4 together need 12, the budget is 6.
  // They all run at once, so some are preempted and resume later; each still gets its solo result.
  EngineOptions o;
  o.kv_memory_bytes = 6 * PageBytes();
  auto e = MakeEngine(o);
  auto sampled = [](int salt) {
    Request r = Greedy(Prompt(100, salt), 60);
    r.sampling.temperature = 0.9f;
    r.sampling.has_seed = true;
    r.sampling.seed = 7u + static_cast<uint64_t>(salt);
    return r;
  };
  std::vector<std::vector<int32_t>> solo;
  for (int i = 0; i < 3; ++i) {
    auto c = e->Generate(i == 2 ? sampled(i) : Greedy(Prompt(100, i), 60));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    solo.push_back(c->tokens);
  }
  auto c3 = e->Generate(Greedy(Prompt(100, 3), 60));
  ASSERT_TRUE(c3.ok());
  solo.push_back(c3->tokens);
  size_t generated = 0;
  for (const auto& t : solo) generated += t.size();
  ASSERT_GT(generated, 200u) << "the demo model stopped early: the requests would not fill the budget";
  e->cache().ClearTree();
  // Request 3 continues a session holding the first half of its prompt.
  const auto p3 = Prompt(100, 3);
  Request head = Greedy(std::vector<int32_t>(p3.begin(), p3.begin() + 50), 0);
  head.retain = false;
  auto held = e->Generate(std::move(head), /*keep_context=*/true);
  ASSERT_TRUE(held.ok());
  ASSERT_EQ(held->context.size(), 50u);
  std::vector<Result<Completion>> got;
  for (int i = 0; i < 4; ++i) got.emplace_back(InternalError("unset"));
  std::vector<std::promise<void>> done(4);
  for (int i = 0; i < 4; ++i) {
    Request r = i == 2 ? sampled(i) : Greedy(Prompt(100, i), 60);
    if (i == 3) {
      r.context = std::move(held->context);
      r.prompt.assign(p3.begin() + 50, p3.end());
    }
    auto result = std::make_shared<Completion>();
    ASSERT_TRUE(e->Submit(std::move(r), [&, i, result](Event& ev) {
                   if (ev.token >= 0) result->tokens.push_back(ev.token);
                   if (!ev.finished) return true;
                   if (ev.reason == FinishReason::kError) {
                     got[static_cast<size_t>(i)] = ev.error;
                   } else {
                     result->context = std::move(ev.context);
                     result->tail = std::move(ev.tail);
                     got[static_cast<size_t>(i)] = std::move(*result);
                   }
                   done[static_cast<size_t>(i)].set_value();
                   return true;
                 }).ok());
  }
  for (auto& d : done) d.get_future().wait();
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(got[i].ok()) << i << ": " << got[i].status().ToString();
    EXPECT_EQ(got[i]->tokens, solo[i]) << "request " << i;
  }
  EXPECT_GT(e->stats().preempted, 0u) << "the budget was never short: the test did not exercise preemption";
  // The session came back whole: its context plus its tail is everything it was given and generated.
  ASSERT_TRUE(got[3]->context.valid());
  std::vector<int32_t> all = got[3]->context.tokens();
  all.insert(all.end(), got[3]->tail.begin(), got[3]->tail.end());
  std::vector<int32_t> want = p3;
  want.insert(want.end(), solo[3].begin(), solo[3].end());
  if (got[3]->tail.size() == 1 && all.size() == want.size() + 1) want.push_back(got[3]->tail[0]);  // an EOG tail
  EXPECT_EQ(all, want);
  got[3]->context.Close();
  EXPECT_TRUE(e->cache().CheckInvariants().ok());
}

TEST(Engine, AFullQueueRefusesAndLeavesTheRequestWithTheCaller) {
  EngineOptions o;
  o.max_active = 1;
  o.max_queue = 1;
  auto e = MakeEngine(o);
  Request head = Greedy(Prompt(30, 9), 0);
  auto session = e->Generate(std::move(head), /*keep_context=*/true);
  ASSERT_TRUE(session.ok());
  // A holds the scheduler inside its sink until B is queued and C refused.
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<Completion> a_done, b_done;
  bool first = true;
  ASSERT_TRUE(e->Submit(Greedy(Prompt(20, 1), 5), [&](Event& ev) {
                 if (first) {
                   first = false;
                   entered.set_value();
                   released.wait();
                 }
                 if (ev.finished) a_done.set_value({});
                 return true;
               }).ok());
  entered.get_future().wait();
  auto b = e->Submit(Greedy(Prompt(20, 2), 5), [&](Event& ev) {
    if (ev.finished) b_done.set_value({});
    return true;
  });
  ASSERT_TRUE(b.ok());
  Request c = Greedy({7, 8}, 5);
  const size_t held = session->context.size();
  ASSERT_EQ(held, 30u);
  c.context = std::move(session->context);
  bool c_called = false;
  auto refused = e->Submit(std::move(c), [&](Event&) { return c_called = true; });
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(e->stats().rejected, 1u);
  ASSERT_TRUE(c.context.valid());  // NOLINT(bugprone-use-after-move): a refusal moves nothing
  EXPECT_EQ(c.context.size(), held);
  EXPECT_EQ(c.prompt, (std::vector<int32_t>{7, 8}));
  release.set_value();
  a_done.get_future().wait();
  b_done.get_future().wait();
  EXPECT_FALSE(c_called);
  // With room again, the same request goes through.
  auto ok = e->Generate(std::move(c));
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST(Engine, AFailedSessionRequestHandsBackItsContextUnchanged) {
  auto e = MakeEngine();
  auto session = e->Generate(Greedy(Prompt(30, 5), 0), /*keep_context=*/true);
  ASSERT_TRUE(session.ok());
  const std::vector<int32_t> before = session->context.tokens();
  Request r = Greedy({1, 5000}, 4);  // a token outside the vocabulary
  r.context = std::move(session->context);
  std::promise<Event> fin;
  ASSERT_TRUE(e->Submit(std::move(r), [&](Event& ev) {
                 if (ev.finished) fin.set_value(std::move(ev));
                 return true;
               }).ok());
  Event ev = fin.get_future().get();
  EXPECT_EQ(ev.reason, FinishReason::kError);
  ASSERT_TRUE(ev.context.valid());
  EXPECT_EQ(ev.context.tokens(), before);
  EXPECT_TRUE(ev.tail.empty());
}

TEST(Engine, PinnedPrefixesStayWithinTheirShareOfMemory) {
  EngineOptions o;
  o.kv_memory_bytes = 8 * PageBytes();  // 8 pages of 64 positions; pins may hold 4
  auto e = MakeEngine(o);
  auto pin = [&](int salt) {
    Request r = Greedy(Prompt(100, salt), 0);
    r.pin_prefix = true;
    ASSERT_TRUE(e->Generate(std::move(r)).ok());
  };
  pin(1);
  pin(2);
  EXPECT_EQ(e->cache().Stats().tree_pinned, 2u);
  pin(3);  // 6 pinned pages > 4: the oldest pin is released
  EXPECT_EQ(e->cache().Stats().tree_pinned, 2u);
  EXPECT_EQ(e->stats().unpinned, 1u);
  for (const auto& entry : e->cache().TreeEntries()) {
    if (entry.tokens == Prompt(100, 1)) {
      EXPECT_FALSE(entry.pinned);
    }
  }
  // However many prefixes clients pin, a request of half the budget still runs.
  for (int salt = 4; salt < 14; ++salt) pin(salt);
  auto big = e->Generate(Greedy(Prompt(248, 99), 8));
  EXPECT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_LE(e->cache().Stats().tree_pinned, 2u);
  EXPECT_TRUE(e->cache().CheckInvariants().ok());
}

}  // namespace
}  // namespace llamay::engine

namespace llamay::engine {
namespace {

// The next-token logits a prompt-only request returns are the model's own for that prompt, and a session
// that carries them continues with no new tokens exactly as a session that ran the prompt's last token.
TEST(Engine, StoredLogitsContinueASessionWithoutAForwardPass) {
  auto e = MakeEngine();
  const auto prompt = Prompt(50, 3);
  // The whole prompt, then the logits of its last position.
  Request pre = Greedy(prompt, 0);
  pre.retain = false;
  pre.return_logits = true;
  auto held = e->Generate(std::move(pre), /*keep_context=*/true);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  ASSERT_EQ(held->logits.size(), e->model().hparams().n_vocab);
  ASSERT_EQ(held->context.size(), prompt.size());
  {
    kv::CacheOptions co;
    co.layout = e->model().KvLayoutFor(64, kv::KvPrecision::kF16);
    auto cache = std::move(*kv::Cache::Create(co));
    kv::Context ctx = cache->NewContext();
    std::vector<float> logits;
    model::SeqInput in{&ctx, prompt, false};
    ASSERT_TRUE(e->model().Forward(std::span(&in, 1), &logits).ok());
    EXPECT_EQ(0, std::memcmp(logits.data(), held->logits.data(), logits.size() * 4)) << "not the model's logits";
  }
  // Continue with no prompt: the first token comes from the stored logits.
  Request go = Greedy({}, 12);
  go.context = std::move(held->context);
  go.context_logits = held->logits;
  auto c = e->Generate(std::move(go), /*keep_context=*/true);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->tokens, ManualGreedy(e->model(), prompt, 12));
  EXPECT_EQ(c->usage.cached_tokens, prompt.size());
  // Without logits, no new tokens is still an error; with logits of the wrong size, too.
  Request bare = Greedy({}, 4);
  bare.context = c->context.Fork();
  auto none = e->Generate(std::move(bare), true);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no next-token logits"), std::string::npos) << none.status().ToString();
  Request wrong = Greedy({}, 4);
  wrong.context = std::move(c->context);
  wrong.context_logits = {1.0f, 2.0f};
  auto bad = e->Generate(std::move(wrong), true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("vocabulary"), std::string::npos) << bad.status().ToString();
}

}  // namespace
}  // namespace llamay::engine

namespace llamay::engine {
namespace {

// The final event names the stop sequence that ended the text: the earliest in the text, not the first
// listed; none when the text ended otherwise.
TEST(Engine, TheFinalEventNamesTheStopSequenceThatEndedTheText) {
  auto e = MakeEngine();
  const auto prompt = Prompt(40, 1);
  auto plain = e->Generate(Greedy(prompt, 24));
  ASSERT_TRUE(plain.ok());
  ASSERT_GE(plain->text.size(), 16u) << "the demo model's answer is too short for this test";
  const std::string early = plain->text.substr(4, 2), late = plain->text.substr(12, 3);
  ASSERT_EQ(plain->text.find(early), 4u) << "pick another prompt: the early stop appears before byte 4";
  auto final_event = [&](std::vector<std::string> stop) {
    Request r = Greedy(prompt, 24);
    r.stop = std::move(stop);
    std::mutex mu;
    std::condition_variable cv;
    std::optional<Event> last;
    auto id = e->Submit(std::move(r), [&](Event& ev) {
      if (!ev.finished) return true;
      std::lock_guard l(mu);
      last = std::move(ev);
      cv.notify_all();
      return true;
    });
    EXPECT_TRUE(id.ok());
    std::unique_lock l(mu);
    cv.wait(l, [&] { return last.has_value(); });
    return std::move(*last);
  };
  Event stopped = final_event({late, early});
  EXPECT_EQ(stopped.reason, FinishReason::kStop);
  EXPECT_EQ(stopped.stop_sequence, early);
  Event unstopped = final_event({"\x01\x02 never"});
  EXPECT_EQ(unstopped.stop_sequence, "");
}

}  // namespace
}  // namespace llamay::engine
