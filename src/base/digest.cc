#include "base/digest.h"

#include <openssl/evp.h>

#include "base/check.h"

namespace llamay {

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  LLAMAY_CHECK(impl_->ctx != nullptr);
  LLAMAY_CHECK(EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) == 1);
}

Sha256::~Sha256() { EVP_MD_CTX_free(impl_->ctx); }

void Sha256::Update(const void* data, size_t n) {
  LLAMAY_CHECK(EVP_DigestUpdate(impl_->ctx, data, n) == 1);
}

Digest Sha256::Finish() {
  Digest d{};
  unsigned int len = 0;
  LLAMAY_CHECK(EVP_DigestFinal_ex(impl_->ctx, d.data(), &len) == 1 && len == d.size());
  return d;
}

Digest Sha256Of(const void* data, size_t n) {
  Sha256 h;
  h.Update(data, n);
  return h.Finish();
}

std::string HexOf(std::span<const uint8_t> bytes) {
  static const char* kHex = "0123456789abcdef";
  std::string s;
  s.reserve(2 * bytes.size());
  for (uint8_t b : bytes) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

std::string DigestHex(const Digest& d) { return HexOf(d); }

std::optional<Digest> DigestFromHex(std::string_view hex) {
  if (hex.size() != 64) return std::nullopt;
  auto nibble = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
  };
  Digest d{};
  for (size_t i = 0; i < 32; ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    d[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return d;
}

}  // namespace llamay
