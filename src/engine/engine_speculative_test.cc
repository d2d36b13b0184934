// Speculative decoding (issue 21): whatever the drafts, a request's events are those of plain decode, byte
// for byte: tokens, texts, logprobs, finish reason, stop sequence, the context it hands back and its tail.
// Every test runs each request twice, with Request::speculative off and on, and compares everything; and
// checks that drafts were in fact verified and accepted, so the comparison is not between two plain runs.
// Oracle drafts (the plain run's own output, whole or with tokens changed) make drafts that are taken in
// full or rejected at a known place, so a verification that keeps one token too many shows.
#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>

#include "engine/draft.h"
#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "engine/grammar_constraint.h"
#include "grammar/json_schema.h"
#include "model/demo_model.h"

namespace llamay::engine {
namespace {

const std::string kModels = std::string(LLAMAY_SHARED_DIR) + "/ref/models/";

// Drafting pays whatever this machine's timing (EngineOptions::draft_token_cost), so that every run drafts.
EngineOptions Drafting() {
  EngineOptions o;
  o.draft_token_cost = 0;
  return o;
}

std::unique_ptr<Engine> MakeEngine(const std::string& file = "", EngineOptions o = Drafting()) {
  auto loaded = LoadModelOrDemo(file.empty() ? "" : kModels + file, 2);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  auto e = Engine::Create(std::move(loaded->model), std::move(loaded->tokenizer), o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return std::move(*e);
}

// Everything a request's sink sees.
struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<std::string> texts;
  std::vector<float> logprobs;
  std::vector<std::vector<std::pair<int32_t, float>>> top;
  FinishReason reason = FinishReason::kNone;
  std::string stop_sequence;
  Status error;
  Usage usage;
  std::vector<int32_t> context_tokens;  // of the context handed back (return_context or a session)
  std::vector<int32_t> tail;
  std::vector<uint8_t> state;  // the handed-back context's recurrent state, every byte
  kv::Context context;
};

Outcome Submit1(Engine& e, Request r) {
  auto out = std::make_shared<Outcome>();
  std::promise<void> done;
  auto id = e.Submit(std::move(r), [out, &done](Event& ev) {
    if (ev.token >= 0) {
      out->tokens.push_back(ev.token);
      out->logprobs.push_back(ev.logprob);
      out->top.push_back(ev.top_logprobs);
    }
    out->texts.push_back(ev.text);
    if (!ev.finished) return true;
    out->reason = ev.reason;
    out->stop_sequence = ev.stop_sequence;
    out->error = ev.error;
    out->usage = ev.usage;
    out->tail = ev.tail;
    if (ev.context.valid()) {
      out->context_tokens = ev.context.tokens();
      const kv::StateGroups& g = ev.context.cache()->groups();
      if (g.has_recurrent() && ev.context.StateData())
        out->state.assign(ev.context.StateData(), ev.context.StateData() + g.recurrent.page_bytes);
    }
    out->context = std::move(ev.context);
    done.set_value();
    return true;
  });
  EXPECT_TRUE(id.ok()) << id.status().ToString();
  done.get_future().wait();
  return std::move(*out);
}

// The two outcomes agree in everything but the draft counts.
void ExpectSame(const Outcome& plain, const Outcome& spec, const std::string& what) {
  ASSERT_TRUE(plain.error.ok()) << what << ": " << plain.error.ToString();
  ASSERT_TRUE(spec.error.ok()) << what << ": " << spec.error.ToString();
  EXPECT_EQ(spec.tokens, plain.tokens) << what;
  EXPECT_EQ(spec.texts, plain.texts) << what;
  EXPECT_EQ(spec.logprobs, plain.logprobs) << what;
  EXPECT_EQ(spec.top, plain.top) << what;
  EXPECT_EQ(spec.reason, plain.reason) << what;
  EXPECT_EQ(spec.stop_sequence, plain.stop_sequence) << what;
  EXPECT_EQ(spec.usage.prompt_tokens, plain.usage.prompt_tokens) << what;
  EXPECT_EQ(spec.usage.completion_tokens, plain.usage.completion_tokens) << what;
  EXPECT_EQ(spec.context_tokens, plain.context_tokens) << what;
  EXPECT_EQ(spec.tail, plain.tail) << what;
  EXPECT_TRUE(spec.state == plain.state) << what << ": the recurrent states differ";
  EXPECT_EQ(plain.usage.draft_tokens, 0u) << what;
}

Request Make(const Engine& e, const std::string& text, int max_tokens, float temperature, uint64_t seed) {
  Request r = test_util::TextRequest(e, text, max_tokens, temperature, seed);
  r.ignore_eos = true;
  return r;
}

Request Copy(const Request& r, bool speculative) {
  Request c;
  c.prompt = r.prompt;
  c.sampling = r.sampling;
  c.max_tokens = r.max_tokens;
  c.ignore_eos = r.ignore_eos;
  c.stop = r.stop;
  c.top_logprobs = r.top_logprobs;
  c.return_context = r.return_context;
  c.retain = r.retain;
  c.speculative = speculative;
  c.draft_oracle = r.draft_oracle;
  c.draft_length = r.draft_length;
  return c;
}

// Runs `r` plain, then speculatively, on the same engine; returns the speculative outcome.
Outcome Compare(Engine& e, const Request& r, const std::string& what) {
  Outcome plain = Submit1(e, Copy(r, false));
  Outcome spec = Submit1(e, Copy(r, true));
  ExpectSame(plain, spec, what);
  return spec;
}

const char* kRepetitive =
    "def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return a + b\n\ndef add(a, b):\n    return a + b\n\n";

TEST(Draft, LookupFindsTheLongestRecentSuffix) {
  const std::vector<int32_t> h = {1, 2, 3, 9, 1, 2, 3, 4, 5, 7, 2, 3};
  // "2 3" occurred twice before; the newest is followed by 4 5 7.
  Draft d = LookupDraft(h, 3, 2, 4);
  EXPECT_EQ(d.match, 2u);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{4, 5, 7}));
  // A longer suffix beats a more recent shorter one: "1 2 3" then 9 ... is only matched by the first.
  const std::vector<int32_t> h2 = {1, 2, 3, 9, 8, 2, 3, 6, 1, 2, 3};
  d = LookupDraft(h2, 2, 2, 4);
  EXPECT_EQ(d.match, 3u);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{9, 8}));
  // Nothing repeats: no draft. A repeating token drafts itself.
  EXPECT_TRUE(LookupDraft(std::vector<int32_t>{1, 2, 3, 4}, 4, 2, 4).tokens.empty());
  EXPECT_EQ(LookupDraft(std::vector<int32_t>{5, 5, 5}, 4, 2, 4).tokens, (std::vector<int32_t>{5}));
}

TEST(Draft, TheSuffixIndexDraftsFromOtherSequencesAndForgetsTheOldest) {
  SuffixIndex index(/*max_tokens=*/12, /*ngram=*/3);
  index.Add(std::vector<int32_t>{10, 11, 12, 13, 14, 15});
  Draft d = index.Lookup(std::vector<int32_t>{99, 11, 12, 13}, 4);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{14, 15}));
  EXPECT_TRUE(index.Lookup(std::vector<int32_t>{11, 12}, 4).tokens.empty());  // shorter than the n-gram
  index.Add(std::vector<int32_t>{20, 21, 22, 23, 24, 25, 26});  // 13 tokens: the first sequence goes
  EXPECT_TRUE(index.Lookup(std::vector<int32_t>{11, 12, 13}, 4).tokens.empty());
  EXPECT_EQ(index.Lookup(std::vector<int32_t>{21, 22, 23}, 2).tokens, (std::vector<int32_t>{24, 25}));
  EXPECT_EQ(index.tokens(), 7u);
}

TEST(Speculative, GreedyOutputIsIdenticalAndDraftsAreTaken) {
  auto e = MakeEngine();
  size_t drafted = 0, accepted = 0;
  for (const std::string& text : {std::string(kRepetitive), std::string("The fork of a context"),
                                 std::string("Once upon a time, once upon a time, once upon a")}) {
    Outcome s = Compare(*e, Make(*e, text, 96, 0.0f, 1), text);
    drafted += s.usage.draft_tokens;
    accepted += s.usage.accepted_draft_tokens;
  }
  EXPECT_GT(drafted, 0u);
  EXPECT_GT(accepted, 0u);
  const EngineStats st = e->stats();
  EXPECT_EQ(st.draft_tokens, drafted);
  EXPECT_EQ(st.accepted_draft_tokens, accepted);
}

TEST(Speculative, SampledOutputIsIdenticalWhateverTheSeed) {
  auto e = MakeEngine();
  size_t drafted = 0, accepted = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Request r = Make(*e, kRepetitive, 64, seed % 2 ? 0.7f : 1.0f, seed);
    r.sampling.top_k = seed % 3 ? 40 : 0;
    r.sampling.top_p = seed % 4 ? 0.95f : 1.0f;
    r.sampling.repeat_penalty = seed % 5 ? 1.0f : 1.1f;  // reads the history the drafts are checked against
    r.top_logprobs = 2;
    Outcome s = Compare(*e, r, "seed " + std::to_string(seed));
    drafted += s.usage.draft_tokens;
    accepted += s.usage.accepted_draft_tokens;
  }
  EXPECT_GT(drafted, 0u);
  EXPECT_GT(accepted, 0u);
}

// The plain run's own output as the draft: taken whole. The same output with a token changed every few:
// rejected exactly there, and the output stays the plain one.
TEST(Speculative, OracleDraftsAreTakenWholeOrCutWhereTheyDepart) {
  auto e = MakeEngine();
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    Request r = Make(*e, "An oracle knows", 60, seed == 1 ? 0.0f : 0.9f, seed);
    Outcome plain = Submit1(*e, Copy(r, false));
    ASSERT_EQ(plain.tokens.size(), 60u);
    for (size_t len : {size_t{4}, size_t{8}, size_t{16}}) {
      r.draft_oracle = plain.tokens;
      r.draft_length = len;
      Outcome whole = Submit1(*e, Copy(r, true));
      ExpectSame(plain, whole, "oracle, draft " + std::to_string(len));
      // Every drafted token is taken; each step drafts min(len, what is left) and adds one token of its own.
      EXPECT_EQ(whole.usage.accepted_draft_tokens, whole.usage.draft_tokens);
      EXPECT_GE(whole.usage.accepted_draft_tokens, 59 - (59 + len) / (len + 1));
      for (size_t every : {size_t{3}, size_t{7}}) {
        r.draft_oracle = plain.tokens;
        for (size_t i = 1; i < r.draft_oracle.size(); i += every)
          r.draft_oracle[i] = (r.draft_oracle[i] + 1) % static_cast<int32_t>(e->model().hparams().n_vocab);
        Outcome cut = Submit1(*e, Copy(r, true));
        ExpectSame(plain, cut, "wrong every " + std::to_string(every) + ", draft " + std::to_string(len));
        EXPECT_LT(cut.usage.accepted_draft_tokens, cut.usage.draft_tokens);
        EXPECT_GT(cut.usage.accepted_draft_tokens, 0u);
      }
    }
  }
}

TEST(Speculative, StopSequencesEndTheTextWhereThePlainRunEndsIt) {
  auto e = MakeEngine();
  Request base = Make(*e, kRepetitive, 80, 0.0f, 1);
  Outcome plain = Submit1(*e, Copy(base, false));
  std::string text;
  for (const auto& t : plain.texts) text += t;
  ASSERT_GE(text.size(), 40u);
  size_t stopped = 0;
  for (size_t at = 5; at + 3 < 40; at += 3) {
    Request r = Copy(base, false);
    r.stop = {text.substr(at, 2), "\x01never"};
    r.return_context = true;
    r.draft_oracle = plain.tokens;  // drafts that run past the stop
    Outcome s = Compare(*e, r, "stop at " + std::to_string(at));
    stopped += s.reason == FinishReason::kStop;
  }
  EXPECT_GT(stopped, 5u);
}

TEST(Speculative, MaxTokensAndTheContextSizeEndItWhereThePlainRunEnds) {
  EngineOptions o = Drafting();
  o.max_context = 70;
  auto e = MakeEngine("", o);
  for (int max_tokens : {1, 2, 5, 17, 200}) {
    Request r = Make(*e, "abc abc abc abc abc abc abc abc", max_tokens, 0.0f, 1);  // 32 tokens
    r.return_context = true;
    Outcome s = Compare(*e, r, "max_tokens " + std::to_string(max_tokens));
    EXPECT_LE(s.context_tokens.size(), 70u);
    if (max_tokens == 200) {
      EXPECT_GT(s.usage.accepted_draft_tokens, 0u);
    }
  }
}

TEST(Speculative, AJsonSchemaConstrainsDraftsAsItConstrainsPlainDecode) {
  auto e = MakeEngine();
  auto g = grammar::FromJsonSchema(nlohmann::ordered_json::parse(R"({"type":"object","properties":{
      "name":{"type":"string","maxLength":12},"items":{"type":"array","items":{"enum":["ab","ab","cd"]},"maxItems":6}},
      "required":["name","items"],"additionalProperties":false})"));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto vocab = e->GrammarVocabulary();
  ASSERT_TRUE(vocab.ok());
  size_t accepted = 0, rejected = 0;
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    Request r = Make(*e, R"({"name":"ab","items":["ab","ab"]} {"name":"ab","items":["ab","ab"]} Reply:)", 120, 0.8f, seed);
    r.ignore_eos = false;
    auto with_grammar = [&](bool speculative, std::vector<int32_t> oracle) {
      Request c = Copy(r, speculative);
      c.draft_oracle = std::move(oracle);
      c.processors.push_back(std::make_unique<GrammarConstraint>(*g, *vocab));
      return Submit1(*e, std::move(c));
    };
    Outcome plain = with_grammar(false, {});
    Outcome looked_up = with_grammar(true, {});
    ExpectSame(plain, looked_up, "seed " + std::to_string(seed));
    std::vector<int32_t> wrong = plain.tokens;  // drafts the grammar forbids half way
    for (size_t i = 2; i < wrong.size(); i += 5) wrong[i] = e->tokenizer().Encode("}}", false, false)->back();
    Outcome oracle = with_grammar(true, wrong);
    ExpectSame(plain, oracle, "oracle, seed " + std::to_string(seed));
    accepted += oracle.usage.accepted_draft_tokens + looked_up.usage.accepted_draft_tokens;
    rejected += oracle.usage.draft_tokens - oracle.usage.accepted_draft_tokens;
  }
  EXPECT_GT(accepted, 0u);
  EXPECT_GT(rejected, 0u);
}

// A conversation of turns, each continuing the last one's context, and forks of it: the speculative
// chain and the plain chain hand back the same contexts and tails, and continue identically.
TEST(Speculative, SessionsAcrossTurnsAndForksContinueIdentically) {
  auto e = MakeEngine();
  kv::Context ctx[2];
  std::vector<int32_t> tail[2];
  size_t accepted = 0;
  for (int turn = 0; turn < 4; ++turn) {
    Outcome out[2];
    for (int spec = 0; spec < 2; ++spec) {
      Request r = Make(*e, turn == 0 ? kRepetitive : " again: def add(a, b):", 24 + 7 * turn, 0.6f, 10 + turn);
      if (turn > 0) {
        r.prompt.erase(r.prompt.begin());  // no BOS inside a conversation
        r.prompt.insert(r.prompt.begin(), tail[spec].begin(), tail[spec].end());
        r.context = std::move(ctx[spec]);
      }
      r.return_context = true;
      r.speculative = spec == 1;
      out[spec] = Submit1(*e, std::move(r));
      ctx[spec] = std::move(out[spec].context);
      tail[spec] = out[spec].tail;
    }
    ExpectSame(out[0], out[1], "turn " + std::to_string(turn));
    accepted += out[1].usage.accepted_draft_tokens;
  }
  EXPECT_GT(accepted, 0u);
  // Forks of each chain's context continue identically, with drafts and without.
  std::vector<kv::Context> forks = ctx[1].Fork(3);
  std::vector<Outcome> plain_forks;
  for (int i = 0; i < 3; ++i) {
    Request r = Make(*e, "", 40, 0.8f, 100 + i);
    r.prompt = tail[0];
    r.context = ctx[0].Fork();
    r.speculative = false;
    Outcome plain = Submit1(*e, std::move(r));
    Request s = Make(*e, "", 40, 0.8f, 100 + i);
    s.prompt = tail[1];
    s.context = std::move(forks[i]);
    Outcome spec = Submit1(*e, std::move(s));
    ExpectSame(plain, spec, "fork " + std::to_string(i));
  }
}

// Requests in flight together (n > 1, continuous batching): one request's drafts ride in the same step as
// the others' tokens, and nobody's output changes.
TEST(Speculative, ConcurrentRequestsShareStepsAndKeepTheirOutputs) {
  auto e = MakeEngine();
  std::vector<Request> reqs;
  for (uint64_t seed = 1; seed <= 8; ++seed) reqs.push_back(Make(*e, kRepetitive, 48, seed % 2 ? 0.0f : 0.8f, seed));
  std::vector<Outcome> plain;
  for (const Request& r : reqs) plain.push_back(Submit1(*e, Copy(r, false)));
  std::vector<std::future<Outcome>> running;
  for (const Request& r : reqs)
    running.push_back(std::async(std::launch::async, [&e, &r] { return Submit1(*e, Copy(r, true)); }));
  size_t accepted = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    Outcome s = running[i].get();
    ExpectSame(plain[i], s, "request " + std::to_string(i));
    accepted += s.usage.accepted_draft_tokens;
  }
  EXPECT_GT(accepted, 0u);
}

TEST(Draft, TheCostModelFitsStepsAndPicksTheLengthThatPays) {
  StepCost cost;
  EXPECT_EQ(cost.ExtraTokenShare(0.25), 0.25);  // nothing measured yet
  for (int i = 0; i < 20; ++i) {
    cost.Add(1, 0.010);  // a = 9 ms, b = 1 ms: one more token costs a tenth of a one-token step
    cost.Add(9, 0.018);
  }
  EXPECT_NEAR(cost.ExtraTokenShare(0.25), 0.1, 1e-9);
  StepCost flat;
  for (int i = 0; i < 20; ++i) flat.Add(1, 0.010);
  EXPECT_EQ(flat.ExtraTokenShare(0.25), 0.25);  // one size only: b cannot be told from a
  // Cheap tokens and good odds: long drafts; expensive tokens: short ones, or none.
  EXPECT_EQ(BestDraftLength(0.99, 0.0, 16, 1.05), 16u);
  EXPECT_GE(BestDraftLength(0.9, 0.05, 16, 1.05), 8u);
  EXPECT_EQ(BestDraftLength(0.6, 0.1, 16, 1.05), 3u);  // (1 + .6 + .36 + .216) / 1.3 = 1.67 is the best
  EXPECT_EQ(BestDraftLength(0.6, 0.5, 16, 1.05), 1u);   // 1.6 / 1.5
  EXPECT_EQ(BestDraftLength(0.45, 0.5, 16, 1.05), 0u);  // 1.45 / 1.5 < 1: plain decode is faster
  EXPECT_EQ(BestDraftLength(0.0, 0.0, 16, 1.05), 0u);
}

// When a drafted token costs as much as a step, a request with the prior's odds does not draft at all.
TEST(Speculative, DraftsThatCannotPayAreNotMade) {
  EngineOptions o;
  o.draft_token_cost = 1.0;
  auto e = MakeEngine("", o);
  Outcome s = Compare(*e, Make(*e, kRepetitive, 64, 0.0f, 1), "costly");
  EXPECT_EQ(s.usage.draft_tokens, 0u);
}

// Under memory pressure (4 requests of 3 pages each in a budget of 6): drafts need pages plain decode does
// not, so a step that runs out is retried without them before anyone is preempted; whatever happens, every
// request's tokens are those it gets alone without drafts.
TEST(Speculative, MemoryPressureKeepsEveryOutput) {
  EngineOptions o = Drafting();
  const size_t page = MakeEngine()->cache().layout().page_bytes();
  o.kv_memory_bytes = 6 * page;
  auto e = MakeEngine("", o);
  std::vector<Request> reqs;
  for (uint64_t i = 0; i < 4; ++i) {
    Request r = Make(*e, std::string(kRepetitive).substr(i * 3), 60, i % 2 ? 0.8f : 0.0f, 20 + i);
    r.retain = false;
    reqs.push_back(std::move(r));
  }
  std::vector<Outcome> solo;
  for (const Request& r : reqs) solo.push_back(Submit1(*e, Copy(r, false)));
  std::vector<std::future<Outcome>> running;
  for (const Request& r : reqs)
    running.push_back(std::async(std::launch::async, [&e, &r] { return Submit1(*e, Copy(r, true)); }));
  size_t drafted = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    Outcome s = running[i].get();
    ExpectSame(solo[i], s, "request " + std::to_string(i));
    drafted += s.usage.draft_tokens;
  }
  EXPECT_GT(drafted, 0u);
  EXPECT_GT(e->stats().preempted, 0u);  // the pressure was real
  EXPECT_TRUE(e->cache().CheckInvariants().ok());
}

TEST(Speculative, OffMeansNoDrafts) {
  EngineOptions o;
  o.speculative = EngineOptions::Speculative::kOff;
  auto e = MakeEngine("", o);
  Request r = Make(*e, kRepetitive, 64, 0.0f, 1);
  Outcome s = Submit1(*e, Copy(r, true));
  EXPECT_EQ(s.usage.draft_tokens, 0u);
  EXPECT_EQ(e->stats().draft_steps, 0u);
}

// Real models from ../shared/ref: the llama family, and gemma3's sliding windows (the window's pages are
// kept until a verification settles). Long enough outputs to cross the window.
class SpeculativeModels : public testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kModels + GetParam())) GTEST_SKIP() << "../shared/ref is absent";
  }
};

TEST_P(SpeculativeModels, OutputIsIdenticalGreedyAndSampled) {
  EngineOptions o = Drafting();
  o.page_tokens = 16;  // gemma3's window is 32: pages behind it are released as the output grows
  auto e = MakeEngine(GetParam(), o);
  size_t accepted = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    Request r;
    for (int rep = 0; rep < 4; ++rep)
      for (int32_t t = 0; t < 24; ++t) r.prompt.push_back(static_cast<int32_t>(5 + (t * 13 + static_cast<int32_t>(seed)) % 300));
    r.sampling.temperature = seed <= 2 ? 0.0f : 0.8f;
    r.sampling.repeat_penalty = 1.0f;
    r.sampling.seed = seed;
    r.sampling.has_seed = true;
    r.max_tokens = 120;
    r.ignore_eos = true;
    r.return_context = true;
    Outcome s = Compare(*e, r, std::string(GetParam()) + " seed " + std::to_string(seed));
    // And with the plain output as the draft, cut every 5 tokens.
    Outcome plain = Submit1(*e, Copy(r, false));
    r.draft_oracle = plain.tokens;
    for (size_t i = 3; i < r.draft_oracle.size(); i += 5) r.draft_oracle[i] = 7;
    Outcome cut = Submit1(*e, Copy(r, true));
    ExpectSame(plain, cut, std::string(GetParam()) + " oracle, seed " + std::to_string(seed));
    accepted += s.usage.accepted_draft_tokens + cut.usage.accepted_draft_tokens;
  }
  EXPECT_GT(accepted, 0u);
}

INSTANTIATE_TEST_SUITE_P(Models, SpeculativeModels,
                         testing::Values("tiny-llama-q8_0.gguf", "tiny-qwen3-f32.gguf", "tiny-gemma3-f32.gguf",
                                         "tiny-granitehybrid-f32.gguf", "tiny-qwen35-f32.gguf", "tiny-mamba2-f32.gguf"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

}  // namespace
}  // namespace llamay::engine
