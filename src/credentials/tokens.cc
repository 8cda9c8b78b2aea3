// ES256 JWTs for upstreams and the JWKS that publishes their keys (tokens.h). Every OpenSSL
// failure becomes a Status whose message names the step, never the key: the keys here are the
// gateway's signing identity, and error text ends up in logs.
#include "credentials/tokens.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#include "credentials/secret_store.h"
#include <openssl/rand.h>
#include <openssl/x509.h>

#include <algorithm>
#include <set>
#include <utility>

#include "common/base64.h"

namespace warden::credentials {

// The key pair and the public point's coordinates (32 bytes each, big-endian), which the JWK and
// the kid are made of. Shared by copies of a SigningKey: the EVP_PKEY is never changed after it
// is built, and OpenSSL allows concurrent signing with one key.
struct SigningKey::Impl {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> pkey{nullptr, EVP_PKEY_free};
  std::string x, y;
};

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr size_t kCoordinateBytes = 32;  // P-256 field elements, and r and s of a signature

const unsigned char* Bytes(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

// A failure in OpenSSL. The error queue is dropped, not reported: its entries are not key
// material, but left behind they would be picked up by the next unrelated ERR_get_error caller.
Status OpenSslError(const std::string& step) {
  ERR_clear_error();
  return Status::Error("signing key: " + step + " failed (OpenSSL)");
}

// RFC 7515 2: base64url without padding.
std::string Base64Url(std::string_view bytes) { return Base64NoPad(bytes, kBase64UrlAlphabet); }

std::string Hex(const unsigned char* bytes, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    out.push_back(kDigits[bytes[i] >> 4]);
    out.push_back(kDigits[bytes[i] & 15]);
  }
  return out;
}

// One coordinate of the public point, left-padded to 32 bytes (a JWK's x and y have the field's
// full length, RFC 7518 6.2.1.2, so leading zero bytes are kept).
Result<std::string> Coordinate(const EVP_PKEY* pkey, const char* name) {
  BIGNUM* bn = nullptr;
  if (EVP_PKEY_get_bn_param(pkey, name, &bn) != 1) return OpenSslError("reading the public key");
  std::unique_ptr<BIGNUM, decltype(&BN_free)> owned(bn, BN_free);
  std::string out(kCoordinateBytes, '\0');
  if (BN_bn2binpad(bn, reinterpret_cast<unsigned char*>(out.data()),
                   static_cast<int>(out.size())) != static_cast<int>(kCoordinateBytes)) {
    return OpenSslError("encoding the public key");
  }
  return out;
}

// RFC 7638 3.2: the thumbprint input of an EC key is exactly these members, in this
// (lexicographic) order, without whitespace. Written by hand rather than through a JSON library
// so that the bytes hashed cannot change with the library's formatting.
std::string ThumbprintInput(const std::string& x, const std::string& y) {
  return R"({"crv":"P-256","kty":"EC","x":")" + Base64Url(x) + R"(","y":")" + Base64Url(y) +
         R"("})";
}

Result<std::string> KidOf(const std::string& x, const std::string& y) {
  const std::string input = ThumbprintInput(x, y);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(input.data(), input.size(), digest, &size, EVP_sha256(), nullptr) != 1) {
    return OpenSslError("hashing the public key");
  }
  return Hex(digest, 8);  // 16 hex digits: enough to tell a handful of live keys apart
}

bool IsP256(const EVP_PKEY* pkey) {
  if (EVP_PKEY_is_a(pkey, "EC") != 1) return false;
  char group[64] = {};
  size_t length = 0;
  if (EVP_PKEY_get_utf8_string_param(pkey, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group),
                                     &length) != 1) {
    return false;
  }
  const std::string_view name(group, length);
  return name == "prime256v1" || name == "P-256";
}

// The text of a claim, checked: no control characters (C0, DEL, C1), which could split a log
// line or a header where an upstream echoes the claim, and valid UTF-8, which JSON needs (the
// JSON library would otherwise throw while serializing).
Status CheckText(std::string_view text, const char* field) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      return Status::Error(std::string("token request: '") + field +
                           "' contains a control character");
    }
    if (c < 0x80) {
      ++i;
      continue;
    }
    // Multi-byte sequences: the length from the lead byte, then continuation bytes, refusing
    // overlong forms, surrogates and code points beyond U+10FFFF.
    size_t length = 0;
    uint32_t code = 0;
    if (c >= 0xc2 && c <= 0xdf) {
      length = 2;
      code = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      length = 3;
      code = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      length = 4;
      code = c & 0x07;
    } else {
      return Status::Error(std::string("token request: '") + field + "' is not valid UTF-8");
    }
    if (i + length > text.size()) {
      return Status::Error(std::string("token request: '") + field + "' is not valid UTF-8");
    }
    for (size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xc0) != 0x80) {
        return Status::Error(std::string("token request: '") + field + "' is not valid UTF-8");
      }
      code = (code << 6) | (next & 0x3f);
    }
    const bool overlong = (length == 3 && code < 0x800) || (length == 4 && code < 0x10000);
    if (overlong || (code >= 0xd800 && code <= 0xdfff) || code > 0x10ffff) {
      return Status::Error(std::string("token request: '") + field + "' is not valid UTF-8");
    }
    if (code >= 0x80 && code <= 0x9f) {
      return Status::Error(std::string("token request: '") + field +
                           "' contains a control character");
    }
    i += length;
  }
  return Status::Ok();
}

Status CheckRequest(const TokenRequest& request, std::chrono::seconds max_lifetime) {
  if (request.issuer.empty()) return Status::Error("token request: 'issuer' is empty");
  if (request.user.empty()) return Status::Error("token request: 'user' is empty");
  if (request.audience.empty()) return Status::Error("token request: 'audience' is empty");
  if (request.lifetime <= std::chrono::seconds::zero()) {
    return Status::Error("token request: 'lifetime' must be positive (got " +
                         std::to_string(request.lifetime.count()) + " s)");
  }
  if (request.lifetime > max_lifetime) {
    return Status::Error("token request: 'lifetime' of " +
                         std::to_string(request.lifetime.count()) + " s is over the maximum of " +
                         std::to_string(max_lifetime.count()) + " s");
  }
  const std::pair<const std::string*, const char*> fields[] = {
      {&request.issuer, "issuer"}, {&request.tenant, "tenant"},     {&request.user, "user"},
      {&request.agent, "agent"},   {&request.audience, "audience"}, {&request.tool, "tool"},
  };
  for (const auto& [text, name] : fields) WARDEN_RETURN_IF_ERROR(CheckText(*text, name));
  return Status::Ok();
}

// The key set's shape, checked the same way by Create and Replace: at least one current key, a
// positive maximum lifetime, and no kid twice (a JWKS with a repeated kid is refused by
// verifiers, warden's own included, and would leave the key for a token ambiguous).
Status CheckKeys(const std::vector<TokenMinter::KeyEntry>& keys) {
  if (keys.empty()) return Status::Error("token minter: no signing key");
  std::set<std::string> kids;
  bool current = false;
  for (const TokenMinter::KeyEntry& entry : keys) {
    if (entry.key.kid().empty()) return Status::Error("token minter: a signing key has no kid");
    if (!kids.insert(entry.key.kid()).second) {
      return Status::Error("token minter: kid '" + entry.key.kid() + "' appears twice");
    }
    current = current || !entry.retired.has_value();
  }
  if (!current) return Status::Error("token minter: every signing key is retired (none current)");
  return Status::Ok();
}

// The current key: the one not retired, the newest by `created` when several claim to be.
const TokenMinter::KeyEntry* CurrentEntry(const std::vector<TokenMinter::KeyEntry>& keys) {
  const TokenMinter::KeyEntry* current = nullptr;
  for (const TokenMinter::KeyEntry& entry : keys) {
    if (entry.retired.has_value()) continue;
    if (current == nullptr || entry.created > current->created) current = &entry;
  }
  return current;
}

Result<std::string> RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1) {
    ERR_clear_error();
    return Status::Error("token: the random number generator failed");
  }
  return Hex(Bytes(raw), raw.size());
}

}  // namespace

SigningKey::~SigningKey() = default;

namespace {

// A SigningKey's parts from a P-256 key pair, which it takes over.
Result<std::shared_ptr<SigningKey::Impl>> MakeImpl(EVP_PKEY* pkey) {
  auto impl = std::make_shared<SigningKey::Impl>();
  impl->pkey.reset(pkey);
  if (pkey == nullptr) return OpenSslError("generating or decoding the key");
  if (!IsP256(pkey)) {
    ERR_clear_error();
    return Status::Error("signing key: not an EC P-256 key");
  }
  auto x = Coordinate(pkey, OSSL_PKEY_PARAM_EC_PUB_X);
  if (!x) return x.status();
  auto y = Coordinate(pkey, OSSL_PKEY_PARAM_EC_PUB_Y);
  if (!y) return y.status();
  impl->x = std::move(*x);
  impl->y = std::move(*y);
  return impl;
}

}  // namespace

Result<SigningKey> SigningKey::FromImpl(Result<std::shared_ptr<Impl>> impl) {
  if (!impl) return impl.status();
  auto kid = KidOf((*impl)->x, (*impl)->y);
  if (!kid) return kid.status();
  SigningKey key;
  key.impl_ = std::move(*impl);
  key.kid_ = std::move(*kid);
  return key;
}

Result<SigningKey> SigningKey::Generate() {
  return FromImpl(MakeImpl(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256")));
}

Result<SigningKey> SigningKey::FromDer(std::string_view pkcs8_der) {
  const unsigned char* p = Bytes(pkcs8_der);
  std::unique_ptr<PKCS8_PRIV_KEY_INFO, decltype(&PKCS8_PRIV_KEY_INFO_free)> info(
      d2i_PKCS8_PRIV_KEY_INFO(nullptr, &p, static_cast<long>(pkcs8_der.size())),
      PKCS8_PRIV_KEY_INFO_free);
  // Trailing bytes mean the stored blob is not what was written: refuse rather than guess.
  if (!info || p != Bytes(pkcs8_der) + pkcs8_der.size()) {
    ERR_clear_error();
    return Status::Error("signing key: not a PKCS#8 DER private key");
  }
  auto impl = MakeImpl(EVP_PKCS82PKEY(info.get()));
  if (!impl) return impl.status();
  // The public point stored beside the private scalar is not trusted: a mismatched pair would
  // publish a key that verifies none of the tokens signed.
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> check(
      EVP_PKEY_CTX_new_from_pkey(nullptr, (*impl)->pkey.get(), nullptr), EVP_PKEY_CTX_free);
  if (!check || EVP_PKEY_pairwise_check(check.get()) != 1) {
    ERR_clear_error();
    return Status::Error("signing key: the private and public parts do not match");
  }
  return FromImpl(std::move(impl));
}

std::string SigningKey::PrivateDer() const {
  if (!impl_) return "";
  std::unique_ptr<PKCS8_PRIV_KEY_INFO, decltype(&PKCS8_PRIV_KEY_INFO_free)> info(
      EVP_PKEY2PKCS8(impl_->pkey.get()), PKCS8_PRIV_KEY_INFO_free);
  if (!info) {
    ERR_clear_error();
    return "";
  }
  unsigned char* der = nullptr;
  const int size = i2d_PKCS8_PRIV_KEY_INFO(info.get(), &der);
  if (size <= 0) {
    ERR_clear_error();
    return "";
  }
  std::string out(reinterpret_cast<const char*>(der), static_cast<size_t>(size));
  // OpenSSL's copy of the private key is wiped before it is freed; the caller owns `out`.
  OPENSSL_clear_free(der, static_cast<size_t>(size));
  return out;
}

json SigningKey::PublicJwk() const {
  if (!impl_) return json::object();
  return json{{"kty", "EC"},
              {"crv", "P-256"},
              {"x", Base64Url(impl_->x)},
              {"y", Base64Url(impl_->y)},
              {"kid", kid_},
              {"use", "sig"},
              {"alg", "ES256"}};
}

Result<std::string> SigningKey::Sign(std::string_view signing_input) const {
  if (!impl_) return Status::Error("signing key: empty key");
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx ||
      EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, impl_->pkey.get()) != 1) {
    return OpenSslError("starting a signature");
  }
  size_t der_size = 0;
  if (EVP_DigestSign(ctx.get(), nullptr, &der_size, Bytes(signing_input), signing_input.size()) !=
      1) {
    return OpenSslError("sizing a signature");
  }
  std::string der(der_size, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(der.data()), &der_size,
                     Bytes(signing_input), signing_input.size()) != 1) {
    return OpenSslError("signing");
  }
  der.resize(der_size);
  // OpenSSL signs DER (SEQUENCE of r, s); JWS wants r || s, each left-padded to 32 bytes.
  const unsigned char* p = Bytes(der);
  std::unique_ptr<ECDSA_SIG, decltype(&ECDSA_SIG_free)> sig(
      d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der.size())), ECDSA_SIG_free);
  if (!sig) return OpenSslError("decoding a signature");
  const BIGNUM* r = nullptr;
  const BIGNUM* s = nullptr;
  ECDSA_SIG_get0(sig.get(), &r, &s);
  std::string out(2 * kCoordinateBytes, '\0');
  auto* dst = reinterpret_cast<unsigned char*>(out.data());
  if (BN_bn2binpad(r, dst, kCoordinateBytes) != static_cast<int>(kCoordinateBytes) ||
      BN_bn2binpad(s, dst + kCoordinateBytes, kCoordinateBytes) !=
          static_cast<int>(kCoordinateBytes)) {
    return OpenSslError("encoding a signature");
  }
  return out;
}

Result<std::unique_ptr<TokenMinter>> TokenMinter::Create(std::vector<KeyEntry> keys,
                                                         std::chrono::seconds max_lifetime) {
  if (max_lifetime <= std::chrono::seconds::zero()) {
    return Status::Error("token minter: max_lifetime must be positive (got " +
                         std::to_string(max_lifetime.count()) + " s)");
  }
  WARDEN_RETURN_IF_ERROR(CheckKeys(keys));
  return std::unique_ptr<TokenMinter>(new TokenMinter(std::move(keys), max_lifetime));
}

Result<Token> TokenMinter::Mint(const TokenRequest& request,
                                std::chrono::system_clock::time_point now) const {
  WARDEN_RETURN_IF_ERROR(CheckRequest(request, max_lifetime_));
  // A copy of the key (it shares the OpenSSL key): signing happens outside the lock, so a slow
  // signature does not hold up Jwks or a Replace, and a Replace meanwhile does not free the key.
  std::optional<SigningKey> key;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const KeyEntry* current = CurrentEntry(keys_);
    if (current == nullptr) return Status::Error("token minter: no current signing key");
    key = current->key;
  }
  auto jti = RandomHex(16);
  if (!jti) return jti.status();
  // NumericDate is whole seconds (RFC 7519 2); exp is computed from the truncated iat so that
  // exp - iat is exactly the lifetime asked for.
  const int64_t iat =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  const int64_t exp = iat + request.lifetime.count();

  // ordered_json keeps the members in the documented order, which makes tokens easier to read
  // when decoded by hand; verifiers do not care.
  const ordered_json header = {{"alg", "ES256"}, {"typ", "JWT"}, {"kid", key->kid()}};
  ordered_json claims = {{"iss", request.issuer}, {"sub", request.user}};
  if (!request.agent.empty()) claims["act"] = ordered_json{{"sub", request.agent}};
  claims["aud"] = request.audience;
  // A read call's token never carries "write", whatever else the request says.
  claims["scope"] = request.write ? "read write" : "read";
  if (!request.tool.empty()) claims["tool"] = request.tool;
  if (!request.tenant.empty()) claims["tenant"] = request.tenant;
  claims["iat"] = iat;
  claims["nbf"] = iat;
  claims["exp"] = exp;
  claims["jti"] = *jti;

  const std::string signing_input = Base64Url(header.dump()) + "." + Base64Url(claims.dump());
  auto signature = key->Sign(signing_input);
  if (!signature) return signature.status();
  Token token;
  token.jwt = signing_input + "." + Base64Url(*signature);
  token.jti = std::move(*jti);
  token.expires = std::chrono::system_clock::time_point(std::chrono::seconds(exp));
  return token;
}

json TokenMinter::Jwks(std::chrono::system_clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mu_);
  json keys = json::array();
  const KeyEntry* current = CurrentEntry(keys_);
  if (current != nullptr) keys.push_back(current->key.PublicJwk());
  for (const KeyEntry& entry : keys_) {
    if (&entry == current) continue;
    // A token minted just before the retirement lives at most max_lifetime after it. Other keys
    // that claim to be current (an older one) are published too: they may have signed recently.
    if (!entry.retired.has_value() || *entry.retired + max_lifetime_ > now) {
      keys.push_back(entry.key.PublicJwk());
    }
  }
  return json{{"keys", std::move(keys)}};
}

Status TokenMinter::Replace(std::vector<KeyEntry> keys) {
  WARDEN_RETURN_IF_ERROR(CheckKeys(keys));
  std::lock_guard<std::mutex> lock(mu_);
  keys_ = std::move(keys);
  return Status::Ok();
}

std::string TokenMinter::current_kid() const {
  std::lock_guard<std::mutex> lock(mu_);
  const KeyEntry* current = CurrentEntry(keys_);
  return current != nullptr ? current->key.kid() : std::string();
}

Result<std::vector<TokenMinter::KeyEntry>> SigningKeyEntries(SecretStore& store) {
  auto rows = store.SigningKeys();
  if (!rows) return rows.status();
  std::vector<TokenMinter::KeyEntry> entries;
  for (const SigningKeyRow& row : *rows) {
    auto key = SigningKey::FromDer(row.private_der);
    if (!key) return key.status().Wrap("signing key " + row.kid);
    TokenMinter::KeyEntry entry{
        std::move(*key),
        std::chrono::system_clock::time_point(std::chrono::milliseconds(row.created_ms)),
        std::nullopt};
    if (row.retired_ms != 0)
      entry.retired =
          std::chrono::system_clock::time_point(std::chrono::milliseconds(row.retired_ms));
    entries.push_back(std::move(entry));
  }
  return entries;
}

}  // namespace warden::credentials
