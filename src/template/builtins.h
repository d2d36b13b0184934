// Builtins: the filters, tests, methods and global functions chat templates call, with the semantics of
// Jinja2 3.1 and HF transformers' additions (a `tojson` that does not HTML-escape, `raise_exception`,
// `strftime_now`).
//
// Filters: abs, attr, capitalize, count, d/default, dictsort, e/escape, first, float, indent, int, items,
//   join, last, length, list, lower, map, max, min, reject, rejectattr, replace, reverse, round, safe,
//   select, selectattr, sort, string, sum, title, tojson, trim, unique, upper.
// Tests: boolean, callable, defined, divisibleby, eq/equalto/==, escaped, even, false, float, ge/>=,
//   gt/greaterthan/>, in, integer, iterable, le/<=, lower, lt/lessthan/<, mapping, ne/!=, none, number,
//   odd, sameas, sequence, string, true, undefined, upper.
// Methods: str: strip lstrip rstrip split rsplit splitlines startswith endswith upper lower title
//   capitalize replace find rfind count join isdigit isalpha isalnum isspace isupper islower;
//   dict: items keys values get; list: index count; loop: cycle.
// Globals: range, namespace, dict, raise_exception, strftime_now.
//
// Errors: InvalidArgument without a position (the renderer adds it); raise_exception's carries
// TemplateErrorDetail::kRaised as its detail.
// Thread-safety: pure functions (strftime_now reads the clock).
#ifndef LLAMAY_TEMPLATE_BUILTINS_H_
#define LLAMAY_TEMPLATE_BUILTINS_H_

#include <string_view>

#include "base/status.h"
#include "template/ops.h"
#include "template/value.h"

namespace llamay::chat::internal {

bool IsKnownFilter(std::string_view name);
bool IsKnownTest(std::string_view name);
bool IsGlobalFunction(std::string_view name);

Result<Value> ApplyFilter(std::string_view name, const Value& operand, const CallArgs& args,
                          const RenderLimits& limits);
Result<bool> ApplyTest(std::string_view name, const Value& operand, const CallArgs& args);
// obj.name(args) for the methods above. REQUIRES: !obj.is_undefined().
Result<Value> CallMethod(const Value& obj, std::string_view name, const CallArgs& args,
                         const RenderLimits& limits);
Result<Value> CallGlobal(std::string_view name, const CallArgs& args, const RenderLimits& limits);

}  // namespace llamay::chat::internal

#endif  // LLAMAY_TEMPLATE_BUILTINS_H_
