// Dispatch of the chunked SSM scan (ssm_scan.h): argument checks, the split of heads over threads, the
// choice between the AVX-512 or AVX2 (x86-64) or NEON (aarch64) kernels and the scalar reference (which
// gives the same bits), the chunk driver those kernels share (ssm_scan_simd.h), and the writes of the state
// shared by all heads (pending B, header) once the heads are done.
#include "kernels/ssm_scan.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "kernels/reference/reference.h"
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

// The SIMD kernels of this level, or null for the scalar reference.
const SsmScanKernels* ChooseKernels([[maybe_unused]] Isa isa) {
#if defined(__x86_64__)
  if (UsesAvx512(isa)) return &avx512::kSsmScanKernels;
  if (UsesAvx2(isa)) return &avx2::kSsmScanKernels;
#elif defined(__aarch64__)
  if (UsesNeon(isa)) return &neon::kSsmScanKernels;
#endif
  return nullptr;
}

// The parts of one layer's state (ssm_scan.h): S [H][P][N], the header, then the pending inputs
// xdt [L][H][P], B [L][G][N], dA [L][H].
struct SsmScanParts {
  float* s;
  float* header;
  float* xdt;
  float* b;
  float* da;
};

SsmScanParts SsmScanStateParts(const SsmScanArgs& a) {
  const int64_t H = a.n_heads, P = a.head_dim, N = a.d_state, G = a.n_groups, L = kRecurrentChunk;
  SsmScanParts s;
  s.s = a.state;
  s.header = s.s + H * P * N;
  s.xdt = s.header + kChunkHeaderFloats;
  s.b = s.xdt + L * H * P;
  s.da = s.b + L * G * N;
  return s;
}

// Per-thread scratch of one head's chunk (reused across calls: decode runs it once per token).
struct Scratch {
  std::vector<float> xdt, inter, w;  // [L][Pp] each
  std::vector<float> bc;             // [L][L]: bc[j][s] = FmaDot8(B_s, C_j)
};

// Head h of a call whose state had m pending tokens when the call began, with kernels k. Reads the stored
// pending inputs of slots [0, m) (B of every group: read only), updates the head's S, and at the end writes
// the head's own pending xdt and dA slots of the call's last min(T, L) tokens (token t to slot (m + t) % L).
// The group-shared B slots and the header are SsmScan's to write once every head is done.
void RunHead(const SsmScanKernels& k, const SsmScanArgs& a, int h, int m) {
  constexpr int L = kRecurrentChunk;
  const int H = a.n_heads, P = a.head_dim, N = a.d_state, G = a.n_groups;
  const int64_t g = h / (H / G);
  const int64_t T = a.n_tokens, xs = Stride(a.x_stride, int64_t{H} * P), dts = Stride(a.dt_stride, H),
                bcs = Stride(a.bc_stride, int64_t{G} * N), ys = Stride(a.y_stride, int64_t{H} * P);
  const SsmScanParts parts = SsmScanStateParts(a);
  float* S = parts.s + int64_t{h} * P * N;
  const int Pp = (P + k.pad - 1) / k.pad * k.pad;  // local rows padded to whole registers
  thread_local Scratch scratch;
  if (static_cast<int64_t>(scratch.xdt.size()) < int64_t{L} * Pp) {
    scratch.xdt.assign(int64_t{L} * Pp, 0.0f);
    scratch.inter.assign(int64_t{L} * Pp, 0.0f);
    scratch.w.assign(int64_t{L} * Pp, 0.0f);
  }
  scratch.bc.resize(L * L);
  float* xdt = scratch.xdt.data();  // xdt[j * Pp + p]
  float* inter = scratch.inter.data();
  float* bc = scratch.bc.data();
  float dA[L], dth[L];
  const float* Bp[L];  // B_j of the chunk's tokens: stored slots for j < m of the first chunk, else input
  const float* Cp[L];  // C of the tokens output in this chunk
  const float* Srows[64];

  for (int s = 0; s < m; ++s) {
    dA[s] = parts.da[int64_t{s} * H + h];
    std::copy_n(parts.xdt + (int64_t{s} * H + h) * P, P, xdt + s * Pp);
    Bp[s] = parts.b + (int64_t{s} * G + g) * N;
  }
  SsmChunkOutputs out;
  out.head_dim = P;
  out.padded = Pp;
  out.xdt = xdt;
  out.inter = inter;
  out.x_stride = xs;
  out.y_stride = ys;
  out.d = a.d != nullptr ? a.d + h : nullptr;
  int j0 = m;
  for (int64_t t0 = 0; t0 < T;) {
    const int j1 = static_cast<int>(std::min<int64_t>(L, j0 + (T - t0)));
    // This chunk's new tokens: dt, dA, xdt, and where their B and C are.
    for (int j = j0; j < j1; ++j) {
      const int64_t t = t0 + (j - j0);
      float v = a.dt[t * dts + h];
      if (a.dt_bias != nullptr) v = v + a.dt_bias[h];
      dth[j] = RefSoftplus(v);
      dA[j] = RefExp(dth[j] * a.a[h]);
      Bp[j] = a.b + t * bcs + g * N;
      Cp[j] = a.c + t * bcs + g * N;
    }
    const float* x0 = a.x + t0 * xs + int64_t{h} * P;  // token j's x row at x0 + (j - j0) * xs
    k.scale(x0, xs, dth + j0, j1 - j0, P, xdt + j0 * Pp, Pp);
    // inter[j][p] = FmaDot8(S[p], C_j) and bc[j][s] = FmaDot8(B_s, C_j), s <= j.
    for (int p0 = 0; p0 < P; p0 += 64) {
      const int np = std::min(64, P - p0);
      for (int r = 0; r < np; ++r) Srows[r] = S + int64_t{p0 + r} * N;
      k.dots(Srows, np, Cp + j0, j1 - j0, N, inter + j0 * Pp + p0, Pp, false, 0);
    }
    k.dots(Bp, j1, Cp + j0, j1 - j0, N, bc + j0 * L, L, true, j0);
    // The outputs' coefficients, then the outputs across p.
    float dec[L], gamma[L], coef[L][L];
    for (int j = j0; j < j1; ++j) {
      dec[j] = 1.0f;
      for (int s = j - 1; s >= 0; --s) dec[s] = dec[s + 1] * dA[s + 1];
      gamma[j] = dec[0] * dA[0];
      for (int s = 0; s <= j; ++s) coef[j][s] = dec[s] * bc[j * L + s];
    }
    out.j0 = j0;
    out.j1 = j1;
    out.coef = coef;
    out.gamma = gamma;
    out.x = x0;
    out.y = a.y + t0 * ys + int64_t{h} * P;
    k.outputs(out);
    // The fold, with the chunk's last token's dec and gamma.
    if (j1 == L) k.fold(S, P, N, xdt, Pp, dec, Bp, gamma[L - 1], scratch.w.data());
    t0 += j1 - j0;
    j0 = j1 == L ? 0 : j1;
  }
  // The head's own pending slots, once it no longer reads the old ones: the call's last min(T, L) tokens.
  for (int64_t t = std::max<int64_t>(0, T - L); t < T; ++t) {
    const int64_t slot = (m + t) % L;
    parts.da[slot * H + h] = dA[slot];
    std::copy_n(xdt + slot * Pp, P, parts.xdt + (slot * H + h) * P);
  }
}

}  // namespace

int64_t SsmScanStateFloats(int n_heads, int head_dim, int d_state, int n_groups) {
  const int64_t H = n_heads, P = head_dim, N = d_state, G = n_groups;
  return H * P * N + kChunkHeaderFloats + int64_t{kRecurrentChunk} * (H * P + G * N + H);
}

void SsmScan(const SsmScanArgs& a, ThreadPool* pool, Isa isa) {
  CheckScan(a);
  if (a.n_tokens == 0) return;
  const SsmScanKernels* kernels = ChooseKernels(isa);
  // The reference runs token by token over all heads (its pending slots interleave the heads): one thread.
  if (kernels == nullptr) return RefSsmScan(a);
  constexpr int L = kRecurrentChunk;
  const SsmScanParts parts = SsmScanStateParts(a);
  // Read once: every head runs with this m; the header changes only after all heads are done.
  const int m = ChunkPending(parts.header);
  if (pool == nullptr || pool->num_threads() == 1 || a.n_heads == 1) {
    for (int h = 0; h < a.n_heads; ++h) RunHead(*kernels, a, h, m);
  } else {
    pool->ParallelFor(a.n_heads, [&](int64_t h, int) { RunHead(*kernels, a, static_cast<int>(h), m); });
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
