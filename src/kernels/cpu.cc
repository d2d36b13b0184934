#include "kernels/cpu.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/cpu.h"

namespace llamay::kernels {

Isa SupportedIsa() {
  static const Isa isa = [] {
#if defined(__x86_64__)
    // The AVX2 paths also use FMA and F16C (base/cpu.h reads all three, with the OS's YMM support).
    const CpuFeatures& f = GetCpuFeatures();
    if (!(f.avx2 && f.fma && f.f16c)) return Isa::kScalar;
    if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni) return Isa::kAvx512;
    return Isa::kAvx2;
#elif defined(__aarch64__)
    return Isa::kNeon;  // Advanced SIMD is part of the aarch64 baseline
#else
    return Isa::kScalar;
#endif
  }();
  return isa;
}

Isa DetectIsa() {
  static const Isa isa = [] {
    const Isa best = SupportedIsa();
    const char* cap = std::getenv("LLAMAY_ISA");
    if (cap == nullptr || *cap == '\0') return best;
    const std::string c = cap;
    Isa want = best;
    if (c == "scalar") {
      want = Isa::kScalar;
    } else if (c == "avx2") {
      want = Isa::kAvx2;
    } else if (c == "avx512") {
      want = Isa::kAvx512;
    } else if (c == "neon") {
      want = Isa::kNeon;
    } else {
      std::fprintf(stderr, "llamay: ignoring LLAMAY_ISA=%s (expected scalar, avx2, avx512 or neon)\n", cap);
    }
    // A level of another family (or above the CPU's) leaves the best one: the cap never claims a kernel the
    // CPU cannot run.
    if (IsaCovers(best, want)) return want;
    if (want != best) {
      std::fprintf(stderr, "llamay: LLAMAY_ISA=%s is not a level this CPU runs; using %s\n", cap,
                   std::string(IsaName(best)).c_str());
    }
    return best;
  }();
  return isa;
}

std::string_view IsaName(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kNeon:
      return "neon";
    default:
      return "scalar";
  }
}

}  // namespace llamay::kernels
