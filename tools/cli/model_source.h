// Where a command's model comes from: the GGUF file named by -m, or the built-in demo model when -m is
// absent. One function for every command (run, tokenize, serve, ctx build|fork|restore) so they agree on
// the default and on the note that says the demo model's text is meaningless.
// Thread-safety: functions only.
#ifndef LLAMAY_TOOLS_CLI_MODEL_SOURCE_H_
#define LLAMAY_TOOLS_CLI_MODEL_SOURCE_H_

#include <memory>
#include <string>

#include "base/status.h"
#include "engine/engine.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace llamay::cli {

using engine::LoadedModel;

// engine::LoadModelOrDemo, with the note for the demo model on stderr. Errors mean bad input: callers
// exit with kExitBadInput.
Result<LoadedModel> LoadModelOrDemo(const std::string& path, int threads = 0);

// The note that says the demo model's text is meaningless (stderr), for commands run without -m.
void PrintDemoModelNote();

// Only the tokenizer: `path` may be a vocabulary-only GGUF (no tensors). No note for the demo model.
Result<std::unique_ptr<tokenizer::Tokenizer>> LoadTokenizerOrDemo(const std::string& path);

}  // namespace llamay::cli

#endif  // LLAMAY_TOOLS_CLI_MODEL_SOURCE_H_
