// Internal to kernels/: the per-value-head entry points of the chunked gated delta rule (delta_rule.h) for
// the SIMD paths (delta_rule_avx2.cc, delta_rule_avx512.cc, delta_rule_neon.cc). delta_rule.cc validates
// the arguments, reads the pending count once, runs the heads (possibly on several threads) and afterwards
// writes what the heads share: the pending keys and the pending count.
#ifndef LLAMAY_KERNELS_DELTA_RULE_SIMD_H_
#define LLAMAY_KERNELS_DELTA_RULE_SIMD_H_

#include <cstdint>

#include "kernels/delta_rule.h"

namespace llamay::kernels {

// One value head h of a call. a: n_k_heads == n_v_heads == 1, state = the head's S [Dk][Dv], q and k offset
// to key head h % Hk, v, g, beta and out offset to head h, every stride explicit (non-zero).
struct DeltaChunkHeadArgs {
  GatedDeltaRuleArgs a;
  int pending = 0;                // m, the pending count before the call (as read once by the dispatcher)
  const float* pend_k = nullptr;  // slot s's key at pend_k + s * pend_k_stride (read only: shared)
  int64_t pend_k_stride = 0;
  float* pend_delta = nullptr;  // slot s's delta at pend_delta + s * pend_delta_stride (this head's)
  int64_t pend_delta_stride = 0;
  float* pend_eg = nullptr;  // slot s's decay at pend_eg[s * pend_eg_stride] (this head's)
  int64_t pend_eg_stride = 0;
};

// Each runs the head's tokens as delta_rule.h states, folds every completed chunk into a.state, and at the
// end writes this head's pending delta and eg slots of every slot the call's tokens occupied (the last token
// in each). They read pending keys and never write them.
#if defined(__x86_64__)
namespace avx2 {
void GatedDeltaChunkHead(const DeltaChunkHeadArgs& h);
}  // namespace avx2
namespace avx512 {
void GatedDeltaChunkHead(const DeltaChunkHeadArgs& h);
}  // namespace avx512
#endif
#if defined(__aarch64__)
namespace neon {
void GatedDeltaChunkHead(const DeltaChunkHeadArgs& h);
}  // namespace neon
#endif

}  // namespace llamay::kernels

#endif  // LLAMAY_KERNELS_DELTA_RULE_SIMD_H_
