#include "store/s3_xml.h"

#include <cstdint>
#include <optional>
#include <utility>

namespace llamay::store {
namespace {

Status BadResponse(const std::string& why) {
  return StoreStatus(StatusCode::kInternal, StoreError::kBadResponse, "unreadable S3 response: " + why);
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The code point of a numeric reference body ("#65", "#x41"), or nothing.
std::optional<uint32_t> NumericReference(std::string_view ref) {
  if (ref.size() < 2 || ref[0] != '#') return std::nullopt;
  const bool hex = ref[1] == 'x' || ref[1] == 'X';
  const std::string_view digits = ref.substr(hex ? 2 : 1);
  if (digits.empty() || digits.size() > 8) return std::nullopt;
  uint32_t cp = 0;
  for (char c : digits) {
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (hex && c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else if (hex && c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else
      return std::nullopt;
    cp = cp * (hex ? 16 : 10) + static_cast<uint32_t>(d);
  }
  if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return std::nullopt;
  return cp;
}

// One step of a document: a start tag, an end tag (a self-closing tag gives both), text, or the end.
struct XmlEvent {
  enum Kind { kStart, kEnd, kText, kDone } kind = kDone;
  std::string_view name;  // local name (namespace prefix dropped) for kStart / kEnd
  std::string text;       // unescaped, for kText
};

// Pulls events out of a document, skipping the prolog, comments, DOCTYPE and attributes.
class XmlReader {
 public:
  explicit XmlReader(std::string_view doc) : doc_(doc) {}

  Result<XmlEvent> Next() {
    if (pending_end_) {
      pending_end_ = false;
      return XmlEvent{XmlEvent::kEnd, pending_name_, {}};
    }
    while (pos_ < doc_.size()) {
      if (doc_[pos_] != '<') {
        const size_t lt = doc_.find('<', pos_);
        const std::string_view raw = doc_.substr(pos_, lt == std::string_view::npos ? lt : lt - pos_);
        pos_ = lt == std::string_view::npos ? doc_.size() : lt;
        return XmlEvent{XmlEvent::kText, {}, XmlUnescape(raw)};
      }
      const std::string_view rest = doc_.substr(pos_);
      if (rest.starts_with("<?")) {
        LLAMAY_RETURN_IF_ERROR(SkipPast("?>", "processing instruction"));
      } else if (rest.starts_with("<!--")) {
        LLAMAY_RETURN_IF_ERROR(SkipPast("-->", "comment"));
      } else if (rest.starts_with("<![CDATA[")) {
        const size_t end = doc_.find("]]>", pos_ + 9);
        if (end == std::string_view::npos) return BadResponse("unterminated CDATA section");
        XmlEvent e{XmlEvent::kText, {}, std::string(doc_.substr(pos_ + 9, end - pos_ - 9))};
        pos_ = end + 3;
        return e;
      } else if (rest.starts_with("<!")) {
        LLAMAY_RETURN_IF_ERROR(SkipPast(">", "declaration"));
      } else {
        return Tag();
      }
    }
    return XmlEvent{};
  }

 private:
  Status SkipPast(std::string_view end, const char* what) {
    const size_t at = doc_.find(end, pos_);
    if (at == std::string_view::npos) return BadResponse(std::string("unterminated ") + what);
    pos_ = at + end.size();
    return Status::Ok();
  }

  Result<XmlEvent> Tag() {
    const size_t gt = doc_.find('>', pos_);
    if (gt == std::string_view::npos) return BadResponse("unterminated tag");
    std::string_view inside = doc_.substr(pos_ + 1, gt - pos_ - 1);
    pos_ = gt + 1;
    const bool closing = !inside.empty() && inside[0] == '/';
    if (closing) inside.remove_prefix(1);
    const bool self_closing = !closing && !inside.empty() && inside.back() == '/';
    if (self_closing) inside.remove_suffix(1);
    const size_t name_end = inside.find_first_of(" \t\r\n");
    std::string_view name = inside.substr(0, name_end);
    if (const size_t colon = name.find(':'); colon != std::string_view::npos) name = name.substr(colon + 1);
    if (name.empty()) return BadResponse("a tag without a name");
    if (self_closing) {
      pending_end_ = true;
      pending_name_ = name;
    }
    return XmlEvent{closing ? XmlEvent::kEnd : XmlEvent::kStart, name, {}};
  }

  std::string_view doc_;
  size_t pos_ = 0;
  bool pending_end_ = false;
  std::string_view pending_name_;
};

// Walks a document, tracking the open elements and the text directly inside the innermost one, and
// calls on_end(path, text) as each element closes (path: the open elements, the closing one last).
template <typename OnEnd>
Status Walk(std::string_view doc, OnEnd on_end) {
  XmlReader reader(doc);
  std::vector<std::string_view> path;
  std::string text;
  while (true) {
    LLAMAY_ASSIGN_OR_RETURN(XmlEvent e, reader.Next());
    switch (e.kind) {
      case XmlEvent::kDone:
        if (!path.empty()) return BadResponse("document ends inside <" + std::string(path.back()) + ">");
        return Status::Ok();
      case XmlEvent::kText:
        text += e.text;
        break;
      case XmlEvent::kStart:
        path.push_back(e.name);
        text.clear();
        break;
      case XmlEvent::kEnd:
        if (path.empty() || path.back() != e.name) {
          return BadResponse("unexpected </" + std::string(e.name) + ">");
        }
        LLAMAY_RETURN_IF_ERROR(on_end(path, text));
        path.pop_back();
        text.clear();
        break;
    }
  }
}

std::string_view Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

}  // namespace

std::string XmlUnescape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const size_t amp = text.find('&', i);
    if (amp == std::string_view::npos) {
      out.append(text.substr(i));
      break;
    }
    out.append(text.substr(i, amp - i));
    const size_t semi = text.find(';', amp);
    const std::string_view ref = semi == std::string_view::npos || semi - amp > 12
                                     ? std::string_view()
                                     : text.substr(amp + 1, semi - amp - 1);
    static constexpr std::pair<std::string_view, char> kNamed[] = {
        {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
    bool known = false;
    for (const auto& [name, c] : kNamed) {
      if (ref == name) {
        out += c;
        known = true;
      }
    }
    if (!known) {
      if (auto cp = NumericReference(ref)) {
        AppendUtf8(*cp, &out);
      } else {
        out += '&';  // not an entity: kept as written
        i = amp + 1;
        continue;
      }
    }
    i = semi + 1;
  }
  return out;
}

Result<ListPage> ParseListObjectsV2(std::string_view xml) {
  ListPage page;
  bool saw_root = false, saw_truncated = false;
  ObjectInfo current;
  bool have_key = false, have_size = false;
  Status s = Walk(xml, [&](const std::vector<std::string_view>& path, const std::string& text) -> Status {
    const std::string_view name = path.back();
    if (path.size() == 1) {
      if (name != "ListBucketResult")
        return BadResponse("expected <ListBucketResult>, got <" + std::string(name) + ">");
      saw_root = true;
    } else if (path.size() == 2 && name == "IsTruncated") {
      const std::string_view v = Trim(text);
      if (v != "true" && v != "false") return BadResponse("IsTruncated is \"" + std::string(v) + "\"");
      page.truncated = v == "true";
      saw_truncated = true;
    } else if (path.size() == 2 && name == "NextContinuationToken") {
      page.next_token = std::string(Trim(text));
    } else if (path.size() == 3 && path[1] == "Contents" && name == "Key") {
      current.name = text;  // keys are not trimmed: spaces would be part of the key
      have_key = true;
    } else if (path.size() == 3 && path[1] == "Contents" && name == "Size") {
      const std::string_view v = Trim(text);
      if (v.empty()) return BadResponse("an empty Size");
      uint64_t n = 0;
      for (char c : v) {
        const auto d = static_cast<uint64_t>(c - '0');
        if (c < '0' || c > '9' || n > (UINT64_MAX - d) / 10) {
          return BadResponse("Size \"" + std::string(v) + "\" is not a 64-bit count");
        }
        n = n * 10 + d;
      }
      current.size = n;
      have_size = true;
    } else if (path.size() == 2 && name == "Contents") {
      if (!have_key || !have_size) return BadResponse("a <Contents> without Key or Size");
      page.objects.push_back(std::move(current));
      current = {};
      have_key = have_size = false;
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  if (!saw_root) return BadResponse("no <ListBucketResult> element");
  if (!saw_truncated) return BadResponse("no <IsTruncated> element");
  if (page.truncated && page.next_token.empty())
    return BadResponse("IsTruncated without NextContinuationToken");
  return page;
}

S3ErrorBody ParseS3Error(std::string_view xml) {
  S3ErrorBody out;
  Status s = Walk(xml, [&](const std::vector<std::string_view>& path, const std::string& text) -> Status {
    if (path.size() == 2 && path[0] == "Error" && path[1] == "Code") out.code = std::string(Trim(text));
    if (path.size() == 2 && path[0] == "Error" && path[1] == "Message") {
      out.message = std::string(Trim(text)).substr(0, 300);
    }
    return Status::Ok();
  });
  if (!s.ok()) return {};
  return out;
}

}  // namespace llamay::store
