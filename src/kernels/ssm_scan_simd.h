// Internal to kernels/: the per-head SIMD entry points of the chunked SSM scan (ssm_scan.h) and the state
// layout they share with the dispatcher (ssm_scan.cc). Arguments as validated by ssm_scan.cc.
#ifndef LLAMAY_KERNELS_SSM_SCAN_SIMD_H_
#define LLAMAY_KERNELS_SSM_SCAN_SIMD_H_

#include <cstdint>

#include "kernels/recurrent_chunk.h"
#include "kernels/ssm_scan.h"

namespace llamay::kernels {

// The parts of one layer's state (ssm_scan.h): S [H][P][N], the header, then the pending inputs
// xdt [L][H][P], B [L][G][N], dA [L][H].
struct SsmScanParts {
  float* s;
  float* header;
  float* xdt;
  float* b;
  float* da;
};
inline SsmScanParts SsmScanStateParts(const SsmScanArgs& a) {
  const int64_t H = a.n_heads, P = a.head_dim, N = a.d_state, G = a.n_groups, L = kRecurrentChunk;
  SsmScanParts s;
  s.s = a.state;
  s.header = s.s + H * P * N;
  s.xdt = s.header + kChunkHeaderFloats;
  s.b = s.xdt + L * H * P;
  s.da = s.b + L * G * N;
  return s;
}

// Head h of a call whose state had m pending tokens when the call began (the dispatcher reads m once). Reads
// the stored pending inputs of slots [0, m) (B of every group: read only), updates the head's S, and at the
// end writes the head's own pending xdt and dA slots of the call's last min(T, L) tokens (token t to slot
// (m + t) % L). The group-shared B slots and the header are the dispatcher's to write once every head is
// done. Each gives the bits of RefSsmScan.
namespace avx2 {
void SsmScanHead(const SsmScanArgs& a, int h, int m);
}  // namespace avx2
namespace avx512 {
void SsmScanHead(const SsmScanArgs& a, int h, int m);
}  // namespace avx512
namespace neon {
void SsmScanHead(const SsmScanArgs& a, int h, int m);
}  // namespace neon

}  // namespace llamay::kernels

#endif  // LLAMAY_KERNELS_SSM_SCAN_SIMD_H_
