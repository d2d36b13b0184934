// The built-in page's files (embedded and --webui-dir), their headers, --no-webui, the API key and the
// Origin check, end to end on loopback.
#include <gtest/gtest.h>
#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/server.h"
#include "server/server_test_util.h"
#include "server/web_assets.h"
#include "server/webui.h"

namespace llamay::server {
namespace {

using json = nlohmann::json;

std::string Bytes(const unsigned char* data, size_t n) {
  return std::string(reinterpret_cast<const char*>(data), n);
}

const WebAsset* Asset(const std::string& path) {
  for (size_t i = 0; i < kWebAssetCount; ++i)
    if (path == kWebAssets[i].path) return &kWebAssets[i];
  return nullptr;
}

void ExpectPageHeaders(const httplib::Response& r) {
  EXPECT_EQ(r.get_header_value("Content-Security-Policy"), kWebUiCsp);
  EXPECT_EQ(r.get_header_value("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(r.get_header_value("Cache-Control"), "no-cache");
  EXPECT_FALSE(r.get_header_value("ETag").empty());
}

class WebUiTest : public ServerTest {
 protected:
  httplib::Result Get(const std::string& path, const httplib::Headers& headers = {}) {
    return client_->Get(path.c_str(), headers);
  }
};

TEST_F(WebUiTest, EveryEmbeddedFileIsServedWithItsTypeTagAndPolicy) {
  ASSERT_GT(kWebAssetCount, 0u) << "web/ embedded nothing";
  const WebAsset* index = Asset("/index.html");
  ASSERT_NE(index, nullptr) << "web/index.html is missing";
  client_->set_decompress(false);
  for (size_t i = 0; i < kWebAssetCount; ++i) {
    const WebAsset& a = kWebAssets[i];
    SCOPED_TRACE(a.path);
    EXPECT_EQ(std::string(a.mime), WebMimeType(a.path));  // the build script and the server agree
    auto r = Get(a.path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, Bytes(a.data, a.size));
    EXPECT_EQ(r->get_header_value("Content-Type"), a.mime);
    EXPECT_EQ(r->get_header_value("ETag"), a.etag);
    EXPECT_FALSE(r->has_header("Content-Encoding"));
    ExpectPageHeaders(*r);
  }
  // "/" is the index.
  auto root = Get("/");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->status, 200);
  EXPECT_EQ(root->body, Bytes(index->data, index->size));
  EXPECT_EQ(root->get_header_value("Content-Type"), "text/html; charset=utf-8");
  ExpectPageHeaders(*root);
  // What develops or documents the page is not part of it.
  EXPECT_EQ(Asset("/STATE_API.md"), nullptr);
  auto md = Get("/STATE_API.md");
  ASSERT_TRUE(md);
  EXPECT_EQ(md->status, 404);
  for (size_t i = 0; i < kWebAssetCount; ++i) {
    const std::string p = kWebAssets[i].path;
    EXPECT_EQ(p.find("/."), std::string::npos) << p;
    EXPECT_EQ(p.find("node_modules"), std::string::npos) << p;
  }
}

TEST_F(WebUiTest, IfNoneMatchGets304) {
  const WebAsset* index = Asset("/index.html");
  ASSERT_NE(index, nullptr);
  for (const std::string& tag : {std::string(index->etag), "W/" + std::string(index->etag),
                                 "\"other\", " + std::string(index->etag), std::string("*")}) {
    auto r = Get("/", {{"If-None-Match", tag}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 304) << tag;
    EXPECT_TRUE(r->body.empty());
    EXPECT_EQ(r->get_header_value("ETag"), index->etag);
  }
  auto r = Get("/", {{"If-None-Match", "\"something-else\""}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(WebUiTest, GzipIsSentWhereTheClientAcceptsIt) {
  const WebAsset* big = nullptr;
  for (size_t i = 0; i < kWebAssetCount && big == nullptr; ++i)
    if (kWebAssets[i].gzip != nullptr) big = &kWebAssets[i];
  ASSERT_NE(big, nullptr) << "no embedded file has a gzip copy";
  EXPECT_LT(big->gzip_size, big->size);
  client_->set_decompress(false);
  auto gz = Get(big->path, {{"Accept-Encoding", "gzip, deflate, br"}});
  ASSERT_TRUE(gz);
  EXPECT_EQ(gz->status, 200);
  EXPECT_EQ(gz->get_header_value("Content-Encoding"), "gzip");
  EXPECT_EQ(gz->body, Bytes(big->gzip, big->gzip_size));  // the build's copy, compressed once
  EXPECT_EQ(gz->get_header_value("ETag"), big->gzip_etag);
  EXPECT_NE(std::string(big->gzip_etag), std::string(big->etag));
  EXPECT_EQ(gz->get_header_value("Vary"), "Accept-Encoding");
  ExpectPageHeaders(*gz);
  // The client library inflates it back to the file.
  client_->set_decompress(true);
  auto inflated = Get(big->path, {{"Accept-Encoding", "gzip"}});
  ASSERT_TRUE(inflated);
  EXPECT_EQ(inflated->body, Bytes(big->data, big->size));
  // Refused or not offered: the bytes as they are.
  client_->set_decompress(false);
  for (const char* accept : {"gzip;q=0", "identity", "br"}) {
    auto r = Get(big->path, {{"Accept-Encoding", accept}});
    ASSERT_TRUE(r);
    EXPECT_FALSE(r->has_header("Content-Encoding")) << accept;
    EXPECT_EQ(r->body, Bytes(big->data, big->size)) << accept;
  }
  // The gzip copy's tag revalidates the gzip copy.
  auto again = Get(big->path, {{"Accept-Encoding", "gzip"}, {"If-None-Match", big->gzip_etag}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 304);
}

TEST_F(WebUiTest, NoWebUiLeavesTheRootAsBefore) {
  ServerOptions o;
  o.webui = false;
  Start(o);
  auto root = Get("/");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->status, 200);
  EXPECT_EQ(json::parse(root->body)["status"], "ok");
  EXPECT_FALSE(root->has_header("Content-Security-Policy"));
  auto file = Get("/index.html");
  ASSERT_TRUE(file);
  EXPECT_EQ(file->status, 404);
  EXPECT_TRUE(json::parse(file->body).contains("error"));
  // The state routes stay.
  EXPECT_EQ(Get("/v1/state")->status, 200);
}

TEST_F(WebUiTest, WebUiDirServesFilesFromDiskAsTheyAreNow) {
  const std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / "llamay_webui_dir";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "js");
  auto write = [&](const std::string& rel, const std::string& text) { std::ofstream(dir / rel) << text; };
  write("index.html", "<!doctype html><title>dev</title>");
  write("js/app.js", "export const x = 1;\n");
  write(".env", "SECRET=1");
  write("metrics", "not the metrics");  // a file may not take an API route's path
  ServerOptions o;
  o.webui_dir = dir.string();
  o.api_key = "k";
  Start(o);
  client_->set_bearer_token_auth("k");
  auto root = Get("/");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->status, 200);
  EXPECT_EQ(root->body, "<!doctype html><title>dev</title>");
  ExpectPageHeaders(*root);
  auto js = Get("/js/app.js");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->body, "export const x = 1;\n");
  EXPECT_EQ(js->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  const std::string tag = js->get_header_value("ETag");
  auto same = Get("/js/app.js", {{"If-None-Match", tag}});
  ASSERT_TRUE(same);
  EXPECT_EQ(same->status, 304);
  // An edit shows at the next request, under a new tag.
  write("js/app.js", "export const x = 2;\n");
  auto edited = Get("/js/app.js", {{"If-None-Match", tag}});
  ASSERT_TRUE(edited);
  EXPECT_EQ(edited->status, 200);
  EXPECT_EQ(edited->body, "export const x = 2;\n");
  EXPECT_NE(edited->get_header_value("ETag"), tag);
  // Nothing outside the page, no dotfiles, nothing missing.
  for (const char* bad : {"/.env", "/js/../.env", "/missing.js", "/js"}) {
    auto r = Get(bad);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404) << bad;
  }
  // The API's routes stay the API's, with the key.
  httplib::Client anonymous("127.0.0.1", server_->port());
  EXPECT_EQ(anonymous.Get("/metrics")->status, 401);
  EXPECT_EQ(anonymous.Get("/js/app.js")->status, 200);
  auto metrics = Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("llamay_kv_pages_live"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_F(WebUiTest, WithAnApiKeyThePageLoadsAndItsApiNeedsTheKey) {
  ServerOptions o;
  o.api_key = "sekrit";
  Start(o);
  auto root = Get("/");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->status, 200);
  for (size_t i = 0; i < kWebAssetCount; ++i)
    EXPECT_EQ(Get(kWebAssets[i].path)->status, 200) << kWebAssets[i].path;
  for (const char* path : {"/v1/state", "/v1/events", "/v1/contexts/ctx_1/pages", "/nope.js"}) {
    auto r = Get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << path;
  }
  const httplib::Headers key = {{"Authorization", "Bearer sekrit"}};
  EXPECT_EQ(Get("/v1/state", key)->status, 200);
  EXPECT_EQ(Get("/v1/contexts/ctx_1/pages", key)->status, 404);
}

TEST_F(WebUiTest, MutatingRoutesRefuseAnotherOrigin) {
  const std::string port = std::to_string(server_->port());
  auto post = [&](const std::string& origin) {
    httplib::Headers h;
    if (!origin.empty()) h.emplace("Origin", origin);
    return client_->Post("/v1/contexts", h, json{{"prompt", "hi"}}.dump(), "application/json");
  };
  const std::vector<std::string> refused = {"http://evil.example:" + port, "http://evil.example", "null",
                                            "http://localhost:" + std::to_string(server_->port() + 1),
                                            "https://127.0.0.1:1"};
  for (const std::string& bad : refused) {
    auto r = post(bad);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 403) << bad;
    EXPECT_EQ(json::parse(r->body)["error"]["code"], "forbidden_origin") << bad;
  }
  const std::vector<std::string> allowed = {"", "http://127.0.0.1:" + port, "http://localhost:" + port};
  for (const std::string& good : allowed) {
    auto r = post(good);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << good;
  }
  auto del = client_->Delete("/v1/contexts/ctx_1", {{"Origin", "http://evil.example:" + port}});
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 403);
  // Reads are not refused (the browser keeps a cross-origin page from reading the answer).
  EXPECT_EQ(Get("/v1/state", {{"Origin", "http://evil.example"}})->status, 200);
  EXPECT_EQ(client_->Delete("/v1/contexts/ctx_1", {{"Origin", "http://localhost:" + port}})->status, 200);
}

// Sends `parts` one after another on one new loopback connection, each once the server has been quiet for
// kQuietMs (httplib reads a request's headers in one buffer, which the next request does not share: a part
// sent with the headers before it could be lost), and returns everything the server answered.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr int kQuietMs = 750;  // a sanitizer build's server answers many times slower
#else
constexpr int kQuietMs = 150;
#endif

std::string Exchange(int port, const std::vector<std::string>& parts) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  std::string got;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& bytes = parts[i];
    if (::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(bytes.size())) break;
    // An answer late for its part is still read after the next one; after the last, wait longer.
    const int quiet = i + 1 == parts.size() ? 2 * kQuietMs : kQuietMs;
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, quiet) <= 0) break;
      char buf[4096];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return got;
}

std::vector<int> Statuses(const std::string& answers) {
  std::vector<int> out;
  for (size_t at = answers.find("HTTP/1.1 "); at != std::string::npos; at = answers.find("HTTP/1.1 ", at + 1))
    out.push_back(std::atoi(answers.c_str() + at + 9));
  return out;
}

// A refused request's body is read and dropped, never parsed as the connection's next request: a page
// elsewhere could otherwise have a browser POST a body that is itself a DELETE past the Origin check (found
// by fuzz/route_fuzz.cc). The request after it on the same connection is answered as itself.
TEST_F(WebUiTest, ARefusedRequestsBodyIsNeverTakenForAnotherRequest) {
  auto created = client_->Post("/v1/contexts", json{{"prompt", "keep me"}}.dump(), "application/json");
  ASSERT_TRUE(created);
  const std::string id = json::parse(created->body)["id"];
  const std::string smuggled = "DELETE /v1/contexts/" + id + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  const std::string health = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  // The headers, then the body once the server has answered them (a browser's request may arrive so), then
  // a request of the client's own.
  auto refused = [&](const std::string& method, const std::string& path, bool chunked) {
    std::string head = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://evil.example\r\n"
                       "Content-Type: text/plain\r\n";
    if (chunked) {
      char size[16];
      std::snprintf(size, sizeof size, "%zx", smuggled.size());
      return std::vector<std::string>{head + "Transfer-Encoding: chunked\r\n\r\n",
                                      size + std::string("\r\n") + smuggled + "\r\n0\r\n\r\n", health};
    }
    return std::vector<std::string>{head + "Content-Length: " + std::to_string(smuggled.size()) + "\r\n\r\n",
                                    smuggled, health};
  };
  for (const std::string method : {"POST", "PUT", "DELETE"})
    for (const std::string& path : std::vector<std::string>{"/v1/completions", "/v1/contexts/" + id})
      for (bool chunked : {false, true}) {
        SCOPED_TRACE(method + " " + path + (chunked ? " chunked" : ""));
        const std::string answers = Exchange(server_->port(), refused(method, path, chunked));
        EXPECT_EQ(Statuses(answers), (std::vector<int>{403, 200})) << answers;
        EXPECT_NE(answers.find("forbidden_origin"), std::string::npos);
      }
  // A body the library cannot parse (multipart without its boundary) while it reads it: still the refusal.
  const std::string multipart = Exchange(
      server_->port(), {"POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://evil.example\r\n"
                        "Content-Type: multipart/form-data; boundary=llamay\r\nContent-Length: 1\r\n\r\n:",
                        health});
  EXPECT_EQ(Statuses(multipart), (std::vector<int>{403, 200})) << multipart;
  auto list = client_->Get("/v1/contexts");
  ASSERT_TRUE(list);
  EXPECT_NE(list->body.find(id), std::string::npos) << "the smuggled DELETE ran";
  // A chunked DELETE from where the Origin is allowed: refused too (no DELETE takes a body), its body read.
  const std::string answers = Exchange(
      server_->port(), {"DELETE /v1/contexts/" + id + " HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                        "2\r\n{}\r\n0\r\n\r\n", health});
  EXPECT_EQ(Statuses(answers), (std::vector<int>{400, 200})) << answers;
  EXPECT_NE(client_->Get("/v1/contexts")->body.find(id), std::string::npos);
  // A client that names the refusals' own route gets a 404.
  EXPECT_EQ(Statuses(Exchange(server_->port(), {"POST /%00refused HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"})),
            (std::vector<int>{404}));
}

// Fork takes no body; one that comes is read and dropped, not taken for the connection's next request
// (found by fuzz/route_fuzz.cc).
TEST_F(WebUiTest, AForksUnwantedBodyIsReadAndDropped) {
  auto created = client_->Post("/v1/contexts", json{{"prompt", "fork me"}}.dump(), "application/json");
  ASSERT_TRUE(created);
  const std::string id = json::parse(created->body)["id"];
  const std::string body = "DELETE /v1/contexts/" + id + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  const std::string answers = Exchange(
      server_->port(), {"POST /v1/contexts/" + id + "/fork HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n",
                        body, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"});
  EXPECT_EQ(Statuses(answers), (std::vector<int>{200, 200})) << answers;
  EXPECT_NE(client_->Get("/v1/contexts")->body.find("\"" + id + "\""), std::string::npos);
}

TEST_F(WebUiTest, ARequestWithoutTheKeyHasItsBodyReadToo) {
  ServerOptions o;
  o.api_key = "sekrit";
  Start(o);
  const std::string body = "GET /v1/state HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sekrit\r\n\r\n";
  const std::string answers = Exchange(
      server_->port(), {"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
                        "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n",
                        body, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"});
  EXPECT_EQ(Statuses(answers), (std::vector<int>{401, 200})) << answers;
}

TEST(OriginAllowed, LoopbackWildcardAndIpv6) {
  auto req = [](const std::string& origin, const std::string& host_header = "",
                const std::string& local = "127.0.0.1") {
    httplib::Request r;
    r.method = "POST";
    r.headers.emplace("Origin", origin);
    if (!host_header.empty()) r.headers.emplace("Host", host_header);
    r.local_addr = local;
    return r;
  };
  EXPECT_TRUE(OriginAllowed(req("http://127.0.0.1:8080"), "127.0.0.1", 8080));
  EXPECT_TRUE(OriginAllowed(req("http://LOCALHOST:8080"), "127.0.0.1", 8080));
  EXPECT_TRUE(OriginAllowed(req("http://[::1]:8080"), "127.0.0.1", 8080));
  EXPECT_TRUE(OriginAllowed(req("http://localhost:8080"), "localhost", 8080));
  EXPECT_FALSE(OriginAllowed(req("http://localhost:8081"), "127.0.0.1", 8080));
  EXPECT_FALSE(OriginAllowed(req("http://127.0.0.1"), "127.0.0.1", 8080));
  EXPECT_TRUE(OriginAllowed(req("http://127.0.0.1"), "127.0.0.1", 80));
  EXPECT_FALSE(OriginAllowed(req("http://127.0.0.1:8080/x"), "127.0.0.1", 8080));
  EXPECT_FALSE(OriginAllowed(req("file://"), "127.0.0.1", 8080));
  // Listening on one LAN address: that address, not loopback names.
  EXPECT_TRUE(OriginAllowed(req("http://10.0.0.5:8080", "", "10.0.0.5"), "10.0.0.5", 8080));
  EXPECT_FALSE(OriginAllowed(req("http://localhost:8080", "", "10.0.0.5"), "10.0.0.5", 8080));
  EXPECT_FALSE(OriginAllowed(req("http://gpu-box:8080", "gpu-box:8080", "10.0.0.5"), "10.0.0.5", 8080));
  // Listening everywhere: the address the connection came to, loopback, and the name the browser used.
  EXPECT_TRUE(OriginAllowed(req("http://10.0.0.5:8080", "", "10.0.0.5"), "0.0.0.0", 8080));
  EXPECT_TRUE(OriginAllowed(req("http://localhost:8080"), "0.0.0.0", 8080));
  EXPECT_TRUE(OriginAllowed(req("http://gpu-box:8080", "gpu-box:8080", "10.0.0.5"), "0.0.0.0", 8080));
  EXPECT_FALSE(OriginAllowed(req("http://evil.example:8080", "gpu-box:8080", "10.0.0.5"), "0.0.0.0", 8080));
  // Safe methods and requests without Origin always pass.
  httplib::Request get = req("http://evil.example:8080");
  get.method = "GET";
  EXPECT_TRUE(OriginAllowed(get, "127.0.0.1", 8080));
  httplib::Request plain;
  plain.method = "DELETE";
  EXPECT_TRUE(OriginAllowed(plain, "127.0.0.1", 8080));
}

}  // namespace
}  // namespace llamay::server
