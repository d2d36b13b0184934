// Operations on template Values with Python semantics: iteration, attribute and item access, slicing,
// len(), `in` and arithmetic (string helpers are in str_ops.h).
//
// All failures are InvalidArgument with a Python-like message ("unsupported operand type(s) for +: 'str'
// and 'NoneType'") and no position: the renderer adds the line and column of the expression. Results that
// would grow past the limits (list length, string bytes) fail with ResourceExhausted.
// Thread-safety: pure functions.
#ifndef LLAMAY_TEMPLATE_OPS_H_
#define LLAMAY_TEMPLATE_OPS_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "template/chat_template.h"
#include "template/value.h"

namespace llamay::chat::internal {

using ::llamay::chat::RenderLimits;

// Arguments of a call, filter, test or method, evaluated.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;

  // The argument at `index` among the positional ones, else the one called `name`; nullptr if neither.
  const Value* Get(size_t index, std::string_view name) const;
};

// for x in v: list items, dict keys, string characters; undefined iterates as empty.
Result<List> Iterate(const Value& v);
// obj.name: dict/namespace key, else undefined. REQUIRES: !obj.is_undefined().
Value GetAttr(const Value& obj, std::string_view name);
// obj[key]: list/string index (negative from the end), dict key; out of range or missing: undefined.
// REQUIRES: !obj.is_undefined().
Value GetItem(const Value& obj, const Value& key);
// obj[start:stop:step] on a list or string; omitted bounds are undefined or none.
Result<Value> Slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// len(v): code points for strings; undefined has length 0.
Result<int64_t> Length(const Value& v);
// item in container.
Result<bool> Contains(const Value& container, const Value& item);
// a op b for op in + - * / // % **.
Result<Value> Arithmetic(std::string_view op, const Value& a, const Value& b, const RenderLimits& limits);
// -v and +v.
Result<Value> Negate(const Value& v, bool negate);

}  // namespace llamay::chat::internal

#endif  // LLAMAY_TEMPLATE_OPS_H_
