// Tool formats: names, detection from a chat template and a vocabulary, triggers (see toolcall.h).
#include <algorithm>
#include <string>

#include "toolcall/toolcall.h"

namespace llamay::toolcall {
namespace {

bool Contains(std::string_view text, std::string_view what) {
  return text.find(what) != std::string_view::npos;
}

}  // namespace

std::string_view ToolFormatName(ToolFormat format) {
  switch (format) {
    case ToolFormat::kHermes:
      return "hermes";
    case ToolFormat::kLlama3:
      return "llama3";
    case ToolFormat::kMistral:
      return "mistral";
    case ToolFormat::kGranite:
      return "granite";
    case ToolFormat::kGeneric:
      return "generic";
    case ToolFormat::kQwen3Coder:
      return "qwen3_coder";
    case ToolFormat::kGlm45:
      return "glm45";
  }
  return "unknown";
}

ToolFormat DetectToolFormat(std::string_view source,
                            const std::function<bool(std::string_view)>& vocab_has_token) {
  // The template's markers say what the model was shown; `<|tool_call|>` does not contain `<tool_call>`.
  // The XML-like formats wrap their calls in <tool_call> too, so their own markers come first; a
  // <function= alone is not enough (some Llama templates teach <function=name>{...}</function>).
  if (Contains(source, "<arg_key>")) return ToolFormat::kGlm45;
  if (Contains(source, "<tool_call>") &&
      (Contains(source, "<function=") || Contains(source, "<parameter="))) {
    return ToolFormat::kQwen3Coder;
  }
  if (Contains(source, "<tool_call>")) return ToolFormat::kHermes;
  if (Contains(source, "[TOOL_CALLS]") || Contains(source, "[AVAILABLE_TOOLS]")) return ToolFormat::kMistral;
  if (Contains(source, "<|tool_call|>")) return ToolFormat::kGranite;
  if (Contains(source, "<|python_tag|>") || Contains(source, "ipython")) return ToolFormat::kLlama3;
  // A template that says nothing of tools, for a model whose vocabulary was trained on a format.
  // (Qwen3-Coder's vocabulary has no token of its own for its syntax: it reads as kHermes's.)
  if (vocab_has_token) {
    if (vocab_has_token("<arg_key>")) return ToolFormat::kGlm45;
    if (vocab_has_token("<tool_call>")) return ToolFormat::kHermes;
    if (vocab_has_token("[TOOL_CALLS]")) return ToolFormat::kMistral;
    if (vocab_has_token("<|tool_call|>")) return ToolFormat::kGranite;
    if (vocab_has_token("<|python_tag|>")) return ToolFormat::kLlama3;
  }
  return ToolFormat::kGeneric;
}

bool UseToolSystemPrompt(ToolFormat format, bool template_reads_tools) {
  return format == ToolFormat::kGeneric || !template_reads_tools;
}

std::vector<ToolCallTrigger> ToolCallTriggers(ToolFormat format) {
  switch (format) {
    case ToolFormat::kHermes:
    case ToolFormat::kGeneric:
    case ToolFormat::kQwen3Coder:
    case ToolFormat::kGlm45:
      return {{"<tool_call>", false}};
    case ToolFormat::kLlama3:
      return {{"<|python_tag|>", false}, {"{\"name\"", true}};
    case ToolFormat::kMistral:
      return {{"[TOOL_CALLS]", false}};
    case ToolFormat::kGranite:
      return {{"<|tool_call|>", false}};
  }
  return {};
}

}  // namespace llamay::toolcall
