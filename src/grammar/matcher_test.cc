// Matcher tests: tokens that straddle literals and UTF-8 characters, the mask agreeing with Accept, end and
// control tokens, failed accepts leaving the state unchanged, forks, and the helpers (MustEnd, MinBytesToEnd,
// TokenMask::Apply).
#include "grammar/matcher.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/synthetic_vocab.h"
#include "grammar/test_util.h"

namespace llamay::grammar {
namespace {

std::shared_ptr<const Vocabulary> Vocab(std::vector<std::string> tokens) {
  tokens.push_back("");       // control token
  tokens.push_back("<eos>");  // end token
  const int32_t n = static_cast<int32_t>(tokens.size());
  auto v = Vocabulary::Build(std::move(tokens), {n - 1});
  EXPECT_TRUE(v.ok());
  return *v;
}

// The ids allowed by the mask, as their bytes.
std::vector<std::string> Allowed(const Matcher& m) {
  TokenMask mask;
  m.FillMask(&mask);
  std::vector<std::string> out;
  for (int32_t t = 0; t < mask.size(); ++t) {
    if (mask.allowed(t))
      out.push_back(m.vocabulary().is_end_token(t) ? "<eos>" : m.vocabulary().token_bytes(t));
  }
  return out;
}

int32_t Id(const Vocabulary& v, std::string_view bytes) {
  for (int32_t t = 0; t < v.size(); ++t) {
    if (v.token_bytes(t) == bytes) return t;
  }
  ADD_FAILURE() << "no token " << bytes;
  return -1;
}

using Strings = std::vector<std::string>;

TEST(Matcher, TokensStraddleLiterals) {
  auto g = testing::MustParse(R"gbnf(root ::= "hello world" ( "!" | "?" )?)gbnf");
  auto v = Vocab({"hel", "lo w", "orld!", "hello", " world", "!", "h", "x", "orld", "?!"});
  Matcher m(g, v);
  EXPECT_EQ(Allowed(m), (Strings{"hel", "hello", "h"}));
  ASSERT_TRUE(m.Accept(Id(*v, "hel")).ok());
  EXPECT_EQ(Allowed(m), (Strings{"lo w"}));
  ASSERT_TRUE(m.Accept(Id(*v, "lo w")).ok());
  EXPECT_EQ(Allowed(m), (Strings{"orld!", "orld"}));
  ASSERT_TRUE(m.Accept(Id(*v, "orld")).ok());
  EXPECT_TRUE(m.CanEnd());
  EXPECT_FALSE(m.MustEnd());
  EXPECT_EQ(Allowed(m), (Strings{"!", "<eos>"}));  // "?!" would go past the end of the grammar
  ASSERT_TRUE(m.Accept(Id(*v, "!")).ok());
  EXPECT_TRUE(m.MustEnd());
  EXPECT_EQ(Allowed(m), (Strings{"<eos>"}));
}

TEST(Matcher, TokensSplitUtf8Characters) {
  // é = C3 A9, 中 = E4 B8 AD, 😀 = F0 9F 98 80.
  auto g = testing::MustParse(R"gbnf(root ::= "é" [^a-z]+ "!")gbnf");
  auto v = Vocab({"\xC3", "\xA9\xE4", "\xB8", "\xAD", "\xF0\x9F", "\x98\x80!", "é", "a", "\xA9", "!",
                  "\xE4\xB8\xAD\xF0"});
  Matcher m(g, v);
  EXPECT_EQ(Allowed(m), (Strings{"\xC3", "é"}));
  ASSERT_TRUE(m.Accept(Id(*v, "\xC3")).ok());
  EXPECT_EQ(Allowed(m), (Strings{"\xA9\xE4", "\xA9"}));  // the rest of é, alone or with the start of 中
  ASSERT_TRUE(m.Accept(Id(*v, "\xA9\xE4")).ok());
  // E4 takes any continuation byte next (80..BF); a lead byte or ASCII would break the character.
  EXPECT_EQ(Allowed(m), (Strings{"\xB8", "\xAD", "\x98\x80!", "\xA9"}));
  EXPECT_FALSE(m.Accept(Id(*v, "\xC3")).ok());
  EXPECT_FALSE(m.Accept(Id(*v, "a")).ok());
  ASSERT_TRUE(m.Accept(Id(*v, "\xB8")).ok());
  ASSERT_TRUE(m.Accept(Id(*v, "\xAD")).ok());
  EXPECT_FALSE(m.Accept(Id(*v, "\xAD")).ok());  // 中 is complete: a stray continuation byte is refused
  EXPECT_FALSE(m.CanEnd());
  ASSERT_TRUE(m.Accept(Id(*v, "\xE4\xB8\xAD\xF0")).ok());    // a whole 中 and the first byte of 😀
  EXPECT_EQ(Allowed(m), (Strings{"\xB8", "\xAD", "\xA9"}));  // F0 takes three continuations: not "!"
  ASSERT_TRUE(m.AcceptBytes("\x9F").ok());
  EXPECT_EQ(Allowed(m), (Strings{"\xB8", "\xAD", "\x98\x80!", "\xA9"}));
  ASSERT_TRUE(m.Accept(Id(*v, "\x98\x80!")).ok());
  EXPECT_TRUE(m.CanEnd());
  EXPECT_FALSE(m.MustEnd());  // "!" is also one of [^a-z]+, so more may follow
}

TEST(Matcher, EndAndControlTokens) {
  auto g = testing::MustParse(R"gbnf(root ::= "a"+)gbnf");
  auto v = Vocab({"a", "aa", "b"});
  const int32_t control = v->size() - 2, eos = v->size() - 1;
  Matcher m(g, v);
  EXPECT_EQ(m.Accept(eos).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.Accept(control).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.Accept(v->size()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Allowed(m), (Strings{"a", "aa"}));
  ASSERT_TRUE(m.Accept(Id(*v, "aa")).ok());
  EXPECT_EQ(Allowed(m), (Strings{"a", "aa", "<eos>"}));
  ASSERT_TRUE(m.Accept(eos).ok());
  EXPECT_TRUE(m.IsTerminated());
  EXPECT_EQ(Allowed(m), (Strings{}));
  EXPECT_EQ(m.Accept(Id(*v, "a")).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.AcceptBytes("a").code(), StatusCode::kFailedPrecondition);
  m.Reset();
  EXPECT_FALSE(m.IsTerminated());
  EXPECT_FALSE(m.CanEnd());
}

TEST(Matcher, RejectedInputLeavesStateUnchanged) {
  auto g = AnyJson();
  Matcher m(g, testing::ByteVocab());
  ASSERT_TRUE(m.AcceptBytes("{\"a\":[1,").ok());
  TokenMask before, after;
  m.FillMask(&before);
  const Status s = m.AcceptBytes("2}");
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "bytes is not allowed by the grammar here: byte 1 of 2 (0x7d) is rejected");
  m.FillMask(&after);
  EXPECT_TRUE(std::equal(before.words().begin(), before.words().end(), after.words().begin()));
  ASSERT_TRUE(m.AcceptBytes("2]}").ok());
  EXPECT_TRUE(m.MustEnd());
}

TEST(Matcher, ForksAreIndependent) {
  Matcher a(AnyJson(), testing::ByteVocab());
  ASSERT_TRUE(a.AcceptBytes("[\"x").ok());
  Matcher b = a;
  ASSERT_TRUE(a.AcceptBytes("\"]").ok());
  ASSERT_TRUE(b.AcceptBytes("y\",2]").ok());
  EXPECT_TRUE(a.MustEnd());
  EXPECT_TRUE(b.MustEnd());
  EXPECT_FALSE(b.AcceptBytes("]").ok());
}

TEST(Matcher, MinBytesToEndAndAllowsByte) {
  Matcher m(AnyJson(), testing::ByteVocab());
  EXPECT_EQ(m.MinBytesToEnd(), 1);  // "0"
  ASSERT_TRUE(m.AcceptBytes("{\"ab").ok());
  EXPECT_EQ(m.MinBytesToEnd(), 4);  // "\":0}"
  EXPECT_TRUE(m.AllowsByte('"'));
  EXPECT_FALSE(m.AllowsByte('\n'));
  ASSERT_TRUE(m.AcceptBytes("\":[[").ok());
  EXPECT_EQ(m.MinBytesToEnd(), 3);  // "]]}"
  ASSERT_TRUE(m.AcceptBytes("]]}").ok());
  EXPECT_EQ(m.MinBytesToEnd(), 0);
  EXPECT_TRUE(m.CanEnd());
}

TEST(Matcher, DeepNestingStaysCompact) {
  Matcher m(AnyJson(), testing::ByteVocab());
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(m.AcceptBytes("[{\"k\":").ok());
  ASSERT_TRUE(m.AcceptBytes("1").ok());
  EXPECT_LE(m.num_stacks(), 4);
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(m.AcceptBytes("}]").ok());
  EXPECT_TRUE(m.MustEnd());
}

TEST(Matcher, AmbiguousGrammars) {
  auto g = testing::MustParse(R"gbnf(
root ::= a a "!"
a ::= "x"*
)gbnf");
  Matcher m(g, testing::ByteVocab());
  ASSERT_TRUE(m.AcceptBytes("xxxx").ok());
  EXPECT_LE(m.num_stacks(), 8);
  ASSERT_TRUE(m.AcceptBytes("!").ok());
  EXPECT_TRUE(m.MustEnd());
}

TEST(Matcher, TokenMaskApply) {
  TokenMask mask(70);
  mask.Set(3);
  mask.Set(69);
  EXPECT_EQ(mask.Count(), 2);
  std::vector<float> logits(70, 1.0f);
  mask.Apply(logits);
  EXPECT_EQ(logits[3], 1.0f);
  EXPECT_EQ(logits[69], 1.0f);
  EXPECT_TRUE(std::isinf(logits[0]) && logits[0] < 0);
  EXPECT_TRUE(std::isinf(logits[68]));
}

TEST(Matcher, VocabularyErrors) {
  EXPECT_FALSE(Vocabulary::Build({}, {}).ok());
  EXPECT_FALSE(Vocabulary::Build({"a"}, {1}).ok());
  EXPECT_FALSE(Vocabulary::Build({"a"}, {-1}).ok());
  EXPECT_FALSE(Vocabulary::Build({std::string(70000, 'a')}, {}).ok());
  auto v = Vocabulary::Build({"a", "ab", "a", "b", ""}, {4});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ((*v)->trie().size(), 4);  // root, a, ab, b
}

// The mask allows exactly the tokens Accept accepts, along random walks through several grammars.
TEST(Matcher, MaskAgreesWithAccept) {
  const auto vocab = SyntheticVocabulary(2048, 3);
  auto schema = FromJsonSchemaText(R"({"type":"object","properties":{"name":{"type":"string","maxLength":5},
      "n":{"type":"integer","minimum":-20,"maximum":300},"tags":{"type":"array","items":{"enum":["a","b c"]}}},
      "required":["name","n"],"additionalProperties":false})");
  ASSERT_TRUE(schema.ok());
  auto chess = testing::MustParse(R"gbnf(
root ::= ( [1-9] [0-9]? ". " move " " move "\n" )+
move ::= ( [a-h] [1-8] | [NBKQR] [a-h]? [1-8]? "x"? [a-h] [1-8] | "O-O" "-O"? ) [+#]?
)gbnf");
  std::mt19937 rng(5);
  for (const auto& g : {AnyJson(), *schema, chess}) {
    for (int walk = 0; walk < 6; ++walk) {
      Matcher m(g, vocab);
      TokenMask mask;
      for (int step = 0; step < 12 && !m.IsTerminated(); ++step) {
        m.FillMask(&mask);
        std::vector<int32_t> allowed;
        for (int32_t t = 0; t < vocab->size(); ++t) {
          Matcher copy = m;
          const bool ok = copy.Accept(t).ok();
          ASSERT_EQ(mask.allowed(t), ok) << "token '" << vocab->token_bytes(t) << "' at step " << step;
          if (ok) allowed.push_back(t);
        }
        ASSERT_FALSE(allowed.empty());
        ASSERT_TRUE(m.Accept(allowed[rng() % allowed.size()]).ok());
      }
    }
  }
}

// The mask cache and the walk's shortcuts (whole subtrees of plain text) change nothing: along texts in
// strings, counted strings, numbers and a GBNF loop, cached masks equal full walks equal Accept.
TEST(Matcher, MaskCacheAndShortcutsAgreeWithAccept) {
  const auto vocab = SyntheticVocabulary(4096, 9);
  auto counted = FromJsonSchemaText(R"({"type":"object","properties":{"s":{"type":"string","maxLength":12},
      "p":{"type":"string","pattern":"^[a-z ]{0,5}x$"},"n":{"type":"number"}},"required":["s","p","n"],
      "additionalProperties":false})");
  ASSERT_TRUE(counted.ok()) << counted.status().ToString();
  auto loop = testing::MustParse(R"gbnf(root ::= ( [^x]* "x" )+ "!")gbnf");
  const std::vector<std::pair<std::shared_ptr<const Grammar>, std::string>> cases = {
      {AnyJson(), R"({"key": "some text with words", "n": [12.5e3, "\u00e9 é"]})"},
      {*counted, R"({"s": "hello wor", "p": "ab cx", "n": -1.25})"},
      {loop, "abc def xyz x!"}};
  for (const auto& [g, text] : cases) {
    Matcher cached(g, vocab), plain(g, vocab);
    plain.set_mask_cache(false);
    TokenMask a, b;
    for (size_t pos = 0; pos <= text.size(); ++pos) {
      for (int k = 0; k < 3; ++k) cached.FillMask(&a);  // the second lone visit builds the entry
      plain.FillMask(&b);
      ASSERT_TRUE(std::equal(a.words().begin(), a.words().end(), b.words().begin())) << text.substr(0, pos);
      for (int32_t t = 0; t < vocab->size(); t += 3) {
        Matcher copy = plain;
        ASSERT_EQ(b.allowed(t), copy.Accept(t).ok())
            << text.substr(0, pos) << " + '" << vocab->token_bytes(t) << "'";
      }
      if (pos < text.size()) {
        ASSERT_TRUE(cached.AcceptBytes(text.substr(pos, 1)).ok()) << text.substr(0, pos + 1);
        ASSERT_TRUE(plain.AcceptBytes(text.substr(pos, 1)).ok());
      }
    }
  }
}

}  // namespace
}  // namespace llamay::grammar
