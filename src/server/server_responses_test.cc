// The Responses surface (/v1/responses) on the demo model: the answer, its stream of events, stored
// responses continued by previous_response_id on held contexts, function and custom tools, text.format.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "engine/snapshot_store.h"
#include "server/server_test_util.h"
#include "store/store.h"

namespace llamay::server {
namespace {

const std::string kInstructions =
    "You are a coding agent. Read the task, plan the change, edit the files, run the tests, and report what "
    "you did in one short paragraph. Never invent results; say when something failed and why.";

json Request(const json& input, int max_output_tokens = 12) {
  return {{"model", "m"}, {"instructions", kInstructions}, {"input", input}, {"max_output_tokens", max_output_tokens},
          {"temperature", 0}};
}

std::string OutputText(const json& r) {
  std::string text;
  for (const json& item : r["output"])
    if (item["type"] == "message")
      for (const json& part : item["content"]) text += part["text"].get<std::string>();
  return text;
}

json Items(const json& r, const std::string& type) {
  json out = json::array();
  for (const json& item : r["output"])
    if (item["type"] == type) out.push_back(item);
  return out;
}

const json kWeather = {{"type", "object"},
                       {"properties", {{"city", {{"type", "string"}, {"maxLength", 8}}}}},
                       {"required", {"city"}},
                       {"additionalProperties", false}};

TEST_F(ServerTest, ResponsesAnswersAsChatCompletionsDoesForTheSameConversation) {
  const json r = Post("/v1/responses", Request("hello there"));
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["id"].get<std::string>().rfind("resp_", 0), 0u) << r["id"];
  const json chat = Post("/v1/chat/completions",
                         {{"max_tokens", 12}, {"temperature", 0},
                          {"messages", json::array({{{"role", "system"}, {"content", kInstructions}},
                                                    {{"role", "user"}, {"content", "hello there"}}})}});
  EXPECT_EQ(OutputText(r), chat["choices"][0]["message"]["content"]);
  EXPECT_EQ(r["output_text"], OutputText(r));
  const std::string finish = chat["choices"][0]["finish_reason"];
  EXPECT_EQ(r["status"], finish == "length" ? "incomplete" : "completed");
  if (finish == "length") {
    EXPECT_EQ(r["incomplete_details"]["reason"], "max_output_tokens");
  }
  EXPECT_EQ(r["usage"]["input_tokens"], chat["usage"]["prompt_tokens"]);
  EXPECT_EQ(r["usage"]["output_tokens"], chat["usage"]["completion_tokens"]);
  EXPECT_EQ(r["usage"]["total_tokens"], chat["usage"]["total_tokens"]);
  EXPECT_EQ(r["usage"]["output_tokens_details"]["reasoning_tokens"], 0);
  // The same conversation as input items, with a developer message instead of instructions.
  json items = {{{"role", "developer"}, {"content", kInstructions}},
                {{"type", "message"}, {"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "hello there"}}}}}};
  json req = Request(items);
  req.erase("instructions");
  EXPECT_EQ(OutputText(Post("/v1/responses", req)), OutputText(r));
}

TEST_F(ServerTest, ResponsesStreamsTheSameOutputAsNumberedEvents) {
  const json whole = Post("/v1/responses", Request("stream me", 16));
  json req = Request("stream me", 16);
  req["stream"] = true;
  auto res = client_->Post("/v1/responses", req.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const auto events = SseEvents(res->body);
  ASSERT_GE(events.size(), 8u) << res->body;
  std::vector<std::string> names;
  std::string deltas;
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& [name, data] = events[i];
    EXPECT_EQ(data["type"], name);
    EXPECT_EQ(data["sequence_number"], i);
    names.push_back(name);
    if (name == "response.output_text.delta") deltas += data["delta"].get<std::string>();
  }
  const std::vector<std::string> head = {"response.created", "response.in_progress", "response.output_item.added",
                                         "response.content_part.added"};
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 4), head);
  const std::vector<std::string> tail = {"response.output_text.done", "response.content_part.done",
                                         "response.output_item.done"};
  EXPECT_EQ(std::vector<std::string>(names.end() - 4, names.end() - 1), tail);
  const json& last = events.back().second;
  EXPECT_EQ(names.back(), whole["status"] == "completed" ? "response.completed" : "response.incomplete");
  EXPECT_EQ(deltas, OutputText(whole));
  EXPECT_EQ(OutputText(last["response"]), OutputText(whole));
  // The usage but its cached tokens (the second request reads the first's prompt from the prefix tree).
  EXPECT_EQ(last["response"]["usage"]["input_tokens"], whole["usage"]["input_tokens"]);
  EXPECT_EQ(last["response"]["usage"]["output_tokens"], whole["usage"]["output_tokens"]);
  EXPECT_GT(last["response"]["usage"]["input_tokens_details"]["cached_tokens"].get<int>(), 0);
  EXPECT_EQ(events.front().second["response"]["status"], "in_progress");
  EXPECT_EQ(events.front().second["response"]["id"], last["response"]["id"]);
}

TEST_F(ServerTest, PreviousResponseIdContinuesTheStoredContextAndPrefillsOnlyTheNewInput) {
  const json first = Post("/v1/responses", Request("hello there", 8));
  const std::string id = first["id"];
  // A stored response is a held context of its id.
  EXPECT_GT(server_->HeldTokens(id), first["usage"]["input_tokens"].get<size_t>());
  const json next = {{"previous_response_id", id}, {"input", "and then?"}, {"max_output_tokens", 8}, {"temperature", 0}};
  const json second = Post("/v1/responses", next);
  const size_t held = first["usage"]["input_tokens"].get<size_t>() + first["usage"]["output_tokens"].get<size_t>();
  const size_t cached = second["usage"]["input_tokens_details"]["cached_tokens"];
  const size_t input = second["usage"]["input_tokens"];
  // Everything the first turn held but its last token (pending, as a session's tail) came from the
  // context; the rest is the new user turn's few tokens, not the instructions again.
  EXPECT_EQ(cached, held - 1);
  EXPECT_LT(input - cached, first["usage"]["input_tokens"].get<size_t>() / 4) << second["usage"].dump();
  EXPECT_EQ(second["previous_response_id"], id);
  // The first response stays as it was: continuing it again with the same input gives the same answer,
  // and the second is a response of its own that continues further.
  const json again = Post("/v1/responses", next);
  EXPECT_EQ(OutputText(again), OutputText(second));
  // (Drafts may differ: the second turn's own output is now a source of them. The output may not.)
  auto without_drafts = [](json u) {
    u.erase("llamay_draft_tokens");
    u.erase("llamay_accepted_draft_tokens");
    return u;
  };
  EXPECT_EQ(without_drafts(again["usage"]), without_drafts(second["usage"]));
  EXPECT_NE(again["id"], second["id"]);
  const json third = Post("/v1/responses", {{"previous_response_id", second["id"]}, {"input", "more"},
                                            {"max_output_tokens", 4}, {"temperature", 0}});
  EXPECT_GT(third["usage"]["input_tokens_details"]["cached_tokens"].get<size_t>(), cached);
}

TEST_F(ServerTest, AResponseThatWasNotStoredOrWasDeletedCannotBeContinued) {
  json req = Request("hello");
  req["store"] = false;
  const json unstored = Post("/v1/responses", req);
  EXPECT_EQ(server_->HeldTokens(unstored["id"]), 0u);
  const json missing = Post("/v1/responses", {{"previous_response_id", unstored["id"]}, {"input", "x"}}, 404);
  EXPECT_EQ(missing["error"]["code"], "previous_response_not_found");
  EXPECT_EQ(missing["error"]["param"], "previous_response_id");
  const json stored = Post("/v1/responses", Request("hello"));
  auto del = client_->Delete(("/v1/responses/" + stored["id"].get<std::string>()).c_str());
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 200) << del->body;
  EXPECT_EQ(json::parse(del->body)["deleted"], true);
  Post("/v1/responses", {{"previous_response_id", stored["id"]}, {"input", "x"}}, 404);
  auto again = client_->Delete(("/v1/responses/" + stored["id"].get<std::string>()).c_str());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 404);
  // A context that is not a stored response is not one, even under its id.
  const json ctx = Post("/v1/contexts", {{"prompt", "some text"}});
  EXPECT_EQ(Post("/v1/responses", {{"previous_response_id", ctx["id"]}, {"input", "x"}}, 404)["error"]["code"],
            "previous_response_not_found");
}

// GET /v1/responses/{id} gives a stored response as it was answered, streamed or not, until it is deleted;
// a response that was not stored, or is unknown, is 404.
TEST_F(ServerTest, AStoredResponseCanBeRetrievedUntilItIsDeleted) {
  auto get = [&](const json& id) { return client_->Get(("/v1/responses/" + id.get<std::string>()).c_str()); };
  const json first = Post("/v1/responses", Request("hello there", 6));
  auto got = get(first["id"]);
  ASSERT_TRUE(got);
  ASSERT_EQ(got->status, 200) << got->body;
  EXPECT_EQ(json::parse(got->body), first);
  // Streamed: the body is the one response.completed carried.
  json req = Request("stream me", 6);
  req["stream"] = true;
  auto streamed = client_->Post("/v1/responses", req.dump(), "application/json");
  ASSERT_TRUE(streamed);
  json completed;
  for (const auto& [name, data] : SseEvents(streamed->body))
    if (data.contains("type") && (data["type"] == "response.completed" || data["type"] == "response.incomplete"))
      completed = data["response"];
  ASSERT_TRUE(completed.is_object()) << streamed->body;
  got = get(completed["id"]);
  ASSERT_TRUE(got);
  EXPECT_EQ(json::parse(got->body), completed);
  // Deleted, never stored, or unknown: 404.
  ASSERT_TRUE(client_->Delete(("/v1/responses/" + first["id"].get<std::string>()).c_str()));
  EXPECT_EQ(get(first["id"])->status, 404);
  json unstored = Request("hello");
  unstored["store"] = false;
  EXPECT_EQ(get(Post("/v1/responses", unstored)["id"])->status, 404);
  EXPECT_EQ(get(json("resp_nothing"))->status, 404);
  // A held context that is not a response is not one.
  EXPECT_EQ(get(Post("/v1/contexts", {{"prompt", "some text"}})["id"])->status, 404);
}

// POST /v1/responses/input_tokens counts what the request would report as usage.input_tokens, new and
// continued, without running it (nothing is stored).
TEST_F(ServerTest, InputTokensCountsWhatTheResponseWouldUse) {
  const json req = Request("count these words please", 4);
  const json counted = Post("/v1/responses/input_tokens", req);
  EXPECT_EQ(counted["object"], "response.input_tokens");
  const json first = Post("/v1/responses", req);
  EXPECT_EQ(counted["input_tokens"], first["usage"]["input_tokens"]);
  const json next = {{"previous_response_id", first["id"]}, {"input", "and then?"}, {"max_output_tokens", 4},
                     {"temperature", 0}};
  const json counted_next = Post("/v1/responses/input_tokens", next);
  EXPECT_EQ(counted_next["input_tokens"], Post("/v1/responses", next)["usage"]["input_tokens"]);
  EXPECT_GT(counted_next["input_tokens"].get<size_t>(), counted["input_tokens"].get<size_t>());
  // Errors as on /v1/responses.
  EXPECT_EQ(Post("/v1/responses/input_tokens", {{"previous_response_id", "resp_gone"}, {"input", "x"}}, 404)
                ["error"]["code"], "previous_response_not_found");
  Post("/v1/responses/input_tokens", {{"model", "m"}}, 400);
}

TEST_F(ServerTest, AStoredResponseSurvivesARestartThroughTheStateDirectory) {
  const json first = Post("/v1/responses", Request("hello there", 6));
  const std::string dir = testing::TempDir() + "/llamay_responses_state_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(server_->SaveContexts(dir).ok());
  Start();  // a new engine and server, as after a restart
  std::vector<std::string> warnings;
  ASSERT_TRUE(server_->LoadContexts(dir, &warnings).ok());
  EXPECT_TRUE(warnings.empty());
  const json next = Post("/v1/responses", {{"previous_response_id", first["id"]}, {"input", "and then?"},
                                           {"max_output_tokens", 4}, {"temperature", 0}});
  EXPECT_GE(next["usage"]["input_tokens_details"]["cached_tokens"].get<size_t>(),
            first["usage"]["input_tokens"].get<size_t>());
  // New ids continue after the loaded ones.
  EXPECT_NE(next["id"], first["id"]);
  EXPECT_GT(server_->HeldTokens(first["id"]), 0u);
  // Its body stayed with the instance that answered it.
  auto got = client_->Get(("/v1/responses/" + first["id"].get<std::string>()).c_str());
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 404);
  EXPECT_NE(got->body.find("previous_response_id"), std::string::npos) << got->body;
  std::filesystem::remove_all(dir);
}

TEST_F(ServerTest, StoredResponsesAreBoundedOldestFirst) {
  ServerOptions o;
  o.max_stored_responses = 2;
  Start(o);
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(Post("/v1/responses", Request("turn " + std::to_string(i), 2))["id"]);
  EXPECT_EQ(server_->HeldTokens(ids[0]), 0u);
  EXPECT_GT(server_->HeldTokens(ids[1]), 0u);
  EXPECT_GT(server_->HeldTokens(ids[2]), 0u);
  EXPECT_EQ(Post("/v1/responses", {{"previous_response_id", ids[0]}, {"input", "x"}}, 404)["error"]["code"],
            "previous_response_not_found");
}

// A prompt_cache_key's context that a turn has just continued counts as the newest: the stored response
// made before that turn goes first.
TEST_F(ServerTest, AKeyedContextJustContinuedIsEvictedAfterOlderResponses) {
  ServerOptions o;
  o.max_stored_responses = 2;
  Start(o);
  json messages = json::array({{{"role", "system"}, {"content", kInstructions}}, {{"role", "user"}, {"content", "hi"}}});
  const json turn = {{"max_tokens", 4}, {"temperature", 0}, {"prompt_cache_key", "k"}};
  json req = turn;
  req["messages"] = messages;
  const json first = Post("/v1/chat/completions", req);
  const std::string older = Post("/v1/responses", Request("an older response", 2))["id"];
  messages.push_back(first["choices"][0]["message"]);
  messages.push_back({{"role", "user"}, {"content", "and?"}});
  req["messages"] = messages;
  const json second = Post("/v1/chat/completions", req);
  ASSERT_GT(second["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);  // the key continued
  const std::string newer = Post("/v1/responses", Request("a newer response", 2))["id"];
  EXPECT_EQ(server_->HeldTokens(older), 0u);
  EXPECT_GT(server_->HeldTokens(newer), 0u);
  size_t keyed = 0;
  {
    std::lock_guard l(server_->contexts_mu());
    for (const auto& [id, held] : server_->contexts()) keyed += id.rfind("pck_", 0) == 0;
  }
  EXPECT_EQ(keyed, 1u);
}

TEST_F(ServerTest, APromptCacheKeyContinuesOneHeldContextForAClientThatSendsEverything) {
  json messages = json::array({{{"role", "system"}, {"content", kInstructions}}, {{"role", "user"}, {"content", "hi"}}});
  const json first = Post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 6}, {"temperature", 0},
                                                   {"prompt_cache_key", "conversation-1"}});
  std::string keyed;
  auto listed = client_->Get("/v1/contexts");
  ASSERT_TRUE(listed);
  const json contexts = json::parse(listed->body);
  for (const json& ctx : contexts["data"])
    if (ctx["id"].get<std::string>().rfind("pck_", 0) == 0) keyed = ctx["id"];
  ASSERT_FALSE(keyed.empty()) << listed->body;
  // The next turn, sent whole: everything the key's context held but its pending last token is reused.
  messages.push_back(first["choices"][0]["message"]);
  messages.push_back({{"role", "user"}, {"content", "and?"}});
  const json second = Post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 6}, {"temperature", 0},
                                                    {"prompt_cache_key", "conversation-1"}});
  const size_t held = first["usage"]["prompt_tokens"].get<size_t>() + first["usage"]["completion_tokens"].get<size_t>();
  EXPECT_EQ(second["usage"]["prompt_tokens_details"]["cached_tokens"].get<size_t>(), held - 1) << second["usage"];
  EXPECT_EQ(server_->HeldTokens(keyed),
            second["usage"]["prompt_tokens"].get<size_t>() + second["usage"]["completion_tokens"].get<size_t>());
  // The same answer as without the key (the key changes what is reused, not what is computed).
  const json plain = Post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 6}, {"temperature", 0}});
  EXPECT_EQ(plain["choices"][0]["message"]["content"], second["choices"][0]["message"]["content"]);
  // An edited history does not continue the context: it starts from the prefix tree, and becomes the key's.
  messages[1]["content"] = "hello";
  const json edited = Post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 6}, {"temperature", 0},
                                                    {"prompt_cache_key", "conversation-1"}});
  EXPECT_EQ(server_->HeldTokens(keyed),
            edited["usage"]["prompt_tokens"].get<size_t>() + edited["usage"]["completion_tokens"].get<size_t>());
}

// With --share-sessions every stored response is written through to the store, so one evicted from memory
// comes back from there when it is continued.
TEST_F(ServerTest, AnEvictedStoredResponseComesBackFromTheSharedStore) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("llamay_evicted_responses_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto opened = store::OpenStore(dir.string());
  ASSERT_TRUE(opened.ok());
  engine::SnapshotStore snapshots(std::move(*opened));
  ServerOptions o;
  o.store = &snapshots;
  o.share_sessions = true;
  o.max_stored_responses = 1;
  Start(o);
  const json first = Post("/v1/responses", Request("hello there", 4));
  const json second = Post("/v1/responses", Request("something else", 4));
  EXPECT_EQ(server_->HeldTokens(first["id"]), 0u);  // evicted: only the newest is held
  EXPECT_GT(server_->HeldTokens(second["id"]), 0u);
  const json next = Post("/v1/responses", {{"previous_response_id", first["id"]}, {"input", "and then?"},
                                           {"max_output_tokens", 4}, {"temperature", 0}});
  EXPECT_GE(next["usage"]["input_tokens_details"]["cached_tokens"].get<size_t>(),
            first["usage"]["input_tokens"].get<size_t>());
  server_.reset();
  std::filesystem::remove_all(dir);
}

// With a KV budget, the memory stored responses hold outside the prefix tree stays within half of it: the
// oldest go first, the newest stays.
TEST_F(ServerTest, StoredResponsesStayWithinHalfTheKvBudget) {
  engine::EngineOptions eo;
  eo.kv_memory_bytes = 8u << 20;
  Start({}, eo);
  std::vector<std::string> ids;
  for (int i = 0; i < 12; ++i)
    ids.push_back(Post("/v1/responses", Request(std::string(600, static_cast<char>('a' + i)), 2))["id"]);
  size_t held = 0;
  for (const std::string& id : ids) held += server_->HeldTokens(id) > 0 ? 1 : 0;
  EXPECT_GT(server_->HeldTokens(ids.back()), 0u);
  EXPECT_LT(held, ids.size());
  EXPECT_EQ(server_->HeldTokens(ids.front()), 0u);
  size_t bytes = 0;
  {
    std::lock_guard l(server_->contexts_mu());
    for (const std::string& id : ids)
      if (auto it = server_->contexts().find(id); it != server_->contexts().end()) bytes += it->second.context.bytes();
  }
  EXPECT_LE(bytes, eo.kv_memory_bytes / 2) << "held " << held << " of " << ids.size();
}

TEST_F(ServerTest, ResponsesFunctionCallRoundTrip) {
  json req = Request("weather in Oslo?", 200);
  req["tools"] = {{{"type", "function"}, {"name", "get_weather"}, {"description", "The weather"}, {"parameters", kWeather}}};
  req["tool_choice"] = "required";
  const json first = Post("/v1/responses", req);
  const json calls = Items(first, "function_call");
  ASSERT_EQ(calls.size(), 1u) << first.dump();
  EXPECT_EQ(calls[0]["name"], "get_weather");
  EXPECT_EQ(calls[0]["call_id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(calls[0]["status"], "completed");
  const json args = json::parse(calls[0]["arguments"].get<std::string>());
  ASSERT_TRUE(args.contains("city")) << args;
  EXPECT_LE(args["city"].get<std::string>().size(), 8u);
  EXPECT_EQ(first["status"], "completed");
  // The output goes back as a function_call_output item on the stored context.
  const json second = Post("/v1/responses", {{"previous_response_id", first["id"]},
                                             {"input", {{{"type", "function_call_output"}, {"call_id", calls[0]["call_id"]},
                                                         {"output", "21 degrees"}}}},
                                             {"tools", req["tools"]}, {"max_output_tokens", 6}, {"temperature", 0}});
  EXPECT_TRUE(second["status"] == "completed" || second["status"] == "incomplete") << second.dump();
  EXPECT_GE(second["usage"]["input_tokens_details"]["cached_tokens"].get<size_t>(),
            first["usage"]["input_tokens"].get<size_t>());
  // Stateless, the whole history as items, the same call and output are taken too.
  json items = json::array({{{"role", "user"}, {"content", "weather in Oslo?"}}, calls[0],
                            {{"type", "function_call_output"}, {"call_id", calls[0]["call_id"]}, {"output", "21 degrees"}}});
  json whole = Request(items, 6);
  whole["tools"] = req["tools"];
  whole["store"] = false;
  const json stateless = Post("/v1/responses", whole);
  EXPECT_GT(stateless["usage"]["input_tokens"].get<size_t>(), first["usage"]["input_tokens"].get<size_t>());
  EXPECT_EQ(server_->HeldTokens(stateless["id"]), 0u);
  // Streamed, the arguments arrive as deltas that make the same text as the done event.
  req["stream"] = true;
  auto res = client_->Post("/v1/responses", req.dump(), "application/json");
  ASSERT_TRUE(res);
  std::string deltas, done;
  for (const auto& [name, data] : SseEvents(res->body)) {
    if (name == "response.function_call_arguments.delta") deltas += data["delta"].get<std::string>();
    if (name == "response.function_call_arguments.done") done = data["arguments"];
  }
  EXPECT_EQ(deltas, done);
  EXPECT_EQ(done, calls[0]["arguments"]);
}

TEST_F(ServerTest, ACustomToolsInputFollowsItsGrammar) {
  json req = Request("patch it", 200);
  req["tools"] = {{{"type", "custom"}, {"name", "tag"}, {"description", "A tag"},
                   {"format", {{"type", "grammar"}, {"syntax", "regex"}, {"definition", "^v[0-9]\\.[0-9]\n$"}}}}};
  req["tool_choice"] = {{"type", "custom"}, {"name", "tag"}};
  const json r = Post("/v1/responses", req);
  const json calls = Items(r, "custom_tool_call");
  ASSERT_EQ(calls.size(), 1u) << r.dump();
  EXPECT_EQ(calls[0]["name"], "tag");
  const std::string input = calls[0]["input"];
  EXPECT_TRUE(std::regex_match(input, std::regex("v[0-9]\\.[0-9]\n"))) << input;
  req["stream"] = true;
  auto res = client_->Post("/v1/responses", req.dump(), "application/json");
  ASSERT_TRUE(res);
  std::string deltas, done;
  for (const auto& [name, data] : SseEvents(res->body)) {
    if (name == "response.custom_tool_call_input.delta") deltas += data["delta"].get<std::string>();
    if (name == "response.custom_tool_call_input.done") done = data["input"];
  }
  EXPECT_EQ(deltas, input);
  EXPECT_EQ(done, input);
  // A custom tool call and its output go back as items.
  json items = json::array({{{"role", "user"}, {"content", "patch it"}}, calls[0],
                            {{"type", "custom_tool_call_output"}, {"call_id", calls[0]["call_id"]}, {"output", "ok"}}});
  json next = Request(items, 4);
  next["tools"] = req["tools"];
  Post("/v1/responses", next);
}

TEST_F(ServerTest, ResponsesTextFormatConstrainsTheAnswer) {
  json req = Request("a number", 64);
  req["text"] = {{"format", {{"type", "json_schema"}, {"name", "n"}, {"strict", true},
                             {"schema", {{"type", "object"}, {"properties", {{"n", {{"type", "integer"}}}}},
                                         {"required", {"n"}}, {"additionalProperties", false}}}}}};
  const json r = Post("/v1/responses", req);
  if (r["status"] == "completed") {
    const json v = json::parse(OutputText(r));
    EXPECT_TRUE(v["n"].is_number_integer()) << v;
  }
  EXPECT_EQ(r["text"]["format"]["type"], "json_schema");
  req["text"]["format"]["schema"] = {{"type", "object"}, {"patternProperties", {{"x", {{"type", "string"}}}}}};
  const json bad = Post("/v1/responses", req, 400);
  EXPECT_NE(bad["error"]["message"].get<std::string>().find("text.format"), std::string::npos) << bad;
}

TEST_F(ServerTest, AContextOverflowIsA400OrAStreamsResponseFailed) {
  engine::EngineOptions eo;
  eo.max_context = 64;
  Start({}, eo);
  const json long_input = Request(std::string(200, 'a'));
  EXPECT_EQ(Post("/v1/responses", long_input, 400)["error"]["code"], "context_length_exceeded");
  json streamed = long_input;
  streamed["stream"] = true;
  auto res = client_->Post("/v1/responses", streamed.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  const auto events = SseEvents(res->body);
  ASSERT_FALSE(events.empty()) << res->body;
  EXPECT_EQ(events.front().first, "response.created");
  EXPECT_EQ(events.back().first, "response.failed");
  EXPECT_EQ(events.back().second["response"]["status"], "failed");
  EXPECT_EQ(events.back().second["response"]["error"]["code"], "context_length_exceeded");
}

TEST_F(ServerTest, ResponsesRefusesWhatItCannotTakeByName) {
  const json image = Post("/v1/responses",
                          Request(json::array({{{"role", "user"}, {"content", {{{"type", "input_image"}, {"image_url", "x"}}}}}})),
                          400);
  EXPECT_NE(image["error"]["message"].get<std::string>().find("input_image"), std::string::npos) << image;
  json no_input = Request("x");
  no_input.erase("input");
  EXPECT_NE(Post("/v1/responses", no_input, 400)["error"]["message"].get<std::string>().find("input"), std::string::npos);
  EXPECT_NE(Post("/v1/responses", Request(json::array({{{"type", "item_reference"}, {"id", "msg_1"}}})), 400)["error"]
                ["message"].get<std::string>().find("item_reference"),
            std::string::npos);
  json bad_tool = Request("x");
  bad_tool["tools"] = {{{"type", "function"}, {"name", "bad name!"}}};
  Post("/v1/responses", bad_tool, 400);
  // Hosted tools, which only OpenAI runs, are accepted and left out.
  json hosted = Request("x");
  hosted["tools"] = {{{"type", "web_search"}}};
  hosted["include"] = {"reasoning.encrypted_content"};
  hosted["prompt_cache_key"] = "abc";
  Post("/v1/responses", hosted);
  auto res = client_->Post("/v1/responses", "{not json", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
}

}  // namespace
}  // namespace llamay::server
