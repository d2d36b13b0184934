// Tool formats: names, detection from a chat template and a vocabulary, triggers (see toolcall.h).
#include <algorithm>
#include <string>

#include "toolcall/toolcall.h"

namespace llamay::toolcall {
namespace {

bool Contains(std::string_view text, std::string_view what) {
  return text.find(what) != std::string_view::npos;
}

bool IsIdentChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Whether Jinja `code` (what is inside {{ }} or {% %}) names the variable `name`: an
// identifier outside string literals, not an attribute (`.name`).
bool CodeUsesVariable(std::string_view code, std::string_view name) {
  char prev = ' ';  // the last character outside strings that is not a space
  for (size_t i = 0; i < code.size();) {
    const char c = code[i];
    if (c == '\'' || c == '"') {
      size_t j = i + 1;
      while (j < code.size() && code[j] != c) j += code[j] == '\\' ? 2 : 1;
      i = j + 1;
      prev = c;
    } else if (IsIdentChar(c)) {
      size_t j = i;
      while (j < code.size() && IsIdentChar(code[j])) ++j;
      if (code.substr(i, j - i) == name && prev != '.') return true;
      prev = code[j - 1];
      i = j;
    } else {
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') prev = c;
      ++i;
    }
  }
  return false;
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
  }
  return "unknown";
}

ToolFormat DetectToolFormat(std::string_view source,
                            const std::function<bool(std::string_view)>& vocab_has_token) {
  // The template's markers say what the model was shown; `<|tool_call|>` does not contain `<tool_call>`.
  if (Contains(source, "<tool_call>")) return ToolFormat::kHermes;
  if (Contains(source, "[TOOL_CALLS]") || Contains(source, "[AVAILABLE_TOOLS]")) return ToolFormat::kMistral;
  if (Contains(source, "<|tool_call|>")) return ToolFormat::kGranite;
  if (Contains(source, "<|python_tag|>") || Contains(source, "ipython")) return ToolFormat::kLlama3;
  // A template that says nothing of tools, for a model whose vocabulary was trained on a format.
  if (vocab_has_token) {
    if (vocab_has_token("<tool_call>")) return ToolFormat::kHermes;
    if (vocab_has_token("[TOOL_CALLS]")) return ToolFormat::kMistral;
    if (vocab_has_token("<|tool_call|>")) return ToolFormat::kGranite;
    if (vocab_has_token("<|python_tag|>")) return ToolFormat::kLlama3;
  }
  return ToolFormat::kGeneric;
}

bool TemplateRendersTools(std::string_view source) {
  for (size_t i = 0; i + 1 < source.size();) {
    const std::string_view open = source.substr(i, 2);
    std::string_view close;
    if (open == "{{") {
      close = "}}";
    } else if (open == "{%") {
      close = "%}";
    } else if (open == "{#") {
      close = "#}";
    } else {
      ++i;
      continue;
    }
    const size_t end = std::min(source.find(close, i + 2), source.size());
    if (open != "{#" && CodeUsesVariable(source.substr(i + 2, end - i - 2), "tools")) return true;
    i = end + 2;
  }
  return false;
}

bool UseToolSystemPrompt(ToolFormat format, std::string_view source) {
  return format == ToolFormat::kGeneric || !TemplateRendersTools(source);
}

std::vector<ToolCallTrigger> ToolCallTriggers(ToolFormat format) {
  switch (format) {
    case ToolFormat::kHermes:
    case ToolFormat::kGeneric:
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
