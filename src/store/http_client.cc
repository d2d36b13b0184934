#include "store/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <string_view>

namespace llamay::store {
namespace {

constexpr size_t kMaxIdleHandles = 16;
constexpr size_t kMaxReserve = size_t{1} << 30;  // trust a Content-Length this far when reserving

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
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
  GlobalInit();
}

HttpClient::~HttpClient() {
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
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
  return curl_easy_init();
}

void HttpClient::GiveBack(void* handle) {
  curl_easy_reset(static_cast<CURL*>(handle));  // keeps the handle's open connections
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < kMaxIdleHandles) {
      idle_.push_back(handle);
      return;
    }
  }
  curl_easy_cleanup(static_cast<CURL*>(handle));
}

HttpResponse HttpClient::Send(const HttpRequest& request) {
  HttpResponse response;
  CURL* curl = static_cast<CURL*>(TakeHandle());
  if (curl == nullptr) {
    response.error = TransportError::kFatal;
    response.error_text = "curl_easy_init failed";
    return response;
  }
  Transfer transfer{&response};
  char error_buffer[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = nullptr;
  for (const std::string& h : request.headers) headers = curl_slist_append(headers, h.c_str());

  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms_);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms_);
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "llamay-store");
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
  if (!sigv4_.empty()) {
    curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, sigv4_.c_str());
    curl_easy_setopt(curl, CURLOPT_USERNAME, signing_.access_key.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, signing_.secret_key.c_str());
  }
  if (request.method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (request.method == "PUT") {
    // The body as POSTFIELDS (in memory, rewound for free on a retry) under the PUT method.
    static const uint8_t kEmpty = 0;
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "PUT");
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.empty() ? &kEmpty : request.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  } else if (request.method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }

  const auto start = std::chrono::steady_clock::now();
  const CURLcode rc = curl_easy_perform(curl);
  response.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  response.error = Classify(rc);
  if (rc != CURLE_OK) response.error_text = error_buffer[0] ? error_buffer : curl_easy_strerror(rc);
  curl_slist_free_all(headers);
  GiveBack(curl);
  return response;
}

}  // namespace llamay::store
