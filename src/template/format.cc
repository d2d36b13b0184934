// Python string formatting: `fmt % args` and `fmt.format(...)`, for the conversions templates use.
#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "template/str_ops.h"

namespace llamay::chat::internal {
namespace {

Status FormatError(std::string message) { return InvalidArgumentError(std::move(message)); }

// Pads `s` to `width` code points: on the right when `left`, else on the left, with `fill`.
std::string Pad(std::string s, int64_t width, bool left, const std::string& fill = " ") {
  int64_t n = static_cast<int64_t>(Utf8Length(s));
  std::string padding;
  for (int64_t i = n; i < width; ++i) padding += fill;
  return left ? s + padding : padding + s;
}

// One numeric conversion through snprintf: `flags` from "-+ 0#", conversion c in d x X o f F e E g G.
Result<std::string> FormatNumber(const Value& v, const std::string& flags, int64_t width, int64_t precision,
                                 char c) {
  if (!v.is_number()) {
    return FormatError(
        StrCat({"%", std::string_view(&c, 1), " format: a number is required, not ", TypeName(v)}));
  }
  std::string spec = StrCat({"%", flags});
  if (width >= 0) spec += std::to_string(std::min<int64_t>(width, 1024));
  if (precision >= 0) {
    spec.push_back('.');
    spec += std::to_string(std::min<int64_t>(precision, 100));
  }
  char buf[2048];
  if (c == 'd' || c == 'x' || c == 'X' || c == 'o') {
    int64_t i = v.is_float() ? static_cast<int64_t>(v.AsDouble()) : v.AsInt();
    spec += std::string(c == 'd' ? PRId64 : c == 'x' ? PRIx64 : c == 'X' ? PRIX64 : PRIo64);
    if (c != 'd' && i < 0 && i != INT64_MIN) {  // Python writes -ff, not the two's complement
      std::snprintf(buf, sizeof(buf), spec.c_str(), -i);
      return StrCat({"-", buf});
    }
    std::snprintf(buf, sizeof(buf), spec.c_str(), i);
  } else {
    spec += c;
    std::snprintf(buf, sizeof(buf), spec.c_str(), v.AsDouble());
  }
  return std::string(buf);
}

}  // namespace

Result<Value> PercentFormat(const std::string& fmt, const Value& args) {
  const List single = {args};
  const List& positional = args.is_tuple() ? args.AsList() : single;
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (++i >= fmt.size()) return FormatError("incomplete format");
    const Value* arg = nullptr;
    Value keyed;
    if (fmt[i] == '(') {  // %(name)s
      size_t close = fmt.find(')', i);
      if (close == std::string::npos) return FormatError("incomplete format key");
      if (!args.is_dict()) return FormatError("format requires a mapping");
      keyed = GetAttr(args, fmt.substr(i + 1, close - i - 1));
      arg = &keyed;
      i = close + 1;
    }
    std::string flags;
    while (i < fmt.size() && std::string("-+ 0#").find(fmt[i]) != std::string::npos)
      flags.push_back(fmt[i++]);
    int64_t width = -1, precision = -1;
    while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9')
      width = std::max<int64_t>(width, 0) * 10 + (fmt[i++] - '0');
    if (i < fmt.size() && fmt[i] == '.') {
      precision = 0;
      while (++i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') precision = precision * 10 + (fmt[i] - '0');
    }
    if (i >= fmt.size()) return FormatError("incomplete format");
    const char c = fmt[i];
    if (c == '%') {
      out.push_back('%');
      continue;
    }
    if (arg == nullptr) {
      if (next >= positional.size()) return FormatError("not enough arguments for format string");
      arg = &positional[next++];
    }
    std::string piece;
    if (c == 's' || c == 'r') {
      piece = c == 's' ? ToStr(*arg) : Repr(*arg);
      if (precision >= 0) {
        std::vector<size_t> offsets = Utf8Offsets(piece);
        if (static_cast<size_t>(precision) + 1 < offsets.size())
          piece.resize(offsets[static_cast<size_t>(precision)]);
      }
      piece = Pad(std::move(piece), width, flags.find('-') != std::string::npos);
    } else if (c == 'i' || c == 'd' || c == 'x' || c == 'X' || c == 'o' || c == 'f' || c == 'F' || c == 'e' ||
               c == 'E' || c == 'g' || c == 'G') {
      LLAMAY_ASSIGN_OR_RETURN(piece, FormatNumber(*arg, flags, width, precision, c == 'i' ? 'd' : c));
    } else {
      return FormatError(std::string("unsupported format character '") + c + "'");
    }
    out += piece;
  }
  if (!args.is_dict() && next < positional.size()) {
    return FormatError("not all arguments converted during string formatting");
  }
  return Value::String(std::move(out));
}

Result<Value> StrFormat(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char ch = fmt[i];
    if (ch == '}') {
      if (i + 1 >= fmt.size() || fmt[i + 1] != '}')
        return FormatError("single '}' encountered in format string");
      ++i;
      out.push_back('}');
      continue;
    }
    if (ch != '{') {
      out.push_back(ch);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) return FormatError("single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    std::string spec, conversion;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      conversion = field.substr(bang + 1);
      field.resize(bang);
    }
    const Value* arg;
    if (field.empty() || (field[0] >= '0' && field[0] <= '9')) {
      size_t index = auto_index++;
      if (!field.empty()) {
        index = 0;
        for (char d : field) {
          if (d < '0' || d > '9' || index > 1'000'000) return FormatError("bad format field '" + field + "'");
          index = index * 10 + static_cast<size_t>(d - '0');
        }
      }
      arg = index < args.positional.size() ? &args.positional[index] : nullptr;
    } else {
      arg = args.Get(SIZE_MAX, field);
    }
    if (arg == nullptr) return FormatError("format field '" + field + "' has no argument");
    // spec: [[fill]align][sign][width][.precision][type]
    std::string fill = " ";
    char align = 0;
    size_t k = 0;
    if (spec.size() >= 2 && std::string("<>^").find(spec[1]) != std::string::npos) {
      fill = spec.substr(0, 1);
      align = spec[1];
      k = 2;
    } else if (!spec.empty() && std::string("<>^").find(spec[0]) != std::string::npos) {
      align = spec[0];
      k = 1;
    }
    std::string flags;
    if (k < spec.size() && (spec[k] == '+' || spec[k] == ' ' || spec[k] == '-')) flags.push_back(spec[k++]);
    int64_t width = -1, precision = -1;
    while (k < spec.size() && spec[k] >= '0' && spec[k] <= '9')
      width = std::max<int64_t>(width, 0) * 10 + (spec[k++] - '0');
    if (k < spec.size() && spec[k] == '.') {
      precision = 0;
      while (++k < spec.size() && spec[k] >= '0' && spec[k] <= '9')
        precision = precision * 10 + (spec[k] - '0');
    }
    const char type = k < spec.size() ? spec[k++] : 0;
    if (k != spec.size()) return FormatError("unsupported format spec '" + spec + "'");
    std::string piece;
    if (type == 0 || type == 's') {
      piece = conversion == "r" ? Repr(*arg) : ToStr(*arg);
      if (precision >= 0 && arg->is_string()) {
        std::vector<size_t> offsets = Utf8Offsets(piece);
        if (static_cast<size_t>(precision) + 1 < offsets.size())
          piece.resize(offsets[static_cast<size_t>(precision)]);
      }
    } else if (std::string("dxXofFeEgG").find(type) != std::string::npos) {
      LLAMAY_ASSIGN_OR_RETURN(piece, FormatNumber(*arg, flags, -1, precision, type));
    } else {
      return FormatError(std::string("unsupported format type '") + type + "'");
    }
    if (width >= 0) {
      if (align == 0) align = arg->is_number() && !arg->is_bool() ? '>' : '<';
      if (align == '^') {
        int64_t total = width - static_cast<int64_t>(Utf8Length(piece));
        piece =
            Pad(Pad(std::move(piece),
                    static_cast<int64_t>(Utf8Length(piece)) + std::max<int64_t>(total, 0) / 2, false, fill),
                width, true, fill);
      } else {
        piece = Pad(std::move(piece), width, align == '<', fill);
      }
    }
    out += piece;
  }
  return Value::String(std::move(out));
}

}  // namespace llamay::chat::internal
