#include "template/chat_template.h"

#include <algorithm>
#include <exception>

#include "template/ast.h"
#include "template/json_value.h"
#include "template/lexer.h"
#include "template/parser.h"
#include "template/renderer.h"

namespace llamay::chat {
namespace {

Status WithDetail(const Status& status, TemplateErrorDetail detail) {
  if (status.ok() || status.detail() != 0) return status;
  return Status(status.code(), status.message(), static_cast<int>(detail));
}

}  // namespace

Result<ChatTemplate> ChatTemplate::Parse(std::string_view source) {
  try {
    auto tokens = internal::Tokenize(source);
    if (!tokens.ok()) return WithDetail(tokens.status(), TemplateErrorDetail::kSyntax);
    auto program = internal::ParseProgram(std::move(tokens).value());
    if (!program.ok()) return WithDetail(program.status(), TemplateErrorDetail::kSyntax);
    return ChatTemplate(std::shared_ptr<const internal::Program>(std::move(program).value()));
  } catch (const std::exception& e) {  // only allocation failure can get here
    return InternalError(std::string("chat template parse: ") + e.what());
  }
}

namespace {

template <typename Json>
Result<std::string> RenderJson(const internal::Program& program, const Json& context,
                               const RenderLimits& limits) {
  if (!context.is_object()) {
    return Status(StatusCode::kInvalidArgument, "chat template context must be a JSON object",
                  static_cast<int>(TemplateErrorDetail::kRuntime));
  }
  try {
    auto ctx = internal::FromJson(context);
    if (!ctx.ok()) return WithDetail(ctx.status(), TemplateErrorDetail::kRuntime);
    internal::Renderer renderer(limits);
    return renderer.Render(program, *ctx);
  } catch (const std::exception& e) {  // only allocation failure can get here
    return InternalError(std::string("chat template render: ") + e.what());
  }
}

template <typename Json>
Result<std::string> RenderWith(const ChatTemplate& tmpl, const Json& messages, bool add_generation_prompt,
                               std::string_view bos, std::string_view eos, const Json& tools = Json(),
                               const Json& variables = Json()) {
  Json context = variables.is_object() ? variables : Json::object();
  context["messages"] = messages;
  context["tools"] = tools;
  context["documents"] = nullptr;
  context["add_generation_prompt"] = add_generation_prompt;
  context["bos_token"] = std::string(bos);
  context["eos_token"] = std::string(eos);
  const size_t bytes = messages.dump(-1, ' ', false, Json::error_handler_t::replace).size() +
                       tools.dump(-1, ' ', false, Json::error_handler_t::replace).size();
  return tmpl.Render(context, RenderLimitsFor(messages.is_array() ? messages.size() : 1, bytes));
}

template <typename Json>
Result<std::string> Apply(std::string_view source, const Json& messages, bool add_generation_prompt,
                          std::string_view bos, std::string_view eos) {
  if (source.empty()) source = DefaultChatTemplate();
  LLAMAY_ASSIGN_OR_RETURN(ChatTemplate tmpl, ChatTemplate::Parse(source));
  return RenderWith(tmpl, messages, add_generation_prompt, bos, eos);
}

}  // namespace

RenderLimits RenderLimitsFor(size_t messages, size_t input_bytes) {
  RenderLimits limits;
  const uint64_t extra = uint64_t{2000} * std::min<uint64_t>(messages, uint64_t{1} << 30) +
                         std::min<uint64_t>(input_bytes, uint64_t{1} << 40) / 4;
  limits.max_steps += static_cast<int64_t>(extra);
  // The longest prompt's text, 16 times over, fits whatever the default says.
  limits.max_output_bytes = std::max<size_t>(limits.max_output_bytes, input_bytes * 16);
  return limits;
}

Result<std::string> RenderMessages(const ChatTemplate& tmpl, const nlohmann::json& messages,
                                   bool add_generation_prompt, std::string_view bos, std::string_view eos) {
  return RenderWith(tmpl, messages, add_generation_prompt, bos, eos);
}

Result<std::string> RenderMessages(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                                   const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                   std::string_view bos, std::string_view eos) {
  return RenderWith(tmpl, messages, add_generation_prompt, bos, eos, tools);
}

Result<std::string> RenderMessages(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                                   const nlohmann::ordered_json& tools, const nlohmann::ordered_json& variables,
                                   bool add_generation_prompt, std::string_view bos, std::string_view eos) {
  return RenderWith(tmpl, messages, add_generation_prompt, bos, eos, tools, variables);
}

Result<std::string> ChatTemplate::Render(const nlohmann::json& context, const RenderLimits& limits) const {
  return RenderJson(*program_, context, limits);
}

Result<std::string> ChatTemplate::Render(const nlohmann::ordered_json& context,
                                         const RenderLimits& limits) const {
  return RenderJson(*program_, context, limits);
}

Result<std::string> ApplyChatTemplate(std::string_view source, const nlohmann::json& messages,
                                      bool add_generation_prompt, std::string_view bos,
                                      std::string_view eos) {
  return Apply(source, messages, add_generation_prompt, bos, eos);
}

Result<std::string> ApplyChatTemplate(std::string_view source, const nlohmann::ordered_json& messages,
                                      bool add_generation_prompt, std::string_view bos,
                                      std::string_view eos) {
  return Apply(source, messages, add_generation_prompt, bos, eos);
}

bool TemplateReadsVariable(std::string_view source, std::string_view name) {
  auto tokens = internal::Tokenize(source);
  if (!tokens.ok()) return false;
  const std::vector<internal::Token>& t = *tokens;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].kind != internal::TokenKind::kName || t[i].text != name) continue;
    if (i > 0 && t[i - 1].kind == internal::TokenKind::kOp && t[i - 1].text == ".") continue;
    return true;
  }
  return false;
}

}  // namespace llamay::chat
