// Template family detection and the built-in templates for models without one.
//
// The built-in templates are written here. Each renders exactly like its family's reference template
// for conversations the reference accepts (golden tests check this); where a reference raises (a system
// message for Gemma or Mistral v0.1, roles out of order), these fold the system message into the first
// user turn or keep the order given instead of failing.
#include <array>
#include <utility>

#include "template/chat_template.h"

namespace llamay::chat {
namespace {

bool Has(std::string_view source, std::string_view marker) {
  return source.find(marker) != std::string_view::npos;
}

constexpr std::string_view kChatMl =
    R"({%- for message in messages -%})"
    R"({{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}})"
    R"({%- endfor -%})"
    R"({%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%})";

constexpr std::string_view kLlama2 =
    R"({%- if messages and messages[0]['role'] == 'system' -%})"
    R"({%- set system = messages[0]['content'] -%}{%- set turns = messages[1:] -%})"
    R"({%- else -%}{%- set system = none -%}{%- set turns = messages -%}{%- endif -%})"
    R"({%- for message in turns -%})"
    R"({%- if message['role'] == 'user' -%})"
    R"({%- set text = message['content'] -%})"
    R"({%- if loop.first and system is not none -%})"
    R"({%- set text = '<<SYS>>\n' + system + '\n<</SYS>>\n\n' + text -%})"
    R"({%- endif -%})"
    R"({{- bos_token + '[INST] ' + text | trim + ' [/INST]' -}})"
    R"({%- elif message['role'] == 'assistant' -%})"
    R"({{- ' ' + message['content'] | trim + ' ' + eos_token -}})"
    R"({%- endif -%})"
    R"({%- endfor -%})";

constexpr std::string_view kLlama3 =
    R"({%- for message in messages -%})"
    R"({%- if loop.first -%}{{- bos_token -}}{%- endif -%})"
    R"({{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim -}})"
    R"({{- '<|eot_id|>' -}})"
    R"({%- endfor -%})"
    R"({%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}{%- endif -%})";

constexpr std::string_view kMistral = R"({{- bos_token -}})"
                                      R"({%- set ns = namespace(system='') -%})"
                                      R"({%- for message in messages -%})"
                                      R"({%- if message['role'] == 'system' -%})"
                                      R"({%- set ns.system = ns.system + message['content'] + '\n\n' -%})"
                                      R"({%- elif message['role'] == 'user' -%})"
                                      R"({{- '[INST] ' + ns.system + message['content'] + ' [/INST]' -}})"
                                      R"({%- set ns.system = '' -%})"
                                      R"({%- elif message['role'] == 'assistant' -%})"
                                      R"({{- message['content'] + eos_token -}})"
                                      R"({%- endif -%})"
                                      R"({%- endfor -%})";

constexpr std::string_view kGemma =
    R"({{- bos_token -}})"
    R"({%- set ns = namespace(system='') -%})"
    R"({%- for message in messages -%})"
    R"({%- if message['role'] == 'system' -%})"
    R"({%- set ns.system = ns.system + message['content'] + '\n\n' -%})"
    R"({%- else -%})"
    R"({%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%})"
    R"({{- '<start_of_turn>' + role + '\n' + (ns.system + message['content']) | trim + '<end_of_turn>\n' -}})"
    R"({%- set ns.system = '' -%})"
    R"({%- endif -%})"
    R"({%- endfor -%})"
    R"({%- if add_generation_prompt -%}{{- '<start_of_turn>model\n' -}}{%- endif -%})";

constexpr std::string_view kPhi3 =
    R"({%- for message in messages -%})"
    R"({%- if message['role'] != 'system' or message['content'] -%})"
    R"({{- '<|' + message['role'] + '|>\n' + message['content'] + '<|end|>\n' -}})"
    R"({%- endif -%})"
    R"({%- endfor -%})"
    R"({%- if add_generation_prompt -%}{{- '<|assistant|>\n' -}}{%- else -%}{{- eos_token -}}{%- endif -%})";

constexpr std::string_view kZephyr =
    R"({%- for message in messages -%})"
    R"({{- '<|' + message['role'] + '|>\n' + message['content'] + eos_token + '\n' -}})"
    R"({%- endfor -%})"
    R"({%- if add_generation_prompt -%}{{- '<|assistant|>\n' -}}{%- endif -%})";

constexpr std::array<std::pair<std::string_view, std::string_view>, 7> kBuiltins = {{
    {"chatml", kChatMl},
    {"llama2", kLlama2},
    {"llama3", kLlama3},
    {"mistral", kMistral},
    {"gemma", kGemma},
    {"phi3", kPhi3},
    {"zephyr", kZephyr},
}};

}  // namespace

std::string_view DetectTemplateFamily(std::string_view s) {
  if (s.empty()) return "none";
  if (Has(s, "<|im_sep|>")) return "phi4";
  if (Has(s, "<|im_start|>")) return "chatml";
  if (Has(s, "<|start_header_id|>")) return "llama3";
  if (Has(s, "<start_of_turn>")) return "gemma";
  if (Has(s, "<|START_OF_TURN_TOKEN|>")) return "command-r";
  if (Has(s, "<｜User｜>") || Has(s, "<｜Assistant｜>")) return "deepseek3";
  if (Has(s, "<<SYS>>") && Has(s, "[INST]")) return "llama2";
  if (Has(s, "[INST]")) return "mistral";
  if (Has(s, "<|start_of_role|>")) return "granite";
  if (Has(s, "[gMASK]")) return "chatglm";
  if (Has(s, "GPT4 Correct")) return "openchat";
  if (Has(s, "<|assistant|>") && Has(s, "<|end|>")) return "phi3";
  if (Has(s, "<|assistant|>") && Has(s, "eos_token")) return "zephyr";
  if (Has(s, "### Instruction")) return Has(s, "Deepseek") ? "deepseek" : "alpaca";
  if (Has(s, "USER: ") && Has(s, "ASSISTANT:")) return "vicuna";
  return "unknown";
}

std::string_view BuiltinTemplate(std::string_view family) {
  for (const auto& [name, source] : kBuiltins) {
    if (name == family) return source;
  }
  return {};
}

std::string_view DefaultChatTemplate() { return kChatMl; }

}  // namespace llamay::chat
