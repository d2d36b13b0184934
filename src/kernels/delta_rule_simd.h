// Internal to kernels/: the ISA-specific pieces of the chunked gated delta rule (delta_rule.h), one table per
// SIMD path (delta_rule_avx2.cc, delta_rule_avx512.cc, delta_rule_neon.cc). delta_rule.cc holds the one
// driver they share: it validates the arguments, reads the pending count once, splits the value heads over
// threads, walks each head's chunks (decays, coefficients, fold weights, pending slots: scalar f32, the
// same bits whatever the ISA) and calls the table for the products, the substitution and the fold.
//
// Why a table of functions rather than a driver template instantiated in each ISA file: the ISA files are
// not built with their own -m flags; their functions carry target attributes (LLAMAY_AVX2, LLAMAY_AVX512)
// and the rest of the library is generic x86-64. A template driver would have to carry each ISA's attribute
// to inline those functions, which a template parameter cannot give it, and otherwise calls them just as
// the table does. So the driver is compiled once, generically, and calls through the table a few times per
// chunk of kRecurrentChunk tokens; every vectorised loop stays inside the ISA's functions. The driver's own
// arithmetic is plain f32 operations, each rounded once (-ffp-contract=off), so compiling it without an
// ISA's target changes no bit.
//
// Thread-safety: the tables are constants; their functions work on caller-owned memory only.
#ifndef LLAMAY_KERNELS_DELTA_RULE_SIMD_H_
#define LLAMAY_KERNELS_DELTA_RULE_SIMD_H_

#include <cstdint>

#include "kernels/delta_rule.h"
#include "kernels/recurrent_chunk.h"

namespace llamay::kernels {

// The coefficients of a chunk's tokens j (delta_rule.h): Gamma_j and, by source token s, Dec(j, s) * kk(s)
// (s < j) and Dec(j, s) * kq(s) (s <= j).
struct DeltaChunkCoefs {
  float gamma[kRecurrentChunk];
  float ck[kRecurrentChunk][kRecurrentChunk];
  float cq[kRecurrentChunk][kRecurrentChunk];
};

// One ISA's pieces, each for one value head (a: n_k_heads == n_v_heads == 1, state = the head's S [Dk][Dv],
// arrays offset to the head, every stride explicit) and for the tokens [j0, j1) of one chunk, at chunk
// index j of token t0 + (j - j0) of the call.
struct DeltaRuleKernels {
  // The driver pads its scratch rows (Dvp floats) to a multiple of `pad`: whole registers.
  int pad;
  // kk[j][s] = FmaDot8(k_s, k_j, Dk) for s < j and kq[j][s] = FmaDot8(k_s, q_j, Dk) for s <= j, for every
  // j in [j0, j1); k_s = kp[s], q_j = qp[j].
  void (*dots)(const float* const* kp, const float* const* qp, int j0, int j1, int Dk,
               float (*kk)[kRecurrentChunk], float (*kq)[kRecurrentChunk]);
  // out row r (stride out_stride, padded to Dvp) = S^T x[r] for r < n, each element the fma chain over i.
  void (*product)(const float* S, int Dv, int Dk, const float* const* x, int n, float* out,
                  int64_t out_stride);
  // The deltas and outputs of tokens [j0, j1), across every column: aq rows 2 (j - j0) and 2 (j - j0) + 1
  // (stride Dvp) hold S^T k_j and S^T q_j; d[s] is delta_s for s < j0 (stored slots) and dbuf row s for
  // s >= j0, where delta_j is written.
  void (*subst)(const GatedDeltaRuleArgs& a, int64_t t0, int j0, int j1, const DeltaChunkCoefs& cf,
                const float* aq, int64_t Dvp, const float* const* d, float* dbuf);
  // S[i][c] = gamma * S[i][c], then fma(w[i][s], d[s][c]) for s = 0..L-1 ascending. w: [Dk][L].
  void (*fold)(float* S, int Dv, int Dk, const float* w, const float* const* d, float gamma);
};

#if defined(__x86_64__)
namespace avx2 {
extern const DeltaRuleKernels kDeltaRuleKernels;
}  // namespace avx2
namespace avx512 {
extern const DeltaRuleKernels kDeltaRuleKernels;
}  // namespace avx512
#endif
#if defined(__aarch64__)
namespace neon {
extern const DeltaRuleKernels kDeltaRuleKernels;
}  // namespace neon
#endif

}  // namespace llamay::kernels

#endif  // LLAMAY_KERNELS_DELTA_RULE_SIMD_H_
