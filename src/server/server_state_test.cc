// The built-in page's state routes end to end on loopback: GET /v1/state, GET /v1/contexts/{id}/pages and
// the /v1/events stream (order, ids, resume, resync, coalescing, the stats tick, shutdown).
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "server/events.h"
#include "server/server.h"
#include "server/server_test_util.h"

namespace llamay::server {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Small pages, so that short prompts span several.
constexpr uint32_t kPageTokens = 16;

struct SseEvent {
  uint64_t id = 0;
  std::string type;
  json data;
  Clock::time_point at;
};

// Reads GET /v1/events on its own thread and keeps every event it receives.
class SseListener {
 public:
  SseListener(int port, httplib::Headers headers = {}) : client_("127.0.0.1", port) {
    client_.set_read_timeout(30, 0);
    thread_ = std::thread([this, headers] {
      auto r = client_.Get(
          "/v1/events", headers,
          [this](const httplib::Response& res) {
            std::lock_guard l(mu_);
            status_ = res.status;
            cv_.notify_all();
            return true;
          },
          [this](const char* data, size_t n) {
            std::lock_guard l(mu_);
            buffer_.append(data, n);
            Parse();
            cv_.notify_all();
            return true;
          });
      std::lock_guard l(mu_);
      ended_ = true;
      if (r && status_ == 0) status_ = r->status;
      cv_.notify_all();
    });
  }
  ~SseListener() { Stop(); }

  void Stop() {
    client_.stop();
    if (thread_.joinable()) thread_.join();
  }
  // Waits until pred(events) holds (true) or the timeout passes (false).
  bool WaitFor(const std::function<bool(const std::vector<SseEvent>&)>& pred,
               milliseconds timeout = milliseconds(5000)) {
    std::unique_lock l(mu_);
    return cv_.wait_for(l, timeout, [&] { return pred(events_) || ended_; }) && pred(events_);
  }
  bool WaitStatus(milliseconds timeout = milliseconds(5000)) {
    std::unique_lock l(mu_);
    return cv_.wait_for(l, timeout, [&] { return status_ != 0 || ended_; });
  }
  bool WaitEnded(milliseconds timeout) {
    std::unique_lock l(mu_);
    return cv_.wait_for(l, timeout, [&] { return ended_; });
  }
  std::vector<SseEvent> events() {
    std::lock_guard l(mu_);
    return events_;
  }
  int status() {
    std::lock_guard l(mu_);
    return status_;
  }
  std::string raw() {
    std::lock_guard l(mu_);
    return all_;
  }

 private:
  void Parse() {  // REQUIRES: mu_
    size_t end;
    while ((end = buffer_.find("\n\n")) != std::string::npos) {
      const std::string frame = buffer_.substr(0, end);
      all_ += frame + "\n\n";
      buffer_.erase(0, end + 2);
      SseEvent e;
      size_t at = 0;
      while (at < frame.size()) {
        size_t nl = frame.find('\n', at);
        if (nl == std::string::npos) nl = frame.size();
        const std::string line = frame.substr(at, nl - at);
        at = nl + 1;
        if (line.rfind("id: ", 0) == 0) e.id = std::stoull(line.substr(4));
        if (line.rfind("event: ", 0) == 0) e.type = line.substr(7);
        if (line.rfind("data: ", 0) == 0) e.data = json::parse(line.substr(6));
      }
      if (e.type.empty()) continue;  // a comment or the retry line
      e.at = Clock::now();
      events_.push_back(std::move(e));
    }
  }

  httplib::Client client_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string buffer_, all_;
  std::vector<SseEvent> events_;
  int status_ = 0;
  bool ended_ = false;
};

auto HasType(const std::string& type) {
  return [type](const std::vector<SseEvent>& es) {
    for (const auto& e : es)
      if (e.type == type) return true;
    return false;
  };
}

std::vector<SseEvent> OfType(const std::vector<SseEvent>& es, const std::string& prefix) {
  std::vector<SseEvent> out;
  for (const auto& e : es)
    if (e.type.rfind(prefix, 0) == 0) out.push_back(e);
  return out;
}

class StateTest : public ServerTest {
 protected:
  void SetUp() override {
    engine::EngineOptions eo;
    eo.page_tokens = kPageTokens;
    Start({}, eo);
  }
  json Get(const std::string& path, int want = 200) {
    auto r = client_->Get(path.c_str());
    EXPECT_TRUE(r) << path;
    if (!r) return {};
    EXPECT_EQ(r->status, want) << path << ": " << r->body;
    return json::parse(r->body, nullptr, false);
  }
  json State() { return Get("/v1/state"); }
  static const json* Find(const json& contexts, const std::string& id) {
    for (const auto& c : contexts)
      if (c["id"] == id) return &c;
    return nullptr;
  }
};

TEST_F(StateTest, TheStateDescribesTheServerAndFollowsCreateForkAndDelete) {
  json s = State();
  EXPECT_EQ(s["event_id"], 0);
  EXPECT_EQ(s["server"]["model"], model::kDemoModelName);
  EXPECT_FALSE(s["server"]["architecture"].get<std::string>().empty());
  EXPECT_FALSE(s["server"]["version"].get<std::string>().empty());
  ASSERT_GE(s["server"]["layer_groups"].size(), 1u);
  EXPECT_EQ(s["server"]["layer_groups"][0]["kind"], "attention");
  EXPECT_EQ(s["server"]["kv"]["page_tokens"], kPageTokens);
  EXPECT_EQ(s["server"]["kv"]["precision"], "f16");
  EXPECT_EQ(s["server"]["kv"]["memory_bytes"], engine_->options().kv_memory_bytes);
  EXPECT_EQ(s["server"]["metrics"], "/metrics");
  EXPECT_TRUE(s["contexts"].empty());
  EXPECT_EQ(s["prefix_tree"]["root"]["id"], 0);
  EXPECT_EQ(s["prefix_tree"]["root"]["children"].size(), 0u);
  EXPECT_FALSE(s["prefix_tree"]["truncated"]);
  for (const char* k : {"free", "unique", "shared", "prefix_only", "evictable"}) {
    EXPECT_TRUE(s["pool"]["pages"][k].is_number()) << k;
    EXPECT_TRUE(s["pool"]["bytes"][k].is_number()) << k;
  }
  EXPECT_EQ(s["pool"]["pages"]["unique"], 0);
  const size_t free_before = s["pool"]["pages"]["free"];
  for (const char* k : {"requests", "prompt_tokens", "cached_tokens", "completion_tokens", "forks",
                        "restores", "snapshots", "evictions"})
    EXPECT_TRUE(s["counters"][k].is_number()) << k;

  const int64_t before = UnixMillis();
  json ctx =
      Post("/v1/contexts", {{"prompt", "a shared system prompt that spans several pages of the cache"}});
  const std::string id = ctx["id"];
  json fork = Post("/v1/contexts/" + id + "/fork?n=2", json::object());
  ASSERT_EQ(fork["branches"].size(), 2u);
  s = State();
  ASSERT_EQ(s["contexts"].size(), 3u);
  const json* parent = Find(s["contexts"], id);
  ASSERT_NE(parent, nullptr);
  EXPECT_TRUE((*parent)["parent"].is_null());
  EXPECT_EQ((*parent)["tokens"], ctx["tokens"]);
  EXPECT_EQ((*parent)["pages"], ctx["pages"]);
  EXPECT_GE((*parent)["created_ms"].get<int64_t>(), before);
  EXPECT_GE((*parent)["last_used_ms"].get<int64_t>(), (*parent)["created_ms"].get<int64_t>());
  EXPECT_EQ((*parent)["busy"], false);
  EXPECT_EQ((*parent)["kind"], "context");
  EXPECT_TRUE((*parent)["state_position"].is_null());  // not a recurrent model
  for (const auto& b : fork["branches"]) {
    const json* c = Find(s["contexts"], b["id"]);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ((*c)["parent"], id);
    EXPECT_EQ((*c)["tokens"], b["tokens"]);
    // A fork shares every page it holds: as many as the fork route reported.
    EXPECT_EQ((*c)["pages_shared"], b["pages"]);
    EXPECT_EQ((*c)["pages_owned"], 0);
  }
  EXPECT_EQ((*parent)["pages_shared"], ctx["pages"]);
  EXPECT_EQ(s["counters"]["forks"], 2);
  // Every page the three hold is one of the pool's shared pages (the prefix tree holds them too).
  const size_t pages = ctx["pages"];
  EXPECT_GE(pages, 3u);
  EXPECT_EQ(s["pool"]["pages"]["shared"], pages);
  EXPECT_EQ(s["pool"]["pages"]["unique"], 0);
  EXPECT_EQ(s["pool"]["pages"]["free"], free_before - pages);
  // The session prefilled through the prefix tree, which now holds its tokens.
  EXPECT_GE(s["prefix_tree"]["entries"].get<int>(), 1);
  ASSERT_EQ(s["prefix_tree"]["root"]["children"].size(), 1u);
  const json& node = s["prefix_tree"]["root"]["children"][0];
  EXPECT_EQ(node["tokens"].get<size_t>() + 1, ctx["tokens"].get<size_t>());  // all but the tail
  EXPECT_EQ(node["pages"], pages);
  EXPECT_TRUE(node["entry"]);
  EXPECT_FALSE(node["preview"].get<std::string>().empty());
  EXPECT_LE(node["preview"].get<std::string>().size(), 48u);

  // Deleting the parent leaves the branches (they still name it) and their pages.
  auto del = client_->Delete(("/v1/contexts/" + id).c_str());
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 200);
  s = State();
  ASSERT_EQ(s["contexts"].size(), 2u);
  EXPECT_EQ(Find(s["contexts"], id), nullptr);
  EXPECT_EQ(s["contexts"][0]["parent"], id);
  EXPECT_EQ(s["contexts"][0]["pages_shared"], pages);
  // Deleting the branches leaves the pages to the prefix tree alone: evictable, no longer shared.
  for (const auto& b : fork["branches"])
    client_->Delete(("/v1/contexts/" + b["id"].get<std::string>()).c_str());
  s = State();
  EXPECT_TRUE(s["contexts"].empty());
  EXPECT_EQ(s["pool"]["pages"]["shared"], 0);
  EXPECT_EQ(s["pool"]["pages"]["prefix_only"], pages);
  EXPECT_EQ(s["pool"]["pages"]["evictable"], pages);
}

TEST_F(StateTest, PagesNameTheirHoldersAndWhereAForkDiverged) {
  json a = Post("/v1/contexts", {{"prompt", "the parent's prompt, long enough for three pages"}});
  const std::string id = a["id"];
  const size_t tokens = a["tokens"];
  json b = Post("/v1/contexts/" + id + "/fork", json::object())["branches"][0];
  const std::string bid = b["id"];
  json p = Get("/v1/contexts/" + bid + "/pages");
  EXPECT_EQ(p["id"], bid);
  EXPECT_EQ(p["tokens"], tokens);
  EXPECT_EQ(p["parent"], id);
  EXPECT_TRUE(p["recurrent"].is_null());
  ASSERT_EQ(p["groups"].size(), 1u);
  const json& g = p["groups"][0];
  EXPECT_EQ(g["kind"], "attention");
  EXPECT_EQ(g["first_page"], 0);
  ASSERT_EQ(g["pages"].size(), b["pages"].get<size_t>());
  EXPECT_EQ(g["divergence"], g["pages"].size());  // not diverged: every page is the parent's
  for (const auto& page : g["pages"]) {
    EXPECT_GE(page["refs"].get<int>(), 3);  // the parent, the branch and the prefix tree
    EXPECT_NE(std::find(page["holders"].begin(), page["holders"].end(), id), page["holders"].end());
    EXPECT_NE(std::find(page["holders"].begin(), page["holders"].end(), "prefix tree"),
              page["holders"].end());
  }

  // A turn on the branch writes from its held positions on: the page where they end is copied (or new).
  json turn = Post("/v1/completions", {{"prompt", std::vector<int32_t>{70, 71, 72}},
                                       {"max_tokens", 4},
                                       {"temperature", 0},
                                       {"llamay_session", bid}});
  ASSERT_TRUE(turn.contains("choices"));
  p = Get("/v1/contexts/" + bid + "/pages");
  const size_t held_before = tokens - 1;  // the session held all but its last token
  const size_t div = p["groups"][0]["divergence"];
  EXPECT_EQ(div, held_before / kPageTokens);
  const json& pages = p["groups"][0]["pages"];
  for (size_t i = 0; i < pages.size(); ++i) {
    const auto& h = pages[i]["holders"];
    const bool parents = std::find(h.begin(), h.end(), id) != h.end();
    EXPECT_EQ(parents, i < div) << "page " << i;
  }
  // The parent's own view: no parent, so no divergence; the branch holds its first pages.
  p = Get("/v1/contexts/" + id + "/pages");
  EXPECT_TRUE(p["parent"].is_null());
  EXPECT_TRUE(p["groups"][0]["divergence"].is_null());
  const auto& first = p["groups"][0]["pages"][0]["holders"];
  EXPECT_NE(std::find(first.begin(), first.end(), bid), first.end());
  // Unknown: 404.
  Get("/v1/contexts/ctx_999/pages", 404);
}

TEST_F(StateTest, EventsArriveInOrderWithIncreasingIds) {
  SseListener sse(server_->port());
  ASSERT_TRUE(sse.WaitStatus());
  EXPECT_EQ(sse.status(), 200);
  json ctx = Post("/v1/contexts", {{"prompt", "events please"}});
  const std::string id = ctx["id"];
  json fork = Post("/v1/contexts/" + id + "/fork?n=2", json::object());
  auto snap = client_->Get(("/v1/contexts/" + id + "/snapshot").c_str());
  ASSERT_TRUE(snap);
  auto restored = client_->Post("/v1/contexts/restore", snap->body, "application/octet-stream");
  ASSERT_TRUE(restored);
  const std::string rid = json::parse(restored->body)["id"];
  client_->Delete(("/v1/contexts/" + id).c_str());
  ASSERT_TRUE(sse.WaitFor(HasType("context.deleted")));
  const std::vector<SseEvent> all = sse.events();
  for (size_t i = 1; i < all.size(); ++i) EXPECT_EQ(all[i].id, all[i - 1].id + 1) << all[i].type;
  const std::vector<SseEvent> ctx_events = OfType(all, "context.");
  ASSERT_EQ(ctx_events.size(), 5u) << sse.raw();
  EXPECT_EQ(ctx_events[0].type, "context.created");
  EXPECT_EQ(ctx_events[0].data["id"], id);
  EXPECT_EQ(ctx_events[0].data["tokens"], ctx["tokens"]);
  EXPECT_EQ(ctx_events[0].data["pages"], ctx["pages"]);
  EXPECT_EQ(ctx_events[1].type, "context.forked");
  EXPECT_EQ(ctx_events[1].data["parent"], id);
  EXPECT_EQ(ctx_events[1].data["children"],
            json::array({fork["branches"][0]["id"], fork["branches"][1]["id"]}));
  EXPECT_EQ(ctx_events[2].type, "context.snapshotted");
  EXPECT_EQ(ctx_events[2].data["id"], id);
  EXPECT_EQ(ctx_events[2].data["bytes"], snap->body.size());
  EXPECT_EQ(ctx_events[3].type, "context.restored");
  EXPECT_EQ(ctx_events[3].data["id"], rid);
  EXPECT_EQ(ctx_events[4].type, "context.deleted");
  EXPECT_EQ(ctx_events[4].data["id"], id);
  // The state says which event it follows; the counters saw the work.
  json s = Get("/v1/state");
  EXPECT_GE(s["event_id"].get<uint64_t>(), ctx_events[4].id);
  EXPECT_EQ(s["counters"]["snapshots"], 1);
  EXPECT_EQ(s["counters"]["restores"], 1);
  EXPECT_NE(sse.raw().find("retry: "), std::string::npos);
}

TEST_F(StateTest, ASessionThatGrowsAfterATurnIsAnEvent) {
  json ctx = Post("/v1/contexts", {{"prompt", "a session"}});
  const std::string id = ctx["id"];
  SseListener sse(server_->port());
  ASSERT_TRUE(sse.WaitStatus());
  json turn = Post("/v1/completions", {{"prompt", std::vector<int32_t>{70, 71}},
                                       {"max_tokens", 3},
                                       {"temperature", 0},
                                       {"llamay_session", id}});
  ASSERT_TRUE(sse.WaitFor(HasType("context.updated"))) << turn.dump();
  const SseEvent e = OfType(sse.events(), "context.updated")[0];
  EXPECT_EQ(e.data["id"], id);
  // Two new tokens and what was generated.
  EXPECT_EQ(e.data["tokens"],
            ctx["tokens"].get<size_t>() + 2 + turn["usage"]["completion_tokens"].get<size_t>());
  const json state = State();
  const json* c = Find(state["contexts"], id);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ((*c)["tokens"], e.data["tokens"]);
  EXPECT_GT((*c)["last_used_ms"].get<int64_t>(), (*c)["created_ms"].get<int64_t>() - 1);
}

TEST_F(StateTest, LastEventIdResumesAndATooOldOneResyncs) {
  Post("/v1/contexts", {{"prompt", "one"}});
  Post("/v1/contexts", {{"prompt", "two"}});
  // Resume after the first event: the second and what follows come again, nothing before.
  {
    SseListener sse(server_->port(), {{"Last-Event-ID", "1"}});
    ASSERT_TRUE(sse.WaitFor([](const auto& es) { return !es.empty(); }));
    const auto es = sse.events();
    EXPECT_EQ(es[0].id, 2u);
    EXPECT_NE(es[0].type, "resync");
  }
  // Older than the ring holds: the first event is a resync carrying the newest id, and the stream goes on
  // from there.
  for (int i = 0; i < 1100; ++i) server_->events().Publish("test.filler", {{"i", i}});
  const uint64_t newest = server_->events().last_id();
  {
    SseListener sse(server_->port(), {{"Last-Event-ID", "1"}});
    ASSERT_TRUE(sse.WaitFor([](const auto& es) { return !es.empty(); }));
    const auto es = sse.events();
    EXPECT_EQ(es[0].type, "resync");
    EXPECT_GE(es[0].id, newest);
    Post("/v1/contexts", {{"prompt", "three"}});
    ASSERT_TRUE(sse.WaitFor(HasType("context.created")));
    EXPECT_GT(OfType(sse.events(), "context.created")[0].id, es[0].id);
  }
  // An id from another run of the server (beyond the newest): resync too.
  {
    SseListener sse(server_->port(), {{"Last-Event-ID", std::to_string(newest + 1000)}});
    ASSERT_TRUE(sse.WaitFor([](const auto& es) { return !es.empty(); }));
    EXPECT_EQ(sse.events()[0].type, "resync");
  }
  // Recent enough: no resync.
  {
    SseListener sse(server_->port(), {{"Last-Event-ID", std::to_string(newest - 10)}});
    ASSERT_TRUE(sse.WaitFor([](const auto& es) { return es.size() >= 10; }));
    EXPECT_EQ(sse.events()[0].id, newest - 9);
    EXPECT_NE(sse.events()[0].type, "resync");
  }
}

TEST_F(StateTest, TreeAndPoolChangesAreCoalescedAndStatsTickEverySecond) {
  SseListener sse(server_->port());
  ASSERT_TRUE(sse.WaitStatus());
  const auto start = Clock::now();
  // Many changes, as fast as they come: each request allocates pages and retains into the tree.
  int requests = 0;
  while (Clock::now() - start < milliseconds(1500)) {
    Post("/v1/completions",
         {{"prompt", "change " + std::to_string(requests++)}, {"max_tokens", 1}, {"temperature", 0}});
  }
  ASSERT_TRUE(sse.WaitFor(HasType("stats"), milliseconds(3000)));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const auto es = sse.events();
  const auto tree = OfType(es, "tree.changed"), pool = OfType(es, "pool.changed");
  EXPECT_GE(tree.size(), 1u);
  EXPECT_GE(pool.size(), 1u);
  // At most 4 a second (a period of 250 ms; some slack for when they are read).
  EXPECT_LE(tree.size(), 4 * seconds + 2) << requests << " requests";
  EXPECT_LE(pool.size(), 4 * seconds + 2) << requests << " requests";
  EXPECT_TRUE(tree.back().data.contains("entries"));
  EXPECT_TRUE(tree.back().data.contains("nodes"));
  EXPECT_TRUE(tree.back().data.contains("bytes"));
  EXPECT_TRUE(pool.back().data["pages"].contains("shared"));
  const SseEvent stats = OfType(es, "stats")[0];
  for (const char* k : {"tokens_per_s", "requests_active", "queue"})
    EXPECT_TRUE(stats.data[k].is_number()) << k;
  EXPECT_TRUE(stats.data["pool"]["free"].is_number());
}

TEST_F(StateTest, ShutdownEndsOpenEventStreamsPromptly) {
  SseListener a(server_->port()), b(server_->port());
  ASSERT_TRUE(a.WaitStatus());
  ASSERT_TRUE(b.WaitStatus());
  const auto t0 = Clock::now();
  server_->BeginShutdown();
  EXPECT_TRUE(a.WaitEnded(milliseconds(2000)));
  EXPECT_TRUE(b.WaitEnded(milliseconds(2000)));
  EXPECT_LT(Clock::now() - t0, milliseconds(2000));
  EXPECT_TRUE(server_->WaitStopped(std::chrono::seconds(5)));
}

TEST_F(StateTest, StopEndsOpenEventStreamsPromptly) {
  SseListener a(server_->port());
  ASSERT_TRUE(a.WaitStatus());
  const auto t0 = Clock::now();
  server_->Stop();
  EXPECT_TRUE(a.WaitEnded(milliseconds(2000)));
  EXPECT_LT(Clock::now() - t0, milliseconds(2000));
}

TEST_F(StateTest, OpenEventStreamsAreBounded) {
  ServerOptions o;
  o.http_threads = 4;  // at most 2 streams
  Start(o);
  SseListener a(server_->port()), b(server_->port());
  ASSERT_TRUE(a.WaitStatus());
  ASSERT_TRUE(b.WaitStatus());
  EXPECT_EQ(a.status(), 200);
  EXPECT_EQ(b.status(), 200);
  auto r = client_->Get("/v1/events");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "too_many_event_streams");
  // The API is still answered.
  EXPECT_EQ(client_->Get("/v1/state")->status, 200);
  a.Stop();
  // Its place comes free once the server notices the client left.
  bool reopened = false;
  for (int i = 0; i < 40 && !reopened; ++i) {
    SseListener c(server_->port());
    ASSERT_TRUE(c.WaitStatus());
    reopened = c.status() == 200;
    if (!reopened) std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_TRUE(reopened);
}

TEST(EventHub, TheRingIsBoundedAndReadersResync) {
  EventHub hub(4);
  EXPECT_EQ(hub.last_id(), 0u);
  std::vector<EventHub::Event> out;
  EXPECT_TRUE(hub.After(0, 10, &out));
  EXPECT_TRUE(out.empty());
  for (int i = 1; i <= 6; ++i) EXPECT_EQ(hub.Publish("e", {{"i", i}}), static_cast<uint64_t>(i));
  EXPECT_FALSE(hub.After(0, 10, &out));  // ids 1 and 2 have left
  EXPECT_FALSE(hub.After(1, 10, &out));
  EXPECT_TRUE(hub.After(2, 10, &out));
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].id, 3u);
  EXPECT_EQ(out[0].data, "{\"i\":3}");
  out.clear();
  EXPECT_TRUE(hub.After(4, 1, &out));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].id, 5u);
  EXPECT_FALSE(hub.After(7, 10, &out));  // beyond the newest
  EXPECT_EQ(SseFrame(out[0]), "id: 5\nevent: e\ndata: {\"i\":5}\n\n");
  // Wait returns at once for a newer event, and at Close.
  const auto t0 = Clock::now();
  hub.Wait(5, milliseconds(2000));
  EXPECT_LT(Clock::now() - t0, milliseconds(1000));
  std::thread closer([&] {
    std::this_thread::sleep_for(milliseconds(50));
    hub.Close();
  });
  hub.Wait(6, milliseconds(5000));
  closer.join();
  EXPECT_LT(Clock::now() - t0, milliseconds(2000));
  EXPECT_TRUE(hub.closed());
  EXPECT_TRUE(hub.OpenStream(1));
  EXPECT_FALSE(hub.OpenStream(1));
  hub.CloseStream();
  EXPECT_EQ(hub.streams(), 0u);
}

}  // namespace
}  // namespace llamay::server
