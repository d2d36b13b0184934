// ReasoningBudget over fake logits: a 16-token vocabulary where 3 is `<think>`, 5 is `</`, 6 is `think>`
// (the close marker is two tokens) and the others are words.
#include "engine/reasoning_budget.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace llamay::engine {
namespace {

constexpr int kVocab = 16;
constexpr int32_t kOpen = 3, kCloseA = 5, kCloseB = 6, kWord = 9;
const std::vector<int32_t> kOpenTokens = {kOpen};
const std::vector<int32_t> kCloseTokens = {kCloseA, kCloseB};

// Runs one step: Process on flat logits, then the tokens still allowed.
std::vector<int32_t> Allowed(LogitsProcessor& p) {
  std::vector<float> logits(kVocab, 1.0f);
  EXPECT_TRUE(p.Process(logits).ok());
  std::vector<int32_t> allowed;
  for (int32_t t = 0; t < kVocab; ++t)
    if (!std::isinf(logits[static_cast<size_t>(t)])) allowed.push_back(t);
  return allowed;
}

bool Free(LogitsProcessor& p) { return Allowed(p).size() == static_cast<size_t>(kVocab); }

// Accepts `token` after checking the step it is accepted in was free.
void AcceptFree(ReasoningBudget& b, int32_t token) {
  ASSERT_TRUE(Free(b)) << "after " << b.reasoning_tokens() << " reasoning tokens";
  ASSERT_TRUE(b.Accept(token).ok());
}

TEST(ReasoningBudget, ForcesTheCloseMarkerAfterExactlyTheBudget) {
  for (int budget : {0, 1, 2, 7}) {
    ReasoningBudget b({}, kCloseTokens, /*starts_inside=*/true, budget);
    EXPECT_TRUE(b.inside());
    for (int i = 0; i < budget; ++i) {
      EXPECT_EQ(b.reasoning_tokens(), i);
      AcceptFree(b, kWord + i % 3);
    }
    EXPECT_EQ(b.reasoning_tokens(), budget);
    EXPECT_TRUE(b.forcing());
    // The close marker, one token per step.
    EXPECT_EQ(Allowed(b), std::vector<int32_t>{kCloseA}) << "budget " << budget;
    ASSERT_TRUE(b.Accept(kCloseA).ok());
    EXPECT_TRUE(b.inside());
    EXPECT_EQ(Allowed(b), std::vector<int32_t>{kCloseB});
    ASSERT_TRUE(b.Accept(kCloseB).ok());
    // Then everything passes, and nothing counts.
    EXPECT_FALSE(b.inside());
    EXPECT_FALSE(b.forcing());
    EXPECT_EQ(b.reasoning_tokens(), budget);
    for (int i = 0; i < 5; ++i) AcceptFree(b, kWord);
    AcceptFree(b, kCloseA);
    AcceptFree(b, kCloseB);
    EXPECT_TRUE(Free(b));
    EXPECT_EQ(b.reasoning_tokens(), budget);
  }
}

TEST(ReasoningBudget, TheForcedTokenKeepsItsLogit) {
  ReasoningBudget b({}, kCloseTokens, true, 0);
  std::vector<float> logits(kVocab, 0.0f);
  logits[kCloseA] = -2.5f;
  ASSERT_TRUE(b.Process(logits).ok());
  for (int32_t t = 0; t < kVocab; ++t)
    EXPECT_EQ(logits[static_cast<size_t>(t)], t == kCloseA ? -2.5f : -INFINITY) << t;
  // A forced step that accepts another token is a broken pipeline, said so.
  EXPECT_EQ(b.Accept(kWord).code(), StatusCode::kInternal);
  // Logits too short for the forced token.
  std::vector<float> few(3, 0.0f);
  EXPECT_EQ(b.Process(few).code(), StatusCode::kInvalidArgument);
}

TEST(ReasoningBudget, ANaturalCloseStopsCountingAndNeverForces) {
  ReasoningBudget b({}, kCloseTokens, true, 10);
  AcceptFree(b, kWord);
  AcceptFree(b, kWord);
  AcceptFree(b, kCloseA);  // may be the close marker: not counted while undecided
  EXPECT_EQ(b.reasoning_tokens(), 2);
  AcceptFree(b, kWord);  // it was not: counted after all
  EXPECT_EQ(b.reasoning_tokens(), 4);
  AcceptFree(b, kCloseA);
  AcceptFree(b, kCloseA);  // "</" "</": the second one may still begin the marker
  EXPECT_EQ(b.reasoning_tokens(), 5);
  EXPECT_TRUE(b.inside());
  AcceptFree(b, kCloseB);
  EXPECT_FALSE(b.inside());
  EXPECT_EQ(b.reasoning_tokens(), 5);  // the words and the first "</"
  for (int i = 0; i < 20; ++i) AcceptFree(b, kWord);
  EXPECT_EQ(b.reasoning_tokens(), 5);
}

TEST(ReasoningBudget, TheBudgetSpentInsideAMarkerTheModelBeganFinishesIt) {
  ReasoningBudget b({}, kCloseTokens, true, 3);
  AcceptFree(b, kWord);
  AcceptFree(b, kWord);
  // The third token the model chose begins the marker.
  AcceptFree(b, kCloseA);
  EXPECT_EQ(Allowed(b), std::vector<int32_t>{kCloseB});  // not a second "</"
  ASSERT_TRUE(b.Accept(kCloseB).ok());
  EXPECT_FALSE(b.inside());
  EXPECT_EQ(b.reasoning_tokens(), 2);
  EXPECT_TRUE(Free(b));
}

TEST(ReasoningBudget, TheOpenMarkerCountsOnlyAtTheStart) {
  {  // <think> first: the block starts after it, the marker not counted
    ReasoningBudget b(kOpenTokens, kCloseTokens, false, 2);
    EXPECT_FALSE(b.inside());
    AcceptFree(b, kOpen);
    EXPECT_TRUE(b.inside());
    EXPECT_EQ(b.reasoning_tokens(), 0);
    AcceptFree(b, kWord);
    AcceptFree(b, kWord);
    EXPECT_EQ(Allowed(b), std::vector<int32_t>{kCloseA});
  }
  {  // a word first: no block, ever
    ReasoningBudget b(kOpenTokens, kCloseTokens, false, 1);
    AcceptFree(b, kWord);
    AcceptFree(b, kOpen);
    for (int i = 0; i < 10; ++i) AcceptFree(b, kWord);
    EXPECT_FALSE(b.inside());
    EXPECT_EQ(b.reasoning_tokens(), 0);
  }
  {  // a two-token open marker that breaks off
    ReasoningBudget b({1, 2}, kCloseTokens, false, 0);
    AcceptFree(b, 1);
    AcceptFree(b, 1);
    EXPECT_FALSE(b.inside());
    EXPECT_TRUE(Free(b));
  }
  {  // budget 0 after an open marker: the close comes at once
    ReasoningBudget b({1, 2}, kCloseTokens, false, 0);
    AcceptFree(b, 1);
    AcceptFree(b, 2);
    EXPECT_EQ(Allowed(b), std::vector<int32_t>{kCloseA});
  }
}

TEST(ReasoningBudget, WithoutAnOpenSequenceOutsideNeverCounts) {
  ReasoningBudget b({}, kCloseTokens, false, 0);
  EXPECT_FALSE(b.inside());
  for (int32_t t : {kOpen, kWord, kCloseA, kCloseB, kWord}) AcceptFree(b, t);
  EXPECT_EQ(b.reasoning_tokens(), 0);
  EXPECT_FALSE(b.inside());
}

TEST(ReasoningBudget, ANegativeBudgetOnlyCounts) {
  ReasoningBudget b({}, kCloseTokens, true, -1);
  for (int i = 0; i < 100; ++i) AcceptFree(b, kWord);
  EXPECT_EQ(b.reasoning_tokens(), 100);
  AcceptFree(b, kCloseA);
  AcceptFree(b, kCloseB);
  EXPECT_FALSE(b.inside());
  EXPECT_EQ(b.reasoning_tokens(), 100);
}

TEST(ReasoningBudget, ACloneIsIndependent) {
  ReasoningBudget b({}, kCloseTokens, true, 4);
  AcceptFree(b, kWord);
  AcceptFree(b, kWord);
  std::unique_ptr<LogitsProcessor> clone = b.Clone();
  auto& c = static_cast<ReasoningBudget&>(*clone);
  EXPECT_EQ(c.reasoning_tokens(), 2);
  // The original closes by itself; the clone spends its budget and is forced.
  AcceptFree(b, kCloseA);
  AcceptFree(b, kCloseB);
  EXPECT_FALSE(b.inside());
  EXPECT_TRUE(c.inside());
  AcceptFree(c, kWord);
  AcceptFree(c, kWord);
  EXPECT_EQ(c.reasoning_tokens(), 4);
  EXPECT_EQ(Allowed(c), std::vector<int32_t>{kCloseA});
  EXPECT_TRUE(Free(b));
  EXPECT_EQ(b.reasoning_tokens(), 2);
}

TEST(ReasoningBudget, OverlappingCloseMarker) {
  // A marker whose beginning repeats inside it ("a a b"): "a a a b" still ends with it.
  ReasoningBudget b({}, {1, 1, 2}, true, -1);
  for (int32_t t : {7, 1, 1, 1}) AcceptFree(b, t);
  EXPECT_TRUE(b.inside());
  EXPECT_EQ(b.reasoning_tokens(), 2);  // 7 and the first 1; the last two may begin the marker
  AcceptFree(b, 2);
  EXPECT_FALSE(b.inside());
  EXPECT_EQ(b.reasoning_tokens(), 2);
}

}  // namespace
}  // namespace llamay::engine
