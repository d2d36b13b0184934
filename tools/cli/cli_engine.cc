#include "cli_engine.h"

#include "format.h"

namespace llamay::cli {

Result<std::unique_ptr<Engine>> OpenCliEngine(const CliEngineOptions& o) {
  if (o.model.empty()) PrintDemoModelNote();
  Options opts;
  opts.model_path = o.model;
  opts.threads = o.threads;
  opts.page_tokens = o.page_tokens;
  opts.kv_precision = o.kv_precision;
  opts.kv_memory_bytes = size_t{64} << 30;  // the command's own sessions: bounded by what they need
  opts.max_context = o.ctx_size;
  opts.prefill_chunk = o.prefill_chunk;
  opts.speculative = o.speculative;
  return Engine::Open(opts);
}

}  // namespace llamay::cli
