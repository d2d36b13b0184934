// Structured output through the HTTP routes: response_format, json_schema and grammar.
#include <gtest/gtest.h>

#include "server/conversation.h"
#include "server/server_test_util.h"

namespace llamay::server {
namespace {

const char* kSchema = R"({"type":"object","properties":{
    "id":{"type":"integer","minimum":1,"maximum":500},
    "label":{"type":"string","minLength":1,"maxLength":6},
    "ok":{"type":"boolean"}},
  "required":["id","label"],"additionalProperties":false})";

// Checks an answer against kSchema without the grammar library.
testing::AssertionResult MatchesSchema(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return testing::AssertionFailure() << "not JSON: " << text;
  if (!j.is_object()) return testing::AssertionFailure() << "not an object: " << text;
  if (!j.contains("id") || !j["id"].is_number_integer() || j["id"] < 1 || j["id"] > 500)
    return testing::AssertionFailure() << "bad id: " << text;
  if (!j.contains("label") || !j["label"].is_string() || j["label"].get<std::string>().empty())
    return testing::AssertionFailure() << "bad label: " << text;
  if (j["label"].get<std::string>().size() > 6) return testing::AssertionFailure() << "long label: " << text;
  for (auto& [k, v] : j.items())
    if (k != "id" && k != "label" && !(k == "ok" && v.is_boolean()))
      return testing::AssertionFailure() << "extra or bad member " << k << ": " << text;
  return testing::AssertionSuccess();
}

TEST_F(ServerTest, JsonSchemaAnswersValidateWhateverTheSeed) {
  const json schema = json::parse(kSchema);
  int complete = 0;
  for (int seed = 0; seed < 24; ++seed) {
    json req = {{"messages", {{{"role", "user"}, {"content", "give me a record"}}}},
                {"max_tokens", 120},
                {"temperature", 1.0},
                {"seed", seed},
                {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "r"}, {"schema", schema}, {"strict", true}}}}}};
    json a = Post("/v1/chat/completions", req);
    if (a["choices"][0]["finish_reason"] != "stop") continue;
    ++complete;
    EXPECT_TRUE(MatchesSchema(a["choices"][0]["message"]["content"])) << "seed " << seed;
  }
  EXPECT_GE(complete, 18);
}

TEST_F(ServerTest, EveryFormOfStructuredOutputIsFollowed) {
  const json schema = json::parse(kSchema);
  // llama.cpp's json_schema field and response_format json_object with a schema, on /v1/completions.
  for (const json& extra : {json{{"json_schema", schema}},
                            json{{"response_format", {{"type", "json_object"}, {"schema", schema}}}}}) {
    json req = {{"prompt", "record:"}, {"max_tokens", 120}, {"temperature", 0.8}, {"seed", 5}};
    req.update(extra);
    json a = Post("/v1/completions", req);
    ASSERT_EQ(a["choices"][0]["finish_reason"], "stop") << a.dump();
    EXPECT_TRUE(MatchesSchema(a["choices"][0]["text"])) << extra.dump();
  }
  // Any JSON object.
  json obj = Post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "json"}}}},
                                           {"max_tokens", 200}, {"temperature", 0.7}, {"seed", 2},
                                           {"response_format", {{"type", "json_object"}}}});
  if (obj["choices"][0]["finish_reason"] == "stop") {
    json j = json::parse(obj["choices"][0]["message"]["content"].get<std::string>(), nullptr, false);
    EXPECT_TRUE(j.is_object()) << obj.dump();
  }
  // GBNF, and n choices that each follow it.
  json g = Post("/v1/completions", {{"prompt", "abc"}, {"max_tokens", 40}, {"temperature", 1.0}, {"n", 3},
                                    {"seed", 9}, {"grammar", "root ::= (\"yes\" | \"no\") \" \" [0-9] [0-9]?"}});
  for (const auto& c : g["choices"]) {
    const std::string t = c["text"];
    EXPECT_TRUE(t.rfind("yes ", 0) == 0 || t.rfind("no ", 0) == 0) << t;
    EXPECT_TRUE(t.size() >= 4 && t.size() <= 5 + (t[0] == 'y')) << t;
    EXPECT_EQ(c["finish_reason"], "stop");
  }
  // Without a constraint the same request is not JSON: the checks above can fail.
  json free = Post("/v1/completions", {{"prompt", "record:"}, {"max_tokens", 40}, {"temperature", 0.8}, {"seed", 5}});
  EXPECT_FALSE(MatchesSchema(free["choices"][0]["text"]));
}

TEST_F(ServerTest, AStreamedStructuredAnswerIsTheSameJson) {
  json req = {{"messages", {{{"role", "user"}, {"content", "a record"}}}}, {"max_tokens", 120},
              {"temperature", 0.9}, {"seed", 11},
              {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "r"}, {"schema", json::parse(kSchema)}}}}}};
  json whole = Post("/v1/chat/completions", req);
  req["stream"] = true;
  auto r = client_->Post("/v1/chat/completions", req.dump(), "application/json");
  ASSERT_TRUE(r);
  std::string text;
  for (size_t at = r->body.find("data: {"); at != std::string::npos; at = r->body.find("data: {", at + 1)) {
    json chunk = json::parse(r->body.substr(at + 6, r->body.find("\n\n", at) - at - 6));
    const json& d = chunk["choices"][0]["delta"];
    if (d.contains("content")) text += d["content"].get<std::string>();
  }
  EXPECT_EQ(text, whole["choices"][0]["message"]["content"]);
}

TEST_F(ServerTest, UnsupportedOrMalformedConstraintsGetPrecise400s) {
  const json base = {{"prompt", "x"}, {"max_tokens", 4}};
  auto message = [&](const json& extra) {
    json req = base;
    req.update(extra);
    return Post("/v1/completions", req, 400)["error"]["message"].get<std::string>();
  };
  EXPECT_NE(message({{"json_schema", {{"type", "object"}, {"patternProperties", json::object()}}}}).find("patternProperties"),
            std::string::npos);
  EXPECT_NE(message({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", {{"type", "strang"}}}}}}}})
                .find("strang"),
            std::string::npos);
  EXPECT_NE(message({{"response_format", {{"type", "xml"}}}}).find("\"xml\""), std::string::npos);
  EXPECT_NE(message({{"response_format", "json"}}).find("response_format"), std::string::npos);
  EXPECT_NE(message({{"response_format", {{"type", "json_schema"}}}}).find("json_schema"), std::string::npos);
  EXPECT_NE(message({{"json_schema", 3}}).find("json_schema"), std::string::npos);
  EXPECT_NE(message({{"grammar", "root ::= \"a"}}).find("grammar"), std::string::npos);
  EXPECT_NE(message({{"grammar", "root ::= a"}}).find("grammar"), std::string::npos);
  EXPECT_NE(message({{"grammar", "root ::= \"a\""}, {"json_schema", json::object()}}).find("not several"), std::string::npos);
  // Still serving.
  EXPECT_EQ(Post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}, {"grammar", "root ::= \"ok\""}})["choices"][0]["text"], "ok");
}

// toolcall::ParseTools names an unsupported keyword and where it is ("... at /properties/x"); the keyword is
// dropped there even when a property name in that pointer, or a $ref quoted before it, contains " at ". The
// reader once took what followed the last " at " as the pointer and threw on "y" (found writing
// request_fuzz), so a Messages or Responses request with such a tool got a 400 "a field has the wrong type".
TEST(ParseToolsDroppingUnsupported, FindsTheKeywordWhateverThePropertyNamesSay) {
  const auto tools =
      nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "t", "parameters": {
      "type": "object", "properties": {
        "x at y": {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}},
        "a at ": {"type": "array", "items": {"type": "object", "propertyNames": {"maxLength": 3}}},
        "r": {"$ref": "https://example.com/s at /properties"}}}}}])");
  auto parsed = ParseToolsDroppingUnsupported(tools);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const nlohmann::ordered_json& props = (*parsed)[0].parameters["properties"];
  EXPECT_EQ(props["x at y"], nlohmann::ordered_json({{"type", "object"}}));
  EXPECT_EQ(props["a at "]["items"], nlohmann::ordered_json({{"type", "object"}}));
  EXPECT_FALSE(props["r"].contains("$ref"));
}

}  // namespace
}  // namespace llamay::server
