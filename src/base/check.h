// CHECK and DCHECK: assertions for broken invariants (bugs), not for bad input.
//
// LLAMAY_CHECK(cond) << "why"; is always on: when cond is false it prints file:line, the condition and the
// streamed message to stderr and aborts. LLAMAY_DCHECK is the same in debug builds and compiles to nothing
// (the condition is not evaluated) under NDEBUG. Run-time failures that a caller can cause return a Status.
#ifndef LLAMAY_BASE_CHECK_H_
#define LLAMAY_BASE_CHECK_H_

#include <sstream>

namespace llamay::internal {

// Collects the message and aborts in its destructor.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  template <typename T>
  CheckFailure& operator<<(const T& v) {
    stream_ << v;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

// Swallows the stream expression so that `LLAMAY_CHECK(x) << a;` is one statement of type void.
struct Voidify {
  void operator&(const CheckFailure&) {}
};

}  // namespace llamay::internal

#define LLAMAY_CHECK(cond)                    \
  (cond) ? (void)0                            \
         : ::llamay::internal::Voidify() &    \
               ::llamay::internal::CheckFailure(__FILE__, __LINE__, #cond)

#ifdef NDEBUG
#define LLAMAY_DCHECK(cond) \
  while (false) LLAMAY_CHECK(cond)
#else
#define LLAMAY_DCHECK(cond) LLAMAY_CHECK(cond)
#endif

#endif  // LLAMAY_BASE_CHECK_H_
