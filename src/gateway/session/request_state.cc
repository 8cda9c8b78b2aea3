#include "gateway/session/request_state.h"

#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>

#include <memory>

#include "audit/entry.h"
#include "audit/sha256.h"
#include "common/base64.h"

namespace warden::gateway {

using nlohmann::json;

namespace {

constexpr char kAad[] = "warden-request-state-v1";
constexpr size_t kNonce = 12, kTag = 16;

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};

}  // namespace

std::string CallDigest(const mcp::Request& request) {
  json params = request.params.value_or(json::object());
  if (params.is_object()) {
    params.erase("_meta");
    params.erase("inputResponses");
    params.erase("requestState");
  }
  return audit::Sha256Hex(audit::CanonicalJson(json{{"method", request.method}, {"params", params}}));
}

RequestStateSealer::RequestStateSealer() {
  if (RAND_bytes(key_.data(), static_cast<int>(key_.size())) != 1) std::abort();  // no entropy
}

RequestStateSealer::RequestStateSealer(const std::array<uint8_t, 32>& secret) {
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(
      EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr), EVP_PKEY_CTX_free);
  static constexpr unsigned char kInfo[] = "warden request state";
  size_t len = key_.size();
  if (!ctx || EVP_PKEY_derive_init(ctx.get()) <= 0 ||
      EVP_PKEY_CTX_set_hkdf_md(ctx.get(), EVP_sha256()) <= 0 ||
      EVP_PKEY_CTX_set1_hkdf_key(ctx.get(), secret.data(), static_cast<int>(secret.size())) <= 0 ||
      EVP_PKEY_CTX_add1_hkdf_info(ctx.get(), kInfo, sizeof(kInfo) - 1) <= 0 ||
      EVP_PKEY_derive(ctx.get(), key_.data(), &len) <= 0 || len != key_.size())
    std::abort();  // OpenSSL without HKDF-SHA256: nothing sensible to fall back to
}

int64_t RequestStateSealer::NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string RequestStateSealer::Seal(const RequestState& s) const {
  json payload = {{"v", 1},          {"id", s.id},     {"principal", s.principal},
                  {"task", s.task},  {"method", s.method}, {"call", s.call},
                  {"expires", s.expires_ms}, {"kind", s.kind}, {"ref", s.ref}};
  if (s.inner) payload["inner"] = *s.inner;
  const std::string plain = payload.dump();
  std::string out(kNonce + plain.size() + kTag, '\0');
  auto* bytes = reinterpret_cast<unsigned char*>(out.data());
  if (RAND_bytes(bytes, kNonce) != 1) return "";
  std::unique_ptr<EVP_CIPHER_CTX, CtxFree> ctx(EVP_CIPHER_CTX_new());
  int n = 0;
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), bytes) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &n, reinterpret_cast<const unsigned char*>(kAad),
                        sizeof(kAad) - 1) != 1 ||
      EVP_EncryptUpdate(ctx.get(), bytes + kNonce, &n,
                        reinterpret_cast<const unsigned char*>(plain.data()),
                        static_cast<int>(plain.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), bytes + kNonce + n, &n) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTag, bytes + kNonce + plain.size()) != 1)
    return "";
  return Base64NoPad(out);
}

Result<RequestState> RequestStateSealer::Open(const std::string& text) const {
  if (text.size() > 64 * 1024) return Status::Error("requestState is too long to be warden's");
  auto raw = Base64Decode(text, kBase64UrlAlphabet, /*padded=*/false);
  if (!raw) return Status::Error("requestState is not warden's (not base64url)");
  if (raw->size() < kNonce + kTag + 2) return Status::Error("requestState is not warden's (too short)");
  const auto* bytes = reinterpret_cast<const unsigned char*>(raw->data());
  const size_t len = raw->size() - kNonce - kTag;
  std::string plain(len, '\0');
  std::unique_ptr<EVP_CIPHER_CTX, CtxFree> ctx(EVP_CIPHER_CTX_new());
  int n = 0;
  std::array<unsigned char, kTag> tag;
  std::copy(bytes + kNonce + len, bytes + raw->size(), tag.begin());
  if (!ctx || EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), bytes) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &n, reinterpret_cast<const unsigned char*>(kAad),
                        sizeof(kAad) - 1) != 1 ||
      EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()), &n,
                        bytes + kNonce, static_cast<int>(len)) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTag, tag.data()) != 1 ||
      EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()) + n, &n) != 1)
    return Status::Error("requestState was altered, or was not issued by this gateway");
  json j = json::parse(plain, nullptr, false);
  if (!j.is_object() || j.value("v", 0) != 1)
    return Status::Error("requestState is of a version this gateway does not read");
  RequestState s;
  try {
    s.id = j.at("id").get<std::string>();
    s.principal = j.at("principal").get<std::string>();
    s.task = j.at("task").get<std::string>();
    s.method = j.at("method").get<std::string>();
    s.call = j.at("call").get<std::string>();
    s.expires_ms = j.at("expires").get<int64_t>();
    s.kind = j.at("kind").get<std::string>();
    s.ref = j.at("ref").get<std::string>();
    if (j.contains("inner")) s.inner = j.at("inner").get<std::string>();
  } catch (const json::exception&) {
    return Status::Error("requestState is of a version this gateway does not read");
  }
  return s;
}

UsedStates::Use UsedStates::MarkUsed(const std::string& id, int64_t expires_ms, int64_t now_ms) {
  std::lock_guard lock(mu_);
  while (!by_expiry_.empty() && by_expiry_.begin()->first < now_ms) {
    by_id_.erase(by_expiry_.begin()->second);
    by_expiry_.erase(by_expiry_.begin());
  }
  if (by_id_.count(id)) return Use::kAlreadyUsed;
  if (by_id_.size() >= max_) return Use::kFull;
  by_id_.emplace(id, expires_ms);
  by_expiry_.emplace(expires_ms, id);
  return Use::kFirst;
}

size_t UsedStates::size() const {
  std::lock_guard lock(mu_);
  return by_id_.size();
}

}  // namespace warden::gateway
