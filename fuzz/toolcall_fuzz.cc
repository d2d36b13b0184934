// libFuzzer target: tool-call parsing of model output, whole and streamed, and the request's tools.
//
// Input: byte 0's bits 0-2 are n, the number of piece-size bytes that follow (bytes 1..n); bit 3 adds a
// stream fed one byte at a time; bits 4-6 pick a format for the grammar check below, bit 7 `parallel`.
// The rest is the text. For each of the five formats: ParseToolCalls(format, text, RandomToolCallIds(1)),
// then ToolCallStream(format, RandomToolCallIds(1)) pushed the text in pieces, then Finish. Piece sizes
// cycle through the size bytes (b < 128: b % 17 bytes; b >= 128: (b - 128) * 37 bytes; none: one piece);
// empty pushes are made too, but after a whole cycle of them the next piece is one byte. The documented
// property (toolcall.h) must hold: the deltas' content concatenated equals the parsed content, and the
// calls (index order, id, name, arguments fragments concatenated) equal the parsed calls. The deltas must
// be shaped as OpenAI streams them: a call's first delta has the next index, an id, a name and no
// arguments; later ones the latest index, no id or name, non-empty arguments.
// When the text parses as JSON: ParseTools and ParseToolChoice (of its "tools" and "tool_choice" members
// if it is an object with "tools", else of the value itself) must not crash and refusals must have
// messages; with tools and a choice accepted, ToolCallGbnf for the picked format must be valid GBNF
// (ParseGbnf may refuse it only for its size or recursion, never for its syntax).
// Build: cmake --preset fuzz && cmake --build build/fuzz --target toolcall_fuzz
// Run:   build/fuzz/fuzz/toolcall_fuzz -max_len=4096 CORPUS_DIR   (see docs/fuzzing.md)
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "toolcall/toolcall.h"

namespace {

using llamay::toolcall::ParsedAnswer;
using llamay::toolcall::ToolCallStream;
using llamay::toolcall::ToolDelta;
using llamay::toolcall::ToolFormat;

constexpr ToolFormat kFormats[] = {ToolFormat::kHermes,  ToolFormat::kLlama3,     ToolFormat::kMistral,
                                   ToolFormat::kGranite, ToolFormat::kGeneric,    ToolFormat::kQwen3Coder,
                                   ToolFormat::kGlm45};

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// Adds a delta to `answer`, checking its shape.
void Take(const ToolDelta& d, ParsedAnswer* answer) {
  answer->content += d.content;
  for (const auto& c : d.calls) {
    if (!c.id.empty()) {  // a call's first delta
      Check(c.index == static_cast<int>(answer->calls.size()));
      Check(!c.name.empty() && c.arguments.empty());
      answer->calls.push_back({c.id, c.name, ""});
    } else {  // a fragment of the latest call's arguments
      Check(!answer->calls.empty());
      Check(c.index == static_cast<int>(answer->calls.size()) - 1);
      Check(c.name.empty() && !c.arguments.empty());
      answer->calls.back().arguments += c.arguments;
    }
  }
}

void CheckSame(const ParsedAnswer& streamed, const ParsedAnswer& whole) {
  Check(streamed.content == whole.content);
  Check(streamed.calls.size() == whole.calls.size());
  for (size_t i = 0; i < whole.calls.size(); ++i) {
    Check(streamed.calls[i].id == whole.calls[i].id);
    Check(streamed.calls[i].name == whole.calls[i].name);
    Check(streamed.calls[i].arguments == whole.calls[i].arguments);
  }
}

size_t PieceSize(uint8_t b) { return b < 128 ? b % 17 : static_cast<size_t>(b - 128) * 37; }

ParsedAnswer Stream(ToolFormat format, std::string_view text, std::string_view sizes, bool bytewise) {
  ToolCallStream stream(format, llamay::toolcall::RandomToolCallIds(1));
  ParsedAnswer answer;
  size_t k = 0, empty_pushes = 0;
  while (!text.empty()) {
    size_t n = text.size();
    if (bytewise) {
      n = 1;
    } else if (!sizes.empty()) {
      n = PieceSize(static_cast<uint8_t>(sizes[k++ % sizes.size()]));
      // Empty pushes are allowed, but a cycle of them all would never end.
      empty_pushes = n == 0 ? empty_pushes + 1 : 0;
      if (empty_pushes > sizes.size()) n = 1;
    }
    n = std::min(n, text.size());
    Take(stream.Push(text.substr(0, n)), &answer);
    text.remove_prefix(n);
  }
  Take(stream.Finish(), &answer);
  Check(stream.num_calls() == static_cast<int>(answer.calls.size()));
  return answer;
}

void Request(std::string_view text, ToolFormat format, bool parallel) {
  using Json = nlohmann::ordered_json;
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return;
  const bool request = j.is_object() && j.contains("tools");
  const Json& tools_json = request ? j["tools"] : j;
  const Json choice_json = !request ? j : j.contains("tool_choice") ? j["tool_choice"] : Json();
  auto tools = llamay::toolcall::ParseTools(tools_json);
  if (!tools.ok()) {
    Check(!tools.status().message().empty());
    auto choice = llamay::toolcall::ParseToolChoice(choice_json, {});
    if (!choice.ok()) Check(!choice.status().message().empty());
    return;
  }
  (void)llamay::toolcall::ToolsJson(*tools);
  auto choice = llamay::toolcall::ParseToolChoice(choice_json, *tools);
  if (!choice.ok()) {
    Check(!choice.status().message().empty());
    return;
  }
  auto gbnf = llamay::toolcall::ToolCallGbnf(format, *tools, *choice, parallel);
  if (!gbnf.ok()) {
    Check(!gbnf.status().message().empty());
    return;
  }
  auto grammar = llamay::grammar::ParseGbnf(*gbnf);
  if (!grammar.ok()) {
    const std::string& m = grammar.status().message();
    Check(!m.empty());
    Check(m.rfind("line ", 0) != 0 && m.rfind("grammar has no rule", 0) != 0);  // never a syntax error
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const size_t n_sizes = std::min<size_t>(flags & 7, size - 1);
  const std::string_view sizes(reinterpret_cast<const char*>(data) + 1, n_sizes);
  const std::string_view text(reinterpret_cast<const char*>(data) + 1 + n_sizes, size - 1 - n_sizes);
  for (ToolFormat format : kFormats) {
    const ParsedAnswer whole =
        llamay::toolcall::ParseToolCalls(format, text, llamay::toolcall::RandomToolCallIds(1));
    CheckSame(Stream(format, text, sizes, false), whole);
    if (flags & 8) CheckSame(Stream(format, text, sizes, true), whole);
  }
  Request(text, kFormats[((flags >> 4) & 7) % std::size(kFormats)], (flags & 0x80) != 0);
  return 0;
}
