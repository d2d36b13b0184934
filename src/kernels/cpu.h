// Which instruction set the kernels use, detected once at run time.
//
// Every kernel has a portable scalar version (reference/, the source of truth) and, where it matters, an
// AVX2/FMA/F16C version selected when the CPU has all three. Both give bit-identical results (see
// vec_dot.h for the fixed reduction orders that make that possible), so an Isa argument is only a speed
// choice; tests pass kScalar explicitly to compare the two.
// Thread-safety: DetectIsa is safe to call from any thread.
#ifndef LLAMAY_KERNELS_CPU_H_
#define LLAMAY_KERNELS_CPU_H_

#include <string_view>

namespace llamay::kernels {

enum class Isa { kScalar = 0, kAvx2 = 1 };

// kAvx2 when the CPU supports AVX2, FMA and F16C (and the build targets x86-64), else kScalar.
Isa DetectIsa();
std::string_view IsaName(Isa isa);

}  // namespace llamay::kernels

#endif  // LLAMAY_KERNELS_CPU_H_
