// One HTTP request at a time per call, over libcurl: what the S3 backend sends its requests with.
// Signing is curl's own (CURLOPT_AWS_SIGV4, "aws:amz:<region>:s3"): there is no hand-written signer.
// Curl signs the headers the request carries (the caller adds x-amz-content-sha256, Content-MD5 and
// x-amz-security-token) with the key and secret given here, which never appear in a URL, a header we log
// or an error message. Redirects are not followed (a redirected signed request would be refused anyway).
// libcurl (libcurl.so.4) is loaded when the first client is made, not at process start; where it cannot be
// loaded, every Send fails with kFatal and says why.
//
// Thread-safety: Send may be called from many threads at once. Each call takes an idle curl easy handle
// from a pool (or makes one) and puts it back after, so connections are reused without being shared.
#ifndef LLAMAY_STORE_HTTP_CLIENT_H_
#define LLAMAY_STORE_HTTP_CLIENT_H_

#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace llamay::store {

struct HttpRequest {
  std::string method;                // "GET", "PUT", "HEAD" or "DELETE"
  std::string url;                   // already escaped
  std::vector<std::string> headers;  // "Name: value"
  std::span<const uint8_t> body;     // sent with PUT (Content-Length: body.size())
};

// How a request failed below HTTP, if it did.
enum class TransportError {
  kNone,     // an HTTP answer arrived whole
  kConnect,  // no connection (refused, DNS, unreachable)
  kTimeout,  // past the time limit
  kPartial,  // the body ended before its Content-Length (connection closed mid-body)
  kBroken,   // the connection failed otherwise (reset, nothing received, send or receive error)
  kFatal,    // retrying cannot help (bad URL, TLS certificate refused, out of memory)
};

struct HttpResponse {
  TransportError error = TransportError::kNone;
  std::string error_text;       // curl's explanation when error != kNone
  long status = 0;              // HTTP status (0 when none arrived)
  std::string etag;             // the ETag header, quotes removed
  int64_t content_length = -1;  // the Content-Length header; -1 when absent
  std::vector<uint8_t> body;    // (empty for HEAD)
  double seconds = 0;           // how long the request took
};

struct HttpSigning {
  std::string region;  // empty: requests go unsigned
  std::string access_key, secret_key;
};

class HttpClient {
 public:
  HttpClient(double timeout_seconds, HttpSigning signing);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  HttpResponse Send(const HttpRequest& request);

 private:
  void* TakeHandle();
  void GiveBack(void* handle);

  const long timeout_ms_;
  const HttpSigning signing_;
  const std::string sigv4_;  // "aws:amz:<region>:s3"
  std::mutex mu_;
  std::vector<void*> idle_;  // CURL* easy handles, guarded by mu_
};

}  // namespace llamay::store

#endif  // LLAMAY_STORE_HTTP_CLIENT_H_
