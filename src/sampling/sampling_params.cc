#include "sampling/sampling_params.h"

#include <cmath>
#include <sstream>
#include <string>

namespace llamay::sampling {
namespace {

template <typename T>
Status Bad(const char* field, const char* rule, T value) {
  std::ostringstream os;
  os << field << " must be " << rule << ", got " << value;
  return InvalidArgumentError(os.str());
}

}  // namespace

// Every float test is written so that NaN fails it (comparisons with NaN are false).
Status SamplingParams::Validate() const {
  if (!(temperature >= 0.0f) || !std::isfinite(temperature)) {
    return Bad("temperature", ">= 0 and finite (0 = greedy)", temperature);
  }
  if (top_k < 0) return Bad("top_k", ">= 0 (0 = off)", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) return Bad("top_p", "in (0, 1] (1 = off)", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return Bad("min_p", "in [0, 1] (0 = off)", min_p);
  if (!(repeat_penalty > 0.0f) || !std::isfinite(repeat_penalty)) {
    return Bad("repeat_penalty", "> 0 and finite (1 = off)", repeat_penalty);
  }
  if (repeat_last_n < -1) return Bad("repeat_last_n", ">= -1 (0 = off, -1 = whole history)", repeat_last_n);
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
    return Bad("frequency_penalty", "in [-2, 2]", frequency_penalty);
  }
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
    return Bad("presence_penalty", "in [-2, 2]", presence_penalty);
  }
  return Status::Ok();
}

}  // namespace llamay::sampling
