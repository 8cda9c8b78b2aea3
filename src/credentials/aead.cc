#include "credentials/aead.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <memory>

namespace warden::credentials {

namespace {

constexpr int kNonceBytes = 12;  // GCM's native IV size: no GHASH over the IV
constexpr int kTagBytes = 16;

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }
};
using Ctx = std::unique_ptr<EVP_CIPHER_CTX, CtxFree>;

const unsigned char* Bytes(std::string_view text) {
  return reinterpret_cast<const unsigned char*>(text.data());
}

unsigned char* Bytes(std::string& text) { return reinterpret_cast<unsigned char*>(text.data()); }

Status NotDecrypting(const MasterKey& key) {
  return Status::Error("the ciphertext does not decrypt under key " + key.id +
                       " (tampered, or another key)");
}

}  // namespace

Result<Sealed> Seal(const MasterKey& key, std::string_view plaintext, std::string_view aad) {
  if (plaintext.size() > static_cast<size_t>(INT32_MAX - kTagBytes) ||
      aad.size() > static_cast<size_t>(INT32_MAX)) {
    return Status::Error("the text to encrypt is too large");
  }
  Sealed sealed;
  sealed.nonce.resize(kNonceBytes);
  // A random nonce per encryption: with 96 bits, a repeat under one key is negligible for the
  // number of secrets a gateway will ever write, and no counter has to survive restarts.
  if (RAND_bytes(Bytes(sealed.nonce), kNonceBytes) != 1) {
    return Status::Error("could not draw a random nonce (OpenSSL RAND_bytes failed)");
  }
  Ctx ctx(EVP_CIPHER_CTX_new());
  if (!ctx) return Status::Error("could not allocate a cipher context (OpenSSL)");
  const auto fail = [] { return Status::Error("AES-256-GCM encryption failed (OpenSSL)"); };
  if (EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.bytes.data(),
                         Bytes(sealed.nonce)) != 1) {
    return fail();
  }
  int n = 0;
  if (!aad.empty() &&
      EVP_EncryptUpdate(ctx.get(), nullptr, &n, Bytes(aad), static_cast<int>(aad.size())) != 1) {
    return fail();
  }
  sealed.ciphertext.resize(plaintext.size() + kTagBytes);
  int written = 0;
  if (!plaintext.empty()) {
    if (EVP_EncryptUpdate(ctx.get(), Bytes(sealed.ciphertext), &n, Bytes(plaintext),
                          static_cast<int>(plaintext.size())) != 1) {
      return fail();
    }
    written = n;
  }
  if (EVP_EncryptFinal_ex(ctx.get(), Bytes(sealed.ciphertext) + written, &n) != 1) return fail();
  written += n;
  if (static_cast<size_t>(written) != plaintext.size()) return fail();
  if (EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes,
                          Bytes(sealed.ciphertext) + written) != 1) {
    return fail();
  }
  return sealed;
}

Result<std::string> Open(const MasterKey& key, const Sealed& sealed, std::string_view aad) {
  if (sealed.nonce.size() != kNonceBytes || sealed.ciphertext.size() < kTagBytes ||
      sealed.ciphertext.size() > static_cast<size_t>(INT32_MAX) ||
      aad.size() > static_cast<size_t>(INT32_MAX)) {
    return NotDecrypting(key);
  }
  const size_t size = sealed.ciphertext.size() - kTagBytes;
  Ctx ctx(EVP_CIPHER_CTX_new());
  if (!ctx) return Status::Error("could not allocate a cipher context (OpenSSL)");
  if (EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.bytes.data(),
                         Bytes(sealed.nonce)) != 1) {
    return Status::Error("AES-256-GCM decryption failed (OpenSSL)");
  }
  int n = 0;
  if (!aad.empty() &&
      EVP_DecryptUpdate(ctx.get(), nullptr, &n, Bytes(aad), static_cast<int>(aad.size())) != 1) {
    return NotDecrypting(key);
  }
  std::string plaintext(size, '\0');
  int written = 0;
  if (size > 0) {
    if (EVP_DecryptUpdate(ctx.get(), Bytes(plaintext), &n, Bytes(sealed.ciphertext),
                          static_cast<int>(size)) != 1) {
      OPENSSL_cleanse(plaintext.data(), plaintext.size());
      return NotDecrypting(key);
    }
    written = n;
  }
  // The tag is set before Final, which is where GCM compares it.
  std::string tag = sealed.ciphertext.substr(size);
  const bool ok =
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, Bytes(tag)) == 1 &&
      EVP_DecryptFinal_ex(ctx.get(), Bytes(plaintext) + written, &n) == 1;
  if (!ok || static_cast<size_t>(written + n) != size) {
    // What decrypted before the tag failed is unauthenticated: none of it may leave.
    OPENSSL_cleanse(plaintext.data(), plaintext.size());
    return NotDecrypting(key);
  }
  return plaintext;
}

}  // namespace warden::credentials
