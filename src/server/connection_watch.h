// ConnectionWatch: notices that the client of a request being handled has gone away (closed or reset
// its connection) while the handler waits for the engine, before any byte of the response is written.
//
// cpp-httplib 0.11 shows a handler nothing of its connection, and a content provider learns of a closed
// one only when a write fails. The watch finds the connection's socket among the process's descriptors by
// its two addresses (the request's local and remote address and port, unique among open TCP sockets) and
// polls it without reading: end-of-stream (POLLRDHUP, or a zero-byte peek), a hang-up or an error mean the
// client left. Bytes the client sent ahead (a pipelined request) are left where they are.
//
// Thread-safety: Closed() may be called from any thread while the handler runs (the descriptor stays
// open, and so cannot be reused, until the handler and its content provider have returned).
#ifndef LLAMAY_SERVER_CONNECTION_WATCH_H_
#define LLAMAY_SERVER_CONNECTION_WATCH_H_

#include <httplib.h>

#include <functional>
#include <memory>

namespace llamay::server {

class ConnectionWatch {
 public:
  // Finds the request's socket; when it cannot be found (not TCP, descriptors unreadable) Closed() is
  // always false and the write-based checks remain.
  explicit ConnectionWatch(const httplib::Request& req);

  bool found() const { return fd_ >= 0; }
  // True once the client has closed or reset the connection. Cheap (one poll) but a system call: poll it
  // every few tens of milliseconds, not in a tight loop.
  bool Closed() const;

 private:
  int fd_ = -1;
};

// A watch shared by a handler and its content provider.
std::shared_ptr<ConnectionWatch> WatchConnection(const httplib::Request& req);

// For Engine::Generate's `stop`: true once the watched client has left (never when `watch` is null).
std::function<bool()> GoneProbe(std::shared_ptr<ConnectionWatch> watch);

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_CONNECTION_WATCH_H_
