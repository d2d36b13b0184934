#include "server/connection_watch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace llamay::server {
namespace {

// The address and port of a socket address, as httplib writes them into a Request.
bool Describe(const sockaddr_storage& a, std::string* ip, int* port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
    if (!inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf)) return false;
    *port = ntohs(in->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* in = reinterpret_cast<const sockaddr_in6*>(&a);
    if (!inet_ntop(AF_INET6, &in->sin6_addr, buf, sizeof buf)) return false;
    *port = ntohs(in->sin6_port);
  } else {
    return false;
  }
  *ip = buf;
  return true;
}

bool Matches(int fd, const httplib::Request& req) {
  sockaddr_storage peer{}, self{};
  socklen_t n = sizeof peer;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &n) != 0) return false;
  std::string ip;
  int port = -1;
  if (!Describe(peer, &ip, &port) || port != req.remote_port || ip != req.remote_addr) return false;
  n = sizeof self;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&self), &n) != 0) return false;
  if (!Describe(self, &ip, &port) || port != req.local_port) return false;
  return req.local_addr.empty() || ip == req.local_addr;
}

}  // namespace

ConnectionWatch::ConnectionWatch(const httplib::Request& req) {
  if (req.remote_port <= 0 || req.local_port <= 0) return;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    struct stat st {};
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    if (Matches(static_cast<int>(fd), req)) {
      fd_ = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
}

bool ConnectionWatch::Closed() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, static_cast<short>(POLLIN | POLLRDHUP), 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  if (p.revents & POLLIN) {
    char c;
    const ssize_t r = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0;  // end of stream; data (a pipelined request) or EAGAIN: still there
  }
  return false;
}

std::shared_ptr<ConnectionWatch> WatchConnection(const httplib::Request& req) {
  return std::make_shared<ConnectionWatch>(req);
}

std::function<bool()> GoneProbe(std::shared_ptr<ConnectionWatch> watch) {
  return [watch = std::move(watch)] { return watch != nullptr && watch->Closed(); };
}

}  // namespace llamay::server
