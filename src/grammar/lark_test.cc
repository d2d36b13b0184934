// Lark-to-regex tests: exact regexes for small grammars, lark's common terminals, Python regex syntax
// translated, the refusals with their messages, custom-tool regexes, and Codex's real apply_patch grammar
// compiled through the JSON Schema pattern path and matched over bytes.
//
// testdata/apply_patch.lark is verbatim from github.com/openai/codex,
// codex-rs/core/src/tools/handlers/tool_apply_patch.lark (commit 71163530a46dc568775f9ee95a9b57de3385cd9a).
#include "grammar/lark.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>
#include <string>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"
#include "grammar/test_util.h"

namespace llamay::grammar {
namespace {

using Json = nlohmann::ordered_json;
using testing::Feed;
using testing::Outcome;

// The regex of `lark`, which PatternToGbnf must also accept.
std::string RegexOf(std::string_view lark) {
  auto re = LarkToRegex(lark);
  EXPECT_TRUE(re.ok()) << re.status().ToString() << "\n" << lark;
  if (!re.ok()) return "";
  auto gbnf = internal::PatternToGbnf(*re);
  EXPECT_TRUE(gbnf.ok()) << gbnf.status().ToString() << "\n" << *re;
  return *re;
}

std::string ErrorOf(std::string_view lark) {
  auto re = LarkToRegex(lark);
  EXPECT_FALSE(re.ok()) << "converted to " << (re.ok() ? *re : "") << "\n" << lark;
  return re.ok() ? "" : re.status().message();
}

std::shared_ptr<const Grammar> PatternGrammar(const std::string& regex) {
  auto g = FromJsonSchema(Json{{"type", "string"}, {"pattern", regex}});
  EXPECT_TRUE(g.ok()) << g.status().ToString() << "\n" << regex;
  return g.ok() ? *g : nullptr;
}

// The verdict of the schema grammar on `value` as a JSON string (quoted and escaped), fed byte by byte.
Outcome FeedValue(const std::shared_ptr<const Grammar>& g, const std::string& value) {
  return Feed(g, Json(value).dump());
}

std::string ReadTestdata(const std::string& name) {
  std::ifstream in(std::filesystem::path(LLAMAY_SOURCE_DIR) / "src/grammar/testdata" / name,
                   std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Lark, LiteralsAreEscaped) {
  EXPECT_EQ(RegexOf(R"(start: "a.b/c")"), R"(^a\.b\/c$)");
  EXPECT_EQ(RegexOf(R"(start: "(x)[y]{z}|^$*+?\\")"), R"(^\(x\)\[y\]\{z\}\|\^\$\*\+\?\\$)");
  EXPECT_EQ(RegexOf(R"(start: "\"q\"\t\n-")"), R"(^"q"\t\n-$)");
  EXPECT_EQ(RegexOf(R"(start: "\d")"), R"(^\\d$)");  // lark keeps an unknown escape's backslash
  EXPECT_EQ(RegexOf("start: \"\xC3\xA9\\u00e8\\U0001F600\""), R"(^\u00E9\u00E8\u{1F600}$)");
}

TEST(Lark, AlternationOptionalRepetition) {
  EXPECT_EQ(RegexOf(R"(start: "a" | "b" | "cd")"), "^(?:[ab]|cd)$");
  EXPECT_EQ(RegexOf(R"(start: "a" ["b"] "c"?)"), "^ab?c?$");
  EXPECT_EQ(RegexOf("start: x+ y* z\nx: \"ab\"\ny: \"c\"\nz: (\"d\" | \"ef\")~2"), "^(?:ab)+c*(?:d|ef){2}$");
  EXPECT_EQ(RegexOf(R"(start: "a"~3 "b"~2..4 "c"~0..1 "d"~1)"), "^a{3}b{2,4}c?d$");
  EXPECT_EQ(RegexOf(R"(start: ("x" | "y")+ ["z" | "w"])"), "^[xy]+[wz]?$");
  EXPECT_EQ(RegexOf(R"(start: "a" |)"), "^a?$");              // an empty alternative
  EXPECT_EQ(RegexOf(R"(start: ("a"?)* ("b"+)?)"), "^a*b*$");  // nested repetitions collapse
  EXPECT_EQ(RegexOf(R"(start: ("ab" "c")? "d")"), "^(?:abc)?d$");
}

TEST(Lark, ImportedTerminals) {
  EXPECT_EQ(RegexOf("start: \"x\" LF\n%import common.LF\n"), R"(^x\n$)");
  EXPECT_EQ(RegexOf("start: INT (WS_INLINE INT)*\n%import common (INT, WS_INLINE)\n"),
            R"(^[0-9]+(?:[\t ]+[0-9]+)*$)");
  EXPECT_EQ(RegexOf("start: ESCAPED_STRING\n%import common.ESCAPED_STRING"), R"(^"(?:[^\n"\\]|\\[^\n])*"$)");
  EXPECT_EQ(RegexOf("start: NL+\n%import common.NEWLINE -> NL"), R"(^(?:\r?\n)+$)");
  EXPECT_EQ(RegexOf("start: WORD \"=\" SIGNED_INT\n%import common.WORD\n%import common.SIGNED_INT"),
            R"(^[A-Za-z]+=[+\-]?[0-9]+$)");
  EXPECT_EQ(RegexOf("start: WS\n%import common.WS"), R"(^[\t\n\f\r ]+$)");
  EXPECT_EQ(RegexOf("start: CNAME\n%import common.CNAME"), "^[A-Z_a-z][0-9A-Z_a-z]*$");
}

// A C comment ends at its first "*/", as lark's lazy /.*?/s makes it; an empty start rule is the empty
// string.
TEST(Lark, CommentsAndTheEmptyString) {
  const std::string re = RegexOf("start: C_COMMENT\n%import common.C_COMMENT");
  EXPECT_EQ(re, R"(^\/\*(?:[^*]|\*+[^*\/])*\*+\/$)");
  auto g = PatternGrammar(re);
  ASSERT_NE(g, nullptr);
  for (const char* ok : {"/**/", "/* a */", "/* ** */", "/***/", "/*\n*/"}) {
    EXPECT_EQ(FeedValue(g, ok), Outcome::kComplete) << ok;
  }
  for (const char* bad : {"/* a */ b */", "/*/", "/* a", "/**/*/"}) {
    EXPECT_NE(FeedValue(g, bad), Outcome::kComplete) << bad;
  }
  EXPECT_EQ(RegexOf("start:"), "^$");
  auto empty = PatternGrammar("^$");
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(Feed(empty, "\"\""), Outcome::kComplete);
  EXPECT_EQ(Feed(empty, "\"a\""), Outcome::kRejected);
}

TEST(Lark, RulesTerminalsAndSyntax) {
  const std::string re = RegexOf(R"(
// a comment
?start: _item+ -> items      # an alias and a hash comment
!_item.2: KEY "=" VALUE ";"
        | "#"
        // a comment between continuation lines
        | "@" \
          "@"
KEY.3: "k"i /[0-9]/
VALUE: "0".."9"+
)");
  EXPECT_EQ(re, "^(?:[Kk][0-9]=[0-9]+;|#|@@)+$");
}

TEST(Lark, PythonRegexTranslated) {
  EXPECT_EQ(RegexOf("start: /a.b/"), R"(^a[^\n]b$)");
  EXPECT_EQ(RegexOf("start: /a.b/s"), R"(^a[\s\S]b$)");
  EXPECT_EQ(RegexOf("start: /[a-z_]\\w*/"), "^[_a-z][0-9A-Z_a-z]*$");
  EXPECT_EQ(RegexOf("start: /[]a]{,2}x{/"), R"(^[\]a]{0,2}x\{$)");
  EXPECT_EQ(RegexOf("start: /\\x41\\101\\0/"), R"(^AA\x00$)");
  EXPECT_EQ(RegexOf("start: /(?P<n>ab)(?#note)c*?/"), "^abc*$");
  EXPECT_EQ(RegexOf("start: /\\//"), R"(^\/$)");
  EXPECT_EQ(RegexOf("start: /[^\\d\\s-]/"),
            R"(^[^\t-\r\x1C- \-0-9\u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]$)");
  EXPECT_EQ(RegexOf("start: /ab/i /[^a]/i"), "^[Aa][Bb][^Aa]$");
  EXPECT_EQ(RegexOf("start: /[a-c]/i \"x\"i"), "^[A-Ca-c][Xx]$");
}

TEST(Lark, RefusesRecursion) {
  EXPECT_EQ(ErrorOf(R"lark(start: "(" start ")" | "x")lark"),
            "Lark grammar line 1: rule \"start\" is recursive (start -> start): the language of a recursive "
            "grammar may not be regular, so it has no regex");
  const std::string indirect = ErrorOf("start: a\na: \"x\" b?\nb: \"y\" a\n");
  EXPECT_NE(indirect.find("rule \"a\" is recursive (a -> b -> a)"), std::string::npos) << indirect;
  const std::string terminal = ErrorOf("start: A\nA: \"x\" B?\nB: A\n");
  EXPECT_NE(terminal.find("terminal \"A\" is recursive (A -> B -> A)"), std::string::npos) << terminal;
}

TEST(Lark, RefusesWhatItCannotConvert) {
  EXPECT_EQ(ErrorOf("start: foo"),
            "Lark grammar line 1: rule \"foo\" is used but not defined (in rule \"start\")");
  EXPECT_EQ(ErrorOf("start: \"a\" BAR\n"),
            "Lark grammar line 1: terminal \"BAR\" is used but not defined (in rule \"start\")");
  const std::string ignore = ErrorOf("start: WORD+\n%import common.WORD\n%import common.WS\n%ignore WS\n");
  EXPECT_EQ(ignore.rfind("Lark grammar line 4: %ignore is not supported: it lets the ignored text appear", 0),
            0u)
      << ignore;
  EXPECT_NE(ErrorOf("start: A\n%declare A").find("%declare is not supported"), std::string::npos);
  EXPECT_NE(ErrorOf("start: pair{\"a\"}\npair{x}: x x").find("templates"), std::string::npos);
  EXPECT_NE(ErrorOf("pair{x}: x x\nstart: \"a\"").find("rule \"pair\" is a template"), std::string::npos);
  EXPECT_EQ(ErrorOf("start: /(?=a)a/"),
            "Lark grammar line 1: in /(?=a)a/ of rule \"start\": lookahead is not supported");
  EXPECT_NE(ErrorOf("start: /a/x").find("the flag x is not supported"), std::string::npos);
  EXPECT_NE(ErrorOf("start: /^a$/").find("anchors"), std::string::npos);
  EXPECT_NE(ErrorOf("start: /(a)\\1/").find("backreferences"), std::string::npos);
  EXPECT_NE(ErrorOf("start: /\\bx/").find("word boundaries"), std::string::npos);
  EXPECT_NE(ErrorOf("start: /a*+/").find("possessive"), std::string::npos);
  // Regex groups nest at most 128 deep (each level recurses; a request's pattern must not overflow a stack).
  auto nested = [](int n) { return "start: /" + std::string(static_cast<size_t>(n), '(') + "a" +
                                   std::string(static_cast<size_t>(n), ')') + "/"; };
  EXPECT_TRUE(LarkToRegex(nested(128)).ok());
  EXPECT_NE(ErrorOf(nested(129)).find("groups nested more than 128 deep"), std::string::npos) << ErrorOf(nested(129));
  EXPECT_NE(ErrorOf(nested(100000)).find("nested"), std::string::npos);
  EXPECT_NE(ErrorOf("start: /a**/").find("multiple repeat"), std::string::npos);
  EXPECT_NE(ErrorOf("start: /a{10001}/").find("above 10000"), std::string::npos);
  EXPECT_NE(ErrorOf("start: \"\xC3\xA9\"i").find("ASCII"), std::string::npos);
  EXPECT_NE(ErrorOf("start: \"\"").find("empty"), std::string::npos);
  EXPECT_NE(ErrorOf("start: A\nA: b\nb: \"x\"").find("terminal \"A\" uses rule \"b\""), std::string::npos);
  EXPECT_NE(ErrorOf("start: \"a\"\nstart: \"b\"").find("\"start\" is defined twice"), std::string::npos);
  EXPECT_NE(ErrorOf("start: X\n%import foo.X").find("only %import common"), std::string::npos);
  EXPECT_NE(ErrorOf("start: X\n%import common.X").find("common.X is not a supported"), std::string::npos);
  EXPECT_NE(ErrorOf("start: \"a\" (\"b\"").find("expected \")\""), std::string::npos);
  EXPECT_EQ(ErrorOf("rule: \"a\""), "Lark grammar: the start rule \"start\" is not defined");
  auto other_start = LarkToRegex("rule: \"a\"", "rule");
  ASSERT_TRUE(other_start.ok()) << other_start.status().ToString();
  EXPECT_EQ(*other_start, "^a$");
}

TEST(Lark, RefusesAnExponentialInlining) {
  std::string lark = "r0: \"a\" | \"bc\"\n";
  for (int k = 1; k <= 16; ++k) {
    const std::string prev = std::string("r").append(std::to_string(k - 1));
    lark.append("r")
        .append(std::to_string(k))
        .append(": ")
        .append(prev)
        .append(" ")
        .append(prev)
        .append("\n");
  }
  auto re = LarkToRegex(lark, "r16");
  ASSERT_FALSE(re.ok());
  EXPECT_NE(re.status().message().find("too large"), std::string::npos) << re.status().ToString();
  EXPECT_TRUE(LarkToRegex(lark, "r4").ok());
}

TEST(Lark, RegexForCustomTool) {
  EXPECT_EQ(*RegexForCustomTool("regex", "abc"), "^(?:abc)$");
  EXPECT_EQ(*RegexForCustomTool("regex", "^abc$"), "^abc$");
  EXPECT_EQ(*RegexForCustomTool("regex", "^a|b$"), "^(?:a|b)$");
  EXPECT_EQ(*RegexForCustomTool("regex", "^(a|b)c\\$"), "^(?:(a|b)c\\$)$");
  EXPECT_EQ(*RegexForCustomTool("regex", ""), "^$");
  EXPECT_EQ(*RegexForCustomTool("lark", "start: \"x\"+"), "^x+$");
  auto lookahead = RegexForCustomTool("regex", "(?=a)a");
  ASSERT_FALSE(lookahead.ok());
  EXPECT_EQ(lookahead.status().message(), "custom tool regex: lookahead is not supported");
  auto unknown = RegexForCustomTool("peg", "x");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            "unsupported custom tool grammar syntax \"peg\" (expected \"lark\" or \"regex\")");
  EXPECT_FALSE(RegexForCustomTool("lark", "start: start").ok());
}

// Every regex LarkToRegex writes for the small grammars is one PatternToGbnf takes, and it agrees with
// std::regex (ECMAScript) on strings over a small alphabet.
TEST(Lark, RegexesCompileAndAgreeWithStdRegex) {
  const std::vector<std::string> grammars = {
      "start: (\"a\" | \"bc\")+ [\"-\"]",
      "start: INT (\".\" INT)?\n%import common.INT",
      "start: ESCAPED_STRING\n%import common.ESCAPED_STRING",
      "start: /[a-c]{1,2}/ \"/\" (\"x\"~2..3)*",
  };
  const std::string alphabet = "abc01.-/x\"\\\n";
  std::mt19937 rng(5);
  for (const std::string& lark : grammars) {
    SCOPED_TRACE(lark);
    const std::string re = RegexOf(lark);
    ASSERT_TRUE(internal::PatternToGbnf(re).ok()) << re;
    auto g = PatternGrammar(re);
    ASSERT_NE(g, nullptr);
    const std::regex std_re(re, std::regex::ECMAScript);
    int matched = 0;
    for (int i = 0; i < 3000; ++i) {
      std::string s;
      const int len = static_cast<int>(rng() % 7);
      for (int k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
      const bool want = std::regex_search(s, std_re);
      matched += want;
      ASSERT_EQ(FeedValue(g, s) == Outcome::kComplete, want) << Json(s).dump() << " " << re;
    }
    EXPECT_GT(matched, 5) << re;
  }
}

class ApplyPatch : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string lark = ReadTestdata("apply_patch.lark");
    ASSERT_FALSE(lark.empty());
    auto re = LarkToRegex(lark);
    ASSERT_TRUE(re.ok()) << re.status().ToString();
    regex_ = new std::string(*re);
    grammar_ = new std::shared_ptr<const Grammar>(PatternGrammar(*re));
  }
  static void TearDownTestSuite() {
    delete regex_;
    delete grammar_;
  }

  // The schema grammar's verdict, checked against std::regex on the raw value.
  static Outcome Check(const std::string& patch) {
    const Outcome outcome = FeedValue(*grammar_, patch);
    EXPECT_EQ(outcome == Outcome::kComplete, std::regex_match(patch, std::regex(*regex_))) << patch;
    return outcome;
  }
  // The verdict on the value's opening quote and body without the closing quote: kRejected here means a
  // byte inside the patch itself is refused, not just that the string ended too early.
  static Outcome Body(const std::string& patch) {
    const std::string encoded = Json(patch).dump();
    return Feed(*grammar_, std::string_view(encoded).substr(0, encoded.size() - 1));
  }

  static std::string* regex_;
  static std::shared_ptr<const Grammar>* grammar_;
};
std::string* ApplyPatch::regex_ = nullptr;
std::shared_ptr<const Grammar>* ApplyPatch::grammar_ = nullptr;

TEST_F(ApplyPatch, ConvertsToAnExactRegex) {
  EXPECT_EQ(
      *regex_,
      R"(^\*\*\* Begin Patch\n(?:\*\*\* Add File: [^\n]+\n(?:\+[^\n]*\n)+|\*\*\* Delete File: [^\n]+\n|)"
      R"(\*\*\* Update File: [^\n]+\n(?:\*\*\* Move to: [^\n]+\n)?(?:(?:(?:@@|@@ [^\n]+)\n|[ +\-][^\n]*\n)+)"
      R"((?:\*\*\* End of File\n)?)?)+\*\*\* End Patch\n?$)");
  ASSERT_NE(*grammar_, nullptr);
}

TEST_F(ApplyPatch, AcceptsRealPatches) {
  ASSERT_NE(*grammar_, nullptr);
  // The JSON string value as the model writes it: quoted, with \n escapes.
  EXPECT_EQ(Feed(*grammar_, "\"*** Begin Patch\\n*** Add File: a.txt\\n+hello\\n*** End Patch\""),
            Outcome::kComplete);
  EXPECT_EQ(Check("*** Begin Patch\n*** Add File: a.txt\n+hello\n+\n+print(\"hi\\n\")\n*** End Patch\n"),
            Outcome::kComplete);
  EXPECT_EQ(Check("*** Begin Patch\n*** Delete File: old/file.txt\n*** End Patch"), Outcome::kComplete);
  EXPECT_EQ(Check("*** Begin Patch\n*** Update File: src/main.py\n@@ def f():\n-    return 1\n+    return 2\n"
                  "     pass\n@@\n x = 1\n*** End Patch"),
            Outcome::kComplete);
  EXPECT_EQ(Check("*** Begin Patch\n*** Update File: a.py\n*** Move to: b/a.py\n@@\n-x\n+y\n*** End of File\n"
                  "*** End Patch\n"),
            Outcome::kComplete);
  EXPECT_EQ(
      Check("*** Begin Patch\n*** Update File: only_moved.txt\n*** Move to: renamed.txt\n*** End Patch"),
      Outcome::kComplete);
  EXPECT_EQ(Check("*** Begin Patch\n*** Add File: n\xC3\xA9w.md\n+# T\xC3\xADtulo\n*** Delete File: x\n"
                  "*** Update File: y\n+z\n*** End Patch"),
            Outcome::kComplete);
}

TEST_F(ApplyPatch, RejectsMalformedPatches) {
  ASSERT_NE(*grammar_, nullptr);
  const std::vector<std::string> malformed = {
      // No "*** Begin Patch".
      "*** Add File: a.txt\n+hello\n*** End Patch",
      // A line of an add hunk without its '+'.
      "*** Begin Patch\n*** Add File: a.txt\nhello\n*** End Patch",
      // No hunk at all, and an add hunk with no lines.
      "*** Begin Patch\n*** End Patch",
      "*** Begin Patch\n*** Add File: a.txt\n*** End Patch",
      // An update line without its ' ', '-' or '+'; an empty file name; an unknown hunk; text after the end.
      "*** Begin Patch\n*** Update File: a\nfoo\n*** End Patch",
      "*** Begin Patch\n*** Delete File: \n*** End Patch",
      "*** Begin Patch\n*** Copy File: a\n*** End Patch",
      "*** Begin Patch\n*** Delete File: a\n*** End Patch\n\n",
  };
  for (const std::string& patch : malformed) {
    EXPECT_EQ(Check(patch), Outcome::kRejected) << patch;
    EXPECT_EQ(Body(patch), Outcome::kRejected) << patch;
  }
  // Not finished yet: the body is a prefix of patches, but the string cannot close here.
  EXPECT_EQ(Body("*** Begin Patch\n*** Delete File: a\n"), Outcome::kIncomplete);
  EXPECT_EQ(Check("*** Begin Patch\n*** Delete File: a\n"), Outcome::kRejected);
  EXPECT_EQ(Body("*** Begin Patch\n*** Delete File: a\n*** End Patch"), Outcome::kIncomplete);
  // Not a JSON string: the value must be quoted.
  EXPECT_EQ(Feed(*grammar_, "*** Begin Patch"), Outcome::kRejected);
}

TEST_F(ApplyPatch, MaskAllowsOnlyHunkHeadersAfterBeginPatch) {
  ASSERT_NE(*grammar_, nullptr);
  Matcher m(*grammar_, testing::ByteVocab());
  ASSERT_TRUE(m.AcceptBytes("\"*** Begin Patch\\n*** ").ok());
  std::string allowed;
  for (int b = 0; b < 256; ++b) {
    if (m.AllowsByte(static_cast<uint8_t>(b))) allowed += static_cast<char>(b);
  }
  EXPECT_EQ(allowed, "ADU");
  EXPECT_FALSE(m.CanEnd());
}

}  // namespace
}  // namespace llamay::grammar
