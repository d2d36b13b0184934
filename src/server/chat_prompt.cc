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

nlohmann::ordered_json TemplateMessages(const std::vector<Message>& messages) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const Message& m : messages) {
    nlohmann::ordered_json j = {{"role", RoleName(m.role)}};
    j["content"] = m.content ? nlohmann::ordered_json(*m.content) : nlohmann::ordered_json(nullptr);
    if (!m.name.empty()) j["name"] = m.name;
    if (!m.reasoning.empty()) j["reasoning_content"] = m.reasoning;
    if (!m.tool_calls.empty()) {
      j["tool_calls"] = nlohmann::ordered_json::array();
      for (const MessageToolCall& c : m.tool_calls)
        j["tool_calls"].push_back(
            {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    if (m.role == Message::Role::kTool) j["tool_call_id"] = m.tool_call_id;
    out.push_back(std::move(j));
  }
  return out;
}

Result<std::vector<int32_t>> ChatPrompt::Tokens(const std::vector<Message>& messages, bool session,
                                                const std::vector<toolcall::ToolSpec>& all_tools,
                                                bool describe_tools) const {
  static const std::vector<toolcall::ToolSpec> kNone;
  const std::vector<toolcall::ToolSpec>& tools = describe_tools ? all_tools : kNone;
  if (!problem_.ok()) return problem_;
  bool tool_messages = false;
  for (const Message& m : messages) tool_messages = tool_messages || m.role == Message::Role::kTool || !m.tool_calls.empty();
  nlohmann::ordered_json ordered = TemplateMessages(messages);
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

}  // namespace llamay::server
