// The S3 backend of the snapshot store: objects in a bucket of any S3-compatible service, under an
// optional key prefix ("s3://bucket/prefix": object "a/b" is key "prefix/a/b").
//
// Requests: PUT (with Content-MD5 and the payload's SHA-256, both checked by the server), GET (the bytes
// received must match Content-Length, and the ETag when it is a plain MD5), HEAD, ListObjectsV2 (every
// page, following NextContinuationToken) and DELETE, each signed by curl (CURLOPT_AWS_SIGV4). Timeouts,
// connection failures, truncated or corrupted transfers and HTTP 5xx/429 are retried with jittered
// exponential backoff (StoreOptions); other answers are not. Errors name the store and the operation and
// never carry credentials: store.h's StoreError lists what each one means.
//
// Thread-safety: thread-safe: a store keeps no per-request state, and HttpClient pools curl handles.
#ifndef LLAMAY_STORE_S3_STORE_H_
#define LLAMAY_STORE_S3_STORE_H_

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "store/s3_config.h"
#include "store/store.h"

namespace llamay::store {

struct S3Location {
  std::string bucket;
  std::string prefix;  // "" or a valid object name, without a trailing '/'
};

// "s3://bucket[/prefix[/]]".
Result<S3Location> ParseS3Url(std::string_view url);

// Resolves the configuration from `options` and the process environment (s3_config.h).
Result<std::unique_ptr<Store>> OpenS3Store(const S3Location& where, const StoreOptions& options);
// With a configuration already resolved (tests), ListObjectsV2 pages of at most `list_page_size`, and
// listings of at most `max_list_pages` pages: a server whose every page says "truncated" (with a new token
// each time) gets an error, not requests for ever (10,000 pages of 1,000 is 10M objects).
Result<std::unique_ptr<Store>> OpenS3Store(const S3Location& where, const StoreOptions& options,
                                           const S3Config& config, int list_page_size = 1000,
                                           int max_list_pages = 10000);

// RFC 3986 percent-encoding of everything but unreserved characters (what SigV4 expects in a query).
std::string UriEncode(std::string_view s);

}  // namespace llamay::store

#endif  // LLAMAY_STORE_S3_STORE_H_
