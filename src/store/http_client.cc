#include "store/http_client.h"

#include <curl/curl.h>
#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <string_view>

namespace llamay::store {
namespace {

constexpr size_t kMaxIdleHandles = 16;
constexpr size_t kMaxReserve = size_t{1} << 30;  // trust a Content-Length this far when reserving

// libcurl's entry points, from the library loaded on first use. A process that never talks to S3 (most
// never do) does not map libcurl and its thirty-odd dependencies at start: that was about 5 ms of every
// `llamay` command's start on this machine (docs/benchmarks.md, "ready to serve").
struct CurlApi {
  std::string error;  // why libcurl could not be loaded; empty when it was
  CURLcode (*global_init)(long) = nullptr;
  CURL* (*easy_init)() = nullptr;
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...) = nullptr;
  CURLcode (*easy_perform)(CURL*) = nullptr;
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...) = nullptr;
  void (*easy_reset)(CURL*) = nullptr;
  void (*easy_cleanup)(CURL*) = nullptr;
  const char* (*easy_strerror)(CURLcode) = nullptr;
  curl_slist* (*slist_append)(curl_slist*, const char*) = nullptr;
  void (*slist_free_all)(curl_slist*) = nullptr;
};

// Loads libcurl.so.4 (Debian's libcurl4, which libcurl4-openssl-dev installs) once, then curl_global_init.
// The library stays loaded for the life of the process.
const CurlApi& Curl() {
  static const CurlApi api = [] {
    CurlApi a;
    void* lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = dlerror();
      a.error = std::string("libcurl could not be loaded (") + (why != nullptr ? why : "libcurl.so.4") +
                "); the S3 store needs it: install libcurl4";
      return a;
    }
    bool ok = true;
    auto bind = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (fn == nullptr) {
        if (ok) a.error = std::string("libcurl.so.4 has no ") + name;
        ok = false;
      }
    };
    bind(a.global_init, "curl_global_init");
    bind(a.easy_init, "curl_easy_init");
    bind(a.easy_setopt, "curl_easy_setopt");
    bind(a.easy_perform, "curl_easy_perform");
    bind(a.easy_getinfo, "curl_easy_getinfo");
    bind(a.easy_reset, "curl_easy_reset");
    bind(a.easy_cleanup, "curl_easy_cleanup");
    bind(a.easy_strerror, "curl_easy_strerror");
    bind(a.slist_append, "curl_slist_append");
    bind(a.slist_free_all, "curl_slist_free_all");
    if (ok && a.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
      a.error = "curl_global_init failed";
      ok = false;
    }
    if (!ok) a.easy_init = nullptr;  // Send reports `error`
    return a;
  }();
  return api;
}

struct Transfer {
  HttpResponse* response;
};

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  t->response->body.insert(t->response->body.end(), data, data + size * n);
  return size * n;
}

bool HeaderIs(std::string_view line, std::string_view name) {
  if (line.size() <= name.size() || line[name.size()] != ':') return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return false;
  return true;
}

std::string_view HeaderValue(std::string_view line, size_t name_size) {
  std::string_view v = line.substr(name_size + 1);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) v.remove_suffix(1);
  return v;
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<Transfer*>(user)->response;
  const std::string_view line(data, size * n);
  if (line.starts_with("HTTP/")) {  // a new response (after a 100 Continue, say): forget the last one
    r->etag.clear();
    r->content_length = -1;
  } else if (HeaderIs(line, "etag")) {
    std::string_view v = HeaderValue(line, 4);
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
    r->etag = std::string(v);
  } else if (HeaderIs(line, "content-length")) {
    const std::string_view v = HeaderValue(line, 14);
    int64_t len = 0;
    bool ok = !v.empty() && v.size() <= 18;
    for (char c : v) {
      if (c < '0' || c > '9') ok = false;
      len = len * 10 + (c - '0');
    }
    r->content_length = ok ? len : -1;
    if (ok) r->body.reserve(std::min(static_cast<size_t>(len), kMaxReserve));
  }
  return size * n;
}

TransportError Classify(CURLcode rc) {
  switch (rc) {
    case CURLE_OK:
      return TransportError::kNone;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
      return TransportError::kConnect;
    case CURLE_OPERATION_TIMEDOUT:
      return TransportError::kTimeout;
    case CURLE_PARTIAL_FILE:
      return TransportError::kPartial;
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_WEIRD_SERVER_REPLY:
      return TransportError::kBroken;
    default:
      return TransportError::kFatal;
  }
}

}  // namespace

HttpClient::HttpClient(double timeout_seconds, HttpSigning signing)
    : timeout_ms_(std::max(1L, static_cast<long>(timeout_seconds * 1000))),
      signing_(std::move(signing)),
      sigv4_(signing_.region.empty() ? "" : "aws:amz:" + signing_.region + ":s3") {
  Curl();
}

HttpClient::~HttpClient() {
  for (void* h : idle_) Curl().easy_cleanup(static_cast<CURL*>(h));
}

void* HttpClient::TakeHandle() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  return Curl().easy_init != nullptr ? Curl().easy_init() : nullptr;
}

void HttpClient::GiveBack(void* handle) {
  Curl().easy_reset(static_cast<CURL*>(handle));  // keeps the handle's open connections
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < kMaxIdleHandles) {
      idle_.push_back(handle);
      return;
    }
  }
  Curl().easy_cleanup(static_cast<CURL*>(handle));
}

HttpResponse HttpClient::Send(const HttpRequest& request) {
  HttpResponse response;
  const CurlApi& api = Curl();
  CURL* curl = static_cast<CURL*>(TakeHandle());
  if (curl == nullptr) {
    response.error = TransportError::kFatal;
    response.error_text = api.error.empty() ? "curl_easy_init failed" : api.error;
    return response;
  }
  Transfer transfer{&response};
  char error_buffer[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = nullptr;
  for (const std::string& h : request.headers) headers = api.slist_append(headers, h.c_str());

  api.easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  api.easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  api.easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  api.easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  api.easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms_);
  api.easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms_);
  api.easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  api.easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
  api.easy_setopt(curl, CURLOPT_USERAGENT, "llamay-store");
  api.easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  api.easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  api.easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  api.easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  api.easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
  if (!sigv4_.empty()) {
    api.easy_setopt(curl, CURLOPT_AWS_SIGV4, sigv4_.c_str());
    api.easy_setopt(curl, CURLOPT_USERNAME, signing_.access_key.c_str());
    api.easy_setopt(curl, CURLOPT_PASSWORD, signing_.secret_key.c_str());
  }
  if (request.method == "HEAD") {
    api.easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (request.method == "PUT") {
    // The body as POSTFIELDS (in memory, rewound for free on a retry) under the PUT method.
    static const uint8_t kEmpty = 0;
    api.easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "PUT");
    api.easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.empty() ? &kEmpty : request.body.data());
    api.easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  } else if (request.method != "GET") {
    api.easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }

  const auto start = std::chrono::steady_clock::now();
  const CURLcode rc = api.easy_perform(curl);
  response.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  api.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  response.error = Classify(rc);
  if (rc != CURLE_OK) response.error_text = error_buffer[0] ? error_buffer : api.easy_strerror(rc);
  api.slist_free_all(headers);
  GiveBack(curl);
  return response;
}

}  // namespace llamay::store
