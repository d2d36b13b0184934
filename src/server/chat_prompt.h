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
#include "server/conversation.h"
#include "template/chat_template.h"
#include "toolcall/toolcall.h"

namespace llamay::server {

class Server;

class ChatPrompt {
 public:
  // REQUIRES: engine outlives this.
  explicit ChatPrompt(const engine::Engine& engine);

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
  Result<std::vector<int32_t>> Tokens(const std::vector<Message>& messages, bool session,
                                      const std::vector<toolcall::ToolSpec>& tools = {},
                                      bool describe_tools = true) const;

  // The model's tool-call syntax, detected once from its template and vocabulary.
  toolcall::ToolFormat tool_format() const { return tool_format_; }

 private:
  const engine::Engine& engine_;
  std::optional<chat::ChatTemplate> template_;
  Status problem_;
  std::string source_name_;
  std::string bos_, eos_;
  toolcall::ToolFormat tool_format_ = toolcall::ToolFormat::kGeneric;
  bool tool_prompt_ = true;  // describe tools in a system message rather than pass them to the template
};

// Messages as chat templates take them, OpenAI's shape: role, content (a string, or null), name,
// tool_calls [{id, type: "function", function: {name, arguments (a JSON string)}}], tool_call_id, and
// reasoning_content for reasoning sent back.
nlohmann::ordered_json TemplateMessages(const std::vector<Message>& messages);

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_CHAT_PROMPT_H_
