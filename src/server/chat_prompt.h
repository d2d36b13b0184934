// The model's chat template, parsed once when the server starts, and the prompt tokens it makes of a
// request's messages.
//
// A template that does not parse, or that fails on a one-message conversation for a reason of its own (a
// render limit, an error in its code), is broken: problem() says why, the server warns at start-up and
// every request that needs the template gets 500 `chat_template_error` at once (the prompt routes still
// serve). A working template that fails on particular messages: raise_exception (roles that do not
// alternate) or an error its code meets on them (content of a type it cannot handle) is the request's
// fault, 400 `chat_template_rejected`; one that exceeds its render budget (chat::RenderLimitsFor) is the
// template's, 500 `chat_template_error`.
//
// Thread-safety: immutable after construction; Tokens may run on any number of threads.
#ifndef LLAMAY_SERVER_CHAT_PROMPT_H_
#define LLAMAY_SERVER_CHAT_PROMPT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"
#include "reasoning/reasoning.h"
#include "server/conversation.h"
#include "template/chat_template.h"
#include "toolcall/toolcall.h"

namespace llamay::server {

class Server;

class ChatPrompt {
 public:
  // REQUIRES: engine outlives this. `template_source`: a template to use instead of the model's
  // (--chat-template-file); empty: the model's, or ChatML when it has none.
  explicit ChatPrompt(const engine::Engine& engine, const std::string& template_source = "");

  // Ok, or why the model's template is unusable (reported at start-up).
  const Status& problem() const { return problem_; }
  // "the model's" or "the default ChatML" template, for messages.
  const std::string& source_name() const { return source_name_; }

  // Renders `messages` (add_generation_prompt) and tokenizes the text: BOS once, none for a session
  // (`session`: the text continues a held context). Errors carry kDetailChatTemplateFault or
  // kDetailChatTemplateRejected (http_util.h) so that they are answered 500 or 400 with their own code.
  // With `tools` (or messages that carry tool calls and results): the template renders them when it
  // can (toolcall::UseToolSystemPrompt says when it cannot; then a system message describes them and
  // calls and results are written as text).
  // A session that already holds a conversation (`describe_tools` false) has had its tools described: the
  // continuation renders only its messages (tool results, new user turns), so its prefill is just those.
  // `reasoning` (optional): chat_template_kwargs become template variables, and `enabled` is passed as
  // enable_thinking. `*opens_reasoning` (optional) says whether the rendered prompt leaves the model inside
  // its reasoning (reasoning::PromptOpensReasoning; false for a model that does not reason).
  // The text Tokens tokenizes: the rendered messages, with the reasoning block opened where the template
  // leaves that to the model (see Tokens for the arguments).
  Result<std::string> Text(const std::vector<Message>& messages, const std::vector<toolcall::ToolSpec>& tools = {},
                           bool describe_tools = true, const ReasoningControls* reasoning = nullptr,
                           bool* opens_reasoning = nullptr) const;

  // `boundaries` (optional; filled only for a model with recurrent layers, whose state resumes only at
  // checkpoints): token positions in the result where a message ends (MessageBoundaries), ascending.
  Result<std::vector<int32_t>> Tokens(const std::vector<Message>& messages, bool session,
                                      const std::vector<toolcall::ToolSpec>& tools = {},
                                      bool describe_tools = true, const ReasoningControls* reasoning = nullptr,
                                      bool* opens_reasoning = nullptr,
                                      std::vector<size_t>* boundaries = nullptr) const;

  // The model's tool-call syntax, detected once from its template and vocabulary.
  toolcall::ToolFormat tool_format() const { return tool_format_; }
  // The markers of the template's reasoning block (reasoning::DetectReasoning), none for a model that does
  // not reason, and their tokens as the model writes them (for harmony, which has no markers here: the
  // analysis message's header and its `<|end|>`).
  const std::optional<reasoning::ReasoningMarkers>& reasoning() const { return reasoning_; }
  const std::vector<int32_t>& open_tokens() const { return open_tokens_; }
  const std::vector<int32_t>& close_tokens() const { return close_tokens_; }
  // The template writes gpt-oss's harmony format (toolcall::IsHarmonyTemplate): its answers are split by a
  // toolcall::HarmonyStream (reasoning, answer and calls at once), its tools and calls are its own.
  bool harmony() const { return harmony_; }
  // The template reads enable_thinking (reasoning can be switched off through it).
  bool thinking_switch() const { return thinking_switch_; }
  // The template's source (the model's, the override, or ChatML).
  const std::string& source() const { return source_; }

 private:
  const engine::Engine& engine_;
  std::optional<chat::ChatTemplate> template_;
  Status problem_;
  std::string source_name_;
  std::string bos_, eos_;
  toolcall::ToolFormat tool_format_ = toolcall::ToolFormat::kGeneric;
  bool tool_prompt_ = true;  // describe tools in a system message rather than pass them to the template
  std::string source_;
  std::optional<reasoning::ReasoningMarkers> reasoning_;
  std::vector<int32_t> open_tokens_, close_tokens_;
  bool thinking_switch_ = false;
  bool null_as_empty_ = false;  // the template cannot take content null (NeedsEmptyContent)
  bool harmony_ = false;

  // The template's text for the messages, as it takes them (tools in a system prompt or its own).
  Result<std::string> Render(const std::vector<Message>& messages, const std::vector<toolcall::ToolSpec>& tools,
                             bool describe_tools, const ReasoningControls* reasoning, bool null_as_empty,
                             bool generation_prompt = true) const;
  // The token positions where the first message (a system message, which conversations share) and each of
  // the last few messages end, where agents' conversations diverge: the template's text for
  // messages[0..i] (no generation prompt) must be a prefix of `text` and tokenize to a prefix of `ids`
  // (templates that render a message differently once later ones follow give none there). Positions in
  // (0, ids.size()), ascending.
  std::vector<size_t> MessageBoundaries(const std::vector<Message>& messages,
                                        const std::vector<toolcall::ToolSpec>& tools, bool describe_tools,
                                        const ReasoningControls* reasoning, bool session, const std::string& text,
                                        const std::vector<int32_t>& ids) const;
  // The text's tokens as Tokens gives them (BOS once; none for a session's continuation).
  Result<std::vector<int32_t>> Encode(const std::string& text, bool session) const;
  // Whether an assistant turn with content null (one that only calls a tool, or has nothing) fails, or
  // prints "None", where "" does not.
  bool NeedsEmptyContent() const;
  // Whether the template, given a tool call and its result in its own way, fails or leaves either out.
  bool LosesToolTurns() const;
};

// Messages as chat templates take them, OpenAI's shape: role, content (a string, or null), name,
// tool_calls [{id, type: "function", function: {name, arguments (a JSON string)}}], tool_call_id, and
// reasoning_content for reasoning sent back. `null_as_empty`: content null (an assistant turn that only
// calls tools) is given as "" instead, for templates that cannot take null.
nlohmann::ordered_json TemplateMessages(const std::vector<Message>& messages, bool null_as_empty = false);

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_CHAT_PROMPT_H_
