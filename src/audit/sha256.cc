#include "audit/sha256.h"

#include <openssl/evp.h>

#include <cstdlib>
#include <memory>

namespace warden::audit {
namespace {

// Fetching the algorithm once spares OpenSSL 3 a provider lookup on every digest.
const EVP_MD* Sha256Md() {
  static const EVP_MD* md = [] {
    EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    // Without SHA-256 no entry can be chained; carrying on would write an unverifiable log.
    if (fetched == nullptr) std::abort();
    return fetched;
  }();
  return md;
}

struct CtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};

std::string Hex(const unsigned char* bytes, unsigned int n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(n * 2, '0');
  for (unsigned int i = 0; i < n; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 0xf];
  }
  return out;
}

}  // namespace

std::string Sha256Hex(std::string_view prefix, std::string_view data) {
  thread_local std::unique_ptr<EVP_MD_CTX, CtxDeleter> ctx(EVP_MD_CTX_new());
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!ctx || EVP_DigestInit_ex(ctx.get(), Sha256Md(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), prefix.data(), prefix.size()) != 1 ||
      EVP_DigestUpdate(ctx.get(), data.data(), data.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), digest, &len) != 1) {
    std::abort();  // only on allocation failure inside libcrypto
  }
  return Hex(digest, len);
}

std::string Sha256Hex(std::string_view data) { return Sha256Hex(std::string_view(), data); }

}  // namespace warden::audit
