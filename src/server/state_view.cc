#include "server/state_view.h"

#include <algorithm>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "server/connection_watch.h"
#include "server/events.h"
#include "server/http_util.h"
#include "tokenizer/detokenizer.h"

#ifndef LLAMAY_VERSION
#define LLAMAY_VERSION "unknown"
#endif

namespace llamay::server {
namespace {

using json = nlohmann::json;

// The first `max_chars` characters of UTF-8 `s` (cut before a character, never inside one).
std::string CutChars(const std::string& s, size_t max_chars) {
  size_t chars = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) continue;  // a continuation byte
    if (chars++ == max_chars) return s.substr(0, i);
  }
  return s;
}

// As the engine detokenizes what it generates (byte tokens joined into characters, a leading space kept),
// so that a node reads as the text that made it.
std::string Preview(const engine::Engine& engine, const std::vector<int32_t>& tokens) {
  tokenizer::StreamingDetokenizer d(engine.tokenizer());
  std::string text;
  for (int32_t t : tokens) text += d.Push(t);
  text += d.Flush();
  return CutChars(text, kPreviewChars);
}

const char* KindOf(const std::string& id) {
  if (id.rfind("resp_", 0) == 0) return "response";
  if (id.rfind("pck_", 0) == 0) return "prompt_cache";
  return "context";
}

json ServerInfo(Server& server) {
  engine::Engine& engine = server.engine();
  const kv::Cache& cache = engine.cache();
  const kv::StateGroups& g = cache.groups();
  json groups = json::array();
  for (const kv::LayerGroup& a : g.attention)
    groups.push_back({{"kind", "attention"}, {"layers", a.layers.size()}, {"window", a.window}});
  if (g.has_recurrent()) groups.push_back({{"kind", "recurrent"}, {"layers", g.recurrent.layers.size()}});
  const kv::KvLayout& l = cache.layout();
  json flags = json::object();
  for (const auto& [k, v] : server.options().flags) flags[k] = v;
  return {{"model", server.options().model_name},
          {"architecture", engine.model().file().GetStringOr("general.architecture", "llama")},
          {"version", LLAMAY_VERSION},
          {"layer_groups", groups},
          {"kv",
           {{"page_tokens", l.page_tokens},
            {"precision", std::string(kv::KvPrecisionName(l.precision))},
            {"memory_bytes", cache.options().max_bytes},
            {"page_bytes", l.page_bytes()},
            {"state_bytes", g.has_recurrent() ? g.recurrent.page_bytes : 0}}},
          {"ctx_size", server.ContextLength()},
          {"flags", flags},
          {"metrics", "/metrics"}};
}

json PoolPages(const kv::PoolView& p) {
  return {{"free", p.free.pages},
          {"unique", p.unique.pages},
          {"shared", p.shared.pages},
          {"prefix_only", p.prefix_only.pages},
          {"evictable", p.evictable.pages}};
}

json PoolJson(const kv::PoolView& p) {
  return {{"pages", PoolPages(p)},
          {"bytes",
           {{"free", p.free.bytes},
            {"unique", p.unique.bytes},
            {"shared", p.shared.bytes},
            {"prefix_only", p.prefix_only.bytes},
            {"evictable", p.evictable.bytes},
            {"states", p.states_bytes}}},
          {"max_bytes", p.max_bytes},
          {"bytes_live", p.bytes_live},
          {"page_bytes", p.page_bytes},
          {"states", p.states}};
}

json ContextsJson(Server& server) {
  const bool recurrent = server.engine().cache().groups().has_recurrent();
  struct Row {
    int64_t created;
    std::string id;
    json j;
  };
  std::vector<Row> rows;
  {
    std::lock_guard l(server.contexts_mu());
    for (const auto& [id, h] : server.contexts()) {
      json c = {{"id", id},
                {"kind", KindOf(id)},
                {"parent", h.parent.empty() ? json(nullptr) : json(h.parent)},
                {"created_ms", h.created_ms},
                {"last_used_ms", h.last_used_ms},
                {"busy", h.busy}};
      if (h.busy || !h.context.valid()) {
        // Lent to a running request: what it held when it left.
        c.update({{"tokens", h.lent_tokens},
                  {"pages", 0},
                  {"pages_shared", 0},
                  {"pages_owned", 0},
                  {"bytes", 0},
                  {"state_position", nullptr},
                  {"checkpoints", json::array()}});
      } else {
        const kv::ContextView v = h.context.Inspect();
        c.update({{"tokens", h.tokens()},
                  {"pages", v.pages_shared + v.pages_owned},
                  {"pages_shared", v.pages_shared},
                  {"pages_owned", v.pages_owned},
                  {"bytes", h.context.bytes()},
                  {"state_position", recurrent ? json(v.state_position) : json(nullptr)},
                  {"checkpoints", v.checkpoints}});
      }
      rows.push_back({h.created_ms, id, std::move(c)});
    }
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.created < b.created; });
  json out = json::array();
  for (Row& r : rows) out.push_back(std::move(r.j));
  return out;
}

json TreeJson(Server& server) {
  const engine::Engine& engine = server.engine();
  kv::TreeViewOptions o;
  o.max_depth = kStateTreeDepth;
  o.max_children = kStateTreeWidth;
  o.max_nodes = kStateTreeNodes;
  const kv::TreeView v = engine.cache().InspectTree(o);
  std::vector<std::vector<size_t>> kids(v.nodes.size());
  for (size_t i = 1; i < v.nodes.size(); ++i) kids[static_cast<size_t>(v.nodes[i].parent)].push_back(i);
  auto node = [&](auto&& self, size_t i) -> json {
    const kv::TreeNodeView& n = v.nodes[i];
    json children = json::array();
    for (size_t k : kids[i]) children.push_back(self(self, k));
    return {{"id", n.id},
            {"tokens", n.edge_tokens},
            {"depth", n.depth},
            {"level", n.level},
            {"preview", Preview(engine, n.edge)},
            {"pages", n.pages},
            {"hits", n.hits},
            {"last_hit_ms", n.last_hit_ms > 0 ? json(n.last_hit_ms) : json(nullptr)},
            {"checkpoint", n.checkpoint},
            {"pinned", n.pinned},
            {"entry", n.entry},
            {"children_total", n.children},
            {"children", std::move(children)}};
  };
  json top = json::array();
  for (const kv::TreeTopView& t : v.top)
    top.push_back({{"id", t.id},
                   {"preview", Preview(engine, t.head)},
                   {"edge_preview", Preview(engine, t.edge)},
                   {"tokens", t.tokens},
                   {"hits", t.hits},
                   {"last_hit_ms", t.last_hit_ms > 0 ? json(t.last_hit_ms) : json(nullptr)}});
  const Server::Metrics& m = server.metrics();
  const uint64_t prompt = m.prompt_tokens.load(), cached = m.cached_tokens.load();
  return {{"root", v.nodes.empty() ? json(nullptr) : node(node, 0)},
          {"truncated", v.truncated},
          {"nodes", v.nodes_total},
          {"entries", v.entries},
          {"hit_ratio", prompt > 0 ? static_cast<double>(cached) / static_cast<double>(prompt) : 0.0},
          {"top", top}};
}

json CountersJson(Server& server) {
  const Server::Metrics& m = server.metrics();
  const kv::CacheStats s = server.engine().cache().Stats();
  return {{"requests", m.requests.load()},
          {"prompt_tokens", m.prompt_tokens.load()},
          {"cached_tokens", m.cached_tokens.load()},
          {"completion_tokens", m.completion_tokens.load()},
          {"forks", m.forks.load()},
          {"restores", m.restores.load()},
          {"snapshots", m.snapshots.load()},
          {"evictions", s.tree_evictions},
          {"tree_hits", s.tree_hits},
          {"page_copies", s.page_copies}};
}

// The other holders of each page of `self`: held contexts by id, and "prefix tree".
struct Holders {
  std::unordered_map<uint64_t, std::vector<std::string>> by_serial;
  std::vector<uint64_t> tree;  // ascending
  json Of(const kv::PageView& p) const {
    json names = json::array();
    size_t more = 0;
    if (auto it = by_serial.find(p.serial); it != by_serial.end()) {
      for (const std::string& id : it->second) {
        if (names.size() < kMaxHoldersNamed)
          names.push_back(id);
        else
          ++more;
      }
    }
    if (std::binary_search(tree.begin(), tree.end(), p.serial)) names.push_back("prefix tree");
    json out = {{"serial", p.serial}, {"refs", p.refs}, {"holders", names}};
    if (more > 0) out["holders_more"] = more;
    return out;
  }
};

// Index of the first page of `self` (in one group) that the parent does not hold at the same place.
size_t Divergence(const std::vector<kv::PageView>& self, const std::vector<kv::PageView>& parent) {
  size_t i = 0;
  while (i < self.size() && i < parent.size() && self[i].serial == parent[i].serial) ++i;
  return i;
}

json PagesJson(Server& server, const std::string& id, const kv::ContextView& self, size_t tokens,
               const std::string& parent, const std::optional<kv::ContextView>& parent_view,
               const Holders& holders) {
  const kv::StateGroups& g = server.engine().cache().groups();
  json groups = json::array();
  for (size_t gi = 0; gi < self.groups.size(); ++gi) {
    const std::vector<kv::PageView>& list = self.groups[gi];
    // Pages before first_page were released (a window's): the list starts at first_page.
    size_t first = 0;
    while (first < list.size() && list[first].serial == 0) ++first;
    json pages = json::array();
    for (size_t i = first; i < list.size(); ++i) pages.push_back(holders.Of(list[i]));
    json div = nullptr;
    if (parent_view && gi < parent_view->groups.size()) div = Divergence(list, parent_view->groups[gi]);
    groups.push_back({{"kind", "attention"},
                      {"window", gi < g.attention.size() ? g.attention[gi].window : 0},
                      {"layers", gi < g.attention.size() ? g.attention[gi].layers.size() : 0},
                      {"first_page", first},
                      {"pages", std::move(pages)},
                      {"divergence", std::move(div)}});
  }
  json recurrent = nullptr;
  if (g.has_recurrent()) {
    recurrent = {{"state_position", self.state_position},
                 {"checkpoints", self.checkpoints},
                 {"state", self.state.serial != 0 ? holders.Of(self.state) : json(nullptr)}};
  }
  return {{"id", id},
          {"tokens", tokens},
          {"page_tokens", server.engine().cache().layout().page_tokens},
          {"parent", parent.empty() ? json(nullptr) : json(parent)},
          {"parent_held", parent_view.has_value()},
          {"groups", std::move(groups)},
          {"recurrent", std::move(recurrent)}};
}

// Last-Event-ID (or ?last_event_id=): the last event the client saw; none: it starts with what comes next.
std::optional<uint64_t> ResumeFrom(const httplib::Request& req) {
  std::string v = req.get_header_value("Last-Event-ID");
  if (v.empty()) v = req.get_param_value("last_event_id");
  if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoull(v);
}

// One open /v1/events stream: its cursor, and its place among the open streams while it lives.
struct Stream {
  std::shared_ptr<EventHub> hub;
  std::shared_ptr<ConnectionWatch> watch;  // notices a client that left between writes
  uint64_t cursor = 0;                     // the last id sent
  bool begun = false;
  std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
  ~Stream() { hub->CloseStream(); }
};

void Events(Server& server, const httplib::Request& req, httplib::Response& res) {
  std::shared_ptr<EventHub> hub = server.events_ptr();
  // Each stream holds one HTTP thread for as long as it is open: at most half of them.
  const size_t limit = std::max(1, server.options().http_threads / 2);
  if (!hub->OpenStream(limit)) {
    res.set_header("Retry-After", "2");
    return SendError(res, 503,
                     "too many open event streams (" + std::to_string(limit) + "); poll /v1/state instead",
                     "too_many_event_streams");
  }
  auto st = std::make_shared<Stream>();
  st->hub = hub;
  st->watch = WatchConnection(req);
  const std::optional<uint64_t> resume = ResumeFrom(req);
  st->cursor = resume ? *resume : hub->last_id();
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("X-Accel-Buffering", "no");
  Server* s = &server;
  res.set_chunked_content_provider("text/event-stream", [s, st](size_t, httplib::DataSink& sink) {
    EventHub& h = *st->hub;
    auto write = [&](const std::string& text) {
      st->last_write = std::chrono::steady_clock::now();
      return sink.write(text.data(), text.size());
    };
    if (!st->begun) {
      st->begun = true;
      if (!write("retry: 2000\n\n")) return false;  // how soon EventSource reconnects
    }
    if (h.closed() || s->shutting_down()) {  // a shutdown: the stream ends now, cleanly
      sink.done();
      return true;
    }
    std::vector<EventHub::Event> batch;
    if (!h.After(st->cursor, 64, &batch)) {
      // The client missed events the ring no longer holds: it reloads /v1/state, then continues from the
      // newest event, whose id this one carries.
      const uint64_t newest = h.last_id();
      st->cursor = newest;
      return write(SseFrame({newest, "resync", "{}"}));
    }
    if (batch.empty()) {
      h.Wait(st->cursor, std::chrono::milliseconds(250));
      // A client that left gives its thread back now, not at the next write.
      if (st->watch->Closed()) return false;
      // A comment now and then: proxies keep the connection open.
      if (std::chrono::steady_clock::now() - st->last_write >= std::chrono::seconds(15))
        return write(": keep-alive\n\n");
      return sink.is_writable();
    }
    std::string out;
    for (const EventHub::Event& e : batch) out += SseFrame(e);
    st->cursor = batch.back().id;
    return write(out);
  });
}

}  // namespace

json StateJson(Server& server) {
  // The id first: a client resuming from it may see an event the state already reflects, never miss one.
  json out = {{"event_id", server.events().last_id()}};
  out["server"] = ServerInfo(server);
  out["pool"] = PoolJson(server.engine().cache().InspectPool());
  out["contexts"] = ContextsJson(server);
  out["prefix_tree"] = TreeJson(server);
  out["counters"] = CountersJson(server);
  return out;
}

Result<json> ContextPagesJson(Server& server, const std::string& id) {
  std::vector<uint64_t> tree = server.engine().cache().TreePageSerials();
  std::lock_guard l(server.contexts_mu());
  auto& map = server.contexts();
  auto it = map.find(id);
  if (it == map.end()) return NotFoundError("no context '" + id + "'");
  if (it->second.busy || !it->second.context.valid())
    return FailedPreconditionError("context '" + id + "' is in use by a running request");
  const kv::ContextView self = it->second.context.Inspect();
  std::unordered_set<uint64_t> mine;
  for (const auto& group : self.groups)
    for (const kv::PageView& p : group)
      if (p.serial != 0) mine.insert(p.serial);
  if (self.state.serial != 0) mine.insert(self.state.serial);
  Holders holders;
  holders.tree = std::move(tree);
  std::optional<kv::ContextView> parent_view;
  for (const auto& [other_id, h] : map) {
    const std::string& other = other_id;  // a lambda below captures it: clang 14 cannot capture a binding
    if (other == id || h.busy || !h.context.valid()) continue;
    kv::ContextView v = h.context.Inspect();
    auto note = [&](const kv::PageView& p) {
      if (p.serial != 0 && mine.count(p.serial)) holders.by_serial[p.serial].push_back(other);
    };
    for (const auto& group : v.groups)
      for (const kv::PageView& p : group) note(p);
    note(v.state);
    if (other == it->second.parent) parent_view = std::move(v);
  }
  return PagesJson(server, id, self, it->second.tokens(), it->second.parent, parent_view, holders);
}

void RegisterStateRoutes(Server& server, httplib::Server& http) {
  Server* s = &server;
  http.Get("/v1/state", [s](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_header("X-Content-Type-Options", "nosniff");
    SendJson(res, StateJson(*s));
  });
  http.Get(R"(/v1/contexts/([^/]+)/pages)", [s](const httplib::Request& req, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_header("X-Content-Type-Options", "nosniff");
    Result<json> pages = ContextPagesJson(*s, req.matches[1]);
    if (!pages.ok()) return SendStatus(res, pages.status());
    SendJson(res, *pages);
  });
  http.Get("/v1/events", [s](const httplib::Request& req, httplib::Response& res) { Events(*s, req, res); });
}

StateWatcher::StateWatcher(Server& server, std::chrono::milliseconds period)
    : server_(server), period_(period), thread_([this] { Run(); }) {}

StateWatcher::~StateWatcher() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StateWatcher::Run() {
  engine::Engine& engine = server_.engine();
  EventHub& hub = server_.events();
  const kv::Cache& cache = engine.cache();
  kv::CacheStats last = cache.Stats();
  auto tick_start = std::chrono::steady_clock::now();
  uint64_t tokens_then = server_.metrics().tokens_streamed.load();
  const int per_second = std::max<int>(1, static_cast<int>(std::chrono::milliseconds(1000) / period_));
  bool idle = false;
  for (int tick = 1;; ++tick) {
    {
      std::unique_lock l(mu_);
      if (cv_.wait_for(l, period_, [this] { return stop_; })) return;
    }
    // Nobody listens: no work at all (a stream that opens loads /v1/state first).
    if (hub.streams() == 0) {
      idle = true;
      continue;
    }
    const kv::CacheStats now = cache.Stats();
    if (idle) {
      idle = false;
      last = now;
      tick_start = std::chrono::steady_clock::now();
      tokens_then = server_.metrics().tokens_streamed.load();
    }
    // At most one of each per period, however many changes the period saw.
    if (now.tree_entries != last.tree_entries || now.tree_nodes != last.tree_nodes ||
        now.tree_bytes != last.tree_bytes || now.tree_evictions != last.tree_evictions ||
        now.tree_checkpoints != last.tree_checkpoints || now.tree_hits != last.tree_hits ||
        now.tree_pinned != last.tree_pinned)
      hub.Publish("tree.changed", {{"entries", now.tree_entries},
                                   {"nodes", now.tree_nodes},
                                   {"bytes", now.tree_bytes},
                                   {"hits", now.tree_hits},
                                   {"evictions", now.tree_evictions}});
    const bool pool_changed = now.pages_allocated_total != last.pages_allocated_total ||
                              now.pages_freed_total != last.pages_freed_total ||
                              now.pages_shared != last.pages_shared || now.tree_bytes != last.tree_bytes ||
                              now.tree_pinned != last.tree_pinned;
    std::optional<kv::PoolView> pool;
    if (pool_changed) {
      pool = cache.InspectPool();
      hub.Publish("pool.changed", {{"pages", PoolPages(*pool)}, {"bytes_live", pool->bytes_live}});
    }
    last = now;
    if (tick % per_second != 0) continue;
    // The stats tick.
    const auto t = std::chrono::steady_clock::now();
    const uint64_t tokens = server_.metrics().tokens_streamed.load();
    const double seconds = std::chrono::duration<double>(t - tick_start).count();
    const double rate = seconds > 0 ? static_cast<double>(tokens - tokens_then) / seconds : 0.0;
    tick_start = t;
    tokens_then = tokens;
    if (!pool) pool = cache.InspectPool();
    hub.Publish("stats", {{"tokens_per_s", rate},
                          {"requests_active", engine.active()},
                          {"queue", engine.queue_depth()},
                          {"pool", PoolPages(*pool)}});
  }
}

}  // namespace llamay::server
