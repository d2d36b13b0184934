// SamplingParams: the knobs of one generation request's sampler (llama.cpp's names and defaults, OpenAI's
// frequency/presence penalties), and their validation.
//
// Each knob has a value that switches its step off: temperature 0 (greedy), top_k 0, top_p 1, min_p 0,
// repeat_penalty 1, repeat_last_n 0, frequency_penalty 0 and presence_penalty 0. What each step does, and in
// which order, is documented in sampling/sampler.h.
//
// Invariant: a Sampler is only ever built from params whose Validate() is OK.
// Thread-safety: a plain value.
#ifndef LLAMAY_SAMPLING_SAMPLING_PARAMS_H_
#define LLAMAY_SAMPLING_SAMPLING_PARAMS_H_

#include <cstdint>

#include "base/status.h"

namespace llamay::sampling {

struct SamplingParams {
  float temperature = 0.8f;     // >= 0; 0 = greedy (argmax of the penalised logits)
  int top_k = 40;               // >= 0; 0 = off
  float top_p = 0.95f;          // in (0, 1]; 1 = off
  float min_p = 0.05f;          // in [0, 1]; 0 = off
  float repeat_penalty = 1.0f;  // > 0; 1 = off
  int repeat_last_n = 64;       // >= -1; the penalty window: 0 = off, -1 = the whole history
  float frequency_penalty = 0;  // in [-2, 2] (OpenAI's range)
  float presence_penalty = 0;   // in [-2, 2] (OpenAI's range)
  uint64_t seed = 0;            // used when has_seed; otherwise the Sampler seeds from std::random_device
  bool has_seed = false;

  // OK, or InvalidArgument naming the first bad field, its allowed range and the value given.
  Status Validate() const;
};

}  // namespace llamay::sampling

#endif  // LLAMAY_SAMPLING_SAMPLING_PARAMS_H_
