// Recurrent kernels: each against a naive double-precision version of its formula (so that a wrong
// formula fails), every ISA level against the scalar reference bit for bit over odd shapes, the same bits
// whatever the split of the tokens into calls or of the heads over threads, and state carried across calls.
#include "kernels/recurrent.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/ops.h"
#include "kernels/reference/reference.h"
#include "kernels/test_util.h"
#include "kernels/thread_pool.h"

namespace llamay::kernels {
namespace {

using test_util::RandomFloats;
using test_util::SameBits;
using test_util::SupportedIsas;

constexpr double kEps = 0x1p-24;  // f32 unit roundoff

double SiluD(double v) { return v / (1 + std::exp(-v)); }
double SoftplusD(double v) { return v > 20 ? v : std::log1p(std::exp(v)); }

TEST(RecurrentMath, LogAndSoftplusAreAccurate) {
  for (double x = 1e-30; x < 1e30; x *= 1.0173) {
    const float xf = static_cast<float>(x);
    const double ref = std::log(static_cast<double>(xf));
    ASSERT_LE(std::fabs(RefLog(xf) - ref), 4 * kEps * std::fabs(ref) + 0x1p-149) << "x=" << xf;
  }
  EXPECT_EQ(RefLog(1.0f), 0.0f);
  for (double v = -120; v < 40; v += 0.0731) {
    const float vf = static_cast<float>(v);
    const double ref = SoftplusD(vf);
    // 1 + exp(v) rounds (relative eps of the sum, which is an absolute error of about eps in the log).
    ASSERT_LE(std::fabs(RefSoftplus(vf) - ref), 6 * kEps * ref + 2 * kEps) << "v=" << vf;
  }
  // ggml's threshold: the identity above 20 (where 1 + exp(v) would overflow past 88).
  for (float v : {20.001f, 20.5f, 50.0f, 100.0f, 1e10f}) EXPECT_EQ(RefSoftplus(v), v);
  EXPECT_EQ(RefSoftplus(-200.0f), 0.0f);
}

// ---- CausalConv1d ----

struct ConvData {
  int64_t T, C;
  int K;
  bool bias, silu;
  // x, y [T][C]; w [C][K]; b [C]; state [(K-1)*C + 1] (the last element a sentinel).
  std::vector<float> x, w, b, state, y;

  ConvData(std::mt19937& rng, int64_t t, int64_t c, int k, bool has_bias, bool has_silu)
      : T(t), C(c), K(k), bias(has_bias), silu(has_silu) {
    x = RandomFloats(rng, T * C, 2.0f);
    w = RandomFloats(rng, C * K, 0.5f);
    b = RandomFloats(rng, C);
    // One more element than the state: a sentinel that no call may touch (and never an empty vector).
    state = RandomFloats(rng, (K - 1) * C + 1, 2.0f);
    y.assign(T * C, 0.0f);
  }
  CausalConv1dArgs Args(int64_t t0, int64_t n) {
    CausalConv1dArgs a;
    a.n_tokens = n;
    a.channels = C;
    a.kernel = K;
    a.x = x.data() + t0 * C;
    a.weight = w.data();
    a.bias = bias ? b.data() : nullptr;
    a.silu = silu;
    a.conv_state = state.data();
    a.y = y.data() + t0 * C;
    return a;
  }
};

TEST(CausalConv1d, HandComputedNewestTapIsLast) {
  // One channel, K = 4: state (oldest first) 1, 2, 3; taps 1, 10, 100, 1000: the last tap multiplies the
  // newest input, as in ggml_ssm_conv. Every value here is exact in f32.
  const float w[4] = {1, 10, 100, 1000};
  float state[3] = {1, 2, 3};
  const float x[2] = {4, 5};
  float y[2];
  for (Isa isa : SupportedIsas()) {
    float st[3] = {state[0], state[1], state[2]};
    CausalConv1dArgs a;
    a.n_tokens = 2, a.channels = 1, a.kernel = 4, a.x = x, a.weight = w, a.silu = false;
    a.conv_state = st, a.y = y;
    CausalConv1d(a, isa);
    EXPECT_EQ(y[0], 1 * 1 + 10 * 2 + 100 * 3 + 1000 * 4);
    EXPECT_EQ(y[1], 1 * 2 + 10 * 3 + 100 * 4 + 1000 * 5);
    EXPECT_EQ(st[0], 3);
    EXPECT_EQ(st[1], 4);
    EXPECT_EQ(st[2], 5);
  }
}

TEST(CausalConv1d, MatchesDoubleFormula) {
  std::mt19937 rng(40);
  for (int K : {1, 2, 4, 5}) {
    for (bool silu : {false, true}) {
      const int64_t T = 9, C = 11;
      ConvData ref(rng, T, C, K, true, silu);
      const ConvData init = ref;
      for (Isa isa : SupportedIsas()) {
        ConvData d = init;
        CausalConv1d(d.Args(0, T), isa);
        for (int64_t c = 0; c < C; ++c) {
          // The extended sequence of channel c: state then x.
          std::vector<double> seq;
          for (int k = 0; k + 1 < K; ++k) seq.push_back(init.state[k * C + c]);
          for (int64_t t = 0; t < T; ++t) seq.push_back(init.x[t * C + c]);
          for (int64_t t = 0; t < T; ++t) {
            double sum = init.b[c], mag = std::fabs(init.b[c]);
            for (int k = 0; k < K; ++k) {
              sum += init.w[c * K + k] * seq[t + k];
              mag += std::fabs(init.w[c * K + k] * seq[t + k]);
            }
            const double want = silu ? SiluD(sum) : sum;
            // K + 1 additions, then the SiLU's few roundings.
            ASSERT_LE(std::fabs(d.y[t * C + c] - want), (K + 2) * kEps * mag + 8 * kEps * std::fabs(want))
                << "K=" << K << " c=" << c << " t=" << t << " isa=" << IsaName(isa);
          }
          for (int k = 0; k + 1 < K; ++k) ASSERT_EQ(d.state[k * C + c], seq[T + k]);
        }
      }
    }
  }
}

TEST(CausalConv1d, EveryIsaMatchesReferenceBits) {
  std::mt19937 rng(41);
  for (int64_t C : {1, 2, 3, 5, 6, 8, 12, 13, 26, 37, 643}) {
    for (int K : {1, 2, 3, 4, 7, kMaxConvKernel}) {
      for (int64_t T : {1, 3, 17, 64}) {
        const bool bias = (C + K) % 2 == 0, silu = (C + T) % 3 != 0;
        ConvData ref(rng, T, C, K, bias, silu);
        const ConvData init = ref;
        RefCausalConv1d(ref.Args(0, T));
        for (Isa isa : SupportedIsas()) {
          ConvData d = init;
          CausalConv1d(d.Args(0, T), isa);
          ASSERT_TRUE(SameBits(d.y, ref.y)) << "C=" << C << " K=" << K << " T=" << T << " " << IsaName(isa);
          ASSERT_TRUE(SameBits(d.state, ref.state)) << "C=" << C << " K=" << K << " T=" << T;
        }
      }
    }
  }
}

TEST(CausalConv1d, SplitCallsGiveSameBits) {
  std::mt19937 rng(42);
  const int64_t T = 17, C = 21;
  ConvData whole(rng, T, C, 4, true, true);
  const ConvData init = whole;
  for (Isa isa : SupportedIsas()) {
    ConvData w1 = init;
    CausalConv1d(w1.Args(0, T), isa);
    // Splits where the second part is shorter than the state (k = 15, 16) or the first is (k = 1, 2).
    for (int64_t k : {0, 1, 2, 3, 8, 15, 16, 17}) {
      ConvData s = init;
      CausalConv1d(s.Args(0, k), isa);
      CausalConv1d(s.Args(k, T - k), isa);
      ASSERT_TRUE(SameBits(s.y, w1.y)) << "k=" << k << " " << IsaName(isa);
      ASSERT_TRUE(SameBits(s.state, w1.state)) << "k=" << k;
    }
    // Token by token: the state carries the window across every call.
    ConvData one = init;
    for (int64_t t = 0; t < T; ++t) CausalConv1d(one.Args(t, 1), isa);
    EXPECT_TRUE(SameBits(one.y, w1.y));
    EXPECT_TRUE(SameBits(one.state, w1.state));
  }
}

// Runs longer than the SIMD paths' token chunks (32), split anywhere, at kernel widths with and without a
// compile-time path and channel counts with partial registers: the reference's bits each time.
TEST(CausalConv1d, SplitCallsAcrossChunksGiveReferenceBits) {
  std::mt19937 rng(142);
  const int64_t T = 70;
  for (int K : {2, 3, 4, 6}) {
    for (int64_t C : {6, 21, 27}) {
      ConvData ref(rng, T, C, K, K != 3, K != 2);
      const ConvData init = ref;
      RefCausalConv1d(ref.Args(0, T));
      for (Isa isa : SupportedIsas()) {
        for (int64_t k : {0, 1, 5, 31, 32, 33, 64, 69}) {
          ConvData s = init;
          CausalConv1d(s.Args(0, k), isa);
          CausalConv1d(s.Args(k, T - k), isa);
          ASSERT_TRUE(SameBits(s.y, ref.y)) << "K=" << K << " C=" << C << " k=" << k << " " << IsaName(isa);
          ASSERT_TRUE(SameBits(s.state, ref.state)) << "K=" << K << " C=" << C << " k=" << k;
        }
      }
    }
  }
}

TEST(CausalConv1d, InPlaceWithRowStrides) {
  std::mt19937 rng(43);
  const int64_t T = 6, C = 19, stride = 32;
  ConvData ref(rng, T, C, 4, true, true);
  const ConvData init = ref;
  RefCausalConv1d(ref.Args(0, T));
  for (Isa isa : SupportedIsas()) {
    // x rows inside wider rows; y written over x.
    std::vector<float> buf(T * stride, -7.0f);
    for (int64_t t = 0; t < T; ++t) std::copy_n(&init.x[t * C], C, &buf[t * stride + 3]);
    ConvData d = init;
    CausalConv1dArgs a = d.Args(0, T);
    a.x = a.y = buf.data() + 3;
    a.x_stride = a.y_stride = stride;
    CausalConv1d(a, isa);
    std::vector<float> got(T * C);
    for (int64_t t = 0; t < T; ++t) std::copy_n(&buf[t * stride + 3], C, &got[t * C]);
    EXPECT_TRUE(SameBits(got, ref.y)) << IsaName(isa);
    EXPECT_TRUE(SameBits(d.state, ref.state));
    for (int64_t t = 0; t < T; ++t) {
      EXPECT_EQ(buf[t * stride + 2], -7.0f);
      EXPECT_EQ(buf[t * stride + 3 + C], -7.0f);
    }
  }
}

TEST(GeGlu, IsGeluThenMulAndMatchesDoubleFormula) {
  std::mt19937 rng(52);
  for (int64_t n : {1, 7, 8, 300, 1001}) {
    auto gate = RandomFloats(rng, n, 3.0f);
    const auto up = RandomFloats(rng, n);
    if (n > 4) gate[0] = 0.0f, gate[1] = -30.0f, gate[2] = 30.0f, gate[3] = 1e-30f;
    std::vector<float> ref(n);
    RefGeGlu(gate.data(), up.data(), n, ref.data());
    for (Isa isa : SupportedIsas()) {
      std::vector<float> y(n), g(n), composed(n);
      GeGlu(gate.data(), up.data(), n, y.data(), isa);
      Gelu(gate.data(), n, g.data(), isa);
      Mul(g.data(), up.data(), n, composed.data());
      ASSERT_TRUE(SameBits(y, composed)) << "n=" << n << " " << IsaName(isa);
      ASSERT_TRUE(SameBits(y, ref)) << "n=" << n << " " << IsaName(isa);
      for (int64_t i = 0; i < n; ++i) {
        const double v = gate[i];
        const double want =
            0.5 * v * (1 + std::tanh(0.79788456080286535588 * v * (1 + 0.044715 * v * v))) * up[i];
        ASSERT_LE(std::fabs(y[i] - want), 9 * kEps * (std::fabs(want) + std::fabs(v * up[i])) + 1e-38) << v;
      }
      // In place over either input.
      auto g2 = gate;
      GeGlu(g2.data(), up.data(), n, g2.data(), isa);
      EXPECT_TRUE(SameBits(g2, ref));
      auto u2 = up;
      GeGlu(gate.data(), u2.data(), n, u2.data(), isa);
      EXPECT_TRUE(SameBits(u2, ref));
    }
  }
}

// ---- GroupRmsNormGated ----

TEST(RecurrentGroupNorm, MatchesDoubleFormulaBothOrdersAndWeights) {
  std::mt19937 rng(53);
  const int64_t T = 3, H = 4, D = 13;
  const auto x = RandomFloats(rng, T * H * D, 2.0f), z = RandomFloats(rng, T * H * D, 2.0f);
  const auto w = RandomFloats(rng, H * D);
  for (GateOrder order : {GateOrder::kNormThenGate, GateOrder::kGateThenNorm}) {
    for (int64_t wl : {D, H * D}) {
      const GroupNormParams p{H, D, wl, 1e-5f, order};
      for (Isa isa : SupportedIsas()) {
        std::vector<float> y(T * H * D);
        GroupRmsNormGated(x.data(), z.data(), w.data(), T, p, y.data(), isa);
        for (int64_t r = 0; r < T * H; ++r) {
          std::vector<double> u(D);
          for (int64_t i = 0; i < D; ++i)
            u[i] = order == GateOrder::kGateThenNorm ? SiluD(z[r * D + i]) * x[r * D + i] : x[r * D + i];
          double ss = 0;
          for (double e : u) ss += e * e;
          const double scale = 1 / std::sqrt(ss / D + 1e-5);
          for (int64_t i = 0; i < D; ++i) {
            const double wi = wl == D ? w[i] : w[(r % H) * D + i];
            double want = u[i] * scale * wi;
            if (order == GateOrder::kNormThenGate) want *= SiluD(z[r * D + i]);
            ASSERT_NEAR(y[r * D + i], want, 24 * kEps * (std::fabs(want) + 1e-30))
                << "row " << r << " i " << i << " " << IsaName(isa);
          }
        }
      }
    }
  }
}

TEST(RecurrentGroupNorm, EveryIsaMatchesReferenceBitsAndInPlace) {
  std::mt19937 rng(54);
  for (int64_t D : {1, 7, 64, 130}) {
    for (int64_t H : {1, 3, 8}) {
      const int64_t T = 5;
      const auto x = RandomFloats(rng, T * H * D, 3.0f), z = RandomFloats(rng, T * H * D, 3.0f);
      const auto w = RandomFloats(rng, H * D);
      for (GateOrder order : {GateOrder::kNormThenGate, GateOrder::kGateThenNorm}) {
        for (int64_t wl : {D, H * D}) {
          const GroupNormParams p{H, D, wl, 1e-6f, order};
          std::vector<float> ref(T * H * D);
          RefGroupRmsNormGated(x.data(), z.data(), w.data(), T, p, ref.data());
          for (Isa isa : SupportedIsas()) {
            auto y = x;  // in place over x
            GroupRmsNormGated(y.data(), z.data(), w.data(), T, p, y.data(), isa);
            ASSERT_TRUE(SameBits(y, ref)) << "D=" << D << " H=" << H << " " << IsaName(isa);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace llamay::kernels
