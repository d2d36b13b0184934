// Scalar reference of the chunked Mamba-2 scan (ssm_scan.h): token by token, head by head, each operation
// of the header's contract written out in its order. ssm_scan_avx2.cc, ssm_scan_avx512.cc and
// ssm_scan_neon.cc repeat these operations exactly, blocked over tokens and rows.
//
// Pending slots: every token writes its inputs to slot (its position in the chunk), so after any run of
// calls slot k holds the latest token ever processed at position k (the valid ones are [0, m)). The fast
// paths write the same slots with the same values, which keeps the whole state, stale slots included,
// independent of how the tokens were split into calls.
#include <cmath>
#include <cstdint>

#include "kernels/recurrent_chunk.h"
#include "kernels/reference/reference.h"
#include "kernels/ssm_scan.h"

namespace llamay::kernels {
namespace {

constexpr int L = kRecurrentChunk;

int64_t Stride(int64_t given, int64_t packed) { return given != 0 ? given : packed; }

// Eight lanes from +0; lane i % 8 accumulates a[i] * b[i] with one rounding (fma); then Reduce8.
float FmaDot8(const float* a, const float* b, int n) {
  float lanes[8] = {};
  for (int i = 0; i < n; ++i) lanes[i % 8] = std::fma(a[i], b[i], lanes[i % 8]);
  return Reduce8(lanes);
}

}  // namespace

void RefSsmScan(const SsmScanArgs& a) {
  const int H = a.n_heads, P = a.head_dim, N = a.d_state, G = a.n_groups, heads_per_group = H / G;
  const int64_t xs = Stride(a.x_stride, int64_t{H} * P), dts = Stride(a.dt_stride, H),
                bcs = Stride(a.bc_stride, int64_t{G} * N), ys = Stride(a.y_stride, int64_t{H} * P);
  // The state's parts (ssm_scan.h): S [H][P][N], header, pending xdt [L][H][P], B [L][G][N], dA [L][H].
  float* S = a.state;
  float* header = S + int64_t{H} * P * N;
  float* pend_xdt = header + kChunkHeaderFloats;
  float* pend_b = pend_xdt + int64_t{L} * H * P;
  float* pend_da = pend_b + int64_t{L} * G * N;
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    const int j = ChunkPending(header);
    // Slot j receives this token's inputs before they are used: every read below is from the slots.
    for (int g = 0; g < G; ++g)
      for (int n = 0; n < N; ++n) pend_b[(int64_t{j} * G + g) * N + n] = a.b[t * bcs + int64_t{g} * N + n];
    for (int h = 0; h < H; ++h) {
      const int g = h / heads_per_group;
      const float* Ct = a.c + t * bcs + int64_t{g} * N;
      float v = a.dt[t * dts + h];
      if (a.dt_bias != nullptr) v = v + a.dt_bias[h];
      const float dth = RefSoftplus(v);
      pend_da[int64_t{j} * H + h] = RefExp(dth * a.a[h]);
      for (int p = 0; p < P; ++p)
        pend_xdt[(int64_t{j} * H + h) * P + p] = a.x[t * xs + int64_t{h} * P + p] * dth;
      auto dA = [&](int s) { return pend_da[int64_t{s} * H + h]; };
      auto xdt = [&](int s, int p) { return pend_xdt[(int64_t{s} * H + h) * P + p]; };
      auto Bs = [&](int s) { return pend_b + (int64_t{s} * G + g) * N; };
      float dec[L];
      dec[j] = 1.0f;
      for (int s = j - 1; s >= 0; --s) dec[s] = dec[s + 1] * dA(s + 1);
      const float gamma = dec[0] * dA(0);
      float coef[L];
      for (int s = 0; s <= j; ++s) coef[s] = dec[s] * FmaDot8(Bs(s), Ct, N);
      float* Sh = S + int64_t{h} * P * N;
      for (int p = 0; p < P; ++p) {
        const float inter = FmaDot8(Sh + int64_t{p} * N, Ct, N);
        float intra = 0.0f;
        for (int s = 0; s <= j; ++s) intra = std::fma(coef[s], xdt(s, p), intra);
        float y = std::fma(gamma, inter, intra);
        if (a.d != nullptr) y = std::fma(a.x[t * xs + int64_t{h} * P + p], a.d[h], y);
        a.y[t * ys + int64_t{h} * P + p] = y;
      }
      if (j == L - 1) {
        for (int p = 0; p < P; ++p) {
          for (int n = 0; n < N; ++n) {
            float acc = gamma * Sh[int64_t{p} * N + n];
            for (int s = 0; s < L; ++s) acc = std::fma(dec[s] * xdt(s, p), Bs(s)[n], acc);
            Sh[int64_t{p} * N + n] = acc;
          }
        }
      }
    }
    SetChunkPending(header, (j + 1) % L);
  }
}

}  // namespace llamay::kernels
