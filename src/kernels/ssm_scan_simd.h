// Internal to kernels/: the ISA-specific pieces of the chunked SSM scan (ssm_scan.h), one table per SIMD path
// (ssm_scan_avx2.cc, ssm_scan_avx512.cc, ssm_scan_neon.cc). ssm_scan.cc holds the one driver they share: it
// validates the arguments, reads the pending count once, splits the heads over threads, walks each head's
// chunks (dt, decays, coefficients, pending slots: scalar f32, the same bits whatever the ISA), calls the
// table for the dot products, the scaled inputs, the outputs and the fold, and writes what the heads share
// (pending B, header) once every head is done. Why a table rather than a template: delta_rule_simd.h.
//
// Thread-safety: the tables are constants; their functions work on caller-owned memory only.
#ifndef LLAMAY_KERNELS_SSM_SCAN_SIMD_H_
#define LLAMAY_KERNELS_SSM_SCAN_SIMD_H_

#include <cstdint>

#include "kernels/recurrent_chunk.h"
#include "kernels/ssm_scan.h"

namespace llamay::kernels {

// The outputs of one head for the tokens [j0, j1) of a chunk, token j being the call's t0 + (j - j0): for
// every p < P, y_j[p] = fma(gamma[j], inter[j][p], intra) with intra the fma chain over s = 0..j ascending
// of coef[j][s] * xdt[s][p], then y_j[p] = fma(x_j[p], *d, y_j[p]) when d is given (ssm_scan.h).
struct SsmChunkOutputs {
  int j0 = 0;
  int j1 = 0;
  int head_dim = 0;              // P
  int64_t padded = 0;            // Pp, the row stride of xdt and inter: P in whole registers
  const float* xdt = nullptr;    // [L][Pp]
  const float* inter = nullptr;  // [L][Pp]: inter[j][p] = FmaDot8(S[p], C_j)
  const float (*coef)[kRecurrentChunk] = nullptr;  // [L][L]: Dec(j, s) * FmaDot8(B_s, C_j), s <= j
  const float* gamma = nullptr;                    // [L]: Gamma_j
  const float* x = nullptr;  // token j's [P] at x + (j - j0) * x_stride (read when d is given)
  int64_t x_stride = 0;
  float* y = nullptr;  // token j's [P] at y + (j - j0) * y_stride
  int64_t y_stride = 0;
  const float* d = nullptr;  // the head's skip weight D[h], or null
};

// One ISA's pieces, for one head of a call.
struct SsmScanKernels {
  // The driver pads its scratch rows (Pp floats) to a multiple of `pad`: whole registers.
  int pad;
  // out[k * ld + r] = FmaDot8(rows[r], cols[k], N) for r < nr, k < nc. With `lower`, only the pairs with
  // r <= k + k_off are needed (the intra dots B_s . C_j, s <= j): the others may be skipped, or written
  // where nobody reads them.
  void (*dots)(const float* const* rows, int nr, const float* const* cols, int nc, int N, float* out,
               int64_t ld, bool lower, int k_off);
  // out[r * ld + p] = x[r * x_stride + p] * f[r] for r < n, p < P (the row's padding may be written too).
  void (*scale)(const float* x, int64_t x_stride, const float* f, int n, int P, float* out, int64_t ld);
  void (*outputs)(const SsmChunkOutputs& o);
  // The fold of a completed chunk into the head's S [P][N], with w [L][Pp] as scratch: w[s][p] = dec[s] *
  // xdt[s][p] (Dec(L - 1, s)), then S[p][n] = gamma * S[p][n] and fma(w[s][p], Bs[s][n]) for s = 0..L-1
  // ascending.
  void (*fold)(float* S, int P, int N, const float* xdt, int64_t Pp, const float* dec, const float* const* Bs,
               float gamma, float* w);
};

#if defined(__x86_64__)
namespace avx2 {
extern const SsmScanKernels kSsmScanKernels;
}  // namespace avx2
namespace avx512 {
extern const SsmScanKernels kSsmScanKernels;
}  // namespace avx512
#endif
#if defined(__aarch64__)
namespace neon {
extern const SsmScanKernels kSsmScanKernels;
}  // namespace neon
#endif

}  // namespace llamay::kernels

#endif  // LLAMAY_KERNELS_SSM_SCAN_SIMD_H_
