// Dispatch of the chunked SSM scan (ssm_scan.h): argument checks, the split of heads over threads, the
// choice between the AVX-512 or AVX2 (x86-64) or NEON (aarch64) per-head kernels and the scalar reference
// (which gives the same bits), and the writes of the state shared by all heads (pending B, header) once the
// heads are done.
#include "kernels/ssm_scan.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "kernels/ssm_scan_simd.h"

namespace llamay::kernels {
namespace {

int64_t Stride(int64_t given, int64_t packed) { return given != 0 ? given : packed; }

void CheckScan(const SsmScanArgs& a) {
  LLAMAY_CHECK(a.n_tokens >= 0 && a.n_heads > 0 && a.head_dim > 0 && a.d_state > 0) << "bad ssm shape";
  LLAMAY_CHECK(a.n_groups > 0 && a.n_heads % a.n_groups == 0)
      << "ssm heads " << a.n_heads << " not a multiple of groups " << a.n_groups;
  const int64_t hp = int64_t{a.n_heads} * a.head_dim;
  LLAMAY_CHECK(Stride(a.x_stride, hp) >= hp && Stride(a.y_stride, hp) >= hp &&
               Stride(a.dt_stride, a.n_heads) >= a.n_heads &&
               Stride(a.bc_stride, int64_t{a.n_groups} * a.d_state) >= int64_t{a.n_groups} * a.d_state)
      << "ssm row stride shorter than a row";
  LLAMAY_CHECK(a.n_tokens == 0 || (a.state != nullptr && a.x != nullptr && a.dt != nullptr &&
                                   a.a != nullptr && a.b != nullptr && a.c != nullptr && a.y != nullptr))
      << "ssm scan lacks an array";
}

enum class Path { kAvx512, kAvx2, kNeon, kReference };

Path ChoosePath([[maybe_unused]] Isa isa) {
#if defined(__x86_64__)
  if (UsesAvx512(isa)) return Path::kAvx512;
  if (UsesAvx2(isa)) return Path::kAvx2;
#elif defined(__aarch64__)
  if (UsesNeon(isa)) return Path::kNeon;
#endif
  return Path::kReference;
}

void RunHead(Path path, const SsmScanArgs& a, int h, int m) {
#if defined(__x86_64__)
  if (path == Path::kAvx512) return avx512::SsmScanHead(a, h, m);
  if (path == Path::kAvx2) return avx2::SsmScanHead(a, h, m);
#elif defined(__aarch64__)
  if (path == Path::kNeon) return neon::SsmScanHead(a, h, m);
#endif
  (void)path, (void)a, (void)h, (void)m;
}

}  // namespace

int64_t SsmScanStateFloats(int n_heads, int head_dim, int d_state, int n_groups) {
  const int64_t H = n_heads, P = head_dim, N = d_state, G = n_groups;
  return H * P * N + kChunkHeaderFloats + int64_t{kRecurrentChunk} * (H * P + G * N + H);
}

void SsmScan(const SsmScanArgs& a, ThreadPool* pool, Isa isa) {
  CheckScan(a);
  if (a.n_tokens == 0) return;
  const Path path = ChoosePath(isa);
  // The reference runs token by token over all heads (its pending slots interleave the heads): one thread.
  if (path == Path::kReference) return RefSsmScan(a);
  constexpr int L = kRecurrentChunk;
  const SsmScanParts parts = SsmScanStateParts(a);
  // Read once: every head runs with this m; the header changes only after all heads are done.
  const int m = ChunkPending(parts.header);
  if (pool == nullptr || pool->num_threads() == 1 || a.n_heads == 1) {
    for (int h = 0; h < a.n_heads; ++h) RunHead(path, a, h, m);
  } else {
    pool->ParallelFor(a.n_heads, [&](int64_t h, int) { RunHead(path, a, static_cast<int>(h), m); });
  }
  // The heads have read the old B slots; now the call's last min(T, L) tokens (token t to slot (m + t) % L:
  // each slot ends with the latest token at its position, as in the reference).
  const int64_t T = a.n_tokens, G = a.n_groups, N = a.d_state;
  const int64_t bcs = Stride(a.bc_stride, G * N);
  for (int64_t t = std::max<int64_t>(0, T - L); t < T; ++t) {
    const int64_t slot = (m + t) % L;
    for (int64_t g = 0; g < G; ++g)
      std::memcpy(parts.b + (slot * G + g) * N, a.b + t * bcs + g * N, sizeof(float) * N);
  }
  SetChunkPending(parts.header, static_cast<int>((m + T) % L));
}

}  // namespace llamay::kernels
