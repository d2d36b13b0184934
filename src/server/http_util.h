// Small helpers shared by the route files: OpenAI error objects, JSON bodies, status mapping.
#ifndef LLAMAY_SERVER_HTTP_UTIL_H_
#define LLAMAY_SERVER_HTTP_UTIL_H_

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace llamay::server {

using json = nlohmann::json;

// Status::detail() values of the server's own errors that SendStatus answers with their own code:
// the model's chat template is broken (500 chat_template_error), or it refused the request's messages
// (400 chat_template_rejected). See chat_prompt.h.
inline constexpr int kDetailChatTemplateFault = 2001;
inline constexpr int kDetailChatTemplateRejected = 2002;
// A request cancelled by the server (its client left, or the server is shutting down): 503
// request_cancelled, Retry-After: 1.
inline constexpr int kDetailCancelled = 2003;
// Status::detail() of a request that failed in the snapshot store (--share-sessions: the session's newest
// generation could not be read): 502 `store_error` (`store_object_damaged` for damaged data) with
// Retry-After, not the 429 of a busy server.
inline constexpr int kDetailStoreError = 2004;
Status CancelledStatus();

// The HTTP status a Status maps to: bad input 400, unknown things 404, busy or wrong-model 409,
// unsupported 501 -> 400 (it is the request that asks for it), memory 503, anything else 500; the
// details above first.
int HttpStatusFor(const Status& s);

// Serialises a response. Generated text and token pieces can hold bytes that are not UTF-8 (a token that is
// part of a character): those become U+FFFD instead of an exception.
std::string Dump(const json& j);

// Writes an OpenAI error object: {"error": {"message", "type", "param", "code"}}.
void SendError(httplib::Response& res, int http_status, const std::string& message,
               const std::string& code = "", const std::string& param = "");
void SendStatus(httplib::Response& res, const Status& s);
void SendJson(httplib::Response& res, const json& body, int http_status = 200);

// Reads a POST body through httplib's content reader, whatever its Content-Type (curl -d sends
// application/x-www-form-urlencoded, which httplib would otherwise parse and cap at 8 KiB). An absent body
// is empty. Over `limit` bytes: sends 413 and returns false.
bool ReadBody(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader,
              size_t limit, std::string* out);
// The same, handing each piece to `take` as it arrives instead of keeping the body (uploads that are
// consumed as they stream in). `take` returning false drops the rest of the body (read and discarded, as
// an oversized one is, so the client gets the answer instead of a reset). Returns false after a 413.
bool ReadBodyPieces(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader,
                    size_t limit, const std::function<bool(const char* data, size_t n)>& take);

// Registers a POST route whose handler gets the raw body (see ReadBody).
using BodyHandler = std::function<void(const httplib::Request&, httplib::Response&, const std::string& body)>;
void PostWithBody(httplib::Server& http, const std::string& pattern, size_t limit, BodyHandler handler);

// A JSON text with every \u escape of a lone UTF-16 surrogate (valid JSON, which nlohmann::json refuses)
// replaced by \uFFFD; everything else unchanged.
std::string ReplaceLoneSurrogates(const std::string& body);
// Parses a JSON object body (lone surrogate escapes read as U+FFFD); on failure sends a 400 and returns
// false.
bool ParseBody(const std::string& body, httplib::Response& res, json* out);

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_HTTP_UTIL_H_
