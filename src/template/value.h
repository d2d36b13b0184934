// Value: the dynamic value a chat template computes with, modelled on the Python objects Jinja2 handles
// (HF transformers renders chat templates with Jinja2, so Python semantics are the reference).
//
// Kinds: undefined (a missing variable, key or attribute: renders empty, is falsy, iterates as empty),
// none, bool, int (int64; overflow is an error, not a bignum), float (double), string (UTF-8 bytes; lengths,
// indices and slices count code points as Python does), list (also used for tuples, which only print
// differently), dict (string keys in insertion order), namespace (the one mutable kind: a dict shared by
// every copy, for `{% set ns.x = ... %}`) and callable (a builtin global such as range, or a macro).
//
// Invariants: strings, lists and dicts are immutable once built and shared between copies (copying a Value
// is O(1), whatever it holds: a render's cost is what it builds, which the renderer charges to its step
// budget); a namespace's contents are shared on purpose. Dict keys are unique.
// Thread-safety: values built during one render are confined to it; the immutable parts may be read from
// any thread.
#ifndef LLAMAY_TEMPLATE_VALUE_H_
#define LLAMAY_TEMPLATE_VALUE_H_

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace llamay::chat::internal {

struct MacroDef;  // ast.h
class Value;
struct DictData;
using List = std::vector<Value>;

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kCallable,
  };

  Value() = default;  // undefined
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value String(std::string s);
  static Value MakeList(List items, bool tuple = false);
  static Value MakeDict(std::vector<std::pair<std::string, Value>> items, bool is_loop = false);
  static Value MakeNamespace(std::vector<std::pair<std::string, Value>> items);
  static Value Builtin(std::string name);
  static Value Macro(const MacroDef* macro);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // int, float or bool (Python's bool is an int).
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && tuple_; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  // REQUIRES: the matching kind (CHECKed).
  bool AsBool() const;
  int64_t AsInt() const;    // int or bool
  double AsDouble() const;  // int, float or bool
  const std::string& AsString() const;
  const List& AsList() const;
  const DictData& AsDict() const;           // dict or namespace
  DictData& MutableNamespace() const;       // namespace only
  const std::string& builtin_name() const;  // callable without a macro
  const MacroDef* macro() const;            // callable; nullptr for a builtin

 private:
  Kind kind_ = Kind::kUndefined;
  bool tuple_ = false;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::shared_ptr<const std::string> s_;  // string value or builtin name (non-null for those kinds)
  std::shared_ptr<const List> list_;
  std::shared_ptr<DictData> dict_;
  const MacroDef* macro_ = nullptr;
};

struct DictData {
  std::vector<std::pair<std::string, Value>> items;  // insertion order, unique keys
  bool is_loop = false;                              // the `loop` variable of a for block

  // nullptr when absent.
  const Value* Find(std::string_view key) const;
  // Replaces the value of an existing key, else appends.
  void Set(std::string_view key, Value value);
};

// Python truthiness: undefined, none, false, 0, 0.0, "", [] and {} are false.
bool Truthy(const Value& v);
// Python's type name, for error messages: "str", "int", "list", "dict", "NoneType", "undefined", ...
std::string_view TypeName(const Value& v);
// Python str(): undefined -> "", none -> "None", true -> "True", 1.0 -> "1.0", lists and dicts as repr.
std::string ToStr(const Value& v);
// Python repr(): strings quoted and escaped the way Python does.
std::string Repr(const Value& v);
// Python ==: 1 == 1.0 == True; lists and dicts compare element-wise; undefined equals only undefined.
bool Equals(const Value& a, const Value& b);
// Python ordering for <, <=, >, >= and sort: numbers with numbers, strings with strings (code point
// order), lists lexicographically. Returns <0, 0 or >0; InvalidArgument for unorderable types.
Result<int> Compare(const Value& a, const Value& b);
// Python float repr: shortest round-trip digits; "1.0", "0.1", "1e+16", "1e-05", "inf", "nan".
std::string FormatFloat(double d);

// Concatenation without the temporaries of `"a" + s + "b"` (which also trip a g++ 12 -Wrestrict false
// positive).
std::string StrCat(std::initializer_list<std::string_view> parts);

// UTF-8 helpers (invalid bytes count as one code point each, so they never cause a failure).
size_t Utf8Length(std::string_view s);
// Decodes the code point at s[*i] and advances *i; an invalid byte decodes as itself (Latin-1).
uint32_t DecodeUtf8(std::string_view s, size_t* i);
void AppendUtf8(uint32_t cp, std::string* out);
// Byte offset of each code point, plus s.size() at the end: size Utf8Length(s) + 1.
std::vector<size_t> Utf8Offsets(std::string_view s);

}  // namespace llamay::chat::internal

#endif  // LLAMAY_TEMPLATE_VALUE_H_
