// Rng: the sampler's random number generator, specified bit for bit so that a seed reproduces the same
// tokens on every machine and standard library.
//
// The generator is xoshiro256** (Blackman and Vigna); its 256-bit state is filled from the 64-bit seed by
// four successive outputs of splitmix64. NextDouble() takes the top 53 bits of one output: k * 2^-53, a
// uniform double in [0, 1). std::uniform_real_distribution and std::discrete_distribution are not used: their
// algorithms are implementation-defined.
//
// Invariant: the state is never all zero (splitmix64 cannot output four zeros in a row).
// Thread-safety: a value; not safe to share between threads.
#ifndef LLAMAY_SAMPLING_RNG_H_
#define LLAMAY_SAMPLING_RNG_H_

#include <array>
#include <cstdint>

namespace llamay::sampling {

// One step of splitmix64: advances *state and returns the next output.
uint64_t SplitMix64(uint64_t* state);

class Rng {
 public:
  explicit Rng(uint64_t seed);
  // A given state, for checking against the algorithm's published outputs. REQUIRES: not all zero.
  explicit Rng(const std::array<uint64_t, 4>& state);

  uint64_t Next();
  // Uniform in [0, 1) with 53 random bits; consumes exactly one Next().
  double NextDouble();

 private:
  uint64_t s_[4];
};

}  // namespace llamay::sampling

#endif  // LLAMAY_SAMPLING_RNG_H_
