// The engine's logits processors are the public interface (include/llamay/logits_processor.h, which
// documents the contract): Request::processors holds them, the decode loop runs them before the sampler.
#ifndef LLAMAY_ENGINE_LOGITS_PROCESSOR_H_
#define LLAMAY_ENGINE_LOGITS_PROCESSOR_H_

#include "llamay/logits_processor.h"

namespace llamay::engine {

using LogitsProcessor = llamay::LogitsProcessor;

}  // namespace llamay::engine

#endif  // LLAMAY_ENGINE_LOGITS_PROCESSOR_H_
