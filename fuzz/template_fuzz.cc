// libFuzzer target: chat templates (a GGUF's tokenizer.chat_template is untrusted code) and the messages,
// tools and template variables rendered through them, within the render budget.
//
// Input: byte 0's bit 0 is add_generation_prompt. The template source follows, up to the first NUL; after
// the NUL, JSON for the context: an object's "messages", "tools" and "variables" members (the variables as
// chat_template_kwargs reach RenderMessages), or an array taken as the messages. Without a NUL, or when the
// JSON does not parse, a fixed conversation (system, user, an assistant tool call, a tool result) is used.
// At most kMaxMessages messages are kept so that the per-message budget stays small enough for libFuzzer.
//
// Properties (chat_template.h): Parse and Render never crash and never throw; a refusal is a Status with a
// message: Parse's is InvalidArgument with kSyntax and "line L, column C: ...", Render's InvalidArgument
// (kRaised or kRuntime) or ResourceExhausted (kLimit), never Internal (which would hide an exception other
// than an allocation failure). The production render (RenderMessages, under RenderLimitsFor) and a render
// of the same context under tight limits both keep their output within max_output_bytes and their time
// within a generous bound per step of the budget. The budget only stops a render: when the tight render
// succeeds, the full one gives the same text, and when the tight one fails other than for a limit, the
// full one fails with the same Status (templates that call strftime_now are exempt: the clock moves).
// Build: cmake --preset fuzz && cmake --build build/fuzz --target template_fuzz
// Run:   build/fuzz/fuzz/template_fuzz -max_len=8192 CORPUS_DIR   (see docs/fuzzing.md)
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "template/chat_template.h"

namespace {

using llamay::Result;
using llamay::Status;
using llamay::StatusCode;
using llamay::chat::ChatTemplate;
using llamay::chat::RenderLimits;
using llamay::chat::TemplateErrorDetail;
using Json = nlohmann::ordered_json;

constexpr size_t kMaxMessages = 16;
// Time allowed per step of a budget, plus a fixed allowance: the slowest kind of step (an empty loop
// iteration) costs about 1 us in a release build, 8 us in this build, and 30 us here with the 2-core machine
// at a load of 6.6; the bound leaves room above that, so that only work the budget does not count (an
// operation whose cost is not charged) exceeds it. Past 10 s libFuzzer's -timeout reports the unit anyway.
constexpr double kSecondsPerStep = 100e-6;
constexpr double kSecondsFixed = 3.0;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "template_fuzz: property failed: %s\n", what);
    __builtin_trap();
  }
}

int Detail(const Status& s) { return s.detail(); }

void CheckRenderError(const Status& s) {
  Check(!s.message().empty(), "a render error has a message");
  if (s.code() == StatusCode::kResourceExhausted) {
    Check(Detail(s) == static_cast<int>(TemplateErrorDetail::kLimit), "ResourceExhausted is kLimit");
  } else {
    Check(s.code() == StatusCode::kInvalidArgument, "a render error is InvalidArgument or ResourceExhausted");
    Check(Detail(s) == static_cast<int>(TemplateErrorDetail::kRaised) ||
              Detail(s) == static_cast<int>(TemplateErrorDetail::kRuntime),
          "InvalidArgument is kRaised or kRuntime");
  }
}

Json DefaultMessages() {
  return Json::parse(R"([
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Weather in «Paris» 😀?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"},
    {"role": "assistant", "content": "  It is 21 degrees.  "},
    {"role": "user", "content": "Thanks!"}])");
}

// Runs `render`, checks the output size and the time taken against `limits`.
template <typename F>
Result<std::string> Timed(const RenderLimits& limits, F render) {
  const auto start = std::chrono::steady_clock::now();
  Result<std::string> out = render();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Check(seconds <= kSecondsFixed + kSecondsPerStep * static_cast<double>(limits.max_steps),
        "a render ends within its step budget's time");
  if (out.ok()) {
    Check(out->size() <= limits.max_output_bytes, "the output is within max_output_bytes");
  } else {
    CheckRenderError(out.status());
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool add_generation_prompt = (data[0] & 1) != 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t nul = rest.find('\0');
  const std::string_view source = rest.substr(0, nul);

  // Cheap analyses the server runs on every template; only crashes matter.
  (void)llamay::chat::TemplateReadsVariable(source, "tools");
  (void)llamay::chat::DetectTemplateFamily(source);

  auto tmpl = ChatTemplate::Parse(source);
  if (!tmpl.ok()) {
    const Status& s = tmpl.status();
    Check(s.code() == StatusCode::kInvalidArgument, "a parse error is InvalidArgument");
    Check(Detail(s) == static_cast<int>(TemplateErrorDetail::kSyntax), "a parse error is kSyntax");
    Check(s.message().rfind("line ", 0) == 0, "a parse error names its line");
    return 0;
  }

  Json messages = DefaultMessages(), tools = nullptr, variables = Json::object();
  if (nul != std::string_view::npos) {
    Json ctx = Json::parse(rest.substr(nul + 1), nullptr, /*allow_exceptions=*/false);
    if (ctx.is_array()) {
      messages = std::move(ctx);
    } else if (ctx.is_object() && ctx.contains("messages")) {
      messages = ctx["messages"];
      if (ctx.contains("tools")) tools = ctx["tools"];
      if (ctx.contains("variables")) variables = ctx["variables"];
    }
  }
  if (messages.is_array() && messages.size() > kMaxMessages)
    messages.erase(messages.begin() + kMaxMessages, messages.end());

  // The production path: what ChatPrompt::Render calls, under RenderLimitsFor.
  const size_t input_bytes = messages.dump(-1, ' ', false, Json::error_handler_t::replace).size() +
                             tools.dump(-1, ' ', false, Json::error_handler_t::replace).size();
  const RenderLimits full_limits =
      llamay::chat::RenderLimitsFor(messages.is_array() ? messages.size() : 1, input_bytes);
  const Result<std::string> full = Timed(full_limits, [&] {
    return llamay::chat::RenderMessages(*tmpl, messages, tools, variables, add_generation_prompt, "<s>",
                                        "</s>");
  });

  // The same context (as RenderMessages builds it) under limits small enough for the fuzzer to reach each.
  Json context = variables.is_object() ? variables : Json::object();
  context["messages"] = messages;
  context["tools"] = tools;
  context["documents"] = nullptr;
  context["add_generation_prompt"] = add_generation_prompt;
  context["bos_token"] = "<s>";
  context["eos_token"] = "</s>";
  RenderLimits tight;
  tight.max_output_bytes = 4096;
  tight.max_items = 256;
  tight.max_depth = 16;
  tight.max_steps = 2000;
  const Result<std::string> small = Timed(tight, [&] { return tmpl->Render(context, tight); });

  if (source.find("strftime_now") != std::string_view::npos) return 0;
  if (small.ok()) {
    Check(full.ok() && *full == *small, "more budget renders the same text");
  } else if (small.status().code() != StatusCode::kResourceExhausted) {
    Check(!full.ok() && full.status().code() == small.status().code() &&
              full.status().message() == small.status().message(),
          "more budget fails the same way");
  }
  return 0;
}
