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

std::string DigestHex(const Digest& d) {
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

}  // namespace llamay
