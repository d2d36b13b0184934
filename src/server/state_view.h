// The state the built-in page shows, as API routes that other tools may use too (docs/server.md, "State
// and events"):
//   GET /v1/state                  one JSON snapshot: the server, the page pool, the held contexts, a
//                                  bounded summary of the prefix tree, counters
//   GET /v1/contexts/{id}/pages    one held context's pages per layer group: refcounts, the other holders,
//                                  where it diverged from the context it was forked from
//   GET /v1/events                 server-sent events (events.h) with increasing ids, resumable with
//                                  Last-Event-ID
// and the StateWatcher, which turns prefix-tree and pool changes (coalesced: at most one of each per
// period, 250 ms) and a 1 Hz stats tick into events while at least one stream is open. It polls the
// cache's counters from its own thread, so nothing is added to the engine's scheduler thread; with no
// stream open it does nothing.
//
// Thread-safety: the routes run on the HTTP threads; the watcher on its own thread until destroyed.
#ifndef LLAMAY_SERVER_STATE_VIEW_H_
#define LLAMAY_SERVER_STATE_VIEW_H_

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "server/server.h"

namespace llamay::server {

// Caps of the prefix-tree summary in /v1/state.
inline constexpr size_t kStateTreeDepth = 16;
inline constexpr size_t kStateTreeWidth = 32;
inline constexpr size_t kStateTreeNodes = 1024;
// A node's preview: its own tokens decoded, at most this many characters.
inline constexpr size_t kPreviewChars = 48;
// Other holders named per page in /v1/contexts/{id}/pages (the rest are counted).
inline constexpr size_t kMaxHoldersNamed = 16;

nlohmann::json StateJson(Server& server);
// NotFound (no such context) or FailedPrecondition (lent to a running request).
Result<nlohmann::json> ContextPagesJson(Server& server, const std::string& id);

void RegisterStateRoutes(Server& server, httplib::Server& http);

class StateWatcher {
 public:
  explicit StateWatcher(Server& server, std::chrono::milliseconds period = std::chrono::milliseconds(250));
  ~StateWatcher();  // stops and joins its thread
  StateWatcher(const StateWatcher&) = delete;
  StateWatcher& operator=(const StateWatcher&) = delete;

 private:
  void Run();

  Server& server_;
  const std::chrono::milliseconds period_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_STATE_VIEW_H_
