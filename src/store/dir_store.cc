#include "store/dir_store.h"

#include <sys/mman.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <system_error>

namespace llamay::store {
namespace {

namespace fs = std::filesystem;

// Closes a file descriptor when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now, reporting the error close() gives.
  int Close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

class DirStore : public Store {
 public:
  explicit DirStore(std::string root) : root_(std::move(root)) {}

  Status Put(const std::string& name, std::span<const uint8_t> bytes) override;
  Result<bool> PutIfAbsent(const std::string& name, std::span<const uint8_t> bytes) override;
  Result<std::vector<uint8_t>> Get(const std::string& name) override;
  Status Read(const std::string& name, const std::function<Status(std::span<const uint8_t>)>& consume) override;
  Result<bool> Exists(const std::string& name) override;
  Result<std::vector<ObjectInfo>> List(const std::string& prefix) override;
  Status Delete(const std::string& name) override;
  std::string Describe() const override { return "dir " + root_; }

 private:
  std::string PathOf(const std::string& name) const { return root_ + "/" + name; }
  // "dir <root>: <what> <path>: <strerror(errno)>" as kIoError.
  Status Errno(const std::string& what, const std::string& path) const {
    return StoreStatus(StatusCode::kIoError, StoreError::kIo,
                       Describe() + ": " + what + " " + path + ": " + std::strerror(errno));
  }
  // Creates the folders that `name`'s '/' separators call for.
  Status MakeParents(const std::string& name) const;
  Status WriteAndRename(const std::string& name, std::span<const uint8_t> bytes) const;
  // WriteAndRename's temporary, linked to the name only if it is free: false when it was taken.
  Result<bool> WriteAndLink(const std::string& name, std::span<const uint8_t> bytes) const;
  // Writes and fsyncs a new temporary beside the object `name`; returns its path.
  Result<std::string> WriteTemporary(const std::string& name, std::span<const uint8_t> bytes) const;

  const std::string root_;  // absolute, normalised, no trailing '/'
};

Status DirStore::MakeParents(const std::string& name) const {
  size_t slash = name.find('/');
  while (slash != std::string::npos) {
    const std::string dir = PathOf(name.substr(0, slash));
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return Errno("mkdir", dir);
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0) return Errno("stat", dir);
    if (!S_ISDIR(st.st_mode)) {
      return StoreStatus(StatusCode::kFailedPrecondition, StoreError::kRequestRefused,
                         Describe() + ": cannot store \"" + name + "\": \"" + name.substr(0, slash) +
                             "\" is an object, and a directory store cannot hold both \"a\" and \"a/b\"");
    }
    slash = name.find('/', slash + 1);
  }
  return Status::Ok();
}

Result<std::string> DirStore::WriteTemporary(const std::string& name, std::span<const uint8_t> bytes) const {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const std::string path = PathOf(name);
  const size_t slash = path.rfind('/');
  const std::string dir = path.substr(0, slash);
  // '~' is not a name byte: List never shows a temporary, and no name can collide with one.
  const std::string tmp = dir + "/." + path.substr(slash + 1) + "~tmp." + std::to_string(::getpid()) + "." +
                          std::to_string(rng());
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) return Errno("create", tmp);
  Status s;
  size_t done = 0;
  while (s.ok() && done < bytes.size()) {
    const ssize_t w = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) s = Errno("write", tmp);
    if (w > 0) done += static_cast<size_t>(w);
  }
  if (s.ok() && ::fsync(fd.get()) != 0) s = Errno("fsync", tmp);
  if (fd.Close() != 0 && s.ok()) s = Errno("close", tmp);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  return tmp;
}

Result<bool> DirStore::WriteAndLink(const std::string& name, std::span<const uint8_t> bytes) const {
  LLAMAY_ASSIGN_OR_RETURN(std::string tmp, WriteTemporary(name, bytes));
  const std::string path = PathOf(name);
  const int linked = ::link(tmp.c_str(), path.c_str());
  const int err = errno;
  ::unlink(tmp.c_str());
  if (linked != 0 && err == EEXIST) return false;
  if (linked != 0) {
    errno = err;
    return Errno("link to", path);
  }
  const std::string dir = path.substr(0, path.rfind('/'));
  Fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd.get() >= 0 && ::fsync(dfd.get()) != 0) return Errno("fsync directory", dir);
  return true;
}

Status DirStore::WriteAndRename(const std::string& name, std::span<const uint8_t> bytes) const {
  LLAMAY_ASSIGN_OR_RETURN(std::string tmp, WriteTemporary(name, bytes));
  const std::string path = PathOf(name);
  const std::string dir = path.substr(0, path.rfind('/'));
  Status s;
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    s = errno == EISDIR
            ? StoreStatus(StatusCode::kFailedPrecondition, StoreError::kRequestRefused,
                          Describe() + ": cannot store \"" + name + "\": it is a directory of other objects")
            : Errno("rename to", path);
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  Fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd.get() >= 0 && ::fsync(dfd.get()) != 0) return Errno("fsync directory", dir);
  return Status::Ok();
}

Status DirStore::Put(const std::string& name, std::span<const uint8_t> bytes) {
  if (!ValidObjectName(name)) return InvalidNameError("name", name);
  LLAMAY_RETURN_IF_ERROR(MakeParents(name));
  return WriteAndRename(name, bytes);
}

Result<bool> DirStore::PutIfAbsent(const std::string& name, std::span<const uint8_t> bytes) {
  if (!ValidObjectName(name)) return InvalidNameError("name", name);
  LLAMAY_RETURN_IF_ERROR(MakeParents(name));
  return WriteAndLink(name, bytes);
}

Result<std::vector<uint8_t>> DirStore::Get(const std::string& name) {
  if (!ValidObjectName(name)) return InvalidNameError("name", name);
  const std::string path = PathOf(name);
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  const auto not_found = [&] {
    return StoreStatus(StatusCode::kNotFound, StoreError::kNotFound,
                       Describe() + ": no object \"" + name + "\"");
  };
  if (fd.get() < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return not_found();
    return Errno("open", path);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Errno("stat", path);
  if (S_ISDIR(st.st_mode)) return not_found();
  if (!S_ISREG(st.st_mode)) return Errno("read (not a regular file)", path);
  std::vector<uint8_t> out(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t r = ::read(fd.get(), out.data() + got, out.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Errno("read", path);
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  if (got != out.size()) {
    return StoreStatus(StatusCode::kDataLoss, StoreError::kTruncated,
                       Describe() + ": object \"" + name + "\" truncated: read " + std::to_string(got) +
                           " of " + std::to_string(out.size()) + " bytes");
  }
  return out;
}

// The file is mapped (MAP_POPULATE: the page cache's pages in one call) rather than read into a new buffer,
// which would fault in, zero and copy as many pages as the object has. Objects are only ever replaced by
// rename, which leaves a mapped file intact.
Status DirStore::Read(const std::string& name, const std::function<Status(std::span<const uint8_t>)>& consume) {
  if (!ValidObjectName(name)) return InvalidNameError("name", name);
  const std::string path = PathOf(name);
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      return StoreStatus(StatusCode::kNotFound, StoreError::kNotFound, Describe() + ": no object \"" + name + "\"");
    return Errno("open", path);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Errno("stat", path);
  if (!S_ISREG(st.st_mode) || st.st_size == 0) {
    LLAMAY_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, Get(name));  // directories, empty files: Get's answer
    return consume(bytes);
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd.get(), 0);
  if (map == MAP_FAILED) return Errno("map", path);
  Status s = consume(std::span(static_cast<const uint8_t*>(map), size));
  ::munmap(map, size);
  return s;
}

Result<bool> DirStore::Exists(const std::string& name) {
  if (!ValidObjectName(name)) return InvalidNameError("name", name);
  const std::string path = PathOf(name);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return false;
    return Errno("stat", path);
  }
  return S_ISREG(st.st_mode);
}

Result<std::vector<ObjectInfo>> DirStore::List(const std::string& prefix) {
  if (!ValidObjectPrefix(prefix)) return InvalidNameError("prefix", prefix);
  // Walk only the folder the prefix's complete segments name.
  const size_t slash = prefix.rfind('/');
  const std::string start = slash == std::string::npos ? root_ : PathOf(prefix.substr(0, slash));
  std::vector<ObjectInfo> out;
  std::error_code ec;
  if (!fs::is_directory(start, ec)) return out;
  fs::recursive_directory_iterator it(start, ec), end;
  if (ec)
    return StoreStatus(StatusCode::kIoError, StoreError::kIo,
                       Describe() + ": list " + start + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return StoreStatus(StatusCode::kIoError, StoreError::kIo, Describe() + ": list: " + ec.message());
    std::error_code entry_ec;
    if (!it->is_regular_file(entry_ec)) continue;
    std::string name = it->path().lexically_relative(root_).string();
    if (name.compare(0, prefix.size(), prefix) != 0 || !ValidObjectName(name)) continue;
    const uintmax_t size = it->file_size(entry_ec);
    if (entry_ec) continue;  // deleted or replaced while listing
    out.push_back({std::move(name), static_cast<uint64_t>(size)});
  }
  std::sort(out.begin(), out.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.name < b.name; });
  return out;
}

Status DirStore::Delete(const std::string& name) {
  if (!ValidObjectName(name)) return InvalidNameError("name", name);
  const std::string path = PathOf(name);
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT || errno == ENOTDIR || errno == EISDIR) return Status::Ok();
    return Errno("unlink", path);
  }
  const std::string dir = path.substr(0, path.rfind('/'));
  Fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd.get() >= 0) ::fsync(dfd.get());  // best effort: makes the unlink durable
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Store>> OpenDirStore(const std::string& path) {
  std::error_code ec;
  fs::path root = fs::absolute(path, ec).lexically_normal();
  if (ec) {
    return StoreStatus(StatusCode::kInvalidArgument, StoreError::kInvalidConfig,
                       "store directory " + path + ": " + ec.message());
  }
  std::string s = root.string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  fs::create_directories(s, ec);
  if (!fs::is_directory(s)) {
    return StoreStatus(StatusCode::kIoError, StoreError::kIo,
                       "store directory " + s + ": cannot create it" +
                           (ec ? ": " + ec.message() : std::string()) +
                           " (or it exists and is not a directory)");
  }
  return std::unique_ptr<Store>(new DirStore(s));
}

}  // namespace llamay::store
