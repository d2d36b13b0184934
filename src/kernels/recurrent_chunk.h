// The chunk scheme shared by the chunked recurrent scans (ssm_scan.h, delta_rule.h).
//
// A recurrent layer's state is kept as the state at the last chunk boundary (the "fold") plus the inputs of
// the tokens since then (the "pending" tokens, fewer than kRecurrentChunk). A token's output is computed from
// the folded state and the pending tokens by a closed form (the chunked, parallel scan: matrix products over
// the chunk instead of one state update per token); when a chunk's last token has been processed the chunk
// is folded into the state and the pending list restarts.
//
// Why the pending tokens are part of the state: the closed form rounds differently from a per-token update,
// so a token's output must not depend on how tokens were grouped into calls. Every token is computed by the
// same operations from the same folded state and pending inputs whether it arrives alone (decode) or in a
// prefill of thousands; chunk boundaries fall every kRecurrentChunk tokens from the state's origin. Running
// tokens [0, T) in one call therefore gives the bits of running [0, k) then [k, T), for every k, and a
// state copied between calls (a checkpoint, a fork, a snapshot) continues exactly.
//
// Each state starts with the folded state (the layout an earlier, per-token version of these kernels kept,
// so such a state zero-extended is a valid state with nothing pending), then a header of
// kChunkHeaderFloats floats whose first holds the pending count m as an exact float, then the pending
// inputs, one slot per position in the chunk. Token t of a call that starts with m pending writes slot
// (m + t) % kRecurrentChunk, so every slot holds the latest token at its position: slots [0, m) are the
// pending tokens, the others stale but the same whatever the split, and the whole state (not only its
// meaningful part) is bit-identical however tokens were grouped into calls. An all-zero buffer is the
// empty state.
#ifndef LLAMAY_KERNELS_RECURRENT_CHUNK_H_
#define LLAMAY_KERNELS_RECURRENT_CHUNK_H_

#include <cstdint>

namespace llamay::kernels {

// Tokens per chunk: a fold every 16 tokens. The pending inputs of up to 16 tokens are stored with the state:
// about 16/N more bytes (Mamba-2 with d_state 128: +13%; the gated delta rule with 128 x 128 heads: +19%
// with half as many key heads as value heads, as Qwen3.5, +25% with as many).
inline constexpr int kRecurrentChunk = 16;
inline constexpr int kChunkHeaderFloats = 16;

// The pending count stored in a header. A value that is not an integer in [0, kRecurrentChunk) (NaN, a
// fraction, out of range: a damaged state) reads as 0, so no state can make a kernel read outside it.
inline int ChunkPending(const float* header) {
  const float m = header[0];
  if (!(m >= 0.0f && m < static_cast<float>(kRecurrentChunk))) return 0;
  const int i = static_cast<int>(m);
  return static_cast<float>(i) == m ? i : 0;
}
inline void SetChunkPending(float* header, int m) { header[0] = static_cast<float>(m); }

}  // namespace llamay::kernels

#endif  // LLAMAY_KERNELS_RECURRENT_CHUNK_H_
