#include "server/http_util.h"

#include "engine/engine.h"

#include <cstdlib>

namespace llamay::server {

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

Status CancelledStatus() {
  return Status(StatusCode::kUnavailable, "the request was cancelled: its client left, or the server is shutting down",
                kDetailCancelled);
}

int HttpStatusFor(const Status& s) {
  if (s.detail() == kDetailChatTemplateFault) return 500;
  if (s.detail() == kDetailCancelled) return 503;
  if (s.detail() == kDetailChatTemplateRejected) return 400;
  if (s.detail() == kDetailStoreError) return 502;
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kUnimplemented:
    case StatusCode::kDataLoss: return 400;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kFailedPrecondition: return 409;
    case StatusCode::kResourceExhausted: return 503;
    case StatusCode::kUnavailable: return 429;
    default: return 500;
  }
}

void SendError(httplib::Response& res, int http_status, const std::string& message, const std::string& code,
               const std::string& param) {
  const char* type = http_status == 401   ? "authentication_error"
                     : http_status == 404 ? "not_found_error"
                     : http_status == 429 ? "rate_limit_error"
                     : http_status >= 500 ? "server_error"
                                          : "invalid_request_error";
  json err = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!code.empty()) err["code"] = code;
  if (!param.empty()) err["param"] = param;
  res.status = http_status;
  res.set_content(Dump(json{{"error", err}}), "application/json");
}

void SendStatus(httplib::Response& res, const Status& s) {
  const int status = HttpStatusFor(s);
  // Busy (a full queue) or out of KV memory: the same request may succeed shortly; OpenAI clients retry
  // these statuses and read Retry-After.
  if (status == 429 || status == 503 || status == 502) res.set_header("Retry-After", "1");
  const char* code = s.detail() == kDetailChatTemplateFault      ? "chat_template_error"
                     : s.detail() == kDetailChatTemplateRejected ? "chat_template_rejected"
                     : s.detail() == kDetailCancelled            ? "request_cancelled"
                     : s.detail() == engine::kDetailContextLength ? "context_length_exceeded"
                     : s.detail() == kDetailStoreError   ? (s.code() == StatusCode::kDataLoss ? "store_object_damaged"
                                                                                                  : "store_error")
                     : status == 429                             ? "server_busy"
                     : status == 503                             ? "kv_memory_exhausted"
                                                                 : "";
  SendError(res, status, s.message(), code, s.detail() == kDetailChatTemplateRejected ? "messages" : "");
}

void SendJson(httplib::Response& res, const json& body, int http_status) {
  res.status = http_status;
  res.set_content(Dump(body), "application/json");
}

bool ReadBodyPieces(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader,
                    size_t limit, const std::function<bool(const char* data, size_t n)>& take) {
  const bool chunked = req.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos;
  if (!req.has_header("Content-Length") && !chunked) return true;  // no body
  // An oversized body is read and dropped (up to 64 MiB past the limit) so the client, still sending,
  // gets the 413 instead of a reset connection; beyond that the connection is closed unread.
  constexpr size_t kDrain = size_t{64} << 20;
  const uint64_t declared =
      req.has_header("Content-Length") ? std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10) : 0;
  bool too_big = declared > limit, taking = true;
  size_t seen = 0;
  if (!too_big || declared <= limit + kDrain) {
    reader([&](const char* data, size_t n) {
      seen += n;
      if (seen > limit) {
        too_big = true;
        return seen <= limit + kDrain;
      }
      if (!too_big && taking) taking = take(data, n);
      return true;
    });
  }
  if (too_big) {
    SendError(res, 413, "the request body exceeds the limit of " + std::to_string(limit) + " bytes");
    return false;
  }
  return true;
}

bool ReadBody(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader,
              size_t limit, std::string* out) {
  if (req.has_header("Content-Length")) {
    // One allocation of the declared size (within the limit) instead of doubling as pieces arrive.
    const uint64_t declared = std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10);
    if (declared <= limit) out->reserve(declared);
  }
  const bool ok = ReadBodyPieces(req, res, reader, limit, [out](const char* data, size_t n) {
    out->append(data, n);
    return true;
  });
  if (!ok) out->clear();
  return ok;
}

void PostWithBody(httplib::Server& http, const std::string& pattern, size_t limit, BodyHandler handler) {
  http.Post(pattern, [limit, handler](const httplib::Request& req, httplib::Response& res,
                                      const httplib::ContentReader& reader) {
    std::string body;
    if (!ReadBody(req, res, reader, limit, &body)) return;
    handler(req, res, body);
  });
}

std::string ReplaceLoneSurrogates(const std::string& body) {
  auto hex4 = [&](size_t at, uint32_t* v) {
    if (at + 4 > body.size()) return false;
    *v = 0;
    for (size_t k = at; k < at + 4; ++k) {
      const char c = body[k];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return false;
      *v = *v * 16 + static_cast<uint32_t>(d);
    }
    return true;
  };
  std::string out;
  out.reserve(body.size());
  bool in_string = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (!in_string) {
      if (c == '"') in_string = true;
      out += c;
      continue;
    }
    if (c == '"') {
      in_string = false;
      out += c;
      continue;
    }
    if (c != '\\' || i + 1 >= body.size()) {
      out += c;
      continue;
    }
    uint32_t u = 0;
    if (body[i + 1] != 'u' || !hex4(i + 2, &u)) {  // another escape: copied whole
      out += c;
      out += body[i + 1];
      ++i;
      continue;
    }
    uint32_t low = 0;
    const bool high = u >= 0xD800 && u <= 0xDBFF;
    const bool paired = high && body.compare(i + 6, 2, "\\u") == 0 && hex4(i + 8, &low) &&
                        low >= 0xDC00 && low <= 0xDFFF;
    if (paired) {
      out.append(body, i, 12);
      i += 11;
    } else if (u >= 0xD800 && u <= 0xDFFF) {
      out += "\\uFFFD";
      i += 5;
    } else {
      out.append(body, i, 6);
      i += 5;
    }
  }
  return out;
}

bool ParseBody(const std::string& body, httplib::Response& res, json* out) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  // JSON allows a \u escape of a lone UTF-16 surrogate, which the parser refuses: such escapes become
  // U+FFFD (only on this slow path; a body without them never comes here twice).
  if (j.is_discarded() && body.find("\\u") != std::string::npos)
    j = json::parse(ReplaceLoneSurrogates(body), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    SendError(res, 400, "the request body is not valid JSON");
    return false;
  }
  if (!j.is_object()) {
    SendError(res, 400, "the request body must be a JSON object");
    return false;
  }
  *out = std::move(j);
  return true;
}

}  // namespace llamay::server
