// EventHub: the server's event log for GET /v1/events (docs/server.md, "The built-in page"): numbered
// events in a ring of the most recent ones, which every open stream reads from its own cursor.
//
// - Ids start at 1 and increase by one per event, for the server's lifetime.
// - The ring keeps the last `capacity` events. A reader whose cursor has fallen out of it (a slow client,
//   or a Last-Event-ID from before a long gap or from another server run) is told to resync: it has
//   missed events and reloads the whole state instead.
// - Memory is bounded by the ring alone: a stream holds a cursor, never a queue of its own, so a slow
//   client costs nothing but its cursor falling behind.
// - Publish takes one short lock and never waits on a reader or does I/O: route handlers and the engine's
//   scheduler thread (a session coming back after a chat turn) publish directly.
// - Close() ends every stream (a shutdown): waiters wake at once and readers see closed().
// - Open streams are counted so that the server bounds them (each holds an HTTP thread) and so that
//   periodic events nobody reads are not made.
//
// Thread-safety: every method is thread-safe.
#ifndef LLAMAY_SERVER_EVENTS_H_
#define LLAMAY_SERVER_EVENTS_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace llamay::server {

class EventHub {
 public:
  struct Event {
    uint64_t id = 0;
    std::string type;  // "context.created", "tree.changed", ...
    std::string data;  // JSON text, one line
  };

  explicit EventHub(size_t capacity = 1024);

  // Appends an event; returns its id.
  uint64_t Publish(const std::string& type, const nlohmann::json& data);
  // The newest event's id (0 before the first).
  uint64_t last_id() const;

  // The events after `after`, oldest first, at most `max` of them, appended to *out. False when some of
  // them have left the ring, or `after` is beyond the newest id (a cursor from another server run): the
  // reader must resync.
  bool After(uint64_t after, size_t max, std::vector<Event>* out) const;
  // Returns once an event newer than `after` exists, after Close(), or after `timeout`.
  void Wait(uint64_t after, std::chrono::milliseconds timeout) const;

  void Close();
  bool closed() const;

  // A stream opens (false, nothing counted, when `limit` are open already) and closes.
  bool OpenStream(size_t limit);
  void CloseStream();
  size_t streams() const;

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::deque<Event> ring_;  // GUARDED_BY(mu_): ids last_id_ - size + 1 .. last_id_
  uint64_t last_id_ = 0;    // GUARDED_BY(mu_)
  bool closed_ = false;     // GUARDED_BY(mu_)
  size_t streams_ = 0;      // GUARDED_BY(mu_)
};

// One event in the text/event-stream format: "id: N\nevent: TYPE\ndata: JSON\n\n".
std::string SseFrame(const EventHub::Event& e);

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_EVENTS_H_
