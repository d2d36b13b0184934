// Status and Result<T>: how llamay reports what can go wrong at run time.
//
// A Status is a code (what kind of failure), a message (what happened, for a person) and a detail value
// (a module-specific reason a caller can branch on, e.g. kv::SnapshotError). Library code never throws and
// never exits; it returns a Status or a Result<T>, which holds either a value or a non-OK Status (shaped
// like std::expected, which C++20 lacks).
//
// Part of the public API (include/llamay/): the library's own code uses the same types through
// base/status.h.
//
// Thread-safety: values; no shared state.
#ifndef LLAMAY_STATUS_H_
#define LLAMAY_STATUS_H_

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace llamay {

namespace internal {
// Ends the process with `what` and `status` on stderr: a Result used against its contract (a bug).
[[noreturn]] void ResultMisuse(const char* what, std::string_view status);
}  // namespace internal

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,    // the caller passed something malformed
  kNotFound,           // a named thing does not exist
  kOutOfRange,         // an index or length beyond what exists
  kResourceExhausted,  // a memory or capacity budget is spent
  kFailedPrecondition, // the object is not in a state that allows this
  kDataLoss,           // stored data is damaged (checksum, truncation)
  kUnimplemented,      // a valid request for something not supported
  kIoError,            // the operating system refused (open, write, rename)
  kInternal,           // a bug: an invariant did not hold
  kUnavailable,        // busy right now (a full queue): the same call may succeed later
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message, int detail = 0)
      : code_(code), message_(std::move(message)), detail_(detail) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // A module-specific reason (0 when none): lets a caller tell apart failures that share a code.
  int detail() const { return detail_; }

  // "CODE: message"
  std::string ToString() const;

  // Returns *this with `context` prepended to the message ("context: message").
  Status WithContext(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  int detail_ = 0;
};

Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status OutOfRangeError(std::string message);
Status ResourceExhaustedError(std::string message);
Status UnavailableError(std::string message);
Status FailedPreconditionError(std::string message);
Status DataLossError(std::string message);
Status UnimplementedError(std::string message);
Status IoError(std::string message);
Status InternalError(std::string message);

// Holds a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    if (std::get<Status>(v_).ok()) internal::ResultMisuse("Result built from an OK Status", "");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  // The error; an OK Status when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  T& value() & {
    CheckHasValue();
    return std::get<T>(v_);
  }
  const T& value() const& {
    CheckHasValue();
    return std::get<T>(v_);
  }
  T&& value() && {
    CheckHasValue();
    return std::get<T>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void CheckHasValue() const {
    if (!ok()) internal::ResultMisuse("value() on an error Result", std::get<Status>(v_).ToString());
  }
  std::variant<T, Status> v_;
};

}  // namespace llamay

#define LLAMAY_CONCAT_INNER_(a, b) a##b
#define LLAMAY_CONCAT_(a, b) LLAMAY_CONCAT_INNER_(a, b)

// Returns the Status from the enclosing function when `expr` (a Status) is not OK.
#define LLAMAY_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::llamay::Status llamay_status_ = (expr);        \
    if (!llamay_status_.ok()) return llamay_status_; \
  } while (0)

// `lhs = value of expr` (a Result), or return its Status from the enclosing function.
#define LLAMAY_ASSIGN_OR_RETURN(lhs, expr) \
  LLAMAY_ASSIGN_OR_RETURN_IMPL_(LLAMAY_CONCAT_(llamay_result_, __LINE__), lhs, expr)
#define LLAMAY_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

#endif  // LLAMAY_STATUS_H_
