// The pre-tokenizer table: which regex sequence and which vocabulary traits each tokenizer.ggml.pre name
// selects. The regexes are the split patterns the models' tokenizer.json files declare, in the form the
// reference engine (llama.cpp) uses them (case-insensitive groups spelled out, possessive quantifiers made
// greedy); several names share one sequence.
#include <array>
#include <string_view>

#include "tokenizer/pre_tokenizer.h"

namespace llamay::tokenizer::internal {
namespace {

using std::string_view_literals::operator""sv;

// GPT-2's pattern. The reference runs it through a hand-written matcher that also accepts a lone whitespace
// character before a non-space (the final |\s+ here); with gaps kept as pieces the two split identically.
constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

constexpr std::array kDefault = {
    R"([\p{P}\$\+<=>\^~\|]+)"sv,
    kGpt2Regex,
    R"(\p{N}+)"sv,
    R"([0-9][0-9][0-9])"sv,
};
constexpr std::array kGpt2 = {kGpt2Regex};
constexpr std::array kLlama3 = {
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"sv,
};
constexpr std::array kQwen2 = {
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"sv,
};
constexpr std::array kQwen35 = {
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|)"
    R"([^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|)"
    R"(\s+(?!\S)|\s+)"sv,
};
constexpr std::array kSeedCoder = {
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)"sv,
};
constexpr std::array kBailingMoe = {
    R"('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)"sv,
};
constexpr std::array kDeepseekLlm = {
    R"([\r\n])"sv,
    R"(\s?[)"
    R"(A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})"
    R"(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A})"
    R"(\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556})"
    R"(\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
    R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})"
    R"(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D})"
    R"(\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4})"
    R"(\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4})"
    R"(\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124})"
    R"(\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F})"
    R"(\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})"
    R"(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17})"
    R"(\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3})"
    R"(\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF})"
    R"(\x{1E900}-\x{1E943})"
    R"(]+)"sv,
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)"sv,
    R"(\s+$)"sv,
    R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)"sv,
    R"(\p{N}+)"sv,
};
constexpr std::array kDeepseekCoder = {
    R"([\r\n])"sv,    R"(\s?\p{L}+)"sv,
    R"(\s?\p{P}+)"sv, R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)"sv,
    R"(\p{N})"sv,
};
constexpr std::array kFalcon = {
    R"([\p{P}\$\+<=>\^~\|`]+)"sv,
    kGpt2Regex,
    R"([0-9][0-9][0-9])"sv,
};
constexpr std::array kStarcoder = {R"(\p{N})"sv, kGpt2Regex};
// Everything up to a space or a sentence mark (the parentheses and | are literal members of the class).
constexpr std::string_view kPoroRegex =
    R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)";
constexpr std::array kPoro = {kPoroRegex};
constexpr std::array kViking = {kPoroRegex, R"(\p{N})"sv};
constexpr std::array kTekken = {
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|)"
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"sv,
};
constexpr std::array kGpt4o = {
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|)"
    R"('[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|)"
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|)"
    R"('[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|)"
    R"(\s+(?!\S)|\s+)"sv,
};

// Traits: {clean_spaces, ignore_merges, add_bos, clear_bos}.
constexpr PreTokenizerTraits kPlain{true, false, false, false};
constexpr PreTokenizerTraits kNoClean{false, false, false, false};
constexpr PreTokenizerTraits kLlama3Traits{true, true, true, false};
constexpr PreTokenizerTraits kGlmTraits{true, false, false, true};
constexpr PreTokenizerTraits kTekkenTraits{false, true, true, false};

const PreTokenizerDef kDefs[] = {
    {"default", kDefault, kPlain},
    // Llama 3 family.
    {"llama3", kLlama3, kLlama3Traits},
    {"llama-v3", kLlama3, kLlama3Traits},
    {"llama-bpe", kLlama3, kLlama3Traits},
    {"falcon3", kLlama3, kLlama3Traits},
    {"falcon-h1", kLlama3, kLlama3Traits},
    {"pixtral", kLlama3, kLlama3Traits},
    {"midm-2.0", kLlama3, kLlama3Traits},
    {"lfm2", kLlama3, kLlama3Traits},
    {"dbrx", kLlama3, kPlain},
    {"smaug-bpe", kLlama3, kPlain},
    {"chatglm-bpe", kLlama3, kGlmTraits},
    {"glm4", kLlama3, kGlmTraits},
    // GPT-2 pattern.
    {"gpt-2", kGpt2, kPlain},
    {"phi-2", kGpt2, kPlain},
    {"gigachat", kGpt2, kPlain},
    {"a.x-4.0", kGpt2, kPlain},
    {"mellum", kGpt2, kPlain},
    {"mpt", kGpt2, kPlain},
    {"olmo", kGpt2, kPlain},
    {"jais", kGpt2, kPlain},
    {"exaone4", kGpt2, kPlain},
    {"trillion", kGpt2, kNoClean},
    {"granite-docling", kGpt2, kNoClean},
    // Digits split first, then GPT-2.
    {"starcoder", kStarcoder, kPlain},
    {"refact", kStarcoder, kPlain},
    {"command-r", kStarcoder, kNoClean},
    {"smollm", kStarcoder, kNoClean},
    {"codeshell", kStarcoder, kPlain},
    {"exaone", kStarcoder, kPlain},
    {"minerva-7b", kStarcoder, kPlain},
    {"mellum2", kStarcoder, kPlain},
    {"falcon", kFalcon, kPlain},
    {"deepseek-llm", kDeepseekLlm, kNoClean},
    {"deepseek-coder", kDeepseekCoder, kNoClean},
    // Qwen 2 pattern (single digits).
    {"qwen2", kQwen2, kNoClean},
    {"deepseek-r1-qwen", kQwen2, kNoClean},
    {"kormo", kQwen2, kNoClean},
    {"f2llmv2", kQwen2, kNoClean},
    {"megrez", kQwen2, kPlain},
    {"stablelm2", kQwen2, kPlain},
    {"hunyuan", kQwen2, kNoClean},
    {"solar-open", kQwen2, kNoClean},
    {"grok-2", kQwen2, kNoClean},
    {"qwen35", kQwen35, kNoClean},
    {"seed-coder", kSeedCoder, kNoClean},
    {"bailingmoe", kBailingMoe, kNoClean},
    {"bailingmoe2", kBailingMoe, kNoClean},
    {"llada-moe", kBailingMoe, kNoClean},
    {"poro-chat", kPoro, kNoClean},
    {"bloom", kPoro, kPlain},
    {"gpt3-finnish", kPoro, kPlain},
    {"viking", kViking, kNoClean},
    {"tekken", kTekken, kTekkenTraits},
    {"gpt-4o", kGpt4o, kNoClean},
    {"llama4", kGpt4o, kNoClean},
    {"kanana2", kGpt4o, kNoClean},
    {"talkie", kGpt4o, kNoClean},
    {"minimax-m2", kGpt4o, kNoClean},
};

}  // namespace

const PreTokenizerDef* FindPreTokenizer(std::string_view name) {
  if (name.empty()) name = "default";
  for (const PreTokenizerDef& def : kDefs) {
    if (def.name == name) return &def;
  }
  return nullptr;
}

std::vector<std::string_view> SupportedPreTokenizers() {
  std::vector<std::string_view> names;
  for (const PreTokenizerDef& def : kDefs) names.push_back(def.name);
  return names;
}

}  // namespace llamay::tokenizer::internal
