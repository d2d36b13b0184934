#include "base/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace llamay {
namespace {

std::string Errno(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

class FdSink : public ByteSink {
 public:
  FdSink(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  Status Append(const void* data, size_t n) override {
    const auto* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        return IoError(Errno("write", path_));
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
    return Status::Ok();
  }

 private:
  int fd_;
  std::string path_;
};

}  // namespace

Status VectorSink::Append(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  out_->insert(out_->end(), p, p + n);
  return Status::Ok();
}

Result<std::vector<uint8_t>> ReadFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFoundError(Errno("open", path));
    return IoError(Errno("open", path));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    Status s = IoError(Errno("stat", path));
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgumentError(path + " is not a regular file");
  }
  std::vector<uint8_t> out(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < out.size()) {
    ssize_t r = ::read(fd, out.data() + got, out.size() - got);
    if (r < 0) {
      if (errno == EINTR) continue;
      Status s = IoError(Errno("read", path));
      ::close(fd);
      return s;
    }
    if (r == 0) break;  // file shrank while reading
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

Status WriteFileAtomic(const std::string& path, const std::function<Status(ByteSink&)>& write) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rng());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(Errno("create", tmp));
  FdSink sink(fd, tmp);
  Status s = write(sink);
  if (s.ok() && ::fsync(fd) != 0) s = IoError(Errno("fsync", tmp));
  if (::close(fd) != 0 && s.ok()) s = IoError(Errno("close", tmp));
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = IoError(Errno("rename to", path));
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  int dfd = ::open(DirName(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // best effort: makes the rename durable
    ::close(dfd);
  }
  return Status::Ok();
}

Status WriteFileAtomic(const std::string& path, std::span<const uint8_t> bytes) {
  return WriteFileAtomic(path, [&](ByteSink& sink) { return sink.Append(bytes.data(), bytes.size()); });
}

}  // namespace llamay
