// SHA-256 (through OpenSSL): the weight digest that ties a snapshot to the weights that computed it.
// Thread-safety: each Sha256 object is single-threaded; separate objects are independent.
#ifndef LLAMAY_BASE_DIGEST_H_
#define LLAMAY_BASE_DIGEST_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace llamay {

using Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(const void* data, size_t n);
  Digest Finish();  // the object may not be used afterwards

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

Digest Sha256Of(const void* data, size_t n);
std::string DigestHex(const Digest& d);
// Lowercase hex of any bytes (DigestHex is this for a digest).
std::string HexOf(std::span<const uint8_t> bytes);
// The digest DigestHex wrote: 64 hex digits, either case; nullopt otherwise.
std::optional<Digest> DigestFromHex(std::string_view hex);

}  // namespace llamay

#endif  // LLAMAY_BASE_DIGEST_H_
