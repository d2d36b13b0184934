// The snapshot store: where snapshots live. A generic named-object store (bytes in, bytes out) with two
// backends, a local directory and any S3-compatible object storage (AWS S3, MinIO, Cloudflare R2, s3rver).
// It knows nothing of snapshots: their format and checksums belong to the layer above (kv/, engine/).
//
// Invariants:
//  * Every name that reaches a backend has passed ValidObjectName: it is safe as a file path below the
//    store's root and as a URL path without escaping.
//  * Put is atomic for readers (the old object or the whole new one, never a part), idempotent and safe
//    to retry; a failed Put leaves the previous object readable.
//  * Get returns the whole object or an error: a short read is kDataLoss, never a short success.
//  * Errors say which store failed and why, and never carry credentials (see docs/store.md).
//
// Thread-safety: a Store is safe to use from several threads at once (each backend says how). OpenStore
// and ValidObjectName are thread-safe.
#ifndef LLAMAY_STORE_STORE_H_
#define LLAMAY_STORE_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace llamay::store {

// Status::detail() of every error a Store returns: tells apart failures that share a StatusCode.
enum class StoreError : int {
  kNone = 0,
  kInvalidName,       // kInvalidArgument: a name or prefix that ValidObjectName refuses
  kInvalidConfig,     // kInvalidArgument: a bad URL, endpoint or credential setting
  kNotFound,          // kNotFound: no such object (or bucket)
  kUnreachable,       // kUnavailable: cannot connect (refused, DNS, connection reset), after retries
  kTimeout,           // kUnavailable: a request ran past timeout_seconds, after retries
  kServerError,       // kUnavailable: HTTP 5xx or 429, after retries
  kAccessDenied,      // kFailedPrecondition: HTTP 401/403 (wrong credentials, no permission)
  kRequestRefused,    // kFailedPrecondition / kInvalidArgument: another 3xx/4xx answer
  kTruncated,         // kDataLoss: fewer bytes than Content-Length or the file size
  kChecksumMismatch,  // kDataLoss: the bytes do not match their MD5 (Content-MD5 / ETag)
  kBadResponse,       // kInternal: an answer that cannot be parsed
  kIo,                // kIoError: the operating system refused (directory backend)
};

struct ObjectInfo {
  std::string name;  // relative to the store's root (directory) or prefix (S3)
  uint64_t size = 0;
};

struct StoreOptions {
  // Per request (connect + transfer), in seconds. A whole object moves in one request, so this bounds
  // the largest object a slow link can carry.
  double timeout_seconds = 30;
  // Extra attempts on timeouts, connection errors, truncated or corrupted transfers and HTTP 5xx/429;
  // never on another 4xx. The wait before attempt n (1-based) is retry_backoff_seconds * 2^(n-1),
  // jittered down to half of that at random, at most 5 s.
  int retries = 3;
  double retry_backoff_seconds = 0.2;

  // S3 only. Each empty field falls back to the standard AWS environment (docs/store.md has the order):
  // AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION / AWS_DEFAULT_REGION,
  // AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, AWS_PROFILE with ~/.aws/credentials and ~/.aws/config,
  // AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE. With no credentials at all, requests go unsigned.
  std::string
      endpoint;  // e.g. http://127.0.0.1:4569 (MinIO, s3rver, R2); empty: https://s3.<region>.amazonaws.com
  std::string region;  // default us-east-1
  std::string access_key, secret_key, session_token;
  // Path-style (http://endpoint/bucket/key) or virtual-hosted (http://bucket.endpoint/key) requests.
  // Unset: path-style with a custom endpoint (what MinIO and s3rver need, and R2 accepts), virtual-hosted
  // with AWS's own endpoint (AWS is retiring path-style) unless the bucket name is not a DNS label.
  std::optional<bool> path_style;
  // Sends Content-MD5 with every PUT (the server refuses a body that does not match) and, where the
  // ETag is a plain MD5 (32 hex digits), checks the ETag of a PUT or GET against the bytes. Turn off for
  // buckets with SSE-KMS or SSE-C encryption, whose ETags are not the MD5 of the object.
  bool verify_etag = true;
};

class Store {
 public:
  virtual ~Store() = default;
  // Stores `bytes` under `name`. Atomic for readers (they see the old object or the whole new one),
  // idempotent, safe to retry, safe when two processes put the same name concurrently (one wins whole).
  virtual Status Put(const std::string& name, std::span<const uint8_t> bytes) = 0;
  // The whole object; NotFoundError when absent; a short read (fewer bytes than Content-Length / the file
  // size) is an error (kDataLoss), never a short success.
  virtual Result<std::vector<uint8_t>> Get(const std::string& name) = 0;
  // Stores `bytes` under `name` only if no object has that name: true when this call created it, false
  // when one existed (it is left as it was). Two writers racing for one name: exactly one gets true on a
  // directory (link(2) is atomic) and on S3 services that honour `If-None-Match: *` (AWS S3, MinIO, R2);
  // on a service that ignores the header (s3rver) only a HEAD guards it, so a race within one request's
  // time can let both win (docs/store.md).
  virtual Result<bool> PutIfAbsent(const std::string& name, std::span<const uint8_t> bytes) = 0;
  // The whole object handed to `consume` (valid only during the call), with Get's checks. The directory
  // backend maps the file instead of copying it (a restore by name reads each chunk once); others Get it.
  // Returns consume's error, if any.
  virtual Status Read(const std::string& name, const std::function<Status(std::span<const uint8_t>)>& consume) {
    LLAMAY_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, Get(name));
    return consume(bytes);
  }
  virtual Result<bool> Exists(const std::string& name) = 0;  // HEAD
  // Every object whose name starts with `prefix` ("" for all; "a/" or a partial name like "a/snap-"),
  // sorted by name. Names that ValidObjectName refuses (written by other tools) are left out.
  virtual Result<std::vector<ObjectInfo>> List(const std::string& prefix) = 0;
  virtual Status Delete(const std::string& name) = 0;  // absent is OK
  // "dir /path" or "s3://bucket/prefix at endpoint": never credentials.
  virtual std::string Describe() const = 0;
};

// "/abs/or/relative/path" or "file:///path": a directory (created if missing); "s3://bucket[/prefix]": S3.
Result<std::unique_ptr<Store>> OpenStore(const std::string& url, const StoreOptions& options = {});

// Names are what request paths may carry: 1..512 bytes of [A-Za-z0-9._-] and '/' separators, no empty
// segment, no "." or ".." segment, no leading '/'. Everything that reaches a backend passes this.
bool ValidObjectName(std::string_view name);
// A List prefix: the start of some valid name ("", "a/", "a/snap-"): allowed bytes, no leading '/', and
// every segment followed by a '/' is one a name may have (not empty, "." or "..").
bool ValidObjectPrefix(std::string_view prefix);

// Status helpers the backends share: `code` with `detail` as the Status detail.
Status StoreStatus(StatusCode code, StoreError detail, std::string message);
Status InvalidNameError(std::string_view what, std::string_view name);

}  // namespace llamay::store

#endif  // LLAMAY_STORE_STORE_H_
