// The chunked SSM scan (ssm_scan.h): against the per-token recurrence in double (so a wrong formula fails),
// every ISA level against the scalar reference bit for bit (outputs and the whole state, pending area and
// header included), the same bits whatever the split of the tokens into calls or of the heads over
// threads, strided rows, damaged headers, and a hand-computed case.
#include "kernels/ssm_scan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/recurrent_chunk.h"
#include "kernels/reference/reference.h"
#include "kernels/test_util.h"
#include "kernels/thread_pool.h"

namespace llamay::kernels {
namespace {

using test_util::RandomFloats;
using test_util::SameBits;
using test_util::SupportedIsas;
using test_util::UniformFloats;

constexpr int L = kRecurrentChunk;

double SoftplusD(double v) { return v > 20 ? v : std::log1p(std::exp(v)); }

struct ChunkData {
  int64_t T;
  int H, P, N, G;
  bool use_d, use_bias;
  // state: SsmScanStateFloats; x, y [T][H][P]; dt [T][H]; dt_bias, a, d [H]; b, c [T][G][N].
  std::vector<float> state, x, dt, dt_bias, a, b, c, d, y;

  ChunkData(std::mt19937& rng, int64_t t, int h, int p, int n, int g, bool with_d = true,
            bool with_bias = true)
      : T(t), H(h), P(p), N(n), G(g), use_d(with_d), use_bias(with_bias) {
    state.assign(SsmScanStateFloats(H, P, N, G), 0.0f);
    const auto s = RandomFloats(rng, int64_t{H} * P * N);
    std::copy(s.begin(), s.end(), state.begin());  // a folded state, nothing pending
    x = RandomFloats(rng, T * H * P);
    dt = RandomFloats(rng, T * H, 1.5f);
    for (size_t i = 0; i < dt.size(); i += 7) dt[i] = 21.0f + static_cast<float>(i % 3);  // past 20
    dt_bias = RandomFloats(rng, H, 0.5f);
    a = UniformFloats(rng, H, -3.0f, -0.05f);  // -exp(A_log)
    b = RandomFloats(rng, T * G * N);
    c = RandomFloats(rng, T * G * N);
    d = RandomFloats(rng, H);
    y.assign(T * H * P, 0.0f);
  }
  float* Header() { return state.data() + int64_t{H} * P * N; }
  // Random pending inputs in every slot and a pending count of m: any such state is valid.
  void RandomPending(std::mt19937& rng, int m) {
    float* pend = Header() + kChunkHeaderFloats;
    const int64_t nx = int64_t{L} * H * P, nb = int64_t{L} * G * N, na = int64_t{L} * H;
    const auto xs = RandomFloats(rng, nx), bs = RandomFloats(rng, nb);
    const auto as = UniformFloats(rng, na, 0.05f, 0.99f);
    std::copy(xs.begin(), xs.end(), pend);
    std::copy(bs.begin(), bs.end(), pend + nx);
    std::copy(as.begin(), as.end(), pend + nx + nb);
    SetChunkPending(Header(), m);
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

// The per-token recurrence in double from the folded state of `init` (nothing pending), with a bound on
// the magnitude of every term either form sums: mag[n] follows the state with |.| on every term.
struct DoubleScan {
  std::vector<double> s, mag;
  std::vector<double> y, ymag;        // [T][H][P]
  std::vector<double> s_at_boundary;  // the state after the last whole chunk (token T - T % L)
  std::vector<double> mag_at_boundary;

  explicit DoubleScan(const ChunkData& d) {
    const int H = d.H, P = d.P, N = d.N, G = d.G;
    s.assign(d.state.begin(), d.state.begin() + int64_t{H} * P * N);
    mag.resize(s.size());
    for (size_t i = 0; i < s.size(); ++i) mag[i] = std::fabs(s[i]);
    s_at_boundary = s, mag_at_boundary = mag;
    y.resize(d.T * H * P), ymag.resize(d.T * H * P);
    for (int64_t t = 0; t < d.T; ++t) {
      for (int h = 0; h < H; ++h) {
        const double v = static_cast<double>(d.dt[t * H + h]) + (d.use_bias ? d.dt_bias[h] : 0.0);
        const double dth = SoftplusD(v), dA = std::exp(dth * d.a[h]);
        const int g = h / (H / G);
        for (int p = 0; p < P; ++p) {
          const double xv = d.x[(t * H + h) * P + p];
          double yv = 0, ym = 0;
          for (int n = 0; n < N; ++n) {
            const int64_t i = (int64_t{h} * P + p) * N + n;
            const double bn = d.b[(t * G + g) * N + n], cn = d.c[(t * G + g) * N + n];
            s[i] = s[i] * dA + bn * xv * dth;
            mag[i] = mag[i] * dA + std::fabs(bn * xv * dth);
            yv += s[i] * cn;
            ym += mag[i] * std::fabs(cn);
          }
          if (d.use_d) yv += xv * d.d[h], ym += std::fabs(xv * d.d[h]);
          y[(t * H + h) * P + p] = yv;
          ymag[(t * H + h) * P + p] = ym;
        }
      }
      if ((t + 1) % L == 0) s_at_boundary = s, mag_at_boundary = mag;
    }
  }
};

struct Shape {
  int H, P, N, G;
};

void ExpectNearDouble(const ChunkData& got, const DoubleScan& want, const std::string& what) {
  for (size_t i = 0; i < want.y.size(); ++i)
    ASSERT_NEAR(got.y[i], want.y[i], 1e-5 * (want.ymag[i] + 1)) << what << " y[" << i << "]";
  for (size_t i = 0; i < want.s_at_boundary.size(); ++i)
    ASSERT_NEAR(got.state[i], want.s_at_boundary[i], 1e-5 * (want.mag_at_boundary[i] + 1))
        << what << " S[" << i << "]";
}

TEST(SsmScan, MatchesDoubleRecurrence) {
  std::mt19937 rng(51);
  for (Shape sh : {Shape{2, 3, 5, 1}, Shape{4, 2, 9, 2}, Shape{6, 1, 16, 3}, Shape{2, 64, 128, 1}}) {
    for (int64_t T : {1, 15, 16, 17, 40}) {
      const ChunkData init(rng, T, sh.H, sh.P, sh.N, sh.G, T != 15, T != 16);
      const DoubleScan want(init);
      for (Isa isa : SupportedIsas()) {
        const std::string what = "H=" + std::to_string(sh.H) + " P=" + std::to_string(sh.P) +
                                 " N=" + std::to_string(sh.N) + " T=" + std::to_string(T) + " " +
                                 std::string(IsaName(isa));
        ChunkData got = init;
        SsmScan(got.Args(0, T), nullptr, isa);
        ExpectNearDouble(got, want, what);
        EXPECT_EQ(ChunkPending(got.Header()), T % L);
        // The same tokens from a state with pending tokens (a first call of k leaves k % L pending).
        for (int64_t k : {int64_t{1}, T / 2, T - 1}) {
          if (k <= 0 || k >= T) continue;
          ChunkData two = init;
          SsmScan(two.Args(0, k), nullptr, isa);
          ASSERT_EQ(ChunkPending(two.Header()), k % L);
          SsmScan(two.Args(k, T - k), nullptr, isa);
          ExpectNearDouble(two, want, what + " k=" + std::to_string(k));
        }
      }
    }
  }
}

TEST(SsmScan, EveryIsaMatchesReferenceBits) {
  std::mt19937 rng(52);
  struct HG {
    int H, G;
  };
  int variant = 0;
  for (HG hg : {HG{1, 1}, HG{4, 2}, HG{3, 3}, HG{5, 1}}) {
    for (int P : {1, 3, 5, 16, 64}) {
      for (int N : {1, 3, 7, 8, 9, 17, 64, 128}) {
        for (int64_t T : {1, 3, 16, 17, 40, 70}) {
          ++variant;
          const bool with_d = variant % 2 == 0, with_bias = variant % 3 != 0;
          ChunkData ref(rng, T, hg.H, P, N, hg.G, with_d, with_bias);
          const int m = variant % 4 == 0 ? 0 : (variant * 7) % L;  // pending tokens at the start
          if (m > 0) ref.RandomPending(rng, m);
          const ChunkData init = ref;
          RefSsmScan(ref.Args(0, T));
          ASSERT_EQ(ChunkPending(ref.Header()), (m + T) % L);
          for (Isa isa : SupportedIsas()) {
            ChunkData d = init;
            SsmScan(d.Args(0, T), nullptr, isa);
            ASSERT_TRUE(SameBits(d.y, ref.y)) << "H=" << hg.H << " G=" << hg.G << " P=" << P << " N=" << N
                                              << " T=" << T << " m=" << m << " " << IsaName(isa);
            ASSERT_TRUE(SameBits(d.state, ref.state)) << "H=" << hg.H << " P=" << P << " N=" << N
                                                      << " T=" << T << " m=" << m << " " << IsaName(isa);
          }
        }
      }
    }
  }
}

// Heads of more than 64 rows (the kernels take the rows of S in blocks of 64) and a head of many groups.
TEST(SsmScan, WideHeadsMatchReferenceBits) {
  std::mt19937 rng(56);
  for (Shape sh : {Shape{2, 72, 9, 1}, Shape{1, 131, 24, 1}, Shape{8, 2, 5, 8}}) {
    for (int64_t T : {1, 19, 40}) {
      ChunkData ref(rng, T, sh.H, sh.P, sh.N, sh.G);
      ref.RandomPending(rng, static_cast<int>(T % 7));
      const ChunkData init = ref;
      RefSsmScan(ref.Args(0, T));
      for (Isa isa : SupportedIsas()) {
        ChunkData d = init;
        SsmScan(d.Args(0, T), nullptr, isa);
        ASSERT_TRUE(SameBits(d.y, ref.y)) << "P=" << sh.P << " T=" << T << " " << IsaName(isa);
        ASSERT_TRUE(SameBits(d.state, ref.state)) << "P=" << sh.P << " T=" << T << " " << IsaName(isa);
      }
    }
  }
}

TEST(SsmScan, SplitCallsAndThreadsGiveSameBits) {
  std::mt19937 rng(53);
  const int64_t T = 70;
  for (Shape sh : {Shape{6, 5, 19, 2}, Shape{4, 64, 128, 2}}) {
    const ChunkData init(rng, T, sh.H, sh.P, sh.N, sh.G);
    ThreadPool pool(3);
    for (Isa isa : SupportedIsas()) {
      ChunkData whole = init;
      SsmScan(whole.Args(0, T), nullptr, isa);
      for (int64_t k : {0, 1, 3, 15, 16, 17, 33, 69, 70}) {
        ChunkData s = init;
        SsmScan(s.Args(0, k), &pool, isa);
        SsmScan(s.Args(k, T - k), nullptr, isa);
        ASSERT_TRUE(SameBits(s.y, whole.y)) << "k=" << k << " P=" << sh.P << " " << IsaName(isa);
        ASSERT_TRUE(SameBits(s.state, whole.state)) << "k=" << k << " P=" << sh.P << " " << IsaName(isa);
      }
      ChunkData one = init;
      for (int64_t t = 0; t < T; ++t) SsmScan(one.Args(t, 1), &pool, isa);
      EXPECT_TRUE(SameBits(one.y, whole.y)) << IsaName(isa);
      EXPECT_TRUE(SameBits(one.state, whole.state)) << IsaName(isa);
    }
  }
}

// x, B and C as views of one conv output row (Mamba-2's xBC), dt inside a wider row, y into wider rows.
TEST(SsmScan, RowStridesGiveSameBits) {
  std::mt19937 rng(54);
  const int64_t T = 21;
  const int H = 4, P = 3, N = 10, G = 2;
  ChunkData ref(rng, T, H, P, N, G);
  const ChunkData init = ref;
  RefSsmScan(ref.Args(0, T));
  const int64_t row = H * P + 2 * G * N + 5, yrow = H * P + 3;
  std::vector<float> xbc(T * row), dtrow(T * (H + 2));
  for (int64_t t = 0; t < T; ++t) {
    std::copy_n(&init.x[t * H * P], H * P, &xbc[t * row]);
    std::copy_n(&init.b[t * G * N], G * N, &xbc[t * row + H * P]);
    std::copy_n(&init.c[t * G * N], G * N, &xbc[t * row + H * P + G * N]);
    std::copy_n(&init.dt[t * H], H, &dtrow[t * (H + 2) + 1]);
  }
  ThreadPool pool(2);
  for (Isa isa : SupportedIsas()) {
    ChunkData d = init;
    std::vector<float> y(T * yrow, -9.0f);
    SsmScanArgs a = d.Args(0, T);
    a.x = xbc.data(), a.x_stride = row;
    a.b = xbc.data() + H * P, a.c = xbc.data() + H * P + G * N, a.bc_stride = row;
    a.dt = dtrow.data() + 1, a.dt_stride = H + 2;
    a.y = y.data(), a.y_stride = yrow;
    SsmScan(a, &pool, isa);
    std::vector<float> got(T * H * P);
    for (int64_t t = 0; t < T; ++t) {
      std::copy_n(&y[t * yrow], H * P, &got[t * H * P]);
      for (int64_t i = H * P; i < yrow; ++i) EXPECT_EQ(y[t * yrow + i], -9.0f);
    }
    EXPECT_TRUE(SameBits(got, ref.y)) << IsaName(isa);
    EXPECT_TRUE(SameBits(d.state, ref.state)) << IsaName(isa);
  }
}

TEST(SsmScan, DamagedHeaderReadsAsEmpty) {
  std::mt19937 rng(55);
  const int64_t T = 20;
  const int H = 3, P = 4, N = 9, G = 1;
  ChunkData init(rng, T, H, P, N, G);
  init.RandomPending(rng, 0);  // pending slots full of values that must not be used
  for (Isa isa : SupportedIsas()) {
    ChunkData want = init;
    SsmScan(want.Args(0, T), nullptr, isa);
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), -1.0f, 2.5f, 16.0f, 1e30f,
                      std::numeric_limits<float>::infinity()}) {
      ChunkData d = init;
      d.Header()[0] = bad;
      SsmScan(d.Args(0, T), nullptr, isa);
      EXPECT_TRUE(SameBits(d.y, want.y)) << bad << " " << IsaName(isa);
      EXPECT_TRUE(SameBits(d.state, want.state)) << bad << " " << IsaName(isa);
    }
  }
  // A state of the earlier per-token kernels zero-extended (S only, the rest zero, as a snapshot of theirs
  // restores) is a folded state with nothing pending: it continues as the recurrence does.
  ChunkData old(rng, 2 * L, H, P, N, G);
  std::fill(old.state.begin() + int64_t{H} * P * N, old.state.end(), 0.0f);
  const DoubleScan want(old);
  for (Isa isa : SupportedIsas()) {
    ChunkData d = old;
    SsmScan(d.Args(0, 2 * L), nullptr, isa);
    ExpectNearDouble(d, want, "zero-extended " + std::string(IsaName(isa)));
  }
}

TEST(SsmScan, HandComputed) {
  // S 0.5, x (2, 1), dt (0, ln 2) (softplus: ln 2, ln 3), A -1 (dA = 1/2, 1/3), B (1, 2), C (3, 1), D 0.25:
  //   S_0 = 0.5 * 1/2 + 1 * (2 ln 2) = 0.25 + 2 ln 2;        y_0 = 3 S_0 + 2 * 0.25 = 1.25 + 6 ln 2
  //   S_1 = S_0 / 3 + 2 * (1 ln 3) = (0.25 + 2 ln 2) / 3 + 2 ln 3;   y_1 = 1 S_1 + 1 * 0.25
  // Two tokens fold nothing: S stays 0.5 and both tokens are pending.
  const double ln2 = std::log(2.0), ln3 = std::log(3.0);
  for (Isa isa : SupportedIsas()) {
    std::vector<float> state(SsmScanStateFloats(1, 1, 1, 1), 0.0f);
    state[0] = 0.5f;
    const float x[2] = {2, 1}, dt[2] = {0, static_cast<float>(ln2)}, a = -1, b[2] = {1, 2}, c[2] = {3, 1},
                d = 0.25f;
    float y[2] = {};
    SsmScanArgs s;
    s.n_tokens = 2, s.n_heads = 1, s.head_dim = 1, s.d_state = 1, s.n_groups = 1;
    s.state = state.data(), s.x = x, s.dt = dt, s.a = &a, s.b = b, s.c = c, s.d = &d, s.y = y;
    SsmScan(s, nullptr, isa);
    EXPECT_NEAR(y[0], 1.25 + 6 * ln2, 1e-6) << IsaName(isa);
    EXPECT_NEAR(y[1], (0.25 + 2 * ln2) / 3 + 2 * ln3 + 0.25, 1e-6) << IsaName(isa);
    EXPECT_EQ(state[0], 0.5f);
    EXPECT_EQ(ChunkPending(&state[1]), 2);
    const float* xdt = &state[1 + kChunkHeaderFloats];
    const float* pb = xdt + L;
    const float* da = pb + L;
    EXPECT_NEAR(xdt[0], 2 * ln2, 1e-6);
    EXPECT_NEAR(xdt[1], ln3, 1e-6);
    EXPECT_EQ(pb[0], 1.0f);
    EXPECT_EQ(pb[1], 2.0f);
    EXPECT_NEAR(da[0], 0.5, 1e-7);
    EXPECT_NEAR(da[1], 1.0 / 3, 1e-7);
  }
}

}  // namespace
}  // namespace llamay::kernels
