// Helpers shared by the grammar tests: small vocabularies and whole-string matching.
//
// Thread-safety: test code; each helper builds its own objects.
#ifndef LLAMAY_GRAMMAR_TEST_UTIL_H_
#define LLAMAY_GRAMMAR_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/vocabulary.h"

namespace llamay::grammar::testing {

// Tokens 0..255 are the single bytes, 256 is the end token.
inline std::shared_ptr<const Vocabulary> ByteVocab() {
  static const std::shared_ptr<const Vocabulary> kVocab = [] {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
    tokens.push_back("</s>");
    return *Vocabulary::Build(std::move(tokens), {256});
  }();
  return kVocab;
}

inline std::shared_ptr<const Grammar> MustParse(std::string_view gbnf) {
  auto g = ParseGbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.status().ToString() << "\n" << gbnf;
  return g.ok() ? *g : nullptr;
}

// How far the grammar gets through `s` fed byte by byte: kComplete when every byte is accepted and the
// grammar can end there, kIncomplete when every byte is accepted but it cannot end, kRejected otherwise.
enum class Outcome { kComplete, kIncomplete, kRejected };

inline Outcome Feed(const std::shared_ptr<const Grammar>& g, std::string_view s) {
  Matcher m(g, ByteVocab());
  for (char c : s) {
    if (!m.AcceptBytes(std::string_view(&c, 1)).ok()) return Outcome::kRejected;
  }
  return m.CanEnd() ? Outcome::kComplete : Outcome::kIncomplete;
}

inline bool Matches(const std::shared_ptr<const Grammar>& g, std::string_view s) {
  return Feed(g, s) == Outcome::kComplete;
}

}  // namespace llamay::grammar::testing

#endif  // LLAMAY_GRAMMAR_TEST_UTIL_H_
