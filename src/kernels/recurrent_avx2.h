// Internal to kernels/: AVX2 versions of the recurrent kernels of recurrent.h (same bits as
// reference/recurrent_ref.cc). Arguments as validated by recurrent.cc.
#ifndef LLAMAY_KERNELS_RECURRENT_AVX2_H_
#define LLAMAY_KERNELS_RECURRENT_AVX2_H_

#include "kernels/recurrent.h"

namespace llamay::kernels::avx2 {

void CausalConv1d(const CausalConv1dArgs& a);

}  // namespace llamay::kernels::avx2

#endif  // LLAMAY_KERNELS_RECURRENT_AVX2_H_
