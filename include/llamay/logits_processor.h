// LogitsProcessor: one request's filter on the next token's logits, applied by the engine's decode loop
// before the sampler, in order. A grammar constraint is one (Session::ConstrainToJsonSchema); a program can
// add its own through GenerateOptions::processors (llamay.h), and the engine runs it in the same decode loop
// the server uses.
//
// Per step the engine calls, in this order: Process on every processor (each sees the logits the one before
// it left), the sampler on the result, then Accept(token) on every processor with the token chosen. A
// processor that wants to end generation leaves only end-of-generation tokens allowed. An error from either
// call ends the request (an error result); so does a step where every logit became -infinity.
//
// State: a processor belongs to one request; the engine keeps it through preemption (the request resumes
// with its processors as they were) and drops it when the request ends. Clone() gives an independent copy
// in the current state, for requests that start from a fork of one context (n choices).
//
// Thread-safety: Process and Accept run on the engine's scheduler thread, one request at a time.
#ifndef LLAMAY_LOGITS_PROCESSOR_H_
#define LLAMAY_LOGITS_PROCESSOR_H_

#include <cstdint>
#include <memory>
#include <span>

#include "llamay/status.h"

namespace llamay {

class LogitsProcessor {
 public:
  virtual ~LogitsProcessor() = default;
  // Adjusts the next token's logits ([vocabulary size]) in place (a disallowed token: -infinity).
  virtual Status Process(std::span<float> logits) = 0;
  // The token the sampler chose (an end-of-generation token too).
  virtual Status Accept(int32_t token) = 0;
  // An independent copy in the current state.
  virtual std::unique_ptr<LogitsProcessor> Clone() const = 0;
};

}  // namespace llamay

#endif  // LLAMAY_LOGITS_PROCESSOR_H_
