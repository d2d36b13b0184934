// Unit tests on small hand-built vocabularies: SPM merges and byte fallback, BPE merges and pre-tokenizers,
// special and unknown tokens, decoding clean-up, the streaming detokenizer, UTF-8 helpers and load errors.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tokenizer/detokenizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/unicode.h"

namespace llamay::tokenizer {
namespace {

constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kByte = 6;

// <unk> <s> </s>, then the 256 byte tokens, then `extra` (text, score, type).
VocabSpec SpmSpec(const std::vector<std::tuple<std::string, float, int32_t>>& extra,
                  bool byte_tokens = true) {
  VocabSpec spec;
  spec.model = "llama";
  auto add = [&](std::string text, float score, int32_t type) {
    spec.tokens.push_back(std::move(text));
    spec.scores.push_back(score);
    spec.token_types.push_back(type);
  };
  add("<unk>", 0, kUnknown);
  add("<s>", 0, kControl);
  add("</s>", 0, kControl);
  if (byte_tokens) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 0, kByte);
  }
  for (const auto& [text, score, type] : extra) add(text, score, type);
  return spec;
}

std::unique_ptr<Tokenizer> Make(VocabSpec spec) {
  auto tok = Tokenizer::FromSpec(std::move(spec));
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  if (!tok.ok()) return nullptr;
  (*tok)->vocab().CheckInvariants();
  return std::move(tok).value();
}

std::vector<int32_t> Ids(const Tokenizer& tok, std::initializer_list<const char*> texts) {
  std::vector<int32_t> ids;
  for (const char* t : texts) {
    ids.push_back(tok.FindToken(t));
    EXPECT_GE(ids.back(), 0) << "no token " << t;
  }
  return ids;
}

std::vector<int32_t> Encode(const Tokenizer& tok, std::string_view text, bool add_special = false,
                            bool parse_special = false) {
  auto r = tok.Encode(text, add_special, parse_special);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<int32_t>{};
}

const std::vector<std::tuple<std::string, float, int32_t>> kSpmWords = {
    {"\u2581", -1, kNormal},      {"a", -2, kNormal},     {"b", -2, kNormal},
    {"c", -2, kNormal},           {"ab", -1.5f, kNormal}, {"\u2581a", -1.2f, kNormal},
    {"\u2581ab", -0.5f, kNormal}, {"bc", -0.1f, kNormal}, {"<|user|>", 0, kUserDefined},
};

TEST(SpmTest, MergesByScoreWithSpacePrefix) {
  auto tok = Make(SpmSpec(kSpmWords));
  ASSERT_NE(tok, nullptr);
  // "▁abc": "bc" (-0.1) beats "▁a" (-1.2) and "ab" (-1.5), then "▁a" + "bc" is not a token.
  EXPECT_EQ(Encode(*tok, "abc"), Ids(*tok, {"\u2581a", "bc"}));
  EXPECT_EQ(Encode(*tok, "ab"), Ids(*tok, {"\u2581ab"}));
  EXPECT_EQ(Encode(*tok, " ab"), Ids(*tok, {"\u2581", "\u2581ab"}));
  EXPECT_EQ(Encode(*tok, ""), std::vector<int32_t>{});
  EXPECT_EQ(Encode(*tok, "ab", /*add_special=*/true), (std::vector<int32_t>{1, tok->FindToken("\u2581ab")}));
  EXPECT_EQ(tok->Decode(Encode(*tok, " ab abc")), " ab abc");
  // A continuation (a session's next turn) is not a new run of text: no space is added before it, but one
  // still is after a special token inside it.
  auto cont = tok->Encode("ab", /*add_special=*/false, /*parse_special=*/false, /*continuation=*/true);
  ASSERT_TRUE(cont.ok());
  EXPECT_EQ(*cont, Ids(*tok, {"ab"}));
  auto cont_sp = tok->Encode(" ab", false, false, true);
  ASSERT_TRUE(cont_sp.ok());
  EXPECT_EQ(*cont_sp, Ids(*tok, {"\u2581ab"}));
}

TEST(SpmTest, ByteFallbackAndUnknown) {
  auto tok = Make(SpmSpec(kSpmWords));
  ASSERT_NE(tok, nullptr);
  // U+00E9 is not in the vocabulary: its two UTF-8 bytes become byte tokens.
  EXPECT_EQ(Encode(*tok, "\xC3\xA9"), Ids(*tok, {"\u2581", "<0xC3>", "<0xA9>"}));
  EXPECT_EQ(tok->Decode(Encode(*tok, "a\xC3\xA9z")), "a\xC3\xA9z");
  EXPECT_EQ(tok->TokenToPiece(tok->FindToken("<0xC3>")), "\xC3");

  // Without byte tokens, an unknown character becomes <unk>, which renders as its text only on request.
  auto no_bytes = Make(SpmSpec(kSpmWords, /*byte_tokens=*/false));
  ASSERT_NE(no_bytes, nullptr);
  const std::vector<int32_t> ids = Encode(*no_bytes, "az");
  EXPECT_EQ(ids, (std::vector<int32_t>{no_bytes->FindToken("\u2581a"), 0}));
  EXPECT_EQ(no_bytes->unk(), 0);
  EXPECT_TRUE(no_bytes->IsControl(0));
  EXPECT_EQ(no_bytes->Decode(ids), "a<unk>");
  EXPECT_EQ(no_bytes->Decode(ids, /*render_special=*/false), "a");
}

TEST(SpmTest, ControlTokensOnlyWithParseSpecial) {
  auto tok = Make(SpmSpec(kSpmWords));
  ASSERT_NE(tok, nullptr);
  // With parse_special, "<s>" is BOS and the text after it gets its own leading space.
  EXPECT_EQ(Encode(*tok, "<s>ab", false, true), (std::vector<int32_t>{1, tok->FindToken("\u2581ab")}));
  // Without, "<s>" is text: bytes.
  const std::vector<int32_t> raw = Encode(*tok, "<s>ab", false, false);
  EXPECT_EQ(raw.size(), 5u);  // ▁ < s > ab
  EXPECT_EQ(raw[1], tok->FindToken("<0x3C>"));
  // User-defined tokens are matched either way.
  EXPECT_EQ(Encode(*tok, "<|user|>a", false, false), Ids(*tok, {"<|user|>", "\u2581a"}));
  EXPECT_EQ(Encode(*tok, "a<|user|>", false, false), Ids(*tok, {"\u2581a", "<|user|>"}));
  EXPECT_TRUE(tok->IsEog(2));  // </s> is EOS
  EXPECT_FALSE(tok->IsEog(1));
}

// A byte-level vocabulary: the 256 byte images, then merged tokens.
VocabSpec BpeSpec(const std::string& pre, const std::vector<std::string>& merges,
                  const std::vector<std::pair<std::string, int32_t>>& extra) {
  VocabSpec spec;
  spec.model = "gpt2";
  spec.pre = pre;
  for (int b = 0; b < 256; ++b) spec.tokens.push_back(internal::ByteToUnicode(static_cast<uint8_t>(b)));
  spec.token_types.assign(256, kNormal);
  for (const auto& m : merges) {
    spec.merges.push_back(m);
    const size_t space = m.find(' ');
    spec.tokens.push_back(m.substr(0, space) + m.substr(space + 1));
    spec.token_types.push_back(kNormal);
  }
  for (const auto& [text, type] : extra) {
    spec.tokens.push_back(text);
    spec.token_types.push_back(type);
  }
  spec.eos = spec.bos = static_cast<int64_t>(spec.tokens.size()) - 1;
  return spec;
}

TEST(BpeTest, MergesByRank) {
  auto tok = Make(BpeSpec("gpt-2", {"l l", "h e", "he ll", "hell o", "\u0120 w", "o r", "\u0120w or"},
                          {{"<|endoftext|>", kControl}}));
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(Encode(*tok, "hello world"), Ids(*tok, {"hello", "\u0120wor", "l", "d"}));
  EXPECT_EQ(tok->Decode(Encode(*tok, "hello world")), "hello world");
  // Unmerged bytes (including a multi-byte character) stay byte tokens and decode to the same bytes.
  EXPECT_EQ(tok->Decode(Encode(*tok, "h\xE2\x82\xAC!")), "h\xE2\x82\xAC!");
  EXPECT_EQ(Encode(*tok, "<|endoftext|>", false, true), Ids(*tok, {"<|endoftext|>"}));
  EXPECT_EQ(Encode(*tok, "<|endoftext|>", false, false).size(), 13u);
  EXPECT_TRUE(tok->IsEog(tok->FindToken("<|endoftext|>")));
  EXPECT_EQ(tok->TokenToPiece(tok->FindToken("\u0120wor")), " wor");
}

TEST(BpeTest, DecodeCleansSpacesLikeTheReference) {
  auto tok = Make(BpeSpec("gpt-2", {}, {}));
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Decode(Encode(*tok, "a , b . c ' d 's 're 't")), "a, b. c'd's're 't");
  auto raw = Make(BpeSpec("deepseek-coder", {}, {}));  // declares no clean-up
  ASSERT_NE(raw, nullptr);
  EXPECT_EQ(raw->Decode(Encode(*raw, "a , b ' c")), "a , b ' c");
}

std::vector<std::string> Split(std::string_view pre, std::string_view text) {
  const internal::PreTokenizerDef* def = internal::FindPreTokenizer(pre);
  EXPECT_NE(def, nullptr) << pre;
  if (def == nullptr) return {};
  auto splitter = internal::RegexSplitter::Create(def->regexes);
  EXPECT_TRUE(splitter.ok()) << splitter.status().ToString();
  auto words = (*splitter)->Split(text);
  EXPECT_TRUE(words.ok()) << words.status().ToString();
  return words.ok() ? *words : std::vector<std::string>{};
}

TEST(PreTokenizerTest, Llama3AndGpt2Patterns) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Split("llama3", "Hello world's  1234567\n\n x"),
            (V{"Hello", " world", "'s", " ", " ", "123", "456", "7", "\n\n", " x"}));
  EXPECT_EQ(Split("llama3", "I'VE  !!\r\n"), (V{"I", "'VE", " ", " !!\r\n"}));
  EXPECT_EQ(Split("gpt-2", "I've   got\t$5"), (V{"I", "'ve", "  ", " got", "\t", "$", "5"}));
  // Non-ASCII whitespace counts as whitespace; every regex compiles.
  EXPECT_EQ(Split("gpt-2", "a\u3000\u3000b"), (V{"a", "\u3000", "\u3000", "b"}));
  for (std::string_view name : internal::SupportedPreTokenizers())
    EXPECT_FALSE(Split(name, "x y 12").empty());
}

TEST(PreTokenizerTest, SequencesKeepUnmatchedText) {
  using V = std::vector<std::string>;
  // starcoder: digits first, then GPT-2 on every piece.
  EXPECT_EQ(Split("starcoder", "ab12 c"), (V{"ab", "1", "2", " c"}));
  // Malformed UTF-8 becomes U+FFFD, one per bad byte.
  EXPECT_EQ(Split("gpt-2", "a\xFF"), (V{"a", "\uFFFD"}));
}

TEST(PreTokenizerTest, VeryLongRunsDoNotFail) {
  // The GPT-4o pattern backtracks per letter; a 300k-letter word outgrows the JIT stack and must still split.
  const std::string word(300000, 'a');
  EXPECT_EQ(Split("gpt-4o", word), std::vector<std::string>{word});
  EXPECT_EQ(Split("llama3", std::string(300000, ' ') + "x").size(), 2u);
}

TEST(PreTokenizerTest, RewritesWhitespaceEscapes) {
  EXPECT_EQ(internal::RewriteWhitespaceEscapes(R"(\s+(?!\S)|[^\s\p{L}])"),
            R"([\t\n\x0B\f\r ]+(?![^\t\n\x0B\f\r ])|[^\t\n\x0B\f\r \p{L}])");
  EXPECT_EQ(internal::RewriteWhitespaceEscapes(R"([]\s]\\s)"), R"([]\t\n\x0B\f\r ]\\s)");
}

TEST(DetokenizerTest, HoldsSplitCharacterUntilComplete) {
  auto tok = Make(SpmSpec(kSpmWords));
  ASSERT_NE(tok, nullptr);
  StreamingDetokenizer stream(*tok);
  EXPECT_EQ(stream.Push(tok->FindToken("\u2581a")), " a");
  EXPECT_EQ(stream.Push(tok->FindToken("<0xE2>")), "");
  EXPECT_EQ(stream.pending(), 1u);
  EXPECT_EQ(stream.Push(tok->FindToken("<0x82>")), "");
  EXPECT_EQ(stream.Push(tok->FindToken("<0xAC>")), "\xE2\x82\xAC");
  EXPECT_EQ(stream.Push(tok->FindToken("<0xF0>")), "");
  EXPECT_EQ(stream.Push(tok->FindToken("<0x9F>")), "");
  // A sequence broken by an ASCII byte can never complete: everything is released.
  EXPECT_EQ(stream.Push(tok->FindToken("b")),
            "\xF0\x9F"
            "b");
  EXPECT_EQ(stream.Push(tok->FindToken("<0xC3>")), "");
  EXPECT_EQ(stream.Flush(), "\xC3");
  EXPECT_EQ(stream.Push(tok->FindToken("<0xA9>")), "\xA9");  // a stray continuation byte is not held
  StreamingDetokenizer quiet(*tok, /*render_special=*/false);
  EXPECT_EQ(quiet.Push(2), "");
}

TEST(UnicodeTest, LossyDecodeAndCompletePrefix) {
  using internal::DecodeUtf8Lossy;
  EXPECT_EQ(DecodeUtf8Lossy("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\xA6\x99"),
            (std::vector<uint32_t>{'a', 0xE9, 0x20AC, 0x1F999}));
  EXPECT_EQ(DecodeUtf8Lossy("\x80\xC3(\xE2\x82"),
            (std::vector<uint32_t>{0xFFFD, 0xFFFD, '(', 0xFFFD, 0xFFFD}));
  EXPECT_EQ(internal::CompleteUtf8Prefix("ab\xE2\x82"), 2u);
  EXPECT_EQ(internal::CompleteUtf8Prefix("ab\xE2\x82\xAC"), 5u);
  EXPECT_EQ(internal::CompleteUtf8Prefix("\xFF"), 1u);
  EXPECT_EQ(internal::UnicodeToByte(0x120), ' ');
  EXPECT_EQ(internal::ByteToUnicode('A'), "A");
}

TEST(LoadTest, ErrorsNameTheValue) {
  VocabSpec bert = SpmSpec({});
  bert.model = "bert";
  auto r = Tokenizer::FromSpec(bert);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("'bert'"), std::string::npos) << r.status().message();

  auto pre = Tokenizer::FromSpec(BpeSpec("no-such-pre", {}, {}));
  ASSERT_FALSE(pre.ok());
  EXPECT_EQ(pre.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(pre.status().message().find("'no-such-pre'"), std::string::npos) << pre.status().message();

  VocabSpec dup = SpmSpec({{"a", 0, kNormal}, {"a", 0, kNormal}});
  EXPECT_EQ(Tokenizer::FromSpec(dup).status().code(), StatusCode::kInvalidArgument);

  VocabSpec no_bos = BpeSpec("gpt-2", {}, {});
  no_bos.bos = std::nullopt;
  no_bos.tokens.resize(11);  // the BPE default BOS id (11) is then out of range
  no_bos.token_types.resize(11);
  no_bos.add_bos = true;
  auto missing = Tokenizer::FromSpec(no_bos);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("bos_token_id"), std::string::npos) << missing.status().message();
}

// The text indexes (text_index.h): every text finds its id in a vocabulary large enough for collisions, a
// repeated merge keeps its first rank, a merge matches only its exact "left right", and a special id found
// by text is the lowest id among the rule's texts.
TEST(LoadTest, IndexesEveryTextAndTheFirstRankOfAMerge) {
  std::vector<std::pair<std::string, int32_t>> extra;
  for (int i = 0; i < 5000; ++i) {
    char text[16];
    std::snprintf(text, sizeof(text), "t%d", i);
    extra.emplace_back(text, kNormal);
  }
  extra.emplace_back("<|fim_prefix|>", kNormal);
  extra.emplace_back("<PRE>", kNormal);
  VocabSpec spec = BpeSpec("gpt-2", {"a b", "c d", "ab c"}, extra);
  spec.merges.push_back("a b");      // a repeat: rank 0 stays
  spec.merges.push_back("nospace");  // no space after the first character: the empty pair
  auto v = BuildVocab(spec);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  v->CheckInvariants();
  for (int32_t id = 0; id < v->n_vocab(); ++id) ASSERT_EQ(v->Find(v->tokens[id].text), id);
  EXPECT_EQ(v->Find("t5000"), -1);
  EXPECT_EQ(v->Find(""), -1);
  EXPECT_EQ(v->MergeRank("a", "b"), 0);
  EXPECT_EQ(v->MergeRank("c", "d"), 1);
  EXPECT_EQ(v->MergeRank("ab", "c"), 2);
  EXPECT_EQ(v->MergeRank("", ""), 4);
  EXPECT_EQ(v->MergeRank("a", "bc"), -1);
  EXPECT_EQ(v->MergeRank("ab", ""), -1);
  EXPECT_EQ(v->MergeRank("b", "a"), -1);
  // Both texts name the FIM prefix; the lower id wins.
  EXPECT_EQ(v->fim_pre, v->Find("<|fim_prefix|>"));
  EXPECT_LT(v->Find("<|fim_prefix|>"), v->Find("<PRE>"));

  VocabSpec reversed = BpeSpec("gpt-2", {}, {{"<PRE>", kNormal}, {"<|fim_prefix|>", kNormal}});
  auto r = BuildVocab(reversed);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->fim_pre, r->Find("<PRE>"));  // the lowest id wins, whatever the list's order
  EXPECT_TRUE(r->tokens[r->fim_pre].attr & kAttrControl);
}

TEST(LoadTest, EndOfGenerationByText) {
  auto tok = Make(BpeSpec("qwen2", {}, {{"<|im_start|>", kControl}, {"<|im_end|>", kUserDefined}}));
  ASSERT_NE(tok, nullptr);
  const int32_t im_end = tok->FindToken("<|im_end|>");
  EXPECT_TRUE(tok->IsEog(im_end));
  EXPECT_TRUE(tok->IsControl(im_end));  // promoted: control-looking text
  EXPECT_FALSE(tok->IsEog(tok->FindToken("<|im_start|>")));
  EXPECT_EQ(Encode(*tok, "<|im_start|>hi<|im_end|>", false, true)[0], tok->FindToken("<|im_start|>"));
}

TEST(SpmTest, Phi3SpecialTokensSwallowFollowingWhitespace) {
  VocabSpec spec = SpmSpec(kSpmWords);
  spec.name = "Phi3";  // the reference keys this rule on general.name
  auto tok = Make(spec);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(Encode(*tok, "<|user|> \n a"), Ids(*tok, {"<|user|>", "\u2581a"}));
  auto plain = Make(SpmSpec(kSpmWords));
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(Encode(*plain, "<|user|> a"), Ids(*plain, {"<|user|>", "\u2581", "\u2581a"}));
}

TEST(ConcurrencyTest, EncodeFromManyThreads) {
  auto tok = Make(BpeSpec("llama3", {"l l", "h e", "he ll", "hell o", "\u0120 w", "o r", "\u0120w or"}, {}));
  ASSERT_NE(tok, nullptr);
  const std::string text = "hello world, hello 12345 worlds!\n";
  const std::vector<int32_t> want = Encode(*tok, text);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        auto ids = tok->Encode(text, false, false);
        mismatches[t] += !ids.ok() || *ids != want;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace llamay::tokenizer
