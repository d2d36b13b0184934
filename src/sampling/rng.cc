#include "sampling/rng.h"

#include "base/check.h"

namespace llamay::sampling {
namespace {

constexpr uint64_t RotateLeft(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

uint64_t SplitMix64(uint64_t* state) {
  *state += 0x9e3779b97f4a7c15ULL;
  uint64_t z = *state;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

Rng::Rng(uint64_t seed) {
  uint64_t sm = seed;
  for (uint64_t& word : s_) word = SplitMix64(&sm);
}

Rng::Rng(const std::array<uint64_t, 4>& state) : s_{state[0], state[1], state[2], state[3]} {
  LLAMAY_CHECK((s_[0] | s_[1] | s_[2] | s_[3]) != 0) << "xoshiro256** state must not be all zero";
}

uint64_t Rng::Next() {
  const uint64_t result = RotateLeft(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = RotateLeft(s_[3], 45);
  return result;
}

double Rng::NextDouble() {
  // 2^-53: the top 53 bits as an integer k in [0, 2^53), times 2^-53, is exact in a double.
  return static_cast<double>(Next() >> 11) * 0x1.0p-53;
}

}  // namespace llamay::sampling
