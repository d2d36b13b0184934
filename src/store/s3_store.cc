#include "store/s3_store.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <thread>

#include "base/digest.h"
#include "store/http_client.h"
#include "store/s3_xml.h"

namespace llamay::store {
namespace {

using Md5 = std::array<uint8_t, 16>;

Md5 Md5Of(std::span<const uint8_t> bytes) {
  Md5 out{};
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), out.data(), &len, EVP_md5(), nullptr);
  return out;
}

std::string Hex(std::span<const uint8_t> bytes) { return HexOf(bytes); }

std::string Base64(std::span<const uint8_t> bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes.data(),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// True for an ETag that is the MD5 of the object (a single-part upload without SSE-KMS or SSE-C).
bool PlainMd5Etag(std::string_view etag) {
  if (etag.size() != 32) return false;
  return std::all_of(etag.begin(), etag.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  });
}

bool SameHex(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(x) == std::tolower(y);
         });
}

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

class S3Store : public Store {
 public:
  S3Store(S3Location where, const StoreOptions& options, S3Config config, int list_page_size,
          int max_list_pages)
      : where_(std::move(where)),
        options_(options),
        config_(std::move(config)),
        list_page_size_(list_page_size),
        max_list_pages_(max_list_pages),
        client_(options.timeout_seconds, HttpSigning{config_.access_key.empty() ? "" : config_.region,
                                                     config_.access_key, config_.secret_key}) {}

  Status Put(const std::string& name, std::span<const uint8_t> bytes) override;
  Result<bool> PutIfAbsent(const std::string& name, std::span<const uint8_t> bytes) override;
  Result<std::vector<uint8_t>> Get(const std::string& name) override;
  Result<bool> Exists(const std::string& name) override;
  Result<std::vector<ObjectInfo>> List(const std::string& prefix) override;
  Status Delete(const std::string& name) override;
  std::string Describe() const override {
    return "s3://" + where_.bucket + (where_.prefix.empty() ? "" : "/" + where_.prefix) + " at " +
           config_.endpoint;
  }

 private:
  Result<bool> PutObject(const std::string& name, std::span<const uint8_t> bytes, bool if_absent);
  // A check of a 2xx answer (whole body, checksum); a non-OK result is retried like a transport error.
  using Verify = std::function<Status(const HttpResponse&)>;

  std::string KeyOf(const std::string& name) const {
    return where_.prefix.empty() ? name : where_.prefix + "/" + name;
  }
  // The URL of `key` ("" for the bucket itself), path-style or virtual-hosted.
  std::string Url(const std::string& key) const;
  HttpRequest Request(std::string method, std::string url, std::span<const uint8_t> body = {}) const;
  // Sends with retries. Returns the final HTTP answer (any status but a retried 5xx/429 that never
  // stopped) or the error of the last failed attempt.
  Result<HttpResponse> Send(const HttpRequest& request, const std::string& what, const Verify& verify = {});
  // The Status for an HTTP answer the operation cannot accept.
  Status HttpError(const HttpResponse& r, const std::string& what) const;
  Status Fail(StatusCode code, StoreError detail, const std::string& what, const std::string& why) const {
    return StoreStatus(code, detail, Describe() + ": " + what + ": " + why);
  }

  const S3Location where_;
  const StoreOptions options_;
  const S3Config config_;
  const int list_page_size_;
  const int max_list_pages_;
  HttpClient client_;
};

std::string S3Store::Url(const std::string& key) const {
  if (config_.path_style) return config_.endpoint + "/" + where_.bucket + "/" + key;
  const size_t host = config_.endpoint.find("://") + 3;
  return config_.endpoint.substr(0, host) + where_.bucket + "." + config_.endpoint.substr(host) + "/" + key;
}

HttpRequest S3Store::Request(std::string method, std::string url, std::span<const uint8_t> body) const {
  HttpRequest r{std::move(method), std::move(url), {}, body};
  // S3 wants the payload's SHA-256 in every signed request; curl 7.88 signs it as one of our headers.
  r.headers.push_back("x-amz-content-sha256: " + DigestHex(Sha256Of(body.data(), body.size())));
  if (!config_.session_token.empty()) r.headers.push_back("x-amz-security-token: " + config_.session_token);
  return r;
}

Result<HttpResponse> S3Store::Send(const HttpRequest& request, const std::string& what,
                                   const Verify& verify) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const int attempts = 1 + std::max(0, options_.retries);
  Status last;
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    if (attempt > 1) {
      const double full =
          std::min(5.0, options_.retry_backoff_seconds * double(1 << std::min(attempt - 2, 20)));
      std::uniform_real_distribution<double> jitter(0.5 * full, full);
      std::this_thread::sleep_for(std::chrono::duration<double>(jitter(rng)));
    }
    HttpResponse r = client_.Send(request);
    const std::string tries = attempt == 1 ? "" : " (" + std::to_string(attempt) + " attempts)";
    switch (r.error) {
      case TransportError::kNone:
        break;
      case TransportError::kTimeout:
        last = Fail(StatusCode::kUnavailable, StoreError::kTimeout, what,
                    "timed out after " + Seconds(r.seconds) + " (timeout_seconds " +
                        Seconds(options_.timeout_seconds) + ")" + tries);
        continue;
      case TransportError::kConnect:
      case TransportError::kBroken:
        last = Fail(StatusCode::kUnavailable, StoreError::kUnreachable, what,
                    "store unreachable: " + r.error_text + tries);
        continue;
      case TransportError::kPartial:
        last = Fail(StatusCode::kDataLoss, StoreError::kTruncated, what,
                    "truncated: received " + std::to_string(r.body.size()) + " of " +
                        std::to_string(r.content_length) + " bytes (" + r.error_text + ")" + tries);
        continue;
      case TransportError::kFatal:
        return Fail(StatusCode::kUnavailable, StoreError::kUnreachable, what,
                    "request failed: " + r.error_text);
    }
    if (r.status >= 500 || r.status == 429) {
      last = HttpError(r, what);
      last = StoreStatus(last.code(), StoreError(last.detail()), last.message() + tries);
      continue;
    }
    if (r.status >= 200 && r.status < 300 && verify) {
      if (Status s = verify(r); !s.ok()) {
        last = StoreStatus(s.code(), StoreError(s.detail()),
                           Describe() + ": " + what + ": " + s.message() + tries);
        continue;
      }
    }
    return r;
  }
  return last;
}

Status S3Store::HttpError(const HttpResponse& r, const std::string& what) const {
  const S3ErrorBody e =
      ParseS3Error(std::string_view(reinterpret_cast<const char*>(r.body.data()), r.body.size()));
  std::string answer = "HTTP " + std::to_string(r.status);
  if (!e.code.empty()) answer += " " + e.code;
  if (!e.message.empty()) answer += ": " + e.message;
  if (r.status >= 500 || r.status == 429) {
    return Fail(StatusCode::kUnavailable, StoreError::kServerError, what, "server error: " + answer);
  }
  if (r.status == 401 || r.status == 403) {
    return Fail(StatusCode::kFailedPrecondition, StoreError::kAccessDenied, what,
                "access denied: " + answer + " (wrong credentials or no permission; credentials from " +
                    config_.credential_source + ", region " + config_.region + ")");
  }
  if (r.status == 404) {
    if (e.code == "NoSuchBucket") {
      return Fail(StatusCode::kNotFound, StoreError::kNotFound, what,
                  "bucket " + where_.bucket + " does not exist");
    }
    return Fail(StatusCode::kNotFound, StoreError::kNotFound, what, "not found (" + answer + ")");
  }
  if (e.code == "BadDigest" || e.code == "XAmzContentSHA256Mismatch" || e.code == "InvalidDigest") {
    return Fail(StatusCode::kDataLoss, StoreError::kChecksumMismatch, what,
                "the server received other bytes than were sent: " + answer);
  }
  if (r.status >= 300 && r.status < 400) {
    return Fail(
        StatusCode::kFailedPrecondition, StoreError::kRequestRefused, what,
        answer + " (the bucket is in another region than " + config_.region + " or needs another endpoint)");
  }
  if (r.status >= 400)
    return Fail(StatusCode::kFailedPrecondition, StoreError::kRequestRefused, what, answer);
  return Fail(StatusCode::kInternal, StoreError::kBadResponse, what, "unexpected " + answer);
}

Status S3Store::Put(const std::string& name, std::span<const uint8_t> bytes) {
  return PutObject(name, bytes, /*if_absent=*/false).status();
}

// A conditional PUT (If-None-Match: *) after a HEAD: services that honour the header answer 412 when the
// object appeared meanwhile; the HEAD covers those that ignore it, except within one request's time.
Result<bool> S3Store::PutIfAbsent(const std::string& name, std::span<const uint8_t> bytes) {
  LLAMAY_ASSIGN_OR_RETURN(bool exists, Exists(name));
  if (exists) return false;
  return PutObject(name, bytes, /*if_absent=*/true);
}

Result<bool> S3Store::PutObject(const std::string& name, std::span<const uint8_t> bytes, bool if_absent) {
  if (!ValidObjectName(name)) return InvalidNameError("name", name);
  const std::string what = "PUT \"" + name + "\"";
  const Md5 md5 = Md5Of(bytes);
  HttpRequest req = Request("PUT", Url(KeyOf(name)), bytes);
  req.headers.push_back("Content-Type: application/octet-stream");
  if (if_absent) req.headers.push_back("If-None-Match: *");
  req.headers.push_back("Content-MD5: " + Base64(md5));
  const std::string md5_hex = Hex(md5);
  Verify verify = [&](const HttpResponse& r) -> Status {
    if (options_.verify_etag && PlainMd5Etag(r.etag) && !SameHex(r.etag, md5_hex)) {
      return StoreStatus(StatusCode::kDataLoss, StoreError::kChecksumMismatch,
                         "stored object's ETag " + r.etag + " is not the MD5 of the bytes sent (" + md5_hex +
                             "); set verify_etag=false for SSE-KMS or SSE-C buckets");
    }
    return Status::Ok();
  };
  LLAMAY_ASSIGN_OR_RETURN(HttpResponse r, Send(req, what, verify));
  if (if_absent && (r.status == 412 || r.status == 409)) return false;  // another writer created it first
  if (r.status != 200) return HttpError(r, what);
  return true;
}

Result<std::vector<uint8_t>> S3Store::Get(const std::string& name) {
  if (!ValidObjectName(name)) return InvalidNameError("name", name);
  const std::string what = "GET \"" + name + "\"";
  Verify verify = [&](const HttpResponse& r) -> Status {
    if (r.content_length >= 0 && static_cast<uint64_t>(r.content_length) != r.body.size()) {
      return StoreStatus(StatusCode::kDataLoss, StoreError::kTruncated,
                         "truncated: received " + std::to_string(r.body.size()) + " of " +
                             std::to_string(r.content_length) + " bytes");
    }
    if (options_.verify_etag && PlainMd5Etag(r.etag) && !SameHex(r.etag, Hex(Md5Of(r.body)))) {
      return StoreStatus(StatusCode::kDataLoss, StoreError::kChecksumMismatch,
                         "the bytes received do not match the object's ETag " + r.etag +
                             "; set verify_etag=false for SSE-KMS or SSE-C buckets");
    }
    return Status::Ok();
  };
  LLAMAY_ASSIGN_OR_RETURN(HttpResponse r, Send(Request("GET", Url(KeyOf(name))), what, verify));
  if (r.status == 404) {
    const S3ErrorBody e =
        ParseS3Error(std::string_view(reinterpret_cast<const char*>(r.body.data()), r.body.size()));
    if (e.code != "NoSuchBucket")
      return Fail(StatusCode::kNotFound, StoreError::kNotFound, what, "no such object");
  }
  if (r.status != 200) return HttpError(r, what);
  return std::move(r.body);
}

Result<bool> S3Store::Exists(const std::string& name) {
  if (!ValidObjectName(name)) return InvalidNameError("name", name);
  const std::string what = "HEAD \"" + name + "\"";
  LLAMAY_ASSIGN_OR_RETURN(HttpResponse r, Send(Request("HEAD", Url(KeyOf(name))), what));
  if (r.status == 200) return true;
  if (r.status == 404) return false;
  return HttpError(r, what);
}

Result<std::vector<ObjectInfo>> S3Store::List(const std::string& prefix) {
  if (!ValidObjectPrefix(prefix)) return InvalidNameError("prefix", prefix);
  const std::string root = where_.prefix.empty() ? "" : where_.prefix + "/";
  const std::string what = "LIST \"" + prefix + "\"";
  std::vector<ObjectInfo> out;
  std::string token;
  for (int page = 1;; ++page) {
    // Parameters in sorted order, encoded as SigV4 wants, so the URL's query is already canonical.
    std::string query;
    if (!token.empty()) query += "continuation-token=" + UriEncode(token) + "&";
    query +=
        "list-type=2&max-keys=" + std::to_string(list_page_size_) + "&prefix=" + UriEncode(root + prefix);
    LLAMAY_ASSIGN_OR_RETURN(HttpResponse r, Send(Request("GET", Url("") + "?" + query), what));
    if (r.status != 200) return HttpError(r, what);
    Result<ListPage> parsed =
        ParseListObjectsV2(std::string_view(reinterpret_cast<const char*>(r.body.data()), r.body.size()));
    if (!parsed.ok()) {
      return Fail(StatusCode::kInternal, StoreError::kBadResponse, what + " page " + std::to_string(page),
                  parsed.status().message());
    }
    for (ObjectInfo& o : parsed->objects) {
      if (o.name.compare(0, root.size(), root) != 0) continue;
      o.name.erase(0, root.size());
      if (ValidObjectName(o.name) && o.name.starts_with(prefix)) out.push_back(std::move(o));
    }
    if (!parsed->truncated) break;
    if (parsed->next_token == token) {
      return Fail(StatusCode::kInternal, StoreError::kBadResponse, what,
                  "the server repeated a continuation token");
    }
    if (page >= max_list_pages_) {
      return Fail(StatusCode::kInternal, StoreError::kBadResponse, what,
                  "the listing did not end within " + std::to_string(max_list_pages_) + " pages");
    }
    token = parsed->next_token;
  }
  std::sort(out.begin(), out.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.name < b.name; });
  return out;
}

Status S3Store::Delete(const std::string& name) {
  if (!ValidObjectName(name)) return InvalidNameError("name", name);
  const std::string what = "DELETE \"" + name + "\"";
  LLAMAY_ASSIGN_OR_RETURN(HttpResponse r, Send(Request("DELETE", Url(KeyOf(name))), what));
  if (r.status == 200 || r.status == 204) return Status::Ok();
  if (r.status == 404) {
    const S3ErrorBody e =
        ParseS3Error(std::string_view(reinterpret_cast<const char*>(r.body.data()), r.body.size()));
    if (e.code != "NoSuchBucket") return Status::Ok();  // absent already
  }
  return HttpError(r, what);
}

}  // namespace

std::string UriEncode(std::string_view s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
        c == '.' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

Result<S3Location> ParseS3Url(std::string_view url) {
  auto bad = [&](const std::string& why) {
    return StoreStatus(StatusCode::kInvalidArgument, StoreError::kInvalidConfig,
                       "store URL \"" + std::string(url) + "\": " + why);
  };
  if (!url.starts_with("s3://")) return bad("not an s3:// URL");
  std::string_view rest = url.substr(5);
  const size_t slash = rest.find('/');
  S3Location where;
  where.bucket = std::string(rest.substr(0, slash));
  if (where.bucket.empty() || where.bucket.size() > 255) return bad("want s3://bucket[/prefix]");
  for (char c : where.bucket) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '.' || c == '_')) {
      return bad("bucket names are letters, digits, '.', '-' and '_'");
    }
  }
  if (slash != std::string_view::npos) {
    std::string prefix(rest.substr(slash + 1));
    while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
    if (!prefix.empty() && !ValidObjectName(prefix)) return bad("the prefix is not a valid object name");
    where.prefix = std::move(prefix);
  }
  return where;
}

Result<std::unique_ptr<Store>> OpenS3Store(const S3Location& where, const StoreOptions& options,
                                           const S3Config& config, int list_page_size, int max_list_pages) {
  if (!(options.timeout_seconds > 0)) {
    return StoreStatus(StatusCode::kInvalidArgument, StoreError::kInvalidConfig,
                       "timeout_seconds must be positive");
  }
  return std::unique_ptr<Store>(
      new S3Store(where, options, config, std::clamp(list_page_size, 1, 1000), std::max(max_list_pages, 1)));
}

Result<std::unique_ptr<Store>> OpenS3Store(const S3Location& where, const StoreOptions& options) {
  LLAMAY_ASSIGN_OR_RETURN(S3Config config, ResolveS3Config(options, where.bucket, ProcessEnvironment()));
  return OpenS3Store(where, options, config);
}

}  // namespace llamay::store
