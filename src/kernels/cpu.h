// Which instruction set the kernels use, detected once at run time.
//
// Every kernel has a portable scalar version (reference/, the source of truth) and, where it matters, an
// AVX2/FMA/F16C version selected when the CPU has all three; a few hot kernels (the Q8_0-activation tile
// kernels of the matmul, the batched Q4_K one) also have an AVX-512 VNNI version. All give bit-identical results (see vec_dot.h
// for the fixed reduction orders that make that possible), so an Isa argument is only a speed choice;
// tests pass each level explicitly to compare them. The levels are ordered: kAvx512 implies everything
// kAvx2 uses, and a kernel without an AVX-512 version runs its AVX2 one.
//
// Off x86-64 (aarch64), every kernel takes its scalar path: the x86 code is fenced by `#if
// defined(__x86_64__)`, and scripts/cross-aarch64-test builds the kernels and their tests for aarch64 with
// -Werror and runs them under qemu-user. That is the seam for NEON: a level (say kNeon) detected here, its
// kernel files beside the AVX2 ones under `#if defined(__aarch64__)`, chosen where the AVX2 versions are, in
// the same canonical order (vec_dot.h) so they give the same bits, and tested by the same command.
//
// LLAMAY_ISA=scalar|avx2|avx512 in the environment caps the detected level (benchmarks compare levels in
// one run; a user can rule out a kernel). It can only lower the level, never claim what the CPU lacks.
// Thread-safety: DetectIsa is safe to call from any thread.
#ifndef LLAMAY_KERNELS_CPU_H_
#define LLAMAY_KERNELS_CPU_H_

#include <string_view>

namespace llamay::kernels {

enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

// kAvx512 when the CPU (and OS) support AVX-512 F/BW/VL and VNNI as well as the AVX2 set; kAvx2 when it
// supports AVX2, FMA and F16C (and the build targets x86-64); else kScalar. Capped by LLAMAY_ISA.
Isa DetectIsa();
// The best level this CPU supports, ignoring LLAMAY_ISA (tests use it to know which levels they can run).
Isa SupportedIsa();
std::string_view IsaName(Isa isa);

// True when the AVX2 kernels may run at this level.
inline bool UsesAvx2(Isa isa) { return isa >= Isa::kAvx2; }

}  // namespace llamay::kernels

#endif  // LLAMAY_KERNELS_CPU_H_
