#include "server/events.h"

#include <utility>

#include "server/http_util.h"

namespace llamay::server {

EventHub::EventHub(size_t capacity) : capacity_(capacity > 0 ? capacity : 1) {}

uint64_t EventHub::Publish(const std::string& type, const nlohmann::json& data) {
  Event e{0, type, Dump(data)};  // serialised before the lock is taken
  uint64_t id;
  {
    std::lock_guard l(mu_);
    id = e.id = ++last_id_;
    ring_.push_back(std::move(e));
    if (ring_.size() > capacity_) ring_.pop_front();
  }
  cv_.notify_all();
  return id;
}

uint64_t EventHub::last_id() const {
  std::lock_guard l(mu_);
  return last_id_;
}

bool EventHub::After(uint64_t after, size_t max, std::vector<Event>* out) const {
  std::lock_guard l(mu_);
  if (after > last_id_) return false;
  const uint64_t first = last_id_ - ring_.size() + 1;  // the oldest id the ring holds
  if (after + 1 < first) return false;
  for (size_t i = static_cast<size_t>(after + 1 - first); i < ring_.size() && max > 0; ++i, --max)
    out->push_back(ring_[i]);
  return true;
}

void EventHub::Wait(uint64_t after, std::chrono::milliseconds timeout) const {
  std::unique_lock l(mu_);
  cv_.wait_for(l, timeout, [&] { return closed_ || last_id_ > after; });
}

void EventHub::Close() {
  {
    std::lock_guard l(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

bool EventHub::closed() const {
  std::lock_guard l(mu_);
  return closed_;
}

bool EventHub::OpenStream(size_t limit) {
  std::lock_guard l(mu_);
  if (streams_ >= limit) return false;
  ++streams_;
  return true;
}

void EventHub::CloseStream() {
  std::lock_guard l(mu_);
  if (streams_ > 0) --streams_;
}

size_t EventHub::streams() const {
  std::lock_guard l(mu_);
  return streams_;
}

std::string SseFrame(const EventHub::Event& e) {
  std::string out = "id: ";
  out.append(std::to_string(e.id))
      .append("\nevent: ")
      .append(e.type)
      .append("\ndata: ")
      .append(e.data)
      .append("\n\n");
  return out;
}

}  // namespace llamay::server
