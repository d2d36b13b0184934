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

std::vector<float> Uniform(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

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

// ---- SsmScan ----

struct ScanData {
  int64_t T;
  int H, P, N, G;
  bool use_d, use_bias;
  // state [H][P][N]; x, y [T][H][P]; dt [T][H]; dt_bias, a, d [H]; b, c [T][G][N].
  std::vector<float> state, x, dt, dt_bias, a, b, c, d, y;

  ScanData(std::mt19937& rng, int64_t t, int h, int p, int n, int g, bool with_d = true,
           bool with_bias = true)
      : T(t), H(h), P(p), N(n), G(g), use_d(with_d), use_bias(with_bias) {
    state = RandomFloats(rng, int64_t{H} * P * N);
    x = RandomFloats(rng, T * H * P);
    dt = RandomFloats(rng, T * H, 1.5f);
    for (size_t i = 0; i < dt.size(); i += 7) dt[i] = 21.0f + static_cast<float>(i % 3);  // past 20
    dt_bias = RandomFloats(rng, H, 0.5f);
    a = Uniform(rng, H, -3.0f, -0.05f);  // -exp(A_log)
    b = RandomFloats(rng, T * G * N);
    c = RandomFloats(rng, T * G * N);
    d = RandomFloats(rng, H);
    y.assign(T * H * P, 0.0f);
  }
  SsmScanArgs Args(int64_t t0, int64_t n) {
    SsmScanArgs s;
    s.n_tokens = n;
    s.n_heads = H, s.head_dim = P, s.d_state = N, s.n_groups = G;
    s.state = state.data();
    s.x = x.data() + t0 * H * P;
    s.dt = dt.data() + t0 * H;
    s.dt_bias = use_bias ? dt_bias.data() : nullptr;
    s.a = a.data();
    s.b = b.data() + t0 * G * N;
    s.c = c.data() + t0 * G * N;
    s.d = use_d ? d.data() : nullptr;
    s.y = y.data() + t0 * H * P;
    return s;
  }
};

TEST(SsmScan, HandComputedSingleElement) {
  // state 0.5, x 2, dt 0 (softplus: ln 2), A -1 (dA = exp(-ln 2) = 1/2), B 1, C 3, D 0.25:
  // state = 0.5 * 0.5 + 1 * (2 * ln 2) = 0.25 + 2 ln 2;  y = 3 * state + 2 * 0.25.
  for (Isa isa : SupportedIsas()) {
    float state = 0.5f, x = 2, dt = 0, a = -1, b = 1, c = 3, d = 0.25f, y = 0;
    SsmScanArgs s;
    s.n_tokens = 1, s.n_heads = 1, s.head_dim = 1, s.d_state = 1, s.n_groups = 1;
    s.state = &state, s.x = &x, s.dt = &dt, s.a = &a, s.b = &b, s.c = &c, s.d = &d, s.y = &y;
    SsmScan(s, nullptr, isa);
    const double want_state = 0.25 + 2 * std::log(2.0);
    EXPECT_NEAR(state, want_state, 1e-6);
    EXPECT_NEAR(y, 3 * want_state + 0.5, 4e-6);
  }
}

TEST(SsmScan, MatchesDoubleFormula) {
  std::mt19937 rng(44);
  struct Shape {
    int H, P, N, G;
  };
  for (Shape sh : {Shape{2, 3, 5, 1}, Shape{4, 2, 9, 2}, Shape{6, 1, 16, 3}}) {
    const int64_t T = 5;
    const ScanData init(rng, T, sh.H, sh.P, sh.N, sh.G);
    for (Isa isa : SupportedIsas()) {
      ScanData got = init;
      SsmScan(got.Args(0, T), nullptr, isa);
      std::vector<double> s(init.state.begin(), init.state.end());
      for (int64_t t = 0; t < T; ++t) {
        for (int h = 0; h < sh.H; ++h) {
          const double dt = SoftplusD(static_cast<double>(init.dt[t * sh.H + h]) + init.dt_bias[h]);
          const double dA = std::exp(dt * init.a[h]);
          const int g = h / (sh.H / sh.G);
          for (int p = 0; p < sh.P; ++p) {
            const double xv = init.x[(t * sh.H + h) * sh.P + p];
            double y = 0, mag = 0;
            for (int n = 0; n < sh.N; ++n) {
              double& sn = s[(int64_t{h} * sh.P + p) * sh.N + n];
              sn = sn * dA + init.b[(t * sh.G + g) * sh.N + n] * xv * dt;
              y += sn * init.c[(t * sh.G + g) * sh.N + n];
              mag += std::fabs(sn * init.c[(t * sh.G + g) * sh.N + n]);
            }
            y += xv * init.d[h];
            mag += std::fabs(xv * init.d[h]);
            // Errors of a few eps per token carried in the state (decaying), of dt and dA, and of the sum.
            ASSERT_NEAR(got.y[(t * sh.H + h) * sh.P + p], y, 1e-5 * (mag + 1))
                << "t=" << t << " h=" << h << " p=" << p << " " << IsaName(isa);
          }
        }
      }
      for (size_t i = 0; i < s.size(); ++i) ASSERT_NEAR(got.state[i], s[i], 1e-5 * (std::fabs(s[i]) + 1));
    }
  }
}

TEST(SsmScan, EveryIsaMatchesReferenceBits) {
  std::mt19937 rng(45);
  struct HG {
    int H, G;
  };
  for (HG hg : {HG{1, 1}, HG{4, 2}, HG{6, 3}, HG{8, 1}}) {
    for (int P : {1, 3, 5, 16}) {
      for (int N : {1, 3, 4, 5, 7, 8, 9, 12, 13, 17, 64}) {
        for (int64_t T : {1, 3, 17, 64, 70}) {
          const bool with_d = (P + N) % 2 == 0, with_bias = (N + T) % 3 != 0;
          ScanData ref(rng, T, hg.H, P, N, hg.G, with_d, with_bias);
          const ScanData init = ref;
          RefSsmScan(ref.Args(0, T));
          for (Isa isa : SupportedIsas()) {
            ScanData d = init;
            SsmScan(d.Args(0, T), nullptr, isa);
            ASSERT_TRUE(SameBits(d.y, ref.y)) << "H=" << hg.H << " G=" << hg.G << " P=" << P << " N=" << N
                                              << " T=" << T << " " << IsaName(isa);
            ASSERT_TRUE(SameBits(d.state, ref.state))
                << "H=" << hg.H << " P=" << P << " N=" << N << " T=" << T;
          }
        }
      }
    }
  }
}

TEST(SsmScan, SplitCallsAndThreadsGiveSameBits) {
  std::mt19937 rng(46);
  const int64_t T = 70;
  const ScanData init(rng, T, 6, 5, 19, 2);
  ThreadPool pool(3);
  for (Isa isa : SupportedIsas()) {
    ScanData whole = init;
    SsmScan(whole.Args(0, T), nullptr, isa);
    for (int64_t k : {0, 1, 3, 17, 64, 69, 70}) {
      ScanData s = init;
      SsmScan(s.Args(0, k), &pool, isa);
      SsmScan(s.Args(k, T - k), nullptr, isa);
      ASSERT_TRUE(SameBits(s.y, whole.y)) << "k=" << k << " " << IsaName(isa);
      ASSERT_TRUE(SameBits(s.state, whole.state)) << "k=" << k;
    }
    ScanData one = init;
    for (int64_t t = 0; t < T; ++t) SsmScan(one.Args(t, 1), &pool, isa);
    EXPECT_TRUE(SameBits(one.y, whole.y));
    EXPECT_TRUE(SameBits(one.state, whole.state));
  }
}

// x, B and C as views of one conv output row (Mamba-2's xBC), dt inside a wider row, y into wider rows.
TEST(SsmScan, RowStridesGiveSameBits) {
  std::mt19937 rng(47);
  const int64_t T = 9;
  const int H = 4, P = 3, N = 10, G = 2;
  ScanData ref(rng, T, H, P, N, G);
  const ScanData init = ref;
  RefSsmScan(ref.Args(0, T));
  const int64_t row = H * P + 2 * G * N + 5, yrow = H * P + 3;
  std::vector<float> xbc(T * row), dtrow(T * (H + 2)), y(T * yrow, -9.0f);
  for (int64_t t = 0; t < T; ++t) {
    std::copy_n(&init.x[t * H * P], H * P, &xbc[t * row]);
    std::copy_n(&init.b[t * G * N], G * N, &xbc[t * row + H * P]);
    std::copy_n(&init.c[t * G * N], G * N, &xbc[t * row + H * P + G * N]);
    std::copy_n(&init.dt[t * H], H, &dtrow[t * (H + 2) + 1]);
  }
  ThreadPool pool(2);
  for (Isa isa : SupportedIsas()) {
    ScanData d = init;
    SsmScanArgs a = d.Args(0, T);
    a.x = xbc.data(), a.x_stride = row;
    a.b = xbc.data() + H * P, a.c = xbc.data() + H * P + G * N, a.bc_stride = row;
    a.dt = dtrow.data() + 1, a.dt_stride = H + 2;
    a.y = y.data(), a.y_stride = yrow;
    SsmScan(a, &pool, isa);
    std::vector<float> got(T * H * P);
    for (int64_t t = 0; t < T; ++t) {
      std::copy_n(&y[t * yrow], H * P, &got[t * H * P]);
      EXPECT_EQ(y[t * yrow + H * P], -9.0f);
    }
    EXPECT_TRUE(SameBits(got, ref.y)) << IsaName(isa);
    EXPECT_TRUE(SameBits(d.state, ref.state));
  }
}

// ---- GatedDeltaRule ----

void L2NormaliseRows(std::vector<float>& v, int64_t dim) {
  for (size_t r = 0; r < v.size() / dim; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(v[r * dim + i]) * v[r * dim + i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss + 1e-12));
    for (int64_t i = 0; i < dim; ++i) v[r * dim + i] *= inv;
  }
}

struct DeltaData {
  int64_t T;
  int Hk, Hv, Dk, Dv;
  // state [Hv][Dk][Dv]; q, k [T][Hk][Dk]; v, out [T][Hv][Dv]; g, beta [T][Hv].
  std::vector<float> state, q, k, v, g, beta, out;

  DeltaData(std::mt19937& rng, int64_t t, int hk, int hv, int dk, int dv)
      : T(t), Hk(hk), Hv(hv), Dk(dk), Dv(dv) {
    state = RandomFloats(rng, int64_t{Hv} * Dk * Dv, 0.5f);
    q = RandomFloats(rng, T * Hk * Dk);
    k = RandomFloats(rng, T * Hk * Dk);
    L2NormaliseRows(q, Dk);
    L2NormaliseRows(k, Dk);
    v = RandomFloats(rng, T * Hv * Dv);
    g = Uniform(rng, T * Hv, -2.0f, -0.01f);
    beta = Uniform(rng, T * Hv, 0.05f, 0.95f);
    out.assign(T * Hv * Dv, 0.0f);
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

TEST(GatedDeltaRule, HandComputedSingleElement) {
  // S 1, g ln(1/2): S = 0.5; kv = 0.5 * k(1); delta = (2 - 0.5) * 0.5 = 0.75; S = 0.5 + 1 * 0.75 = 1.25;
  // out = 1.25 * q(1) * 1/sqrt(1).
  for (Isa isa : SupportedIsas()) {
    float s = 1, q = 1, k = 1, v = 2, g = std::log(0.5f), beta = 0.5f, out = 0;
    GatedDeltaRuleArgs a;
    a.n_tokens = 1, a.n_k_heads = 1, a.n_v_heads = 1, a.k_dim = 1, a.v_dim = 1;
    a.state = &s, a.q = &q, a.k = &k, a.v = &v, a.g = &g, a.beta = &beta, a.out = &out;
    GatedDeltaRule(a, nullptr, isa);
    EXPECT_NEAR(s, 1.25, 1e-6);
    EXPECT_NEAR(out, 1.25, 1e-6);
  }
}

TEST(GatedDeltaRule, MatchesDoubleFormula) {
  std::mt19937 rng(48);
  struct Shape {
    int Hk, Hv, Dk, Dv;
  };
  // Hv > Hk with distinct key heads: value head h must read key head h % Hk.
  for (Shape sh : {Shape{1, 1, 4, 4}, Shape{2, 6, 5, 3}, Shape{3, 3, 16, 9}}) {
    const int64_t T = 6;
    const DeltaData init(rng, T, sh.Hk, sh.Hv, sh.Dk, sh.Dv);
    for (Isa isa : SupportedIsas()) {
      DeltaData got = init;
      GatedDeltaRule(got.Args(0, T), nullptr, isa);
      std::vector<double> S(init.state.begin(), init.state.end());
      const double scale = 1 / std::sqrt(static_cast<double>(sh.Dk));
      for (int64_t t = 0; t < T; ++t) {
        for (int h = 0; h < sh.Hv; ++h) {
          double* s = &S[int64_t{h} * sh.Dk * sh.Dv];
          const float* q = &init.q[(t * sh.Hk + h % sh.Hk) * sh.Dk];
          const float* k = &init.k[(t * sh.Hk + h % sh.Hk) * sh.Dk];
          const float* v = &init.v[(t * sh.Hv + h) * sh.Dv];
          const double eg = std::exp(static_cast<double>(init.g[t * sh.Hv + h])),
                       b = init.beta[t * sh.Hv + h];
          for (int64_t e = 0; e < int64_t{sh.Dk} * sh.Dv; ++e) s[e] *= eg;
          for (int j = 0; j < sh.Dv; ++j) {
            double kv = 0;
            for (int i = 0; i < sh.Dk; ++i) kv += s[i * sh.Dv + j] * k[i];
            const double delta = (v[j] - kv) * b;
            for (int i = 0; i < sh.Dk; ++i) s[i * sh.Dv + j] += k[i] * delta;
          }
          for (int j = 0; j < sh.Dv; ++j) {
            double o = 0, mag = 0;
            for (int i = 0; i < sh.Dk; ++i) {
              o += s[i * sh.Dv + j] * q[i];
              mag += std::fabs(s[i * sh.Dv + j] * q[i]);
            }
            ASSERT_NEAR(got.out[(t * sh.Hv + h) * sh.Dv + j], o * scale, 1e-5 * (mag + 1))
                << "t=" << t << " h=" << h << " j=" << j << " " << IsaName(isa);
          }
        }
      }
      for (size_t i = 0; i < S.size(); ++i) ASSERT_NEAR(got.state[i], S[i], 1e-5 * (std::fabs(S[i]) + 1));
    }
  }
}

TEST(GatedDeltaRule, EveryIsaMatchesReferenceBits) {
  std::mt19937 rng(49);
  struct Heads {
    int Hk, Hv;
  };
  for (Heads hh : {Heads{1, 1}, Heads{2, 4}, Heads{3, 3}}) {
    for (int Dk : {1, 3, 8, 13}) {
      for (int Dv : {1, 2, 4, 5, 8, 10, 12, 13, 16, 19, 20, 24, 27, 28, 31, 32, 33, 40, 56, 64, 70}) {
        for (int64_t T : {1, 3, 17, 64}) {
          DeltaData ref(rng, T, hh.Hk, hh.Hv, Dk, Dv);
          const DeltaData init = ref;
          RefGatedDeltaRule(ref.Args(0, T));
          for (Isa isa : SupportedIsas()) {
            DeltaData d = init;
            GatedDeltaRule(d.Args(0, T), nullptr, isa);
            ASSERT_TRUE(SameBits(d.out, ref.out)) << "Hk=" << hh.Hk << " Hv=" << hh.Hv << " Dk=" << Dk
                                                  << " Dv=" << Dv << " T=" << T << " " << IsaName(isa);
            ASSERT_TRUE(SameBits(d.state, ref.state)) << "Dk=" << Dk << " Dv=" << Dv << " T=" << T;
          }
        }
      }
    }
  }
}

TEST(GatedDeltaRule, SplitCallsAndThreadsGiveSameBits) {
  std::mt19937 rng(50);
  const int64_t T = 40;
  const DeltaData init(rng, T, 2, 6, 16, 37);
  ThreadPool pool(3);
  for (Isa isa : SupportedIsas()) {
    DeltaData whole = init;
    GatedDeltaRule(whole.Args(0, T), nullptr, isa);
    for (int64_t k : {0, 1, 3, 17, 39, 40}) {
      DeltaData s = init;
      GatedDeltaRule(s.Args(0, k), nullptr, isa);
      GatedDeltaRule(s.Args(k, T - k), &pool, isa);
      ASSERT_TRUE(SameBits(s.out, whole.out)) << "k=" << k << " " << IsaName(isa);
      ASSERT_TRUE(SameBits(s.state, whole.state)) << "k=" << k;
    }
    DeltaData one = init;
    for (int64_t t = 0; t < T; ++t) GatedDeltaRule(one.Args(t, 1), &pool, isa);
    EXPECT_TRUE(SameBits(one.out, whole.out));
    EXPECT_TRUE(SameBits(one.state, whole.state));
  }
}

// q, k and v as views of one conv output row (Qwen3.5's q|k|v), g and beta inside wider rows.
TEST(GatedDeltaRule, RowStridesGiveSameBits) {
  std::mt19937 rng(51);
  const int64_t T = 7;
  const int Hk = 2, Hv = 4, Dk = 6, Dv = 11;
  DeltaData ref(rng, T, Hk, Hv, Dk, Dv);
  const DeltaData init = ref;
  RefGatedDeltaRule(ref.Args(0, T));
  const int64_t row = 2 * Hk * Dk + Hv * Dv + 1, gb = 2 * Hv + 1, orow = Hv * Dv + 4;
  std::vector<float> qkv(T * row), gbeta(T * gb), out(T * orow, -5.0f);
  for (int64_t t = 0; t < T; ++t) {
    std::copy_n(&init.q[t * Hk * Dk], Hk * Dk, &qkv[t * row]);
    std::copy_n(&init.k[t * Hk * Dk], Hk * Dk, &qkv[t * row + Hk * Dk]);
    std::copy_n(&init.v[t * Hv * Dv], Hv * Dv, &qkv[t * row + 2 * Hk * Dk]);
    std::copy_n(&init.g[t * Hv], Hv, &gbeta[t * gb]);
    std::copy_n(&init.beta[t * Hv], Hv, &gbeta[t * gb + Hv]);
  }
  ThreadPool pool(2);
  for (Isa isa : SupportedIsas()) {
    DeltaData d = init;
    GatedDeltaRuleArgs a = d.Args(0, T);
    a.q = qkv.data(), a.k = qkv.data() + Hk * Dk, a.v = qkv.data() + 2 * Hk * Dk;
    a.q_stride = a.k_stride = a.v_stride = row;
    a.g = gbeta.data(), a.beta = gbeta.data() + Hv, a.g_stride = a.beta_stride = gb;
    a.out = out.data(), a.out_stride = orow;
    GatedDeltaRule(a, &pool, isa);
    std::vector<float> got(T * Hv * Dv);
    for (int64_t t = 0; t < T; ++t) {
      std::copy_n(&out[t * orow], Hv * Dv, &got[t * Hv * Dv]);
      EXPECT_EQ(out[t * orow + Hv * Dv], -5.0f);
    }
    EXPECT_TRUE(SameBits(got, ref.out)) << IsaName(isa);
    EXPECT_TRUE(SameBits(d.state, ref.state));
  }
}

// ---- GeGlu ----

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
