// Reading a VocabSpec from GGUF metadata (the tokenizer.* keys and general.name).
#include <optional>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace llamay::tokenizer {
namespace {

Result<std::optional<int64_t>> OptionalInt(const gguf::File& file, std::string_view key) {
  if (!file.Has(key)) return std::optional<int64_t>();
  LLAMAY_ASSIGN_OR_RETURN(int64_t v, file.GetInt(key));
  return std::optional<int64_t>(v);
}

Result<std::optional<bool>> OptionalBool(const gguf::File& file, std::string_view key) {
  if (!file.Has(key)) return std::optional<bool>();
  LLAMAY_ASSIGN_OR_RETURN(bool v, file.GetBool(key));
  return std::optional<bool>(v);
}

Result<std::vector<std::string>> StringArray(const gguf::File& file, std::string_view key) {
  LLAMAY_ASSIGN_OR_RETURN(std::vector<std::string_view> views, file.GetStringArray(key));
  return std::vector<std::string>(views.begin(), views.end());
}

}  // namespace

Result<VocabSpec> ReadVocabSpec(const gguf::File& file) {
  VocabSpec spec;
  if (!file.Has("tokenizer.ggml.model")) return NotFoundError("GGUF file has no tokenizer.ggml.model");
  LLAMAY_ASSIGN_OR_RETURN(spec.model, file.GetString("tokenizer.ggml.model"));
  spec.pre = file.GetStringOr("tokenizer.ggml.pre", "");
  spec.name = file.GetStringOr("general.name", "");
  if (!file.Has("tokenizer.ggml.tokens")) return NotFoundError("GGUF file has no tokenizer.ggml.tokens");
  LLAMAY_ASSIGN_OR_RETURN(spec.tokens, StringArray(file, "tokenizer.ggml.tokens"));
  if (file.Has("tokenizer.ggml.scores")) {
    auto floats = file.GetFloatArray("tokenizer.ggml.scores");
    if (floats.ok()) {
      spec.scores = std::move(floats).value();
    } else {  // some converters store integer scores
      LLAMAY_ASSIGN_OR_RETURN(std::vector<int64_t> ints, file.GetIntArray("tokenizer.ggml.scores"));
      spec.scores.assign(ints.begin(), ints.end());
    }
  }
  if (file.Has("tokenizer.ggml.token_type")) {
    LLAMAY_ASSIGN_OR_RETURN(std::vector<int64_t> types, file.GetIntArray("tokenizer.ggml.token_type"));
    spec.token_types.reserve(types.size());
    for (int64_t t : types) spec.token_types.push_back(static_cast<int32_t>(t));
  }
  if (file.Has("tokenizer.ggml.merges")) {
    LLAMAY_ASSIGN_OR_RETURN(spec.merges, StringArray(file, "tokenizer.ggml.merges"));
  } else if (spec.model == "gpt2") {
    return NotFoundError(
        "byte-level BPE vocabulary (tokenizer.ggml.model 'gpt2') without tokenizer.ggml.merges");
  }
  const std::pair<std::string_view, std::optional<int64_t>*> ids[] = {
      {"tokenizer.ggml.bos_token_id", &spec.bos},
      {"tokenizer.ggml.eos_token_id", &spec.eos},
      {"tokenizer.ggml.eot_token_id", &spec.eot},
      {"tokenizer.ggml.eom_token_id", &spec.eom},
      {"tokenizer.ggml.unknown_token_id", &spec.unk},
      {"tokenizer.ggml.seperator_token_id", &spec.sep},  // sic: the key's spelling
      {"tokenizer.ggml.padding_token_id", &spec.pad},
      {"tokenizer.ggml.mask_token_id", &spec.mask},
      {"tokenizer.ggml.fim_pre_token_id", &spec.fim_pre},
      {"tokenizer.ggml.fim_suf_token_id", &spec.fim_suf},
      {"tokenizer.ggml.fim_mid_token_id", &spec.fim_mid},
      {"tokenizer.ggml.fim_pad_token_id", &spec.fim_pad},
      {"tokenizer.ggml.fim_rep_token_id", &spec.fim_rep},
      {"tokenizer.ggml.fim_sep_token_id", &spec.fim_sep},
      // Deprecated spellings; where present they win, as in the reference.
      {"tokenizer.ggml.prefix_token_id", &spec.fim_pre},
      {"tokenizer.ggml.suffix_token_id", &spec.fim_suf},
      {"tokenizer.ggml.middle_token_id", &spec.fim_mid},
  };
  for (const auto& [key, target] : ids) {
    LLAMAY_ASSIGN_OR_RETURN(std::optional<int64_t> v, OptionalInt(file, key));
    if (v.has_value()) *target = v;
  }
  LLAMAY_ASSIGN_OR_RETURN(spec.add_bos, OptionalBool(file, "tokenizer.ggml.add_bos_token"));
  LLAMAY_ASSIGN_OR_RETURN(spec.add_eos, OptionalBool(file, "tokenizer.ggml.add_eos_token"));
  LLAMAY_ASSIGN_OR_RETURN(spec.add_space_prefix, OptionalBool(file, "tokenizer.ggml.add_space_prefix"));
  return spec;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const gguf::File& file) {
  LLAMAY_ASSIGN_OR_RETURN(VocabSpec spec, ReadVocabSpec(file));
  return FromSpec(std::move(spec));
}

}  // namespace llamay::tokenizer
