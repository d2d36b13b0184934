// The chunked gated delta rule (delta_rule.h): against the per-token recurrence in double (so that a wrong
// formula or a wrong chunk bookkeeping fails), every ISA level against the scalar reference bit for bit
// (outputs and the whole state, pending area and header included), the same bits for any split of the
// tokens into calls and of the heads over threads, strided rows, damaged headers, and a hand-computed case.
#include "kernels/delta_rule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/test_util.h"
#include "kernels/thread_pool.h"

namespace llamay::kernels {
namespace {

using test_util::RandomFloats;
using test_util::SameBits;
using test_util::SupportedIsas;
using test_util::UniformFloats;

constexpr int L = kRecurrentChunk;

// As the model prepares q and k (ggml_l2_norm).
void L2NormaliseRows(std::vector<float>& v, int64_t dim) {
  for (size_t r = 0; r < v.size() / dim; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(v[r * dim + i]) * v[r * dim + i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss + 1e-12));
    for (int64_t i = 0; i < dim; ++i) v[r * dim + i] *= inv;
  }
}

struct ChunkData {
  int64_t T;
  int Hk, Hv, Dk, Dv;
  // state: GatedDeltaStateFloats (S [Hv][Dk][Dv] random, the rest zero: nothing pending); q, k [T][Hk][Dk];
  // v, out [T][Hv][Dv]; g, beta [T][Hv].
  std::vector<float> state, q, k, v, g, beta, out;

  ChunkData(std::mt19937& rng, int64_t t, int hk, int hv, int dk, int dv)
      : T(t), Hk(hk), Hv(hv), Dk(dk), Dv(dv) {
    state.assign(GatedDeltaStateFloats(Hk, Hv, Dk, Dv), 0.0f);
    const auto s = RandomFloats(rng, int64_t{Hv} * Dk * Dv, 0.5f);
    std::copy(s.begin(), s.end(), state.begin());
    q = RandomFloats(rng, T * Hk * Dk);
    k = RandomFloats(rng, T * Hk * Dk);
    L2NormaliseRows(q, Dk);
    L2NormaliseRows(k, Dk);
    v = RandomFloats(rng, T * Hv * Dv);
    g = UniformFloats(rng, T * Hv, -1.0f, -0.01f);
    beta = UniformFloats(rng, T * Hv, 0.05f, 0.95f);
    out.assign(T * Hv * Dv, 0.0f);
  }
  float* Header() { return state.data() + int64_t{Hv} * Dk * Dv; }
  // Fills the pending area with arbitrary inputs of m tokens (keys normalised, decays in (0, 1)).
  void RandomPending(std::mt19937& rng, int m) {
    float* pk = Header() + kChunkHeaderFloats;
    auto keys = RandomFloats(rng, int64_t{L} * Hk * Dk);
    L2NormaliseRows(keys, Dk);
    const auto deltas = RandomFloats(rng, int64_t{L} * Hv * Dv, 0.3f);
    const auto egs = UniformFloats(rng, int64_t{L} * Hv, 0.3f, 0.99f);
    std::copy(keys.begin(), keys.end(), pk);
    std::copy(deltas.begin(), deltas.end(), pk + keys.size());
    std::copy(egs.begin(), egs.end(), pk + keys.size() + deltas.size());
    SetChunkPending(Header(), m);
  }
  GatedDeltaRuleArgs Args(int64_t t0, int64_t n) {
    GatedDeltaRuleArgs a;
    a.n_tokens = n;
    a.n_k_heads = Hk, a.n_v_heads = Hv, a.k_dim = Dk, a.v_dim = Dv;
    a.state = state.data();
    a.q = q.data() + t0 * Hk * Dk;
    a.k = k.data() + t0 * Hk * Dk;
    a.v = v.data() + t0 * Hv * Dv;
    a.g = g.data() + t0 * Hv;
    a.beta = beta.data() + t0 * Hv;
    a.out = out.data() + t0 * Hv * Dv;
    return a;
  }
};

TEST(GatedDeltaRule, StateFloats) {
  EXPECT_EQ(GatedDeltaStateFloats(16, 32, 128, 128), 32 * 128 * 128 + 16 + 16 * (16 * 128 + 32 * 128 + 32));
  EXPECT_EQ(GatedDeltaStateFloats(1, 1, 1, 1), 1 + 16 + 16 * 3);
}

// The per-token recurrence of delta_rule.h's first formula block, in double, from the state S (m = 0) over
// tokens [0, T), checked against `got`'s outputs; S at the last chunk boundary is compared with got's
// folded state.
void CheckAgainstDouble(const ChunkData& init, const ChunkData& got, const char* what) {
  const int Hk = init.Hk, Hv = init.Hv, Dk = init.Dk, Dv = init.Dv;
  const int64_t T = init.T, boundary = T - T % L;
  std::vector<double> S(init.state.begin(), init.state.begin() + int64_t{Hv} * Dk * Dv);
  const double scale = 1 / std::sqrt(static_cast<double>(Dk));
  auto check_state = [&] {
    for (size_t i = 0; i < S.size(); ++i)
      ASSERT_NEAR(got.state[i], S[i], 1e-5 * (std::fabs(S[i]) + 1)) << "state " << i << " " << what;
  };
  if (boundary == 0) check_state();
  for (int64_t t = 0; t < T; ++t) {
    for (int h = 0; h < Hv; ++h) {
      double* s = &S[int64_t{h} * Dk * Dv];
      const float* q = &init.q[(t * Hk + h % Hk) * Dk];
      const float* k = &init.k[(t * Hk + h % Hk) * Dk];
      const float* v = &init.v[(t * Hv + h) * Dv];
      const double eg = std::exp(static_cast<double>(init.g[t * Hv + h])), b = init.beta[t * Hv + h];
      for (int64_t e = 0; e < int64_t{Dk} * Dv; ++e) s[e] *= eg;
      for (int c = 0; c < Dv; ++c) {
        double kv = 0;
        for (int i = 0; i < Dk; ++i) kv += s[i * Dv + c] * k[i];
        const double delta = (v[c] - kv) * b;
        for (int i = 0; i < Dk; ++i) s[i * Dv + c] += k[i] * delta;
      }
      for (int c = 0; c < Dv; ++c) {
        double o = 0, mag = 0;
        for (int i = 0; i < Dk; ++i) {
          o += s[i * Dv + c] * q[i];
          mag += std::fabs(s[i * Dv + c] * q[i]);
        }
        // The chunked form sums other terms (Gamma S^T q and the chunk's delta terms) than the
        // recurrence, and each delta carries the rounding of the earlier ones; with normalised keys and
        // decays below 1 these terms stay of the size of the state, so the error is a few ulp of the
        // recurrence's term magnitudes (measured: below 2e-7 of them here). 1e-5 leaves room for other
        // seeds and shapes while any wrong term (a missing decay, a wrong slot) is off by far more.
        ASSERT_NEAR(got.out[(t * Hv + h) * Dv + c], o * scale, 1e-5 * (mag + 1))
            << "t=" << t << " h=" << h << " c=" << c << " " << what;
      }
    }
    if (t + 1 == boundary) check_state();
  }
}

TEST(GatedDeltaRule, MatchesDoubleRecurrence) {
  std::mt19937 rng(70);
  struct Shape {
    int Hk, Hv, Dk, Dv;
  };
  // Hv > Hk with distinct key heads: value head h must read key head h % Hk.
  for (Shape sh : {Shape{1, 1, 5, 3}, Shape{1, 2, 8, 9}, Shape{2, 4, 16, 17}, Shape{1, 2, 64, 64}}) {
    for (int64_t T : {1, 15, 16, 17, 40}) {
      const ChunkData init(rng, T, sh.Hk, sh.Hv, sh.Dk, sh.Dv);
      for (Isa isa : SupportedIsas()) {
        ChunkData got = init;
        GatedDeltaRule(got.Args(0, T), nullptr, isa);
        CheckAgainstDouble(init, got, IsaName(isa).data());
        EXPECT_EQ(got.Header()[0], static_cast<float>(T % L));
        // The same tokens in two calls: the second starts with m = split pending tokens.
        const int64_t split = std::min<int64_t>(T, 5);
        ChunkData two = init;
        GatedDeltaRule(two.Args(0, split), nullptr, isa);
        EXPECT_EQ(two.Header()[0], static_cast<float>(split % L));
        GatedDeltaRule(two.Args(split, T - split), nullptr, isa);
        CheckAgainstDouble(init, two, "split");
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST(GatedDeltaRule, EveryIsaMatchesReferenceBits) {
  std::mt19937 rng(71);
  struct Heads {
    int Hk, Hv;
  };
  const std::vector<Isa> isas = SupportedIsas();
  int compared = 0;
  for (Heads hh : {Heads{1, 1}, Heads{1, 2}, Heads{2, 4}, Heads{3, 3}}) {
    for (int Dk : {1, 3, 7, 8, 9, 16, 17, 64, 128}) {
      for (int Dv : {1, 3, 7, 8, 9, 16, 17, 64, 128}) {
        for (int64_t T : {1, 3, 16, 17, 40, 70}) {
          ChunkData ref(rng, T, hh.Hk, hh.Hv, Dk, Dv);
          // Half the cases start with pending tokens (arbitrary inputs, any count).
          if (rng() % 2 == 0) ref.RandomPending(rng, static_cast<int>(rng() % L));
          const ChunkData init = ref;
          RefGatedDeltaRule(ref.Args(0, T));
          for (Isa isa : isas) {
            if (isa == Isa::kScalar) continue;
            ChunkData d = init;
            GatedDeltaRule(d.Args(0, T), nullptr, isa);
            ASSERT_TRUE(SameBits(d.out, ref.out)) << "Hk=" << hh.Hk << " Hv=" << hh.Hv << " Dk=" << Dk
                                                  << " Dv=" << Dv << " T=" << T << " " << IsaName(isa);
            ASSERT_TRUE(SameBits(d.state, ref.state)) << "Dk=" << Dk << " Dv=" << Dv << " T=" << T;
            ++compared;
          }
        }
      }
    }
  }
  if (isas.size() == 1) GTEST_SKIP() << "no SIMD level on this CPU";
  EXPECT_GT(compared, 0);
}

TEST(GatedDeltaRule, SplitCallsAndThreadsGiveSameBits) {
  std::mt19937 rng(72);
  const int64_t T = 70;
  const ChunkData init(rng, T, 2, 6, 24, 37);
  ThreadPool pool(3);
  ChunkData ref = init;
  RefGatedDeltaRule(ref.Args(0, T));
  for (Isa isa : SupportedIsas()) {
    ChunkData whole = init;
    GatedDeltaRule(whole.Args(0, T), nullptr, isa);
    ASSERT_TRUE(SameBits(whole.out, ref.out)) << IsaName(isa);
    ASSERT_TRUE(SameBits(whole.state, ref.state)) << IsaName(isa);
    for (int64_t k : {0, 1, 3, 15, 16, 17, 33, 69, 70}) {
      ChunkData s = init;
      GatedDeltaRule(s.Args(0, k), &pool, isa);
      GatedDeltaRule(s.Args(k, T - k), nullptr, isa);
      ASSERT_TRUE(SameBits(s.out, whole.out)) << "k=" << k << " " << IsaName(isa);
      ASSERT_TRUE(SameBits(s.state, whole.state)) << "k=" << k << " " << IsaName(isa);
    }
    ChunkData one = init;
    for (int64_t t = 0; t < T; ++t) GatedDeltaRule(one.Args(t, 1), t % 2 == 0 ? &pool : nullptr, isa);
    EXPECT_TRUE(SameBits(one.out, whole.out)) << IsaName(isa);
    EXPECT_TRUE(SameBits(one.state, whole.state)) << IsaName(isa);
    ChunkData threaded = init;
    GatedDeltaRule(threaded.Args(0, T), &pool, isa);
    EXPECT_TRUE(SameBits(threaded.out, whole.out)) << IsaName(isa);
    EXPECT_TRUE(SameBits(threaded.state, whole.state)) << IsaName(isa);
  }
}

// q, k and v as views of one conv output row (Qwen3.5's q|k|v), g and beta inside wider rows, out into
// wider rows.
TEST(GatedDeltaRule, RowStridesGiveSameBits) {
  std::mt19937 rng(73);
  const int64_t T = 21;
  const int Hk = 2, Hv = 4, Dk = 6, Dv = 11;
  ChunkData ref(rng, T, Hk, Hv, Dk, Dv);
  ref.RandomPending(rng, 7);
  const ChunkData init = ref;
  RefGatedDeltaRule(ref.Args(0, T));
  const int64_t row = 2 * Hk * Dk + Hv * Dv + 1, gb = 2 * Hv + 1, orow = Hv * Dv + 4;
  std::vector<float> qkv(T * row), gbeta(T * gb);
  for (int64_t t = 0; t < T; ++t) {
    std::copy_n(&init.q[t * Hk * Dk], Hk * Dk, &qkv[t * row]);
    std::copy_n(&init.k[t * Hk * Dk], Hk * Dk, &qkv[t * row + Hk * Dk]);
    std::copy_n(&init.v[t * Hv * Dv], Hv * Dv, &qkv[t * row + 2 * Hk * Dk]);
    std::copy_n(&init.g[t * Hv], Hv, &gbeta[t * gb]);
    std::copy_n(&init.beta[t * Hv], Hv, &gbeta[t * gb + Hv]);
  }
  ThreadPool pool(2);
  for (Isa isa : SupportedIsas()) {
    ChunkData d = init;
    std::vector<float> out(T * orow, -5.0f);
    GatedDeltaRuleArgs a = d.Args(0, T);
    a.q = qkv.data(), a.k = qkv.data() + Hk * Dk, a.v = qkv.data() + 2 * Hk * Dk;
    a.q_stride = a.k_stride = a.v_stride = row;
    a.g = gbeta.data(), a.beta = gbeta.data() + Hv, a.g_stride = a.beta_stride = gb;
    a.out = out.data(), a.out_stride = orow;
    GatedDeltaRule(a, &pool, isa);
    std::vector<float> got(T * Hv * Dv);
    for (int64_t t = 0; t < T; ++t) {
      std::copy_n(&out[t * orow], Hv * Dv, &got[t * Hv * Dv]);
      for (int64_t e = Hv * Dv; e < orow; ++e) EXPECT_EQ(out[t * orow + e], -5.0f);
    }
    EXPECT_TRUE(SameBits(got, ref.out)) << IsaName(isa);
    EXPECT_TRUE(SameBits(d.state, ref.state)) << IsaName(isa);
  }
}

TEST(GatedDeltaRule, DamagedHeaderReadsAsEmpty) {
  std::mt19937 rng(74);
  const int Hk = 1, Hv = 2, Dk = 9, Dv = 10;
  for (int64_t T : {5, 20}) {
    ChunkData clean(rng, T, Hk, Hv, Dk, Dv);
    clean.RandomPending(rng, 0);  // garbage in every slot, none of it valid
    for (Isa isa : SupportedIsas()) {
      ChunkData want = clean;
      GatedDeltaRule(want.Args(0, T), nullptr, isa);
      for (float bad : {std::numeric_limits<float>::quiet_NaN(), -1.0f, 2.5f, 16.0f, 1e30f,
                        std::numeric_limits<float>::infinity()}) {
        ChunkData d = clean;
        d.Header()[0] = bad;
        GatedDeltaRule(d.Args(0, T), nullptr, isa);
        EXPECT_TRUE(SameBits(d.out, want.out)) << bad << " " << IsaName(isa);
        EXPECT_TRUE(SameBits(d.state, want.state)) << bad << " " << IsaName(isa);
      }
    }
  }
  // A state of the earlier per-token kernels zero-extended (S alone, the rest zero, as a snapshot of theirs
  // restores) is a folded state with nothing pending: it continues as the recurrence does.
  const int64_t T = 20;
  ChunkData ext(rng, T, Hk, Hv, Dk, Dv);
  std::fill(ext.state.begin() + int64_t{Hv} * Dk * Dv, ext.state.end(), 0.0f);
  for (Isa isa : SupportedIsas()) {
    ChunkData d = ext;
    GatedDeltaRule(d.Args(0, T), nullptr, isa);
    CheckAgainstDouble(ext, d, IsaName(isa).data());
    EXPECT_EQ(d.Header()[0], 4.0f);
  }
}

TEST(GatedDeltaRule, HandComputed) {
  // One head, Dk = Dv = 1, S = 1; both tokens k = 1, g = ln(1/2) (a decay of 0.5), q = 1 then -1.
  // Token 0 (v 2, beta 0.5): S -> 0.5; kv = 0.5; delta0 = (2 - 0.5) * 0.5 = 0.75; S -> 1.25; out = 1.25.
  // Token 1 (v 1, beta 0.5): S -> 0.625; kv = 0.625; delta1 = (1 - 0.625) * 0.5 = 0.1875; S -> 0.8125;
  // out = -0.8125. In the chunk's terms: kv = Gamma_1 * A + Dec(1,0) * kk * delta0 = 0.25 + 0.5 * 0.75.
  // Nothing is folded yet: S stays 1, and the pending slots hold the two keys, deltas and decays.
  for (Isa isa : SupportedIsas()) {
    std::vector<float> state(GatedDeltaStateFloats(1, 1, 1, 1), 0.0f);
    state[0] = 1.0f;
    const float q[2] = {1.0f, -1.0f}, k[2] = {1.0f, 1.0f}, v[2] = {2.0f, 1.0f};
    const float g[2] = {std::log(0.5f), std::log(0.5f)}, beta[2] = {0.5f, 0.5f};
    float out[2] = {0.0f, 0.0f};
    GatedDeltaRuleArgs a;
    a.n_tokens = 2, a.n_k_heads = 1, a.n_v_heads = 1, a.k_dim = 1, a.v_dim = 1;
    a.state = state.data(), a.q = q, a.k = k, a.v = v, a.g = g, a.beta = beta, a.out = out;
    GatedDeltaRule(a, nullptr, isa);
    EXPECT_NEAR(out[0], 1.25, 1e-6) << IsaName(isa);
    EXPECT_NEAR(out[1], -0.8125, 1e-6) << IsaName(isa);
    EXPECT_EQ(state[0], 1.0f);
    const float* header = state.data() + 1;
    const float* pk = header + kChunkHeaderFloats;
    const float* pd = pk + L;
    const float* pe = pd + L;
    EXPECT_EQ(header[0], 2.0f);
    EXPECT_EQ(pk[0], 1.0f);
    EXPECT_EQ(pk[1], 1.0f);
    EXPECT_NEAR(pd[0], 0.75, 1e-6);
    EXPECT_NEAR(pd[1], 0.1875, 1e-6);
    EXPECT_NEAR(pe[0], 0.5, 1e-6);
    EXPECT_NEAR(pe[1], 0.5, 1e-6);
  }
}

}  // namespace
}  // namespace llamay::kernels
