// Broken and hostile chat templates, served: GGUF files written here (the demo model with another
// tokenizer.chat_template) whose template exceeds a render limit (a huge range, a string repeated 2e9
// times, a recursive macro, a loop nest, a string doubled in a loop), does not parse, or raises on the
// messages. Each is answered at once with its own code and an honest status (500 chat_template_error: the
// model file's fault; 400 chat_template_rejected: the request's), never 503 kv_memory_exhausted, and the
// server keeps serving (prompts always; chat with a template that works).
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "model/demo_model.h"
#include "server/chat_prompt.h"
#include "server/server.h"
#include "server/template_test_util.h"

namespace llamay::server {
namespace {

using json = nlohmann::json;

struct Answer {
  int status = 0;
  json body;
  double seconds = 0;
};

Answer Post(Served& s, const std::string& path, const json& body) {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = s.client->Post(path.c_str(), body.dump(), "application/json");
  Answer a;
  a.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(r) << path;
  if (!r) return a;
  a.status = r->status;
  a.body = json::parse(r->body, nullptr, false);
  return a;
}

const json kChat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}};

// Every route that renders the template answers `status` with `code`; prompts are still served.
void ExpectRefused(Served& s, int status, const std::string& code, const json& chat = kChat) {
  for (const char* path : {"/v1/chat/completions", "/v1/contexts"}) {
    SCOPED_TRACE(path);
    const Answer a = Post(s, path, chat);
    EXPECT_EQ(a.status, status) << a.body.dump();
    EXPECT_EQ(a.body["error"]["code"], code) << a.body.dump();
    EXPECT_NE(a.body["error"]["message"].get<std::string>().find("chat template"), std::string::npos);
    // A bound loose enough for any machine, and far below the seconds a render took before budgets.
    EXPECT_LT(a.seconds, 2.0);
  }
  const Answer p = Post(s, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2}});
  EXPECT_EQ(p.status, 200) << p.body.dump();
  auto h = s.client->Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
}

TEST(ChatTemplateErrors, RenderLimitsAreTheTemplatesFault500) {
  const char* hostile[] = {
      "{% for i in range(10000) %}{% for j in range(10000) %}{% for k in range(10000) %}{% endfor %}{% endfor %}"
      "{% endfor %}",
      "{{ 'x' * 2000000000 }}",
      "{% for i in range(1000000000) %}{{ i }}{% endfor %}",
      "{% macro f(n) %}{{ f(n + 1) }}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
      "{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
      "{% for i in range(20000) %}{{ ('x' * 1000000)|length }}{% endfor %}",
  };
  for (const char* t : hostile) {
    SCOPED_TRACE(t);
    Served s = Serve(t);
    // Broken on every conversation: known at start-up.
    EXPECT_FALSE(s.server->chat_prompt().problem().ok());
    ExpectRefused(s, 500, "chat_template_error");
  }
}

TEST(ChatTemplateErrors, AHostileTemplateOnlyForSomeMessagesIsStillRefusedQuickly) {
  // Renders a one-message conversation, then loops a billion times once there are two.
  Served s = Serve(
      "{% if messages|length > 1 %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
      "{% endfor %}{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}");
  EXPECT_TRUE(s.server->chat_prompt().problem().ok());
  const json two = {{"messages", {{{"role", "user"}, {"content", "a"}}, {{"role", "assistant"}, {"content", "b"}}}},
                    {"max_tokens", 2}};
  ExpectRefused(s, 500, "chat_template_error", two);
  EXPECT_EQ(Post(s, "/v1/chat/completions", kChat).status, 200);
}

TEST(ChatTemplateErrors, AParseErrorIsReportedAtStartAndAnswered500) {
  Served s = Serve("{% for m in messages %}{{ m.content }}");  // no endfor
  ASSERT_FALSE(s.server->chat_prompt().problem().ok());
  EXPECT_NE(s.server->chat_prompt().problem().message().find("does not parse"), std::string::npos)
      << s.server->chat_prompt().problem().ToString();
  ExpectRefused(s, 500, "chat_template_error");
}

TEST(ChatTemplateErrors, ATemplateThatRaisesOnTheMessagesIsTheClients400) {
  Served s = Serve(
      "{% for m in messages %}{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}"
      "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
      "{% endif %}{{ m.role }}: {{ m.content }}\n{% endfor %}");
  EXPECT_TRUE(s.server->chat_prompt().problem().ok());
  const json bad = {{"messages", {{{"role", "user"}, {"content", "a"}}, {{"role", "user"}, {"content", "b"}}}},
                    {"max_tokens", 2}};
  ExpectRefused(s, 400, "chat_template_rejected", bad);
  const Answer a = Post(s, "/v1/chat/completions", bad);
  EXPECT_NE(a.body["error"]["message"].get<std::string>().find("must alternate"), std::string::npos);
  EXPECT_EQ(Post(s, "/v1/chat/completions", kChat).status, 200);
}

}  // namespace
}  // namespace llamay::server
