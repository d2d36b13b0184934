#include "store/store.h"

#include <string>

#include "store/dir_store.h"
#include "store/s3_store.h"

namespace llamay::store {
namespace {

constexpr size_t kMaxNameBytes = 512;

bool NameByte(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-';
}

// A segment a name may hold: not empty, not "." or "..", only NameByte characters.
bool ValidSegment(std::string_view s) {
  if (s.empty() || s == "." || s == "..") return false;
  for (char c : s)
    if (!NameByte(c)) return false;
  return true;
}

}  // namespace

bool ValidObjectName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  size_t start = 0;
  while (true) {
    const size_t slash = name.find('/', start);
    const std::string_view seg =
        name.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (!ValidSegment(seg)) return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

bool ValidObjectPrefix(std::string_view prefix) {
  if (prefix.size() > kMaxNameBytes) return false;
  const size_t last = prefix.rfind('/');
  if (last == std::string_view::npos) {
    for (char c : prefix)
      if (!NameByte(c)) return false;
    return true;
  }
  // Everything up to the last '/' is complete segments; after it, the start of one (possibly empty).
  if (!ValidObjectName(prefix.substr(0, last))) return false;
  for (char c : prefix.substr(last + 1))
    if (!NameByte(c)) return false;
  return true;
}

Status StoreStatus(StatusCode code, StoreError detail, std::string message) {
  return Status(code, std::move(message), static_cast<int>(detail));
}

Status InvalidNameError(std::string_view what, std::string_view name) {
  std::string shown;
  for (char c : name.substr(0, 80)) {
    if (c >= 0x20 && c < 0x7f) {
      shown += c;
    } else {
      static const char kHex[] = "0123456789abcdef";
      const auto u = static_cast<unsigned char>(c);
      shown += "\\x";
      shown += kHex[u >> 4];
      shown += kHex[u & 15];
    }
  }
  if (name.size() > 80) shown += "...";
  return StoreStatus(StatusCode::kInvalidArgument, StoreError::kInvalidName,
                     "invalid object " + std::string(what) + " \"" + shown + "\" (" +
                         std::to_string(name.size()) +
                         " bytes): names are 1..512 bytes of [A-Za-z0-9._-] in '/'-separated segments, none "
                         "empty, \".\" or \"..\", no leading '/'");
}

Result<std::unique_ptr<Store>> OpenStore(const std::string& url, const StoreOptions& options) {
  auto config_error = [&](const std::string& why) {
    return StoreStatus(StatusCode::kInvalidArgument, StoreError::kInvalidConfig,
                       "store URL \"" + url + "\": " + why);
  };
  if (url.empty()) return config_error("empty (want a directory path, file:///path or s3://bucket[/prefix])");
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return OpenDirStore(url);
  const std::string scheme = url.substr(0, scheme_end);
  if (scheme == "s3") {
    LLAMAY_ASSIGN_OR_RETURN(S3Location where, ParseS3Url(url));
    return OpenS3Store(where, options);
  }
  if (scheme == "file") {
    std::string rest = url.substr(scheme_end + 3);
    if (rest.rfind("localhost/", 0) == 0) rest = rest.substr(9);
    if (rest.empty() || rest[0] != '/') return config_error("a file URL is file:///absolute/path");
    return OpenDirStore(rest);
  }
  return config_error("unknown scheme \"" + scheme + "\" (want a directory path, file:///path or s3://)");
}

}  // namespace llamay::store
