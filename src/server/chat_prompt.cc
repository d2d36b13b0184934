#include "server/chat_prompt.h"

#include "server/http_util.h"
#include "server/server.h"

namespace llamay::server {
namespace {

using chat::TemplateErrorDetail;

Status Fault(const std::string& message) {
  return Status(StatusCode::kInternal, message, kDetailChatTemplateFault);
}

bool IsDetail(const Status& s, TemplateErrorDetail d) { return s.detail() == static_cast<int>(d); }

// OpenAI clients send `content` as a string or as an array of parts ([{"type": "text", "text": "..."}]).
// Chat templates expect a string: the text parts are joined with newlines (as vLLM and llama.cpp do for
// templates that take strings). Other part types (images, audio) are refused by name.
Result<nlohmann::json> WithTextContent(const nlohmann::json& messages) {
  nlohmann::json out = messages;
  for (size_t i = 0; i < out.size(); ++i) {
    auto it = out[i].find("content");
    if (it == out[i].end() || !it->is_array()) continue;
    std::string text;
    bool first = true;
    for (const auto& part : *it) {
      const std::string where = "messages[" + std::to_string(i) + "].content";
      if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
        return InvalidArgumentError(where + ": each part needs a string 'type'");
      const std::string type = part["type"].get<std::string>();
      if (type != "text")
        return InvalidArgumentError(where + ": content parts of type '" + type +
                                    "' are not supported (this model takes text parts only)");
      if (!part.contains("text") || !part["text"].is_string())
        return InvalidArgumentError(where + ": a text part needs a string 'text'");
      if (!first) text += "\n";
      text += part["text"].get<std::string>();
      first = false;
    }
    *it = text;
  }
  return out;
}

}  // namespace

ChatPrompt::ChatPrompt(const engine::Engine& engine) : engine_(engine) {
  const tokenizer::Tokenizer& tok = engine.tokenizer();
  bos_ = tok.bos() >= 0 ? tok.TokenText(tok.bos()) : "";
  eos_ = tok.eos() >= 0 ? tok.TokenText(tok.eos()) : "";
  std::string source = engine.model().file().GetStringOr("tokenizer.chat_template", "");
  source_name_ = source.empty() ? "the default ChatML chat template" : "the model's chat template";
  if (source.empty()) source = std::string(chat::DefaultChatTemplate());
  tool_format_ = toolcall::DetectToolFormat(source, [&tok](std::string_view t) { return tok.FindToken(std::string(t)) >= 0; });
  tool_prompt_ = toolcall::UseToolSystemPrompt(tool_format_, source);
  auto parsed = chat::ChatTemplate::Parse(source);
  if (!parsed.ok()) {
    problem_ = Fault(source_name_ + " does not parse: " + parsed.status().message());
    return;
  }
  // A one-message conversation every chat template must take: failing on it for a reason of its own
  // (raise_exception aside: a template may demand a system message) makes the template unusable.
  const nlohmann::json probe = nlohmann::json::array({{{"role", "user"}, {"content", "Hello"}}});
  auto text = chat::RenderMessages(*parsed, probe, /*add_generation_prompt=*/true, bos_, eos_);
  if (!text.ok() && !IsDetail(text.status(), TemplateErrorDetail::kRaised)) {
    problem_ = Fault(source_name_ + " fails on a one-message conversation: " + text.status().message());
    return;
  }
  template_ = std::move(*parsed);
}

Result<std::vector<int32_t>> ChatPrompt::Tokens(const nlohmann::json& messages, bool session,
                                                const std::vector<toolcall::ToolSpec>& all_tools,
                                                bool describe_tools) const {
  static const std::vector<toolcall::ToolSpec> kNone;
  const std::vector<toolcall::ToolSpec>& tools = describe_tools ? all_tools : kNone;
  if (!problem_.ok()) return problem_;
  bool tool_messages = false;
  for (const auto& m : messages) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      return InvalidArgumentError("each message needs a string 'role'");
    tool_messages = tool_messages || m["role"] == "tool" || (m.contains("tool_calls") && !m["tool_calls"].is_null());
  }
  LLAMAY_ASSIGN_OR_RETURN(nlohmann::json normalized, WithTextContent(messages));
  nlohmann::ordered_json ordered = normalized;
  nlohmann::ordered_json tools_var = nullptr;
  if (!all_tools.empty() || tool_messages) {
    if (tool_prompt_) {
      ordered = toolcall::MessagesWithToolPrompt(tool_format_, ordered, tools);
    } else {
      ordered = toolcall::MessagesForToolTemplate(tool_format_, ordered);
      if (!tools.empty()) tools_var = toolcall::ToolsJson(tools);
    }
  }
  auto text = chat::RenderMessages(*template_, ordered, tools_var, /*add_generation_prompt=*/true, bos_, eos_);
  if (!text.ok()) {
    const Status& s = text.status();
    if (IsDetail(s, TemplateErrorDetail::kRaised) || IsDetail(s, TemplateErrorDetail::kRuntime))
      return Status(StatusCode::kInvalidArgument, source_name_ + " rejected the messages: " + s.message(),
                    kDetailChatTemplateRejected);
    if (IsDetail(s, TemplateErrorDetail::kLimit) || IsDetail(s, TemplateErrorDetail::kSyntax))
      return Fault(source_name_ + " is broken: " + s.message());
    return s.WithContext("chat template");
  }
  const tokenizer::Tokenizer& tok = engine_.tokenizer();
  LLAMAY_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.Encode(*text, /*add_special=*/!session, /*parse_special=*/true,
                                                                   /*continuation=*/session));
  // A template that writes the BOS text itself, tokenized with add_special, would start with two.
  if (ids.size() >= 2 && tok.bos() >= 0 && ids[0] == tok.bos() && ids[1] == tok.bos()) ids.erase(ids.begin());
  if (session && !ids.empty() && ids[0] == tok.bos()) ids.erase(ids.begin());
  return ids;
}

Result<std::vector<int32_t>> ChatPromptTokens(Server& server, const nlohmann::json& messages, bool session,
                                              const std::vector<toolcall::ToolSpec>& tools, bool describe_tools) {
  return server.chat_prompt().Tokens(messages, session, tools, describe_tools);
}

}  // namespace llamay::server
