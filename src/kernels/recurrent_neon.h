// Internal to kernels/: NEON versions of the recurrent kernels of recurrent.h (recurrent_neon.cc), the same
// bits as reference/recurrent_ref.cc. Only for aarch64 code running at Isa::kNeon. Arguments as validated by
// recurrent.cc.
#ifndef LLAMAY_KERNELS_RECURRENT_NEON_H_
#define LLAMAY_KERNELS_RECURRENT_NEON_H_

#include "kernels/recurrent.h"

namespace llamay::kernels::neon {

void CausalConv1d(const CausalConv1dArgs& a);

}  // namespace llamay::kernels::neon

#endif  // LLAMAY_KERNELS_RECURRENT_NEON_H_
