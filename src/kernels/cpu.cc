#include "kernels/cpu.h"

#include "base/cpu.h"

namespace llamay::kernels {

Isa DetectIsa() {
  // The AVX2 paths also use FMA and F16C (base/cpu.h reads all three, with the OS's YMM support).
  static const Isa isa = [] {
    const CpuFeatures& f = GetCpuFeatures();
    return f.avx2 && f.fma && f.f16c ? Isa::kAvx2 : Isa::kScalar;
  }();
  return isa;
}

std::string_view IsaName(Isa isa) { return isa == Isa::kAvx2 ? "avx2" : "scalar"; }

}  // namespace llamay::kernels
