// Python str operations shared by filters and methods: strip, split, case mapping, replace and the two
// formatting operators (implemented in format.cc).
//
// Whitespace is Python's (str.isspace()): ASCII whitespace plus the Unicode space characters. Case mapping
// (upper, lower, title, capitalize) covers the one-to-one pairs of Latin (ASCII, Latin-1, Extended-A),
// Greek, Cyrillic, Armenian and fullwidth Latin, plus ß -> SS; other characters pass through (no
// final-sigma rule, no dotted-I special cases). Lengths and positions count code points.
//
// Thread-safety: pure functions.
#ifndef LLAMAY_TEMPLATE_STR_OPS_H_
#define LLAMAY_TEMPLATE_STR_OPS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "template/ops.h"
#include "template/value.h"

namespace llamay::chat::internal {

bool IsSpaceCodePoint(uint32_t cp);
// str.strip / lstrip / rstrip; `chars` nullopt strips whitespace.
std::string Strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split / rsplit; `sep` nullopt splits on whitespace runs. InvalidArgument for an empty separator.
Result<List> Split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit,
                   bool from_right);
std::string PyUpper(std::string_view s);       // str.upper()
std::string PyLower(std::string_view s);       // str.lower()
std::string PyTitle(std::string_view s);       // str.title()
std::string PyCapitalize(std::string_view s);  // str.capitalize()
bool IsLowerCp(uint32_t cp);                   // a lowercase letter
bool IsUpperCp(uint32_t cp);                   // an uppercase letter
// str.replace(old, new, count); count < 0 replaces all.
std::string Replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);

// fmt % args (printf-style: %s %r %d %i %f %e %g %x %o %%, flags, width, precision, %(key)s with a dict;
// a tuple supplies several arguments).
Result<Value> PercentFormat(const std::string& fmt, const Value& args);
// fmt.format(*args, **kwargs): {} {0} {name}, !r, and specs [[fill]align][sign][width][.precision][type].
Result<Value> StrFormat(const std::string& fmt, const CallArgs& args);

}  // namespace llamay::chat::internal

#endif  // LLAMAY_TEMPLATE_STR_OPS_H_
