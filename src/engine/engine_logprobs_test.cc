// Request::prompt_logprobs (echo): each prompt token's log probability from the prefill's own logits, checked
// against a log-softmax computed here from logits taken token by token straight through the model.
#include <gtest/gtest.h>

#include <cmath>
#include <future>

#include "engine/engine.h"
#include "engine/logprobs_test_util.h"
#include "model/demo_model.h"

namespace llamay::engine {
namespace {

std::unique_ptr<Engine> MakeEngine(EngineOptions o = {}) {
  auto m = model::Model::FromFile(std::move(*gguf::File::FromBuffer(model::BuildDemoModel())));
  EXPECT_TRUE(m.ok());
  auto tok = tokenizer::Tokenizer::FromGguf((*m)->file());
  EXPECT_TRUE(tok.ok());
  auto e = Engine::Create(std::move(*m), std::move(*tok), o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return std::move(*e);
}

std::vector<int32_t> Prompt(int n, int salt) {
  std::vector<int32_t> p = {1};
  for (int i = 1; i < n; ++i) p.push_back(3 + (i * 37 + salt * 11) % 96);
  return p;
}

using test_util::ReferenceLogSoftmax;

// Every entry of `got` (entry i: prompt[i + 1]) against the reference rows: the token's logprob and the top
// alternatives, most probable first.
void ExpectMatchesReference(const std::vector<PromptLogprob>& got, const std::vector<int32_t>& prompt,
                            const std::vector<std::vector<double>>& ref, int top) {
  ASSERT_EQ(got.size(), prompt.size() - 1);
  for (size_t i = 0; i < got.size(); ++i) {
    const std::vector<double>& row = ref[i];
    EXPECT_EQ(got[i].token, prompt[i + 1]) << i;
    const double want = row[static_cast<size_t>(prompt[i + 1])];
    EXPECT_NEAR(got[i].logprob, want, 1e-6 * std::max(1.0, std::abs(want))) << "prompt token " << i + 1;
    ASSERT_EQ(got[i].top_logprobs.size(), static_cast<size_t>(top)) << i;
    double prev = 0;
    for (size_t k = 0; k < got[i].top_logprobs.size(); ++k) {
      const auto [id, lp] = got[i].top_logprobs[k];
      const double w = row[static_cast<size_t>(id)];
      EXPECT_NEAR(lp, w, 1e-6 * std::max(1.0, std::abs(w))) << i << " top " << k;
      if (k > 0) {
        EXPECT_LE(w, prev);
      }
      prev = w;
    }
    // Nothing outside the top list beats its last entry.
    const double floor = row[static_cast<size_t>(got[i].top_logprobs.back().first)];
    size_t better = 0;
    for (double v : row) better += v > floor;
    EXPECT_LT(better, static_cast<size_t>(top)) << i;
  }
}

Request WithPromptLogprobs(std::vector<int32_t> prompt, int max_tokens, int top) {
  Request r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.max_tokens = max_tokens;
  r.prompt_logprobs = top;
  return r;
}

TEST(EngineLogprobs, PromptLogprobsEqualTheLogSoftmaxAtEachPosition) {
  EngineOptions o;
  o.prefill_chunk = 7;  // the prompt spans several steps
  auto e = MakeEngine(o);
  const auto prompt = Prompt(40, 1);
  const auto ref = ReferenceLogSoftmax(e->model(), prompt);
  // The prompt is in the prefix tree first: a prompt-logprobs request still computes it from the start.
  ASSERT_TRUE(e->Generate(WithPromptLogprobs(prompt, 4, -1)).ok());
  auto c = e->Generate(WithPromptLogprobs(prompt, 4, 3));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->usage.cached_tokens, 0u);
  ExpectMatchesReference(c->prompt_logprobs, prompt, ref, 3);
  // Generation is unchanged by it.
  auto plain = e->Generate(WithPromptLogprobs(prompt, 4, -1));
  EXPECT_EQ(c->tokens, plain->tokens);
  // max_tokens 0: the prompt's logprobs and nothing else.
  auto only = e->Generate(WithPromptLogprobs(prompt, 0, 2));
  ASSERT_TRUE(only.ok());
  EXPECT_TRUE(only->tokens.empty());
  ExpectMatchesReference(only->prompt_logprobs, prompt, ref, 2);
}

TEST(EngineLogprobs, RequestsSharingStepsEachGetTheirOwnRows) {
  EngineOptions o;
  o.prefill_chunk = 9;
  auto e = MakeEngine(o);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 3; ++i) prompts.push_back(Prompt(25 + 10 * i, i + 2));
  std::vector<std::promise<Completion>> done(3);
  for (int i = 0; i < 3; ++i) {
    // The middle request wants no prompt logprobs: one logits row per step among the others' many.
    Request r = WithPromptLogprobs(prompts[static_cast<size_t>(i)], 5, i == 1 ? -1 : 4);
    auto acc = std::make_shared<Completion>();
    ASSERT_TRUE(e->Submit(std::move(r), [&, i, acc](Event& ev) {
                   if (ev.token >= 0) acc->tokens.push_back(ev.token);
                   if (!ev.prompt_logprobs.empty()) acc->prompt_logprobs = std::move(ev.prompt_logprobs);
                   if (ev.finished) done[static_cast<size_t>(i)].set_value(std::move(*acc));
                   return true;
                 }).ok());
  }
  for (int i = 0; i < 3; ++i) {
    Completion c = done[static_cast<size_t>(i)].get_future().get();
    const auto& p = prompts[static_cast<size_t>(i)];
    if (i == 1) {
      EXPECT_TRUE(c.prompt_logprobs.empty());
    } else {
      ExpectMatchesReference(c.prompt_logprobs, p, ReferenceLogSoftmax(e->model(), p), 4);
    }
    e->cache().ClearTree();
    EXPECT_EQ(c.tokens, e->Generate(WithPromptLogprobs(p, 5, -1))->tokens) << i;
  }
}

TEST(EngineLogprobs, ASessionReportsItsNewTokensAfterTheFirst) {
  auto e = MakeEngine();
  const auto prompt = Prompt(30, 4);
  auto head =
      e->Generate(WithPromptLogprobs({prompt.begin(), prompt.begin() + 12}, 0, -1), /*keep_context=*/true);
  ASSERT_TRUE(head.ok());
  Request r = WithPromptLogprobs({prompt.begin() + 12, prompt.end()}, 3, 2);
  r.context = std::move(head->context);
  auto c = e->Generate(std::move(r));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const auto ref = ReferenceLogSoftmax(e->model(), prompt);
  ASSERT_EQ(c->prompt_logprobs.size(), prompt.size() - 13);
  for (size_t i = 0; i < c->prompt_logprobs.size(); ++i) {
    const size_t at = 12 + i + 1;  // the whole prompt's index of the token entry i reports
    EXPECT_EQ(c->prompt_logprobs[i].token, prompt[at]);
    EXPECT_NEAR(c->prompt_logprobs[i].logprob, ref[at - 1][static_cast<size_t>(prompt[at])], 1e-5) << i;
  }
}

TEST(EngineLogprobs, APreemptedPrefillResumesWithEveryLogprob) {
  // 6 pages of 64 positions; the prompt P (100 tokens) is pinned in the prefix tree (2 pages), so 4 pages
  // remain for three other 100-token requests and then P with prompt logprobs, prefilled 16 tokens a step
  // side by side. When they need their second pages, P's request (the newest) is preempted mid-prefill.
  // On resume the tree offers all of P, but only positions whose logits were captured may be reused.
  EngineOptions o;
  o.prefill_chunk = 16;
  o.kv_memory_bytes = 6 * MakeEngine()->cache().layout().page_bytes();
  auto e = MakeEngine(o);
  const auto p = Prompt(100, 20);
  Request pin = WithPromptLogprobs(p, 0, -1);
  pin.pin_prefix = true;
  ASSERT_TRUE(e->Generate(std::move(pin)).ok());
  ASSERT_EQ(e->cache().Stats().tree_pinned, 1u);
  std::vector<std::promise<Completion>> done(4);
  for (int i = 0; i < 4; ++i) {
    Request r = WithPromptLogprobs(i == 3 ? p : Prompt(100, 21 + i), 4, i == 3 ? 2 : -1);
    auto acc = std::make_shared<Completion>();
    ASSERT_TRUE(e->Submit(std::move(r), [&, i, acc](Event& ev) {
                   if (!ev.prompt_logprobs.empty()) acc->prompt_logprobs = std::move(ev.prompt_logprobs);
                   if (ev.finished) {
                     EXPECT_NE(ev.reason, FinishReason::kError) << ev.error.ToString();
                     done[static_cast<size_t>(i)].set_value(std::move(*acc));
                   }
                   return true;
                 }).ok());
  }
  for (int i = 0; i < 3; ++i) done[static_cast<size_t>(i)].get_future().wait();
  ExpectMatchesReference(done[3].get_future().get().prompt_logprobs, p, ReferenceLogSoftmax(e->model(), p),
                         2);
  EXPECT_GT(e->stats().preempted, 0u) << "nothing was preempted: the test proves nothing";
  EXPECT_TRUE(e->cache().CheckInvariants().ok());
}

}  // namespace
}  // namespace llamay::engine
