#include "model_source.h"

#include <cstdio>
#include <utility>

#include "model/demo_model.h"

namespace llamay::cli {

void PrintDemoModelNote() {
  std::fprintf(stderr, "llamay: no -m given: using the built-in demo model (its text is meaningless; "
                       "pass -m MODEL.gguf for a real one)\n");
}

Result<LoadedModel> LoadModelOrDemo(const std::string& path, int threads) {
  if (path.empty()) PrintDemoModelNote();
  return engine::LoadModelOrDemo(path, threads);
}

Result<std::unique_ptr<tokenizer::Tokenizer>> LoadTokenizerOrDemo(const std::string& path) {
  if (path.empty()) {
    LLAMAY_ASSIGN_OR_RETURN(gguf::File f, gguf::File::FromBuffer(model::BuildDemoModel()));
    return tokenizer::Tokenizer::FromGguf(f);
  }
  LLAMAY_ASSIGN_OR_RETURN(gguf::File f, gguf::File::Open(path));
  return tokenizer::Tokenizer::FromGguf(f);
}

}  // namespace llamay::cli
