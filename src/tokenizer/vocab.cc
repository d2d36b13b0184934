#include "tokenizer/vocab.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/unicode.h"

namespace llamay::tokenizer {
namespace {

using internal::PreTokenizerDef;

constexpr uint32_t kAttrSpecial = kAttrUnknown | kAttrControl;

uint32_t AttrFromType(int32_t type) {
  switch (static_cast<TokenType>(type)) {
    case TokenType::kNormal:
      return kAttrNormal;
    case TokenType::kUnknown:
      return kAttrUnknown;
    case TokenType::kControl:
      return kAttrControl;
    case TokenType::kUserDefined:
      return kAttrUserDefined;
    case TokenType::kUnused:
      return kAttrUnused;
    case TokenType::kByte:
      return kAttrByte;
    default:
      return kAttrUndefined;
  }
}

// The byte a "<0xXX>" token stands for (the two characters after "<0x", read as hex).
uint8_t HexByteToken(const std::string& text) {
  if (text.size() < 5) return 0;
  const char digits[3] = {text[3], text[4], 0};
  return static_cast<uint8_t>(std::strtol(digits, nullptr, 16));
}

// Step: the model type's default special ids and flags (the reference's defaults).
Status ApplyModelDefaults(const VocabSpec& spec, Vocab* v, const PreTokenizerDef** pre) {
  if (spec.model == "llama") {
    v->type = VocabType::kSpm;
    v->bos = 1;
    v->eos = 2;
    v->unk = 0;
    v->add_space_prefix = true;
    v->clean_spaces = false;
    v->add_bos = true;
    v->pre = spec.pre.empty() ? "default" : spec.pre;
    return Status::Ok();
  }
  if (spec.model == "gpt2") {
    v->type = VocabType::kBpe;
    v->bos = 11;
    v->eos = 11;
    *pre = internal::FindPreTokenizer(spec.pre);
    if (*pre == nullptr) {
      return UnimplementedError("unsupported pre-tokenizer '" + spec.pre + "' (tokenizer.ggml.pre)");
    }
    v->pre = std::string((*pre)->name);
    v->add_space_prefix = false;
    v->clean_spaces = (*pre)->traits.clean_spaces;
    v->ignore_merges = (*pre)->traits.ignore_merges;
    v->add_bos = (*pre)->traits.add_bos;
    if ((*pre)->traits.clear_bos) v->bos = -1;
    return Status::Ok();
  }
  if (spec.model == "bert") {
    return UnimplementedError("WordPiece vocabularies (tokenizer.ggml.model 'bert') are not supported");
  }
  return UnimplementedError("unsupported tokenizer model '" + spec.model + "' (tokenizer.ggml.model)");
}

// Step: the token table (texts, scores, attributes) and its inverse.
Status LoadTokens(VocabSpec& spec, Vocab* v) {
  const size_t n = spec.tokens.size();
  if (n == 0) return InvalidArgumentError("tokenizer.ggml.tokens is missing or empty");
  if (n > 0x7FFFFFFF) return InvalidArgumentError("tokenizer.ggml.tokens has too many entries");
  if (!spec.scores.empty() && spec.scores.size() < n) {
    return InvalidArgumentError("tokenizer.ggml.scores has " + std::to_string(spec.scores.size()) +
                                " entries for " + std::to_string(n) + " tokens");
  }
  if (!spec.token_types.empty() && spec.token_types.size() < n) {
    return InvalidArgumentError("tokenizer.ggml.token_type has " + std::to_string(spec.token_types.size()) +
                                " entries for " + std::to_string(n) + " tokens");
  }
  v->tokens.resize(n);
  v->token_index.Reset(n);
  for (size_t i = 0; i < n; ++i) {
    TokenData& t = v->tokens[i];
    t.text = std::move(spec.tokens[i]);
    if (t.text.empty()) t.text = "[EMPTY_" + std::to_string(i) + "]";
    t.score = spec.scores.empty() ? 0.0f : spec.scores[i];
    t.attr = spec.token_types.empty() ? kAttrNormal : AttrFromType(spec.token_types[i]);
    const int32_t earlier = v->token_index.Insert(TextIndex::Hash(t.text), static_cast<int32_t>(i),
                                                  [&](int32_t id) { return v->tokens[id].text == t.text; });
    if (earlier >= 0) {
      return InvalidArgumentError("duplicate token in vocabulary: '" + t.text + "' has ids " +
                                  std::to_string(earlier) + " and " + std::to_string(i));
    }
  }
  return Status::Ok();
}

Status LoadMerges(VocabSpec& spec, Vocab* v) {
  if (v->type != VocabType::kBpe) return Status::Ok();
  v->merges = std::move(spec.merges);
  v->merge_index.Reset(v->merges.size());
  for (size_t i = 0; i < v->merges.size(); ++i) {
    std::string& m = v->merges[i];
    // Split at the first space after the first character; a line without one is an empty pair.
    if (m.find(' ', 1) == std::string::npos) m.assign(1, ' ');
    v->merge_index.Insert(TextIndex::Hash(m), static_cast<int32_t>(i),  // the first rank wins
                          [&](int32_t rank) { return v->merges[rank] == m; });
  }
  return Status::Ok();
}

// Step: special ids from the file (out-of-range values keep the default), then add_bos/add_eos.
Status ApplySpecialIds(const VocabSpec& spec, Vocab* v) {
  const std::array<std::pair<const std::optional<int64_t>*, int32_t*>, 14> ids = {{
      {&spec.bos, &v->bos},
      {&spec.eos, &v->eos},
      {&spec.eot, &v->eot},
      {&spec.eom, &v->eom},
      {&spec.unk, &v->unk},
      {&spec.sep, &v->sep},
      {&spec.pad, &v->pad},
      {&spec.mask, &v->mask},
      {&spec.fim_pre, &v->fim_pre},
      {&spec.fim_suf, &v->fim_suf},
      {&spec.fim_mid, &v->fim_mid},
      {&spec.fim_pad, &v->fim_pad},
      {&spec.fim_rep, &v->fim_rep},
      {&spec.fim_sep, &v->fim_sep},
  }};
  for (auto [from, to] : ids) {
    if (!v->InRange(*to)) *to = -1;
    if (from->has_value() && **from >= 0 && **from < v->n_vocab()) *to = static_cast<int32_t>(**from);
  }
  if (spec.add_bos.has_value()) v->add_bos = *spec.add_bos;
  if (spec.add_eos.has_value()) v->add_eos = *spec.add_eos;
  if (spec.add_space_prefix.has_value()) v->add_space_prefix = *spec.add_space_prefix;
  if (v->add_bos && v->bos < 0) {
    return InvalidArgumentError(
        "tokenizer.ggml.add_bos_token is true, but tokenizer.ggml.bos_token_id is not set");
  }
  if (v->add_eos && v->eos < 0) {
    return InvalidArgumentError(
        "tokenizer.ggml.add_eos_token is true, but tokenizer.ggml.eos_token_id is not set");
  }
  return Status::Ok();
}

// The lowest id among the tokens whose text is one of `texts`, or -1.
int32_t FindFirst(const Vocab& v, std::initializer_list<std::string_view> texts) {
  int32_t first = -1;
  for (std::string_view text : texts) {
    const int32_t id = v.Find(text);
    if (id >= 0 && (first < 0 || id < first)) first = id;
  }
  return first;
}

// Step: ids the file did not give are found by their text; such tokens count as control tokens.
void DetectSpecialByText(Vocab* v) {
  struct Rule {
    int32_t* id;
    std::initializer_list<std::string_view> texts;
  };
  const Rule rules[] = {
      {&v->eot,
       {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
        "_<EOT>", "[EOT]", "<\uFF5Cend\u2581of\u2581sentence\uFF5C>", "<end_of_utterance>"}},
      {&v->eom, {"<|eom_id|>"}},
      {&v->fim_pre,
       {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\uFF5Cfim\u2581begin\uFF5C>", "<PRE>",
        "\u2581<PRE>", "<|code_prefix|>", "<|prefix|>"}},
      {&v->fim_suf,
       {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\uFF5Cfim\u2581hole\uFF5C>", "<SUF>",
        "\u2581<SUF>", "<|code_suffix|>", "<|suffix|>"}},
      {&v->fim_mid,
       {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\uFF5Cfim\u2581end\uFF5C>", "<MID>",
        "\u2581<MID>", "<|code_middle|>", "<|middle|>"}},
      {&v->fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
      {&v->fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
      {&v->fim_sep, {"<|file_sep|>"}},
  };
  for (const Rule& rule : rules) {
    if (*rule.id >= 0) continue;
    if (const int32_t id = FindFirst(*v, rule.texts); id >= 0) {  // lowest id wins when several match
      *rule.id = id;
      v->tokens[id].attr |= kAttrControl;
    }
  }
}

// Step: the end-of-generation set (by id and by text) and the reference's per-family fix-ups.
void DetectEndOfGeneration(Vocab* v) {
  for (int32_t id : {v->fim_pad, v->fim_rep, v->fim_sep}) {
    if (id >= 0) v->eog.insert(id);
  }
  for (std::string_view text :
       {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
        "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
        "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
        "<\uFF5Cend\u2581of\u2581sentence\uFF5C>", "[e~["}) {
    if (const int32_t id = v->Find(text); id >= 0) {
      v->eog.insert(id);
      v->tokens[id].attr |= kAttrControl;
    }
  }
  // gpt-oss renders these structural tokens as ordinary text.
  for (std::string_view text : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    if (const int32_t id = v->Find(text); id >= 0) v->tokens[id].attr = kAttrUserDefined;
  }
  for (int32_t id : {v->eos, v->eot, v->eom}) {
    if (id >= 0) v->eog.insert(id);
  }
  auto eog_with_text = [&](std::string_view text) {
    for (int32_t id : v->eog) {
      if (v->tokens[id].text == text) return id;
    }
    return -1;
  };
  // Harmony-style vocabularies: "<|end|>" ends a message, not the generation.
  const int32_t end_id = eog_with_text("<|end|>");
  const bool has_call = eog_with_text("<|call|>") >= 0 || eog_with_text("<|calls|>") >= 0;
  if (end_id >= 0 && has_call && (eog_with_text("<|return|>") >= 0 || eog_with_text("<|flush|>") >= 0)) {
    v->eog.erase(end_id);
    v->tokens[end_id].attr = kAttrUserDefined;
  }
  // Gemma 4 style: "</s>" is not an end of generation when "<|tool_response>" is.
  const int32_t s_id = eog_with_text("</s>");
  if (s_id >= 0 && eog_with_text("<|tool_response>") >= 0) {
    v->eog.erase(s_id);
    v->tokens[s_id].attr = kAttrNormal;
  }
}

std::string ComputePiece(const Vocab& v, int32_t id) {
  const TokenData& t = v.tokens[id];
  if (t.attr & (kAttrSpecial | kAttrUserDefined)) return t.text;
  if (t.attr & kAttrNormal) {
    std::string out;
    if (v.type == VocabType::kSpm) {
      for (size_t i = 0; i < t.text.size(); ++i) {
        if (t.text.compare(i, 3, "\u2581") == 0) {
          out += ' ';
          i += 2;
        } else {
          out += t.text[i];
        }
      }
      return out;
    }
    for (uint32_t cpt : internal::DecodeUtf8Lossy(t.text)) {
      const int byte = internal::UnicodeToByte(cpt);
      if (byte >= 0) {
        out += static_cast<char>(byte);
        continue;
      }
      std::string utf8;
      internal::AppendUtf8(cpt, &utf8);
      out += "[UNK_BYTE_0x";
      for (unsigned char c : utf8) {
        char hex[3];
        std::snprintf(hex, sizeof(hex), "%02x", c);
        out += hex;
      }
      out += t.text + "]";
    }
    return out;
  }
  if (t.attr & kAttrByte) return std::string(1, static_cast<char>(HexByteToken(t.text)));
  return std::string();  // unused / undefined tokens have no text
}

// Step: the raw-text match list, the per-model strip attributes and the piece cache.
void BuildCaches(const VocabSpec& spec, Vocab* v) {
  for (int32_t id = 0; id < v->n_vocab(); ++id) {
    if (v->tokens[id].attr & (kAttrControl | kAttrUserDefined | kAttrUnknown))
      v->special_tokens.push_back(id);
  }
  std::stable_sort(v->special_tokens.begin(), v->special_tokens.end(),
                   [&](int32_t a, int32_t b) { return v->tokens[a].text.size() > v->tokens[b].text.size(); });
  std::string name = spec.name;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int32_t id : v->special_tokens) v->tokens[id].attr |= kAttrRstrip;
    if (int32_t id = v->Find("</s>"); id >= 0) v->tokens[id].attr |= kAttrRstrip;
    for (const char* text : {"<unk>", "<s>", "<|endoftext|>"}) {
      if (int32_t id = v->Find(text); id >= 0) v->tokens[id].attr &= ~kAttrRstrip;
    }
  }
  v->pieces.resize(v->tokens.size());
  for (int32_t id = 0; id < v->n_vocab(); ++id) v->pieces[id] = ComputePiece(*v, id);
}

}  // namespace

int32_t Vocab::Find(std::string_view text) const {
  return token_index.Find(TextIndex::Hash(text), [&](int32_t id) { return tokens[id].text == text; });
}

int32_t Vocab::MergeRank(std::string_view left, std::string_view right) const {
  const uint64_t hash = TextIndex::HashAppend(TextIndex::HashAppend(TextIndex::Hash(left), " "), right);
  return merge_index.Find(hash, [&](int32_t rank) {
    const std::string_view m = merges[rank];
    return m.size() == left.size() + 1 + right.size() && m.substr(0, left.size()) == left &&
           m[left.size()] == ' ' && m.substr(left.size() + 1) == right;
  });
}

int32_t Vocab::ByteToken(uint8_t byte) const {
  if (type == VocabType::kBpe) return Find(internal::ByteToUnicode(byte));
  static constexpr char kHex[] = "0123456789ABCDEF";
  const std::string hex = {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>'};
  const int32_t id = Find(hex);
  return id >= 0 ? id : Find(std::string(1, static_cast<char>(byte)));
}

void Vocab::CheckInvariants() const {
  LLAMAY_CHECK(token_index.size() == tokens.size()) << "duplicate or missing token texts";
  for (int32_t id = 0; id < n_vocab(); ++id) {
    LLAMAY_CHECK(!tokens[id].text.empty()) << "empty token " << id;
    LLAMAY_CHECK(Find(tokens[id].text) == id) << "the text index does not invert token " << id;
  }
  for (int32_t id :
       {bos, eos, eot, eom, unk, sep, pad, mask, fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep}) {
    LLAMAY_CHECK(id == -1 || InRange(id)) << "special id out of range: " << id;
  }
  size_t n_special = 0;
  for (const TokenData& t : tokens)
    n_special += (t.attr & (kAttrControl | kAttrUserDefined | kAttrUnknown)) != 0;
  LLAMAY_CHECK(n_special == special_tokens.size()) << "special token list is stale";
  for (size_t i = 1; i < special_tokens.size(); ++i) {
    LLAMAY_CHECK(tokens[special_tokens[i - 1]].text.size() >= tokens[special_tokens[i]].text.size())
        << "special tokens not sorted longest first";
  }
  for (int32_t id : eog) LLAMAY_CHECK(InRange(id)) << "EOG id out of range: " << id;
  LLAMAY_CHECK(pieces.size() == tokens.size()) << "piece cache size";
}

Result<Vocab> BuildVocab(VocabSpec spec) {
  Vocab v;
  const PreTokenizerDef* pre = nullptr;
  LLAMAY_RETURN_IF_ERROR(ApplyModelDefaults(spec, &v, &pre));
  LLAMAY_RETURN_IF_ERROR(LoadTokens(spec, &v));
  LLAMAY_RETURN_IF_ERROR(LoadMerges(spec, &v));
  LLAMAY_RETURN_IF_ERROR(ApplySpecialIds(spec, &v));
  DetectSpecialByText(&v);
  DetectEndOfGeneration(&v);
  BuildCaches(spec, &v);
  return v;
}

}  // namespace llamay::tokenizer
