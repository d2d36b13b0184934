#include "tokenize_command.h"

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "ctx_commands.h"
#include "gguf/gguf.h"
#include "model/demo_model.h"
#include "tokenizer/tokenizer.h"

namespace llamay::cli {
namespace {

// The tokenizer of `path`, or of the demo model when it is empty.
Result<std::unique_ptr<tokenizer::Tokenizer>> LoadTokenizerOrDemo(const std::string& path) {
  if (path.empty()) {
    LLAMAY_ASSIGN_OR_RETURN(gguf::File f, gguf::File::FromBuffer(model::BuildDemoModel()));
    return tokenizer::Tokenizer::FromGguf(f);
  }
  LLAMAY_ASSIGN_OR_RETURN(gguf::File f, gguf::File::Open(path));
  return tokenizer::Tokenizer::FromGguf(f);
}

int RunTokenize(const std::string& model_path, const std::string& text, bool no_bos) {
  auto tok = LoadTokenizerOrDemo(model_path);
  if (!tok.ok()) return Fail(tok.status(), kExitBadInput);
  auto ids = (*tok)->Encode(text, !no_bos, false);
  if (!ids.ok()) return Fail(ids.status(), kExitBadInput);
  std::printf("%s\n", nlohmann::json(*ids).dump().c_str());
  return kExitOk;
}

}  // namespace

void AddTokenizeCommand(CLI::App& app, int* exit_code) {
  struct TokenizeArgs {
    std::string model, text;
    bool no_bos = false;
  };
  auto ta = std::make_shared<TokenizeArgs>();
  CLI::App* tokenize = app.add_subcommand("tokenize", "Print the token ids of a text as a JSON list");
  tokenize->add_option("-m,--model", ta->model, "GGUF model or vocabulary file (default: the demo model)");
  tokenize->add_option("-p,--prompt", ta->text, "Text")->required();
  tokenize->add_flag("--no-bos", ta->no_bos, "Do not add the BOS token");
  tokenize->callback([ta, exit_code] { *exit_code = RunTokenize(ta->model, ta->text, ta->no_bos); });
}

}  // namespace llamay::cli
