// CPU features, read once with cpuid (x86-64). Both g++ 12 and clang 14 accept this, unlike
// __builtin_cpu_supports, whose feature names differ between them (clang 14 lacks "f16c").
// Thread-safety: the result is computed once, thread-safely.
#ifndef LLAMAY_BASE_CPU_H_
#define LLAMAY_BASE_CPU_H_

namespace llamay {

struct CpuFeatures {
  bool sse42 = false;
  bool avx = false;   // including OS support for the YMM state
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  // AVX-512 F/BW/VL and VNNI, each only with OS support for the ZMM and opmask state.
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512vnni = false;
};

const CpuFeatures& GetCpuFeatures();

}  // namespace llamay

#endif  // LLAMAY_BASE_CPU_H_
