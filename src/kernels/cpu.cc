#include "kernels/cpu.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace llamay::kernels {
namespace {

#if defined(__x86_64__)
// F16C through CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does not know "f16c".
bool HasF16c() {
  unsigned eax, ebx, ecx, edx;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
}
#endif

}  // namespace

Isa DetectIsa() {
#if defined(__x86_64__)
  static const Isa isa =
      (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && HasF16c()) ? Isa::kAvx2 : Isa::kScalar;
  return isa;
#else
  return Isa::kScalar;
#endif
}

std::string_view IsaName(Isa isa) { return isa == Isa::kAvx2 ? "avx2" : "scalar"; }

}  // namespace llamay::kernels
