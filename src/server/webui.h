// The built-in page (web/, docs/server.md "The built-in page"): its files served at / and below, from the
// copy embedded at build time (web_assets.h) or, with --webui-dir, from a directory read at each request.
//
// Each file is answered with an ETag (a request whose If-None-Match names it gets 304 and no body),
// Cache-Control: no-cache (the browser revalidates, so a new build shows at once), a Content-Security-
// Policy that lets the page load only its own files and talk only to this server (no inline script),
// X-Content-Type-Options: nosniff, and its gzip copy when the client accepts gzip (embedded files only).
// Files are read without the API key; the page asks for the key and sends it on its API calls.
//
// OriginAllowed is the check every mutating route gets (server.cc): a browser names the page that sent a
// request in Origin, and only this server's own pages may POST or DELETE.
#ifndef LLAMAY_SERVER_WEBUI_H_
#define LLAMAY_SERVER_WEBUI_H_

#include <httplib.h>

#include <string>
#include <string_view>

#include "server/server.h"

namespace llamay::server {

// The policy every file of the page is served with.
inline constexpr const char* kWebUiCsp =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src "
    "'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// Registers GET for the page's files (the path "/" is index.html). Call after every other route: a GET no
// other route takes comes here, and one that names no file is the usual 404.
void RegisterWebUi(Server& server, httplib::Server& http);

// True when `req` is a GET (or HEAD) of one of the page's files, which need no API key.
bool IsWebUiFile(Server& server, const httplib::Request& req);

// False when `req` is a mutating request (not GET, HEAD or OPTIONS) whose Origin header names another
// origin than this server's: scheme http(s), the port `port`, and a host that is the one it listens on
// (`host`), the address the connection came in on, or, where it listens on a loopback address, any
// loopback name (127.0.0.1 and localhost are the same server); where it listens on every address
// (0.0.0.0, ::) also the Host the request was sent to. Requests without Origin (curl, SDKs) pass.
bool OriginAllowed(const httplib::Request& req, const std::string& host, int port);

// The Content-Type of a file by its extension (the same table embed_web.cmake applies).
std::string_view WebMimeType(std::string_view path);

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_WEBUI_H_
