// Which instruction set the kernels use, detected once at run time.
//
// Every kernel has a portable scalar version (reference/, the source of truth) and, where it matters, a SIMD
// version per instruction-set family. All give bit-identical results (see vec_dot.h for the fixed reduction
// orders that make that possible), so an Isa argument is only a speed choice; tests pass each level
// explicitly to compare them.
//
// x86-64: an AVX2/FMA/F16C version selected when the CPU has all three; a few hot kernels (the
// Q8_0-activation tile kernels of the matmul, the batched Q4_K one, attention, the chunked SSM scan and
// gated delta rule) also have an AVX-512 version.
// kAvx512 implies everything kAvx2 uses, and a kernel without an AVX-512 version runs its AVX2 one.
//
// aarch64: kNeon, the baseline Advanced SIMD set that every aarch64 CPU has (no optional extension such as
// the dot product instructions). The weight matmul tile kernels (matmul_neon_{q,k,f}.cc: every weight type),
// the paged attention's decode, score and accumulate steps (attention_neon.cc), the ops RmsNorm, Silu,
// Gelu, SwiGlu and Softmax (ops_neon.cc; also the attention's softmax step, and the recurrent layers' GeGlu
// and gated group norm, which call them) and the recurrent layers' convolution, SSM scan and delta rule
// (recurrent_neon.cc) have NEON versions; only rope takes its scalar path at kNeon. They keep the
// canonical order of vec_dot.h and repeat RefExp's operations, so they give the scalar bits;
// scripts/cross-aarch64-test builds the kernels and their tests for aarch64 with -Werror and runs them
// under qemu-user, comparing kNeon with kScalar.
//
// The two families exclude each other: x86 code is fenced by `#if defined(__x86_64__)`, NEON code by `#if
// defined(__aarch64__)`, and the predicates below never let an x86 kernel run at kNeon or a NEON kernel at an
// x86 level (compare levels only through them, not with < or >=: the enum values are not one scale).
//
// LLAMAY_ISA=scalar|avx2|avx512|neon in the environment caps the detected level (benchmarks compare levels
// in one run; a user can rule out a kernel). It can only lower the level within the CPU's family (or to
// scalar), never claim what the CPU lacks.
// Thread-safety: DetectIsa is safe to call from any thread.
#ifndef LLAMAY_KERNELS_CPU_H_
#define LLAMAY_KERNELS_CPU_H_

#include <string_view>

namespace llamay::kernels {

enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kNeon = 3 };

// x86-64: kAvx512 when the CPU (and OS) support AVX-512 F/BW/VL and VNNI as well as the AVX2 set; kAvx2 when
// it supports AVX2, FMA and F16C. aarch64: kNeon. Else kScalar. Capped by LLAMAY_ISA.
Isa DetectIsa();
// The best level this CPU supports, ignoring LLAMAY_ISA (tests use it to know which levels they can run).
Isa SupportedIsa();
std::string_view IsaName(Isa isa);

// True when the AVX2 kernels may run at this level.
inline bool UsesAvx2(Isa isa) { return isa == Isa::kAvx2 || isa == Isa::kAvx512; }
// True when the AVX-512 kernels may run at this level.
inline bool UsesAvx512(Isa isa) { return isa == Isa::kAvx512; }
// True when the NEON kernels may run at this level.
inline bool UsesNeon(Isa isa) { return isa == Isa::kNeon; }
// True when a CPU whose best level is `have` can run level `want`: scalar always, else the same family at a
// level no higher than `have`.
inline bool IsaCovers(Isa have, Isa want) {
  return want == Isa::kScalar || want == have || (want == Isa::kAvx2 && UsesAvx2(have));
}

}  // namespace llamay::kernels

#endif  // LLAMAY_KERNELS_CPU_H_
