// The synthetic vocabulary (see synthetic_vocab.h).
#include "grammar/synthetic_vocab.h"

#include <set>

#include "base/check.h"

namespace llamay::grammar {
namespace {

// splitmix64: a small deterministic generator (the same tokens on every platform).
struct Rng {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint32_t Below(uint32_t n) { return static_cast<uint32_t>(Next() % n); }
};

const char* const kWords[] = {
    "the",    "of",          "and",     "to",    "in",      "is",     "you",    "that",  "it",
    "he",     "was",         "for",     "on",    "are",     "as",     "with",   "his",   "they",
    "at",     "be",          "this",    "have",  "from",    "or",     "one",    "had",   "by",
    "word",   "but",         "not",     "what",  "all",     "were",   "we",     "when",  "your",
    "can",    "said",        "there",   "use",   "an",      "each",   "which",  "she",   "do",
    "how",    "their",       "if",      "will",  "up",      "other",  "about",  "out",   "many",
    "then",   "them",        "these",   "so",    "some",    "her",    "would",  "make",  "like",
    "him",    "into",        "time",    "has",   "look",    "two",    "more",   "write", "go",
    "see",    "number",      "no",      "way",   "could",   "people", "my",     "than",  "first",
    "water",  "been",        "call",    "who",   "oil",     "its",    "now",    "find",  "long",
    "down",   "day",         "did",     "get",   "come",    "made",   "may",    "part",  "name",
    "age",    "email",       "address", "city",  "country", "value",  "type",   "id",    "items",
    "title",  "description", "date",    "price", "status",  "result", "answer", "step",  "steps",
    "output", "explanation", "final",   "user",  "data",    "ing",    "tion",   "ed",    "er",
    "ly",     "ment",        "ness",    "able",  "ous",     "al",     "ic",     "ive",   "est",
    "ist",    "ity",         "re",      "un",    "dis",     "pre",    "con",    "com",   "pro",
    "ex",     "de",          "in",      "im",    "sub",     "inter",  "trans",  "over",  "s",
    "es",     "t",           "d",       "e",     "a",       "o",      "i",      "n",     "th",
    "ch",     "sh",          "qu",      "ph",    "wh",      "ck",     "ng",     "st",    "nd",
    "Hello",  "world",       "JSON",    "true",  "false",   "null",   "London", "Paris", "John",
    "Smith",  "Alice",       "Bob"};

const char* const kPunctuation[] = {
    "{",     "}",     "[",     "]",    "\"",     ":",        ",",     "\":",     "\",",  "\"}",    "{\"",
    "[\"",   "\"]",   "},",    "}}",   "]}",     "],",       "},{",   "}]",      "[{",   "\": \"", "\", \"",
    "\":\"", "\",\"", "\": ",  "\":[", "\":{",   "\": [",    "\": {", ", ",      " {",   " [",     " \"",
    "\n",    "\n\n",  " \n",   "\n  ", "\n    ", "\n      ", "\n\t",  "\t",      "  ",   "   ",    "    ",
    "{\n",   "[\n",   ",\n",   "}\n",  "\n}",    "\n]",      ",\n  ", ",\n    ", "\\n",  "\\\"",   "\\\\",
    "\\t",   "\\u",   "\\u00", ".",    "-",      "+",        "e",     "E",       "e-",   "e+",     ".0",
    ".5",    "0.",    "-1",    "1.",   "00",     "000",      "@",     "@gmail",  ".com", "://",    "http",
    "https", "www",   "T",     "Z",    ":00",    "-0",       "2024",  "2025",    "1999", "12",     "31",
    "_",     "__",    "...",   "!",    "?",      "'",        "(",     ")",       "/",    "#",      "$",
    "%",     "&",     "*",     ";",    "<",      ">",        "=",     "|",       "~",    "`"};

// UTF-8 characters and byte fragments of them (byte-level BPE splits rare characters mid-sequence).
const char* const kUtf8[] = {
    "é",    "è",     "à",    "ü",        "ö",    "ñ",        "ç",        "ß",        "€",        "£",   "中",
    "文",   "日本",  "語",   "한",       "😀",    "👍",        "→",        "—",        "“",        "”",   " é",
    "café", "naïve", "\xc3", "\xe4\xb8", "\xad", "\xf0\x9f", "\x98\x80", "\x9f\x98", "\xe2\x80", "\x94"};

}  // namespace

std::vector<std::string> SyntheticTokens(int32_t size, uint64_t seed) {
  LLAMAY_CHECK(size >= 1024) << "synthetic vocabulary of " << size;
  std::vector<std::string> tokens;
  std::set<std::string> seen;
  auto add = [&](std::string t) {
    if (static_cast<int32_t>(tokens.size()) < size - 2 && !t.empty() && seen.insert(t).second) {
      tokens.push_back(std::move(t));
    }
  };
  for (int b = 0; b < 256; ++b) add(std::string(1, static_cast<char>(b)));
  for (const char* p : kPunctuation) add(p);
  for (int n = 0; n < 100; ++n) add(std::to_string(n));
  for (int n = 100; n < 1000; n += 7) add(std::to_string(n));
  for (const char* u : kUtf8) add(u);
  for (const char* w : kWords) {
    std::string word = w, cap = w;
    cap[0] = static_cast<char>(cap[0] >= 'a' && cap[0] <= 'z' ? cap[0] - 32 : cap[0]);
    for (const std::string& v : {word, " " + word, cap, " " + cap, "\"" + word, word + "\"", word + "\":"})
      add(v);
  }
  // Random-ish tokens: letter runs with an optional leading space or quote, some digits and punctuation,
  // and now and then a UTF-8 fragment.
  Rng rng{seed};
  static const std::string kLetters = "etaoinshrdlcumwfgypbvkjxqz";
  while (static_cast<int32_t>(tokens.size()) < size - 2) {
    std::string t;
    const uint32_t kind = rng.Below(100);
    if (kind < 35) t += ' ';
    if (kind >= 35 && kind < 40) t += '"';
    const uint32_t len = 2 + rng.Below(7);
    for (uint32_t i = 0; i < len; ++i) {
      const uint32_t r = rng.Below(100);
      if (r < 80) {
        t += kLetters[std::min<uint32_t>(rng.Below(26), rng.Below(26))];  // skewed to frequent letters
      } else if (r < 90) {
        t += static_cast<char>('0' + rng.Below(10));
      } else if (r < 97) {
        t += "_-.,:;'!?/()"[rng.Below(12)];
      } else {
        t += static_cast<char>(0x80 + rng.Below(64));  // a continuation byte: an invalid or partial character
      }
    }
    add(std::move(t));
  }
  tokens.push_back("");      // a control token
  tokens.push_back("</s>");  // the end token (its text is never matched)
  return tokens;
}

std::shared_ptr<const Vocabulary> SyntheticVocabulary(int32_t size, uint64_t seed) {
  auto vocab = Vocabulary::Build(SyntheticTokens(size, seed), {size - 1});
  LLAMAY_CHECK(vocab.ok()) << vocab.status().ToString();
  return *vocab;
}

}  // namespace llamay::grammar
