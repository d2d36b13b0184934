#include "server/chat_prompt.h"

#include <algorithm>
#include <cctype>

#include "server/http_util.h"
#include "server/server.h"
#include "toolcall/harmony.h"

namespace llamay::server {
namespace {

using chat::TemplateErrorDetail;

Status Fault(const std::string& message) {
  return Status(StatusCode::kInternal, message, kDetailChatTemplateFault);
}

bool IsDetail(const Status& s, TemplateErrorDetail d) { return s.detail() == static_cast<int>(d); }

}  // namespace

ChatPrompt::ChatPrompt(const engine::Engine& engine, const std::string& template_source) : engine_(engine) {
  const tokenizer::Tokenizer& tok = engine.tokenizer();
  bos_ = tok.bos() >= 0 ? tok.TokenText(tok.bos()) : "";
  eos_ = tok.eos() >= 0 ? tok.TokenText(tok.eos()) : "";
  std::string source = template_source;
  if (!source.empty()) {
    source_name_ = "the chat template given (--chat-template-file)";
  } else {
    source = engine.model().file().GetStringOr("tokenizer.chat_template", "");
    source_name_ = source.empty() ? "the default ChatML chat template" : "the model's chat template";
  }
  if (source.empty()) source = std::string(chat::DefaultChatTemplate());
  source_ = source;
  reasoning_ = reasoning::DetectReasoning(source);
  thinking_switch_ = chat::TemplateReadsVariable(source, "enable_thinking");
  if (reasoning_) {
    // As the model writes them: a continuation (no BOS, no SentencePiece space), special tokens parsed.
    auto open = tok.Encode(reasoning_->open, /*add_special=*/false, /*parse_special=*/true, /*continuation=*/true);
    auto close = tok.Encode(reasoning_->close, false, true, true);
    if (open.ok() && close.ok() && !close->empty()) {
      open_tokens_ = std::move(*open);
      close_tokens_ = std::move(*close);
    } else {
      reasoning_.reset();  // a vocabulary that cannot write the markers: the output is all answer
    }
  }
  harmony_ = toolcall::IsHarmonyTemplate(source);
  if (harmony_) {
    // The analysis message is gpt-oss's reasoning block: a budget counts its tokens and forces its end.
    auto open = tok.Encode(std::string(toolcall::kHarmonyAnalysisMarker), false, true, true);
    auto close = tok.Encode(std::string(toolcall::kHarmonyEndMarker), false, true, true);
    if (open.ok() && close.ok() && !open->empty() && !close->empty()) {
      open_tokens_ = std::move(*open);
      close_tokens_ = std::move(*close);
    }
  }
  tool_format_ = toolcall::DetectToolFormat(source, [&tok](std::string_view t) { return tok.FindToken(std::string(t)) >= 0; });
  tool_prompt_ = toolcall::UseToolSystemPrompt(tool_format_, chat::TemplateReadsVariable(source, "tools"));
  if (harmony_) tool_prompt_ = false;  // gpt-oss's template writes its tools, calls and results itself
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
  // A template that reads `tools` but drops the calls or the results it is given (Granite 3.0's renders
  // only roles of its own) would lose the conversation's tool turns: the calls and results are written as
  // text instead, with the tools described in a system message.
  if (!tool_prompt_ && !harmony_ && LosesToolTurns()) tool_prompt_ = true;
  // Clients send an assistant turn that only calls tools with content null (OpenAI's shape, and what the
  // Messages API's tool_use-only turns become). Templates written for Hugging Face's callers, who pass "",
  // fail on null (Qwen3's `'</think>' in content`) or print it as Python's "None" (GLM-4.7's); those get
  // "" for null, and a template that handles null itself keeps it.
  null_as_empty_ = NeedsEmptyContent();
}

nlohmann::ordered_json TemplateMessages(const std::vector<Message>& messages, bool null_as_empty) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const Message& m : messages) {
    nlohmann::ordered_json j = {{"role", RoleName(m.role)}};
    if (m.content) {
      j["content"] = *m.content;
    } else {
      j["content"] = null_as_empty ? nlohmann::ordered_json("") : nlohmann::ordered_json(nullptr);
    }
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

Result<std::string> ChatPrompt::Render(const std::vector<Message>& messages,
                                       const std::vector<toolcall::ToolSpec>& all_tools, bool describe_tools,
                                       const ReasoningControls* reasoning, bool null_as_empty,
                                       bool generation_prompt) const {
  static const std::vector<toolcall::ToolSpec> kNone;
  const std::vector<toolcall::ToolSpec>& tools = describe_tools ? all_tools : kNone;
  bool tool_messages = false;
  for (const Message& m : messages) tool_messages = tool_messages || m.role == Message::Role::kTool || !m.tool_calls.empty();
  nlohmann::ordered_json ordered = TemplateMessages(messages, null_as_empty);
  nlohmann::ordered_json tools_var = nullptr;
  if (harmony_) {
    // Its own shape of messages (reasoning in `thinking`, one call per message), always: past reasoning
    // goes back to the model even without tools.
    ordered = toolcall::MessagesForHarmonyTemplate(ordered);
    if (!tools.empty()) {
      tools_var = toolcall::ToolsJson(tools);
      // Its template writes every tool's description as a comment, failing on one that has none.
      for (auto& t : tools_var)
        if (!t["function"].contains("description")) t["function"]["description"] = "";
    }
  } else if (!all_tools.empty() || tool_messages) {
    if (tool_prompt_) {
      ordered = toolcall::MessagesWithToolPrompt(tool_format_, ordered, tools);
    } else {
      ordered = toolcall::MessagesForToolTemplate(tool_format_, ordered);
      if (!tools.empty()) tools_var = toolcall::ToolsJson(tools);
    }
  }
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();
  if (reasoning != nullptr) {
    if (reasoning->template_kwargs.is_object()) variables = reasoning->template_kwargs;
    if (reasoning->enabled && !variables.contains("enable_thinking")) variables["enable_thinking"] = *reasoning->enabled;
    // gpt-oss reasons at low, medium (its template's default) or high effort; it cannot be switched off, so
    // "none" and "minimal" ask for the least.
    if (harmony_ && !reasoning->effort.empty() && !variables.contains("reasoning_effort")) {
      const std::string& e = reasoning->effort;
      variables["reasoning_effort"] = e == "none" || e == "minimal" ? "low" : e;
    }
  }
  return chat::RenderMessages(*template_, ordered, tools_var, variables, generation_prompt, bos_, eos_);
}

namespace {

// The probes' conversations: a tool turn (an assistant turn that only calls a tool, content null, then the
// result) and a turn with no content at all; with the values to look for in the text.
constexpr std::string_view kProbeArgument = "probe_value_1";
constexpr std::string_view kProbeResult = "probe_result_2";

toolcall::ToolSpec ProbeTool() {
  toolcall::ToolSpec tool;
  tool.name = "probe_tool";
  tool.parameters = nlohmann::ordered_json::parse(R"({"type":"object","properties":{"probe_arg":{"type":"string"}}})");
  return tool;
}

std::vector<Message> ProbeToolTurn() {
  Message user, call, result;
  user.content = "Hi";
  call.role = Message::Role::kAssistant;
  call.tool_calls.push_back({"call_0", "probe_tool", "{\"probe_arg\":\"" + std::string(kProbeArgument) + "\"}"});
  result.role = Message::Role::kTool;
  result.tool_call_id = "call_0";
  result.content = std::string(kProbeResult);
  return {user, call, result};
}

std::vector<Message> ProbeEmptyTurn() {
  Message user, empty, again;
  user.content = "Hi";
  empty.role = Message::Role::kAssistant;
  again.content = "Hello?";
  return {user, empty, again};
}

int CountNone(const std::string& t) {
  int n = 0;
  for (size_t at = 0; (at = t.find("None", at)) != std::string::npos; ++at) ++n;
  return n;
}

}  // namespace

bool ChatPrompt::LosesToolTurns() const {
  auto text = Render(ProbeToolTurn(), {ProbeTool()}, true, nullptr, /*null_as_empty=*/true);
  return !text.ok() || text->find(kProbeArgument) == std::string::npos || text->find(kProbeResult) == std::string::npos;
}

bool ChatPrompt::NeedsEmptyContent() const {
  for (const std::vector<Message>& probe : {ProbeToolTurn(), ProbeEmptyTurn()}) {
    const std::vector<toolcall::ToolSpec> tools = {ProbeTool()};
    auto as_null = Render(probe, tools, true, nullptr, false);
    auto as_empty = Render(probe, tools, true, nullptr, true);
    if (!as_empty.ok()) continue;  // a template that takes no such turn at all: nothing to learn from it
    if (!as_null.ok() || CountNone(*as_null) > CountNone(*as_empty)) return true;
  }
  return false;
}

Result<std::string> ChatPrompt::Text(const std::vector<Message>& messages,
                                     const std::vector<toolcall::ToolSpec>& tools, bool describe_tools,
                                     const ReasoningControls* reasoning, bool* opens_reasoning) const {
  if (opens_reasoning != nullptr) *opens_reasoning = false;
  if (!problem_.ok()) return problem_;
  auto text = Render(messages, tools, describe_tools, reasoning, null_as_empty_);
  if (!text.ok()) {
    const Status& s = text.status();
    if (IsDetail(s, TemplateErrorDetail::kRaised) || IsDetail(s, TemplateErrorDetail::kRuntime))
      return Status(StatusCode::kInvalidArgument, source_name_ + " rejected the messages: " + s.message(),
                    kDetailChatTemplateRejected);
    if (IsDetail(s, TemplateErrorDetail::kLimit) || IsDetail(s, TemplateErrorDetail::kSyntax))
      return Fault(source_name_ + " is broken: " + s.message());
    return s.WithContext("chat template");
  }
  if (reasoning_) {
    // A reasoning model reasons first: where the template did not open the block itself (Qwen3's leaves
    // it to the model, which always writes it), the prompt opens it, so that a budget counts from the
    // first token and a constraint can wait for the close marker. Reasoning off leaves the prompt as the
    // template made it (Qwen3's writes an empty block when enable_thinking is false).
    bool inside = reasoning::PromptOpensReasoning(*text, *reasoning_);
    const bool off = reasoning != nullptr && reasoning->enabled.has_value() && !*reasoning->enabled;
    std::string_view trimmed(*text);
    while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.back()))) trimmed.remove_suffix(1);
    const bool closed = trimmed.size() >= reasoning_->close.size() &&
                        trimmed.substr(trimmed.size() - reasoning_->close.size()) == reasoning_->close;
    if (!inside && !off && !closed) {
      *text += reasoning_->open + "\n";
      inside = true;
    }
    if (opens_reasoning != nullptr) *opens_reasoning = inside;
  }
  return text;
}

Result<std::vector<int32_t>> ChatPrompt::Encode(const std::string& text, bool session) const {
  const tokenizer::Tokenizer& tok = engine_.tokenizer();
  LLAMAY_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.Encode(text, /*add_special=*/!session, /*parse_special=*/true,
                                                                   /*continuation=*/session));
  // A template that writes the BOS text itself, tokenized with add_special, would start with two.
  if (ids.size() >= 2 && tok.bos() >= 0 && ids[0] == tok.bos() && ids[1] == tok.bos()) ids.erase(ids.begin());
  if (session && !ids.empty() && ids[0] == tok.bos()) ids.erase(ids.begin());
  return ids;
}

Result<std::vector<int32_t>> ChatPrompt::Tokens(const std::vector<Message>& messages, bool session,
                                                const std::vector<toolcall::ToolSpec>& tools,
                                                bool describe_tools, const ReasoningControls* reasoning,
                                                bool* opens_reasoning, std::vector<size_t>* boundaries) const {
  LLAMAY_ASSIGN_OR_RETURN(std::string text, Text(messages, tools, describe_tools, reasoning, opens_reasoning));
  LLAMAY_ASSIGN_OR_RETURN(std::vector<int32_t> ids, Encode(text, session));
  if (boundaries != nullptr) {
    boundaries->clear();
    if (engine_.cache().groups().has_recurrent())
      *boundaries = MessageBoundaries(messages, tools, describe_tools, reasoning, session, text, ids);
  }
  return ids;
}

std::vector<size_t> ChatPrompt::MessageBoundaries(const std::vector<Message>& messages,
                                                  const std::vector<toolcall::ToolSpec>& tools, bool describe_tools,
                                                  const ReasoningControls* reasoning, bool session,
                                                  const std::string& text, const std::vector<int32_t>& ids) const {
  // The first message and the last few: the system prompt that new conversations share, and the turns
  // since an agent's previous request (whose own end is a checkpoint already). Each costs a render and a
  // tokenization of a prefix, so not every message of a long conversation.
  constexpr size_t kLastMessages = 4;
  std::vector<size_t> out;
  const size_t n = messages.size();
  for (size_t i = 0; i + 1 < n; ++i) {
    if (i != 0 && i + 1 + kLastMessages < n) continue;
    const std::vector<Message> head(messages.begin(), messages.begin() + static_cast<long>(i + 1));
    auto prefix = Render(head, tools, describe_tools, reasoning, null_as_empty_, /*generation_prompt=*/false);
    if (!prefix.ok() || prefix->empty() || prefix->size() >= text.size() || text.compare(0, prefix->size(), *prefix) != 0)
      continue;
    auto head_ids = Encode(*prefix, session);
    if (!head_ids.ok() || head_ids->empty() || head_ids->size() >= ids.size() ||
        !std::equal(head_ids->begin(), head_ids->end(), ids.begin()))
      continue;
    if (out.empty() || out.back() < head_ids->size()) out.push_back(head_ids->size());
  }
  return out;
}

}  // namespace llamay::server
