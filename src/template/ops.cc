#include "template/ops.h"

#include <algorithm>
#include <cmath>

#include "template/str_ops.h"

namespace llamay::chat::internal {
namespace {

Status TypeError(std::string message) { return InvalidArgumentError(std::move(message)); }

std::string Quoted(const Value& v) { return StrCat({"'", TypeName(v), "'"}); }

Result<int64_t> SliceIndex(const Value& v) {
  if (v.is_undefined() || v.is_none()) return int64_t{0};
  if (v.is_int() || v.is_bool()) return v.AsInt();
  return TypeError("slice indices must be integers or None");
}

}  // namespace

const Value* CallArgs::Get(size_t index, std::string_view name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [k, v] : named) {
    if (k == name) return &v;
  }
  return nullptr;
}

Result<List> Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return List{};
    case Value::Kind::kList:
      return v.AsList();
    case Value::Kind::kDict: {
      List keys;
      for (const auto& [k, unused] : v.AsDict().items) keys.push_back(Value::String(k));
      return keys;
    }
    case Value::Kind::kString: {
      List chars;
      const std::string& s = v.AsString();
      std::vector<size_t> offsets = Utf8Offsets(s);
      for (size_t i = 0; i + 1 < offsets.size(); ++i) {
        chars.push_back(Value::String(s.substr(offsets[i], offsets[i + 1] - offsets[i])));
      }
      return chars;
    }
    default:
      return TypeError(Quoted(v) + " object is not iterable");
  }
}

Value GetAttr(const Value& obj, std::string_view name) {
  if (obj.is_dict() || obj.is_namespace()) {
    const Value* v = obj.AsDict().Find(name);
    if (v != nullptr) return *v;
  }
  return Value();
}

Value GetItem(const Value& obj, const Value& key) {
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.AsInt();
    if (obj.is_list()) {
      const List& l = obj.AsList();
      int64_t n = static_cast<int64_t>(l.size());
      if (i < 0) i += n;
      return (i >= 0 && i < n) ? l[static_cast<size_t>(i)] : Value();
    }
    const std::string& s = obj.AsString();
    std::vector<size_t> offsets = Utf8Offsets(s);
    int64_t n = static_cast<int64_t>(offsets.size()) - 1;
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value();
    size_t at = static_cast<size_t>(i);
    return Value::String(s.substr(offsets[at], offsets[at + 1] - offsets[at]));
  }
  if ((obj.is_dict() || obj.is_namespace()) && key.is_string()) return GetAttr(obj, key.AsString());
  return Value();
}

Result<Value> Slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  // Jinja2 compiles a slice to a plain Python subscript: unlike obj[key], a failure is an error.
  if (obj.is_dict()) return TypeError("unhashable type: 'slice'");
  if (!obj.is_list() && !obj.is_string()) return TypeError(Quoted(obj) + " object is not subscriptable");
  for (const Value* v : {&start_v, &stop_v, &step_v}) LLAMAY_RETURN_IF_ERROR(SliceIndex(*v).status());
  int64_t step = *SliceIndex(step_v);
  if (step_v.is_undefined() || step_v.is_none()) step = 1;
  if (step == 0) return TypeError("slice step cannot be zero");
  std::vector<size_t> offsets;
  int64_t n;
  if (obj.is_list()) {
    n = static_cast<int64_t>(obj.AsList().size());
  } else {
    offsets = Utf8Offsets(obj.AsString());
    n = static_cast<int64_t>(offsets.size()) - 1;
  }
  step = std::clamp(step, -(n + 1), n + 1);  // a larger stride picks the same (single) item, without overflow
  const int64_t lower = step > 0 ? 0 : -1;
  const int64_t upper = step > 0 ? n : n - 1;
  auto adjust = [&](const Value& v, int64_t dflt) -> Result<int64_t> {
    if (v.is_undefined() || v.is_none()) return dflt;
    LLAMAY_ASSIGN_OR_RETURN(int64_t i, SliceIndex(v));
    if (i < 0) i += n;
    return std::clamp(i, lower, upper);
  };
  LLAMAY_ASSIGN_OR_RETURN(int64_t start, adjust(start_v, step > 0 ? lower : upper));
  LLAMAY_ASSIGN_OR_RETURN(int64_t stop, adjust(stop_v, step > 0 ? upper : lower));
  if (obj.is_list()) {
    List out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      out.push_back(obj.AsList()[static_cast<size_t>(i)]);
    }
    return Value::MakeList(std::move(out), obj.is_tuple());
  }
  const std::string& s = obj.AsString();
  std::string out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    size_t at = static_cast<size_t>(i);
    out.append(s, offsets[at], offsets[at + 1] - offsets[at]);
  }
  return Value::String(std::move(out));
}

Result<int64_t> Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return int64_t{0};
    case Value::Kind::kString:
      return static_cast<int64_t>(Utf8Length(v.AsString()));
    case Value::Kind::kList:
      return static_cast<int64_t>(v.AsList().size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.AsDict().items.size());
    default:
      return TypeError("object of type " + Quoted(v) + " has no len()");
  }
}

Result<bool> Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!item.is_string()) {
        return TypeError("'in <string>' requires string as left operand, not " + std::string(TypeName(item)));
      }
      return container.AsString().find(item.AsString()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& v : container.AsList()) {
        if (Equals(v, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      if (item.is_dict() || (item.is_list() && !item.is_tuple()) || item.is_namespace()) {
        return TypeError("unhashable type: " + Quoted(item));
      }
      return item.is_string() && container.AsDict().Find(item.AsString()) != nullptr;
    default:
      return TypeError("argument of type " + Quoted(container) + " is not iterable");
  }
}

namespace {

Result<Value> Repeat(const Value& seq, int64_t times, const RenderLimits& limits) {
  if (times < 0) times = 0;
  if (seq.is_string()) {
    const std::string& s = seq.AsString();
    if (!s.empty() && static_cast<uint64_t>(times) > limits.max_output_bytes / s.size()) {
      return ResourceExhaustedError("string repetition exceeds the output limit");
    }
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += s;
    return Value::String(std::move(out));
  }
  const List& l = seq.AsList();
  if (!l.empty() && static_cast<uint64_t>(times) > limits.max_items / l.size()) {
    return ResourceExhaustedError("list repetition exceeds the item limit");
  }
  List out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), l.begin(), l.end());
  return Value::MakeList(std::move(out), seq.is_tuple());
}

Result<Value> IntPower(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 0) return TypeError("0.0 cannot be raised to a negative power");
    return Value::Float(std::pow(static_cast<double>(base), static_cast<double>(exp)));
  }
  int64_t result = 1;
  while (exp > 0) {  // square-and-multiply; every square computed is used, so overflow is real
    if ((exp & 1) && __builtin_mul_overflow(result, base, &result))
      return TypeError("integer overflow in **");
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(base, base, &base)) return TypeError("integer overflow in **");
  }
  return Value::Int(result);
}

}  // namespace

Result<Value> Arithmetic(std::string_view op, const Value& a, const Value& b, const RenderLimits& limits) {
  auto unsupported = [&]() {
    return TypeError("unsupported operand type(s) for " + std::string(op) + ": " + Quoted(a) + " and " +
                     Quoted(b));
  };
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      if (a.AsString().size() + b.AsString().size() > limits.max_output_bytes) {
        return ResourceExhaustedError("string exceeds the output limit");
      }
      return Value::String(a.AsString() + b.AsString());
    }
    if (a.is_string())
      return TypeError("can only concatenate str (not \"" + std::string(TypeName(b)) + "\") to str");
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      if (a.AsList().size() + b.AsList().size() > limits.max_items) {
        return ResourceExhaustedError("list exceeds the item limit");
      }
      List out = a.AsList();
      out.insert(out.end(), b.AsList().begin(), b.AsList().end());
      return Value::MakeList(std::move(out), a.is_tuple());
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return Repeat(a, b.AsInt(), limits);
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return Repeat(b, a.AsInt(), limits);
  }
  if (op == "%" && a.is_string()) return PercentFormat(a.AsString(), b);
  if (!a.is_number() || !b.is_number()) return unsupported();
  const bool ints = !a.is_float() && !b.is_float();
  if (ints) {
    int64_t x = a.AsInt(), y = b.AsInt(), r = 0;
    if (op == "+" || op == "-" || op == "*") {
      bool overflow = op == "+"   ? __builtin_add_overflow(x, y, &r)
                      : op == "-" ? __builtin_sub_overflow(x, y, &r)
                                  : __builtin_mul_overflow(x, y, &r);
      if (overflow) return TypeError("integer overflow in " + std::string(op));
      return Value::Int(r);
    }
    if (op == "//" || op == "%") {
      if (y == 0) return TypeError("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) return TypeError("integer overflow in " + std::string(op));
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      return Value::Int(op == "//" ? q : m);
    }
    if (op == "**") return IntPower(x, y);
  }
  double x = a.AsDouble(), y = b.AsDouble();
  if (op == "+") return Value::Float(x + y);
  if (op == "-") return Value::Float(x - y);
  if (op == "*") return Value::Float(x * y);
  if (op == "/") {
    if (y == 0) return TypeError("division by zero");
    return Value::Float(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) return TypeError("float division or modulo by zero");
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    if (op == "%") return Value::Float(m);
    return Value::Float(std::floor((x - m) / y + 0.5));
  }
  if (op == "**") {
    if (x == 0 && y < 0) return TypeError("0.0 cannot be raised to a negative power");
    return Value::Float(std::pow(x, y));
  }
  return unsupported();
}

Result<Value> Negate(const Value& v, bool negate) {
  if (v.is_float()) return Value::Float(negate ? -v.AsDouble() : v.AsDouble());
  if (v.is_int() || v.is_bool()) {
    int64_t i = v.AsInt();
    if (negate && i == INT64_MIN) return TypeError("integer overflow in unary -");
    return Value::Int(negate ? -i : i);
  }
  return TypeError(std::string("bad operand type for unary ") + (negate ? "-" : "+") + ": " + Quoted(v));
}

}  // namespace llamay::chat::internal
