// What the AVX-512 kernel files share: the target attributes of their functions. Internal to
// src/kernels; include it only from x86-64 code (inside `#if defined(__x86_64__)`).
//
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wuninitialized (and
// -Wmaybe-uninitialized) report once inlined: the including file turns both off, for the rest of it.
#ifndef LLAMAY_KERNELS_AVX512_UTIL_H_
#define LLAMAY_KERNELS_AVX512_UTIL_H_

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define LLAMAY_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define LLAMAY_AVX512_INLINE \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"), always_inline)) inline

#endif  // LLAMAY_KERNELS_AVX512_UTIL_H_
