#include "server/webui.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "base/crc32c.h"
#include "base/file.h"
#include "server/http_util.h"
#include "server/web_assets.h"

namespace llamay::server {
namespace {

// One file as it is answered: bytes that stay alive while the response is written (the embedded copy,
// or a shared buffer read from disk).
struct StaticFile {
  std::string_view mime;
  std::shared_ptr<const std::vector<uint8_t>> owned;  // --webui-dir: the file read from disk
  const unsigned char* data = nullptr;
  size_t size = 0;
  const unsigned char* gzip = nullptr;
  size_t gzip_size = 0;
  std::string etag, gzip_etag;
};

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Calls f(item) for each comma-separated item of a header value, trimmed.
template <typename F>
void ForEachItem(std::string_view v, F f) {
  while (!v.empty()) {
    const size_t comma = v.find(',');
    f(Trim(v.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
}

// Accept-Encoding names gzip (or *) without q=0.
bool AcceptsGzip(const httplib::Request& req) {
  bool yes = false;
  ForEachItem(req.get_header_value("Accept-Encoding"), [&](std::string_view item) {
    const size_t semi = item.find(';');
    const std::string coding = Lower(Trim(item.substr(0, semi)));
    if (coding != "gzip" && coding != "*") return;
    std::string params = semi == std::string_view::npos ? "" : Lower(item.substr(semi + 1));
    params.erase(std::remove(params.begin(), params.end(), ' '), params.end());
    const bool refused =
        params.rfind("q=0", 0) == 0 && params.find_first_not_of("q=0.", 0) == std::string::npos;
    if (!refused) yes = true;
  });
  return yes;
}

// If-None-Match names `etag` (weak comparison, as RFC 9110 asks for it) or is "*".
bool NotModified(const httplib::Request& req, const std::string& etag) {
  if (!req.has_header("If-None-Match")) return false;
  bool match = false;
  ForEachItem(req.get_header_value("If-None-Match"), [&](std::string_view tag) {
    if (tag.rfind("W/", 0) == 0) tag.remove_prefix(2);
    if (tag == "*" || tag == etag) match = true;
  });
  return match;
}

void Send(const httplib::Request& req, httplib::Response& res, const StaticFile& f) {
  const bool gz = f.gzip != nullptr && AcceptsGzip(req);
  const std::string& etag = gz ? f.gzip_etag : f.etag;
  res.set_header("ETag", etag);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("Vary", "Accept-Encoding");
  res.set_header("Content-Security-Policy", kWebUiCsp);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("X-Frame-Options", "DENY");
  if (NotModified(req, etag)) {
    res.status = 304;
    return;
  }
  const unsigned char* data = gz ? f.gzip : f.data;
  const size_t size = gz ? f.gzip_size : f.size;
  if (size == 0) return res.set_content("", std::string(f.mime));
  if (gz) res.set_header("Content-Encoding", "gzip");
  // A provider of known length: the HTTP library sends it as it is (it compresses only bodies set whole
  // and chunked streams), so the gzip copy is never compressed twice and the identity bytes stay identity.
  std::shared_ptr<const std::vector<uint8_t>> keep = f.owned;
  res.set_content_provider(size, std::string(f.mime),
                           [data, keep](size_t offset, size_t length, httplib::DataSink& sink) {
                             return sink.write(reinterpret_cast<const char*>(data) + offset, length);
                           });
}

// The URL path of a file: "/" is the index.
std::string FilePath(const std::string& url_path) { return url_path == "/" ? "/index.html" : url_path; }

const WebAsset* FindEmbedded(const std::string& url_path) {
  const std::string path = FilePath(url_path);
  for (size_t i = 0; i < kWebAssetCount; ++i)
    if (path == kWebAssets[i].path) return &kWebAssets[i];
  return nullptr;
}

// The file under `dir` that `url_path` names; none for a path that would leave `dir` or names a dotfile.
std::optional<std::filesystem::path> DiskPath(const std::string& dir, const std::string& url_path) {
  const std::string path = FilePath(url_path);
  const std::filesystem::path rel = std::filesystem::path(path).relative_path();
  for (const auto& part : rel)
    if (part.empty() || part.string()[0] == '.') return std::nullopt;  // "..", ".git", ".env"
  std::error_code ec;
  std::filesystem::path full = std::filesystem::path(dir) / rel;
  if (!std::filesystem::is_regular_file(full, ec)) return std::nullopt;
  return full;
}

std::optional<StaticFile> Lookup(Server& server, const std::string& url_path) {
  const std::string& dir = server.options().webui_dir;
  if (dir.empty()) {
    const WebAsset* a = FindEmbedded(url_path);
    if (a == nullptr) return std::nullopt;
    StaticFile f;
    f.mime = a->mime;
    f.data = a->data;
    f.size = a->size;
    f.gzip = a->gzip;
    f.gzip_size = a->gzip_size;
    f.etag = a->etag;
    f.gzip_etag = a->gzip_etag;
    return f;
  }
  // --webui-dir: read now, so an edit shows at the next reload; the tag is the bytes' checksum.
  const std::optional<std::filesystem::path> full = DiskPath(dir, url_path);
  if (!full) return std::nullopt;
  auto bytes = ReadFile(full->string());
  if (!bytes.ok()) return std::nullopt;
  StaticFile f;
  f.mime = WebMimeType(full->filename().string());
  f.owned = std::make_shared<const std::vector<uint8_t>>(std::move(*bytes));
  f.data = f.owned->data();
  f.size = f.owned->size();
  char tag[32];
  std::snprintf(tag, sizeof tag, "\"%08x-%zx\"", Crc32c(f.data, f.size), f.size);
  f.etag = tag;
  return f;
}

bool IsReadMethod(const std::string& method) { return method == "GET" || method == "HEAD"; }

// Paths the API's routes own: never a file of the page, whatever --webui-dir holds.
bool ApiPath(const std::string& path) {
  return path.rfind("/v1/", 0) == 0 || path.rfind("/api/", 0) == 0 || path == "/metrics" || path == "/health";
}

}  // namespace

std::string_view WebMimeType(std::string_view path) {
  const size_t dot = path.rfind('.');
  const std::string ext = dot == std::string_view::npos ? "" : Lower(path.substr(dot + 1));
  if (ext == "html" || ext == "htm") return "text/html; charset=utf-8";
  if (ext == "js" || ext == "mjs") return "text/javascript; charset=utf-8";
  if (ext == "css") return "text/css; charset=utf-8";
  if (ext == "svg") return "image/svg+xml";
  if (ext == "json" || ext == "map") return "application/json";
  if (ext == "txt") return "text/plain; charset=utf-8";
  if (ext == "png") return "image/png";
  if (ext == "ico") return "image/x-icon";
  if (ext == "woff2") return "font/woff2";
  return "application/octet-stream";
}

bool IsWebUiFile(Server& server, const httplib::Request& req) {
  if (!server.options().webui || !IsReadMethod(req.method) || ApiPath(req.path)) return false;
  if (server.options().webui_dir.empty()) return FindEmbedded(req.path) != nullptr;
  return DiskPath(server.options().webui_dir, req.path).has_value();
}

void RegisterWebUi(Server& server, httplib::Server& http) {
  if (!server.options().webui) return;
  Server* s = &server;
  http.Get(R"(/.*)", [s](const httplib::Request& req, httplib::Response& res) {
    if (ApiPath(req.path)) {
      res.status = 404;  // the error handler writes the usual "no route" object
      return;
    }
    std::optional<StaticFile> f = Lookup(*s, req.path);
    if (!f) {
      res.status = 404;
      return;
    }
    Send(req, res, *f);
  });
}

bool OriginAllowed(const httplib::Request& req, const std::string& host, int port) {
  if (!req.has_header("Origin")) return true;
  if (req.method == "GET" || req.method == "HEAD" || req.method == "OPTIONS") return true;
  // scheme "://" host [":" port]; a host in brackets is IPv6.
  const std::string origin = Lower(req.get_header_value("Origin"));
  const size_t sep = origin.find("://");
  if (sep == std::string::npos) return false;  // "null" (a sandboxed or file: page) and anything else
  const std::string scheme = origin.substr(0, sep);
  if (scheme != "http" && scheme != "https") return false;
  std::string rest = origin.substr(sep + 3);
  if (rest.find('/') != std::string::npos) return false;
  int origin_port = scheme == "https" ? 443 : 80;
  std::string origin_host = rest;
  const size_t close = rest.rfind(']');
  const size_t colon = rest.rfind(':');
  if (colon != std::string::npos && (close == std::string::npos || colon > close)) {
    origin_host = rest.substr(0, colon);
    const std::string p = rest.substr(colon + 1);
    if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos) return false;
    origin_port = std::stoi(p);
  }
  if (origin_host.size() >= 2 && origin_host.front() == '[' && origin_host.back() == ']')
    origin_host = origin_host.substr(1, origin_host.size() - 2);
  if (origin_port != port) return false;
  auto loopback = [](const std::string& h) {
    return h == "localhost" || h == "::1" || h.rfind("127.", 0) == 0 ||
           (h.size() > 10 && h.compare(h.size() - 10, 10, ".localhost") == 0);
  };
  const std::string own = Lower(host);
  const bool wildcard = own.empty() || own == "0.0.0.0" || own == "::";
  if (origin_host == own || origin_host == Lower(req.local_addr)) return true;
  if (loopback(origin_host) && (loopback(own) || wildcard)) return true;
  if (wildcard) {
    // Listening everywhere: the name the browser used for this server is its own.
    std::string sent = Lower(req.get_header_value("Host"));
    const size_t c = sent.rfind(':'), b = sent.rfind(']');
    if (c != std::string::npos && (b == std::string::npos || c > b)) sent = sent.substr(0, c);
    if (sent.size() >= 2 && sent.front() == '[' && sent.back() == ']') sent = sent.substr(1, sent.size() - 2);
    if (!sent.empty() && origin_host == sent) return true;
  }
  return false;
}

}  // namespace llamay::server
