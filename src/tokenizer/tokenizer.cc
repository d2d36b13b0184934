#include "tokenizer/tokenizer.h"

#include <cctype>
#include <utility>

#include "tokenizer/bpe.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/spm.h"

namespace llamay::tokenizer {
namespace {

constexpr std::string_view kEscapedSpace = "\u2581";

std::string EscapeSpaces(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 2);
  for (char c : text) {
    if (c == ' ') {
      out += kEscapedSpace;
    } else {
      out += c;
    }
  }
  return out;
}

bool IsSpaceByte(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// The reference's decode-time clean-up for BPE vocabularies, in its three passes: drop a space before
// ? ! . ,; turn " ' " into "'"; drop the space before the contractions 's 'm 're 've.
void CleanSpaces(std::string* text) {
  std::string& s = *text;
  if (s.empty()) return;
  size_t n = 1;
  for (size_t i = 1; i < s.size(); ++i) {
    const char x = s[i];
    if (s[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --n;
    s[n++] = x;
  }
  s.resize(n);
  // Pass 2 works in place: the space after a stripped apostrophe is overwritten with '\0' and skipped, and
  // that marker is what the next position sees as its predecessor.
  n = 1;
  for (size_t i = 1; i < s.size(); ++i) {
    const char x = s[i];
    if (x == '\'' && i + 1 < s.size() && s[i - 1] == ' ' && s[i + 1] == ' ') {
      --n;
      s[++i] = '\0';
    }
    s[n++] = x;
  }
  s.resize(n);
  n = 1;
  for (size_t i = 1; i < s.size(); ++i) {
    const char x = s[i];
    if (s[i - 1] == ' ' && x == '\'' && i + 1 < s.size()) {
      const char x1 = s[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --n;
      } else if (x1 != 't' && x1 != 'd' && i + 2 < s.size()) {
        const char x2 = s[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --n;
      }
    }
    s[n++] = x;
  }
  s.resize(n);
}

}  // namespace

struct Tokenizer::Fragment {
  int32_t token;  // -1 for raw text
  size_t begin;   // raw text: byte range of the input
  size_t len;
};

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromSpec(VocabSpec spec) {
  LLAMAY_ASSIGN_OR_RETURN(Vocab vocab, BuildVocab(std::move(spec)));
  std::unique_ptr<Tokenizer> tok(new Tokenizer(std::move(vocab)));
  if (tok->vocab_.type == VocabType::kBpe) {
    const internal::PreTokenizerDef* pre = internal::FindPreTokenizer(tok->vocab_.pre);
    LLAMAY_CHECK(pre != nullptr) << "BuildVocab accepted an unknown pre-tokenizer " << tok->vocab_.pre;
    LLAMAY_ASSIGN_OR_RETURN(tok->splitter_, internal::RegexSplitter::Create(pre->regexes));
  }
  return tok;
}

std::vector<Tokenizer::Fragment> Tokenizer::PartitionSpecial(std::string_view text,
                                                             bool parse_special) const {
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (const int32_t id : vocab_.special_tokens) {
    const TokenData& token = vocab_.tokens[id];
    if (!parse_special && (token.attr & (kAttrControl | kAttrUnknown))) continue;
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t begin = f.begin;
      size_t end = f.begin + f.len;
      while (begin < end) {
        const size_t match = text.substr(0, end).find(token.text, begin);
        if (match == std::string_view::npos) break;
        size_t left_end = match;
        if (token.attr & kAttrLstrip) {
          while (left_end > begin && IsSpaceByte(text[left_end - 1])) --left_end;
        }
        if (left_end > begin) next.push_back({-1, begin, left_end - begin});
        next.push_back({id, 0, 0});
        begin = match + token.text.size();
        if (token.attr & kAttrRstrip) {
          while (begin < end && IsSpaceByte(text[begin])) ++begin;
        }
      }
      if (begin < end) next.push_back({-1, begin, end - begin});
    }
    fragments.swap(next);
  }
  return fragments;
}

Status Tokenizer::EncodeText(std::string_view text, bool prefix_space, std::vector<int32_t>* out) const {
  if (vocab_.type == VocabType::kSpm) {
    std::string escaped = prefix_space ? std::string(kEscapedSpace) : std::string();
    escaped += EscapeSpaces(text);
    internal::SpmTokenize(vocab_, escaped, out);
    return Status::Ok();
  }
  LLAMAY_ASSIGN_OR_RETURN(std::vector<std::string> words, splitter_->Split(text));
  for (const std::string& word : words)
    internal::BpeTokenizeWord(vocab_, internal::ByteLevelEncode(word), out);
  return Status::Ok();
}

Result<std::vector<int32_t>> Tokenizer::Encode(std::string_view text, bool add_special, bool parse_special,
                                               bool continuation) const {
  std::vector<int32_t> out;
  if (add_special && vocab_.add_bos) out.push_back(vocab_.bos);
  // SPM vocabularies put a space before the first run of text (unless it continues earlier text) and
  // before each run after a special token.
  bool prev_special = !continuation;
  for (const Fragment& f : PartitionSpecial(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    const bool prefix = vocab_.type == VocabType::kSpm && vocab_.add_space_prefix && prev_special;
    LLAMAY_RETURN_IF_ERROR(EncodeText(text.substr(f.begin, f.len), prefix, &out));
    prev_special = false;
  }
  if (add_special && vocab_.add_eos) out.push_back(vocab_.eos);
  return out;
}

bool Tokenizer::IsControl(int32_t id) const {
  return vocab_.InRange(id) && (vocab_.tokens[id].attr & (kAttrControl | kAttrUnknown)) != 0;
}

const std::string& Tokenizer::TokenText(int32_t id) const {
  static const std::string kEmpty;
  return vocab_.InRange(id) ? vocab_.tokens[id].text : kEmpty;
}

std::string Tokenizer::TokenToPiece(int32_t id, bool render_special) const {
  if (!vocab_.InRange(id) || (!render_special && IsControl(id))) return std::string();
  return vocab_.pieces[id];
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool render_special) const {
  std::string out;
  bool strip_space = vocab_.add_space_prefix;
  for (const int32_t id : ids) {
    const std::string piece = TokenToPiece(id, render_special);
    // Only the first token may lose its leading space, whatever it renders to.
    out.append(piece, strip_space && !piece.empty() && piece[0] == ' ' ? 1 : 0);
    strip_space = false;
  }
  if (vocab_.clean_spaces) CleanSpaces(&out);
  return out;
}

}  // namespace llamay::tokenizer
