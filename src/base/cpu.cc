#include "base/cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace llamay {
namespace {

CpuFeatures Detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  f.sse42 = (c >> 20) & 1;
  const bool osxsave = (c >> 27) & 1;
  bool ymm = false, zmm = false;
  if (osxsave) {
    unsigned lo, hi;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    ymm = (lo & 0x6) == 0x6;     // XMM and YMM state enabled by the OS
    zmm = (lo & 0xE6) == 0xE6;   // and the opmask and both halves of the ZMM state
  }
  f.avx = ((c >> 28) & 1) && ymm;
  f.fma = ((c >> 12) & 1) && f.avx;
  f.f16c = ((c >> 29) & 1) && f.avx;
  if (__get_cpuid_max(0, nullptr) >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    f.avx2 = ((b >> 5) & 1) && f.avx;
    f.avx512f = ((b >> 16) & 1) && zmm;
    f.avx512bw = ((b >> 30) & 1) && f.avx512f;
    f.avx512vl = ((b >> 31) & 1) && f.avx512f;
    f.avx512vnni = ((c >> 11) & 1) && f.avx512f;
  }
#endif
  return f;
}

}  // namespace

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

}  // namespace llamay
