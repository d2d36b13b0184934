// LogitsProcessor: one request's filter on the next token's logits, applied by the engine's decode loop
// before the sampler (Request::processors, in order). A grammar constraint (grammar_constraint.h) is one;
// any surface (the server, the CLI, a test) can add its own without a second decode loop.
//
// Per step the engine calls, in this order: Process on every processor (each sees the logits the one before
// it left), the sampler on the result, then Accept(token) on every processor with the token chosen. A
// processor that wants to end generation leaves only end-of-generation tokens allowed. An error from either
// call ends the request (FinishReason::kError, the error in the final event); so does a step where every
// logit became -infinity.
//
// State: a processor belongs to one request; the engine keeps it through preemption (the request resumes
// with its processors as they were) and drops it when the request ends. Clone() gives an independent copy
// in the current state, for requests that start from a fork of one context (n choices).
//
// Thread-safety: Process and Accept run on the engine's scheduler thread only, one request at a time.
#ifndef LLAMAY_ENGINE_LOGITS_PROCESSOR_H_
#define LLAMAY_ENGINE_LOGITS_PROCESSOR_H_

#include <cstdint>
#include <memory>
#include <span>

#include "base/status.h"

namespace llamay::engine {

class LogitsProcessor {
 public:
  virtual ~LogitsProcessor() = default;
  // Adjusts the next token's logits ([n_vocab]) in place (a disallowed token: -infinity).
  virtual Status Process(std::span<float> logits) = 0;
  // The token the sampler chose (an end-of-generation token too).
  virtual Status Accept(int32_t token) = 0;
  // An independent copy in the current state.
  virtual std::unique_ptr<LogitsProcessor> Clone() const = 0;
};

}  // namespace llamay::engine

#endif  // LLAMAY_ENGINE_LOGITS_PROCESSOR_H_
