#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <utility>

#include "tokenizer/unicode.h"

namespace llamay::tokenizer::internal {
namespace {

// What `\s` means once non-ASCII whitespace has been mapped to U+000B (see the header comment).
constexpr std::string_view kWhitespaceClass = "\\t\\n\\x0B\\f\\r ";

std::string Pcre2ErrorText(int code) {
  PCRE2_UCHAR buffer[256];
  const int n = pcre2_get_error_message(code, buffer, sizeof(buffer));
  return n < 0 ? "PCRE2 error " + std::to_string(code) : std::string(reinterpret_cast<char*>(buffer), n);
}

// The text as the regexes see it, plus where each code point starts in it.
struct MatchText {
  std::string utf8;                   // valid UTF-8
  std::vector<size_t> cpt_start;      // [n_cpts + 1] byte offset of code point i
  std::vector<uint32_t> byte_to_cpt;  // [utf8.size() + 1] code point index starting at (or after) each byte
};

MatchText BuildMatchText(const std::vector<uint32_t>& cpts) {
  MatchText t;
  t.utf8.reserve(cpts.size());
  t.cpt_start.reserve(cpts.size() + 1);
  for (uint32_t c : cpts) {
    t.cpt_start.push_back(t.utf8.size());
    if (c >= 0x80 && IsUnicodeWhitespace(c)) {
      c = 0x0B;
    } else if ((c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF) {
      c = kReplacementChar;
    }
    AppendUtf8(c, &t.utf8);
  }
  t.cpt_start.push_back(t.utf8.size());
  t.byte_to_cpt.assign(t.utf8.size() + 1, 0);
  for (size_t i = 0; i + 1 < t.cpt_start.size(); ++i) {
    for (size_t b = t.cpt_start[i]; b < t.cpt_start[i + 1]; ++b) t.byte_to_cpt[b] = static_cast<uint32_t>(i);
  }
  t.byte_to_cpt[t.utf8.size()] = static_cast<uint32_t>(cpts.size());
  return t;
}

struct Span {
  size_t begin;  // code point indices, begin < end
  size_t end;
};

}  // namespace

struct RegexSplitter::Compiled {
  std::string pattern;  // as compiled, for error messages
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

std::string RewriteWhitespaceEscapes(std::string_view regex) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < regex.size(); ++i) {
    const char c = regex[i];
    if (c == '\\' && i + 1 < regex.size()) {
      const char e = regex[i + 1];
      ++i;
      if (e == 's') {
        if (!in_class) out += '[';
        out += kWhitespaceClass;
        if (!in_class) out += ']';
      } else if (e == 'S' && !in_class) {
        out += "[^";
        out += kWhitespaceClass;
        out += ']';
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' (or '^]') right after the opening bracket is a literal member.
      if (i + 1 < regex.size() && regex[i + 1] == '^') out += regex[++i];
      if (i + 1 < regex.size() && regex[i + 1] == ']') out += regex[++i];
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

RegexSplitter::~RegexSplitter() = default;

Result<std::unique_ptr<RegexSplitter>> RegexSplitter::Create(std::span<const std::string_view> regexes) {
  std::unique_ptr<RegexSplitter> splitter(new RegexSplitter());
  for (std::string_view regex : regexes) {
    auto compiled = std::make_unique<Compiled>();
    compiled->pattern = RewriteWhitespaceEscapes(regex);
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    compiled->code = pcre2_compile(
        reinterpret_cast<PCRE2_SPTR>(compiled->pattern.data()), compiled->pattern.size(),
        PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY | PCRE2_NO_AUTO_CAPTURE, &error, &error_offset, nullptr);
    if (compiled->code == nullptr) {
      return InvalidArgumentError("pre-tokenizer regex '" + std::string(regex) +
                                  "' does not compile at offset " + std::to_string(error_offset) + ": " +
                                  Pcre2ErrorText(error));
    }
    // JIT is an optimisation: where it is unavailable the interpreter gives the same matches.
    (void)pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE);
    splitter->compiled_.push_back(std::move(compiled));
  }
  return splitter;
}

Result<std::vector<std::string>> RegexSplitter::Split(std::string_view text) const {
  const std::vector<uint32_t> cpts = DecodeUtf8Lossy(text);
  std::vector<std::string> words;
  if (cpts.empty()) return words;
  const MatchText mt = BuildMatchText(cpts);

  std::vector<Span> spans = {{0, cpts.size()}};
  std::vector<Span> next;
  for (const auto& compiled : compiled_) {
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
        pcre2_match_data_create_from_pattern(compiled->code, nullptr), &pcre2_match_data_free);
    if (md == nullptr) return ResourceExhaustedError("pre-tokenizer: cannot allocate PCRE2 match data");
    next.clear();
    for (const Span& span : spans) {
      const size_t base = mt.cpt_start[span.begin];
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(mt.utf8.data() + base);
      const size_t length = mt.cpt_start[span.end] - base;
      size_t offset = 0;   // bytes into the span
      size_t emitted = 0;  // bytes of the span already covered by pieces
      auto push = [&](size_t from, size_t to) {
        next.push_back({mt.byte_to_cpt[base + from], mt.byte_to_cpt[base + to]});
      };
      while (offset < length) {
        int rc = pcre2_match(compiled->code, subject, length, offset, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
          // Very long runs can outgrow the JIT's stack; the interpreter keeps its backtracking on the heap.
          rc = pcre2_match(compiled->code, subject, length, offset, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                           md.get(), nullptr);
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          return InternalError("pre-tokenizer regex '" + compiled->pattern +
                               "' failed: " + Pcre2ErrorText(rc));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
        const size_t m_begin = ov[0];
        const size_t m_end = ov[1];
        if (m_end == m_begin) {
          // No table regex matches the empty string; step over one character if one ever does.
          offset = m_end + Utf8SequenceLength(static_cast<uint8_t>(mt.utf8[base + m_end]));
          continue;
        }
        if (m_begin > emitted) push(emitted, m_begin);
        push(m_begin, m_end);
        emitted = offset = m_end;
      }
      if (emitted < length) push(emitted, length);
    }
    spans.swap(next);
  }

  words.reserve(spans.size());
  for (const Span& span : spans) {
    std::string word;
    for (size_t i = span.begin; i < span.end; ++i) AppendUtf8(cpts[i], &word);
    words.push_back(std::move(word));
  }
  return words;
}

}  // namespace llamay::tokenizer::internal
