#include "base/crc32c.h"

#include "base/cpu.h"

#include <array>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define LLAMAY_CRC_X86 1
#endif

namespace llamay {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;

// tables[k][b]: the CRC of byte b followed by k zero bytes.
struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  constexpr Tables() {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b;
      for (int i = 0; i < 8; ++i) c = (c >> 1) ^ ((c & 1u) ? kPoly : 0u);
      t[0][b] = c;
    }
    for (int k = 1; k < 8; ++k)
      for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFFu];
  }
};
constexpr Tables kTables;

#ifdef LLAMAY_CRC_X86
// The crc32 instruction has a latency of 3 cycles and a throughput of 1 per cycle, so one dependency
// chain runs at a third of the possible speed. Large inputs are cut into blocks of three lanes of
// kLane bytes processed in one loop, and the lanes are joined with the linear "advance by kLane zero
// bytes" operator: raw(s, A|B|C) = adv(adv(raw(s, A)) ^ raw(0, B)) ^ raw(0, C), where raw is the CRC
// register without the initial and final inversion.
// Two lane sizes: 8 KiB for large inputs, and 1360 bytes so that the 4 KiB pieces a socket delivers (a
// streamed snapshot upload checks each as it arrives) still run three chains: 3 x 1360 = 4080.
constexpr size_t kLane = 8192;
constexpr size_t kSmallLane = 1360;

__attribute__((target("sse4.2"))) uint32_t RawSse42(uint32_t state, const uint8_t* p, size_t n) {
  uint64_t c = state;
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

// adv(x) for x split into bytes: table[k][b] = adv(b << 8k), advancing by `lane` zero bytes.
template <size_t lane>
struct Advance {
  uint32_t table[4][256];
  Advance() {
    static const uint8_t zeros[lane] = {};
    uint32_t basis[32];
    for (int i = 0; i < 32; ++i) basis[i] = RawSse42(1u << i, zeros, lane);
    for (int k = 0; k < 4; ++k)
      for (uint32_t b = 0; b < 256; ++b) {
        uint32_t v = 0;
        for (int bit = 0; bit < 8; ++bit)
          if (b & (1u << bit)) v ^= basis[8 * k + bit];
        table[k][b] = v;
      }
  }
  uint32_t operator()(uint32_t x) const {
    return table[0][x & 0xFF] ^ table[1][(x >> 8) & 0xFF] ^ table[2][(x >> 16) & 0xFF] ^ table[3][x >> 24];
  }
};

// Blocks of three lanes of `lane` bytes from *p while they last; returns the raw state.
template <size_t lane>
__attribute__((target("sse4.2"))) uint32_t ThreeLanes(uint32_t state, const uint8_t*& p, size_t& n) {
  static const Advance<lane> adv;
  while (n >= 3 * lane) {
    uint64_t a = state, b = 0, c = 0;
    for (size_t i = 0; i < lane; i += 8) {
      uint64_t wa, wb, wc;
      std::memcpy(&wa, p + i, 8);
      std::memcpy(&wb, p + lane + i, 8);
      std::memcpy(&wc, p + 2 * lane + i, 8);
      a = _mm_crc32_u64(a, wa);
      b = _mm_crc32_u64(b, wb);
      c = _mm_crc32_u64(c, wc);
    }
    state = adv(adv(static_cast<uint32_t>(a)) ^ static_cast<uint32_t>(b)) ^ static_cast<uint32_t>(c);
    p += 3 * lane;
    n -= 3 * lane;
  }
  return state;
}

__attribute__((target("sse4.2"))) uint32_t ExtendSse42(uint32_t crc, const uint8_t* p, size_t n) {
  uint32_t state = ~crc;
  if (n >= 3 * kLane) state = ThreeLanes<kLane>(state, p, n);
  if (n >= 3 * kSmallLane) state = ThreeLanes<kSmallLane>(state, p, n);
  return ~RawSse42(state, p, n);
}

bool HaveSse42() {
  return GetCpuFeatures().sse42;
}
#endif

}  // namespace

uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  const auto& t = kTables.t;
  uint32_t c = ~crc;
  while (n >= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);  // little-endian host assumed (x86-64, aarch64)
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
        t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xFF];
  return ~c;
}

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n) {
#ifdef LLAMAY_CRC_X86
  if (HaveSse42()) return ExtendSse42(crc, static_cast<const uint8_t*>(data), n);
#endif
  return Crc32cExtendPortable(crc, data, n);
}

}  // namespace llamay
