// API keys, JWTs (compact JWS: RS256, ES256, EdDSA over Ed25519, HS256/384/512) and task scopes.
// Security rationale is next to each check; docs/identity.md is the reference.
#include "identity/identity.h"

#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/rsa.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "audit/sha256.h"
#include "common/read_file.h"
#include "common/unique_fd.h"

namespace warden::identity {

// What Authenticate needs, copied out of the policy so that the authenticator does not pin the
// snapshot it was built from.
struct Authenticator::State {
  struct TenantEntry {
    std::set<std::string, std::less<>> users;
    std::map<std::string, std::string, std::less<>> agent_user;  // agent -> the user it acts for
  };
  // One verification key from the JWKS file. `key` is set for RSA, EC and OKP keys, `secret` for
  // oct keys; `kty` and `alg` decide which token algorithms it may verify.
  struct Jwk {
    std::string kid, kty, alg;
    std::shared_ptr<EVP_PKEY> key;
    std::string secret;
  };

  std::map<std::string, TenantEntry, std::less<>> tenants;          // empty: single-user mode
  std::map<std::string, policy::KeyOwner, std::less<>> key_owners;  // "sha256:<hex>" -> owner
  std::optional<policy::JwtConfig> jwt;
  std::vector<Jwk> jwks;
  IdentityOptions options;
};

namespace {

using Jwk = Authenticator::State::Jwk;
using nlohmann::json;

// Bounds what a request can make us decode and parse before anything is verified.
constexpr size_t kMaxCredentials = 8 * 1024;
constexpr size_t kMaxJwksBytes = 1024 * 1024;
// Clock skew tolerated between the token's issuer and this host, for exp, nbf and iat.
constexpr double kLeewaySeconds = 60;
constexpr int kMinRsaBits = 2048;
constexpr size_t kMinHmacKeyBytes = 32;  // RFC 7518 3.2: at least the hash's size (HS256)

// Text from a request or a file, fit for an error message: at most 64 characters, control and
// non-ASCII bytes shown as '?'. Never used on keys or tokens.
std::string Printable(std::string_view text) {
  constexpr size_t kMax = 64;
  std::string out;
  for (char c : text.substr(0, kMax)) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20 || u >= 0x7f ? '?' : c);
  }
  if (text.size() > kMax) out += "...";
  return out;
}

int Base64UrlValue(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

// RFC 7515's base64url without padding, strictly: only the URL alphabet, no '=', no whitespace, no
// impossible length, and the unused low bits of the last character zero, so that every byte string
// has exactly one accepted encoding.
std::optional<std::string> Base64UrlDecode(std::string_view in) {
  if (in.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(in.size() * 3 / 4);
  uint32_t buffer = 0;
  int bits = 0;
  for (char c : in) {
    const int v = Base64UrlValue(c);
    if (v < 0) return std::nullopt;
    buffer = ((buffer << 6) | static_cast<uint32_t>(v)) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xff));
    }
  }
  if ((buffer & ((1u << bits) - 1)) != 0) return std::nullopt;
  return out;
}

const unsigned char* Bytes(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

std::shared_ptr<EVP_PKEY> OwnKey(EVP_PKEY* key) {
  return std::shared_ptr<EVP_PKEY>(key, EVP_PKEY_free);
}

// An OpenSSL public key from parameters (OpenSSL 3's fromdata), or null.
std::shared_ptr<EVP_PKEY> KeyFromParams(const char* type, OSSL_PARAM_BLD* builder) {
  std::unique_ptr<OSSL_PARAM, decltype(&OSSL_PARAM_free)> params(OSSL_PARAM_BLD_to_param(builder),
                                                                 OSSL_PARAM_free);
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(
      EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr), EVP_PKEY_CTX_free);
  if (!params || !ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1) return nullptr;
  EVP_PKEY* key = nullptr;
  if (EVP_PKEY_fromdata(ctx.get(), &key, EVP_PKEY_PUBLIC_KEY, params.get()) != 1) return nullptr;
  return OwnKey(key);
}

// A base64url member of a JWK, decoded; `what` names the key in errors.
Result<std::string> JwkBytes(const json& jwk, const char* member, const std::string& what) {
  auto it = jwk.find(member);
  if (it == jwk.end() || !it->is_string()) {
    return Status::Error(what + ": missing '" + member + "' (a base64url string)");
  }
  auto bytes = Base64UrlDecode(it->get_ref<const std::string&>());
  if (!bytes || bytes->empty()) {
    return Status::Error(what + ": '" + member + "' is not base64url (RFC 7515, no padding)");
  }
  return *bytes;
}

Status RsaKey(const json& jwk, const std::string& what, Jwk* out) {
  auto n = JwkBytes(jwk, "n", what);
  if (!n) return n.status();
  auto e = JwkBytes(jwk, "e", what);
  if (!e) return e.status();
  std::unique_ptr<BIGNUM, decltype(&BN_free)> bn_n(
      BN_bin2bn(Bytes(*n), static_cast<int>(n->size()), nullptr), BN_free);
  std::unique_ptr<BIGNUM, decltype(&BN_free)> bn_e(
      BN_bin2bn(Bytes(*e), static_cast<int>(e->size()), nullptr), BN_free);
  std::unique_ptr<OSSL_PARAM_BLD, decltype(&OSSL_PARAM_BLD_free)> builder(OSSL_PARAM_BLD_new(),
                                                                          OSSL_PARAM_BLD_free);
  if (!bn_n || !bn_e || !builder ||
      OSSL_PARAM_BLD_push_BN(builder.get(), OSSL_PKEY_PARAM_RSA_N, bn_n.get()) != 1 ||
      OSSL_PARAM_BLD_push_BN(builder.get(), OSSL_PKEY_PARAM_RSA_E, bn_e.get()) != 1) {
    return Status::Error(what + ": out of memory building the RSA key");
  }
  out->key = KeyFromParams("RSA", builder.get());
  if (!out->key) return Status::Error(what + ": 'n' and 'e' do not make an RSA public key");
  // Short moduli can be factored; refuse them rather than verify with them.
  if (EVP_PKEY_get_bits(out->key.get()) < kMinRsaBits) {
    return Status::Error(what + ": RSA modulus of " +
                         std::to_string(EVP_PKEY_get_bits(out->key.get())) +
                         " bits; at least 2048 required");
  }
  return Status::Ok();
}

Status EcKey(const json& jwk, const std::string& what, Jwk* out) {
  auto x = JwkBytes(jwk, "x", what);
  if (!x) return x.status();
  auto y = JwkBytes(jwk, "y", what);
  if (!y) return y.status();
  if (x->size() != 32 || y->size() != 32) {
    return Status::Error(what + ": P-256 'x' and 'y' must be 32 bytes each");
  }
  const std::string point = std::string(1, '\x04') + *x + *y;  // uncompressed SEC1 point
  std::unique_ptr<OSSL_PARAM_BLD, decltype(&OSSL_PARAM_BLD_free)> builder(OSSL_PARAM_BLD_new(),
                                                                          OSSL_PARAM_BLD_free);
  if (!builder ||
      OSSL_PARAM_BLD_push_utf8_string(builder.get(), OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) !=
          1 ||
      OSSL_PARAM_BLD_push_octet_string(builder.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(),
                                       point.size()) != 1) {
    return Status::Error(what + ": out of memory building the EC key");
  }
  out->key = KeyFromParams("EC", builder.get());
  // An off-curve point invites invalid-curve attacks: check it explicitly.
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> check(
      out->key ? EVP_PKEY_CTX_new_from_pkey(nullptr, out->key.get(), nullptr) : nullptr,
      EVP_PKEY_CTX_free);
  if (!check || EVP_PKEY_public_check(check.get()) != 1) {
    return Status::Error(what + ": 'x' and 'y' are not a point on P-256");
  }
  return Status::Ok();
}

Status OkpKey(const json& jwk, const std::string& what, Jwk* out) {
  auto x = JwkBytes(jwk, "x", what);
  if (!x) return x.status();
  if (x->size() != 32) return Status::Error(what + ": Ed25519 'x' must be 32 bytes");
  out->key = OwnKey(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, Bytes(*x), x->size()));
  if (!out->key) return Status::Error(what + ": 'x' is not an Ed25519 public key");
  return Status::Ok();
}

// The digest of an HMAC algorithm (HS256, HS384, HS512), or null for any other alg.
const EVP_MD* HmacDigest(std::string_view alg) {
  if (alg == "HS256") return EVP_sha256();
  if (alg == "HS384") return EVP_sha384();
  if (alg == "HS512") return EVP_sha512();
  return nullptr;
}

// RFC 7518 3.2: an HMAC key must be at least as long as the hash output.
size_t MinHmacKeyBytes(const EVP_MD* md) { return static_cast<size_t>(EVP_MD_get_size(md)); }

Status OctKey(const json& jwk, const std::string& what, Jwk* out) {
  auto k = JwkBytes(jwk, "k", what);
  if (!k) return k.status();
  // Refused at load, naming the key: a short secret can be brute-forced offline from any one
  // token, so the file is wrong, not a token.
  if (k->size() < kMinHmacKeyBytes) {
    return Status::Error(what + ": oct key of " + std::to_string(k->size()) +
                         " bytes; HS256 needs at least 32");
  }
  if (const EVP_MD* md = HmacDigest(out->alg); md != nullptr && k->size() < MinHmacKeyBytes(md)) {
    return Status::Error(what + ": oct key of " + std::to_string(k->size()) + " bytes; " +
                         out->alg + " needs at least " + std::to_string(MinHmacKeyBytes(md)));
  }
  out->secret = std::move(*k);
  return Status::Ok();
}

std::string JwkString(const json& jwk, const char* member) {
  auto it = jwk.find(member);
  return it != jwk.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// One entry of the JWKS "keys" array. Returns nullopt for keys that are not for verifying
// signatures (use "enc", key_ops without "verify") and for key types warden does not verify with
// (other curves): an identity provider's JWKS may legitimately hold those.
Result<std::optional<Jwk>> ParseJwk(const json& jwk, const std::string& what) {
  if (!jwk.is_object()) return Status::Error(what + ": expected an object");
  for (const char* member : {"kty", "kid", "alg", "use", "crv"}) {
    auto it = jwk.find(member);
    if (it != jwk.end() && !it->is_string()) {
      return Status::Error(what + ": '" + member + "' must be a string");
    }
  }
  if (JwkString(jwk, "kty").empty()) return Status::Error(what + ": missing 'kty'");
  const std::string use = JwkString(jwk, "use");
  if (!use.empty() && use != "sig") return std::optional<Jwk>();
  if (auto ops = jwk.find("key_ops"); ops != jwk.end()) {
    if (!ops->is_array()) return Status::Error(what + ": 'key_ops' must be an array of strings");
    bool verify = false;
    for (const json& op : *ops) verify = verify || (op.is_string() && op == "verify");
    if (!verify) return std::optional<Jwk>();
  }
  Jwk key{JwkString(jwk, "kid"), JwkString(jwk, "kty"), JwkString(jwk, "alg"), nullptr, ""};
  const std::string crv = JwkString(jwk, "crv");
  const std::string named = key.kid.empty() ? what : what + " (kid '" + Printable(key.kid) + "')";
  Status status;
  if (key.kty == "RSA") {
    status = RsaKey(jwk, named, &key);
  } else if (key.kty == "EC" && crv == "P-256") {
    status = EcKey(jwk, named, &key);
  } else if (key.kty == "OKP" && crv == "Ed25519") {
    status = OkpKey(jwk, named, &key);
  } else if (key.kty == "oct") {
    status = OctKey(jwk, named, &key);
  } else {
    return std::optional<Jwk>();
  }
  if (!status.ok()) return status;
  return std::optional<Jwk>(std::move(key));
}

Result<std::vector<Jwk>> LoadJwks(const std::string& path) {
  const std::string where = "identity.jwt.jwks_file " + path;
  // open/read, not a stream: this runs on reload, on a gateway thread, and a failed read must be
  // an error, not an exception (common/read_file.h).
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno(where + ": cannot open", errno);
  auto content = ReadFdUpTo(fd.get(), kMaxJwksBytes + 1, path);
  if (!content) return Status::FromErrno(where + ": cannot read", content.status().err());
  std::string text = std::move(*content);
  if (text.size() > kMaxJwksBytes) return Status::Error(where + ": larger than 1 MiB");
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::Error(where + ": not valid JSON");
  if (!doc.is_object() || !doc.contains("keys") || !doc["keys"].is_array()) {
    return Status::Error(where + ": expected a JWK Set: {\"keys\": [...]}");
  }
  std::vector<Jwk> keys;
  std::set<std::string> kids;
  const json& entries = doc["keys"];
  for (size_t i = 0; i < entries.size(); ++i) {
    auto key = ParseJwk(entries[i], where + ": keys[" + std::to_string(i) + "]");
    if (!key) return key.status();
    if (!key->has_value()) continue;
    // A kid must pick one key, or a token could choose which of two keys checks it.
    if (!(*key)->kid.empty() && !kids.insert((*key)->kid).second) {
      return Status::Error(where + ": keys[" + std::to_string(i) + "]: kid '" +
                           Printable((*key)->kid) + "' is used twice");
    }
    keys.push_back(std::move(**key));
  }
  if (keys.empty()) {
    return Status::Error(where +
                         ": no usable signing key (warden verifies with RSA, EC P-256, OKP "
                         "Ed25519 and oct keys)");
  }
  return keys;
}

// The key type an algorithm needs. Pinning the algorithm to the key type is what stops algorithm
// confusion: an RSA public key can never be taken for an HS256 secret.
const char* KeyTypeFor(std::string_view alg) {
  if (alg == "RS256") return "RSA";
  if (alg == "ES256") return "EC";
  if (alg == "EdDSA") return "OKP";
  if (HmacDigest(alg) != nullptr) return "oct";
  return nullptr;
}

// Whether `key` may verify a token of `alg`: the key type the alg needs, the key's own alg when
// it names one, and for HMAC a secret at least as long as the hash (an HS512 token is not checked
// with a 32-byte secret). An asymmetric key has no secret, so it can never be an HMAC key.
bool KeyFitsAlg(const Jwk& key, std::string_view alg) {
  const char* kty = KeyTypeFor(alg);
  if (kty == nullptr || key.kty != kty || !(key.alg.empty() || key.alg == alg)) return false;
  if (const EVP_MD* md = HmacDigest(alg)) {
    return key.key == nullptr && key.secret.size() >= MinHmacKeyBytes(md);
  }
  return key.key != nullptr;
}

// JWS ES256 signatures are r || s (32 bytes each); OpenSSL verifies DER.
std::optional<std::string> Es256ToDer(std::string_view raw) {
  if (raw.size() != 64) return std::nullopt;
  std::unique_ptr<ECDSA_SIG, decltype(&ECDSA_SIG_free)> sig(ECDSA_SIG_new(), ECDSA_SIG_free);
  BIGNUM* r = BN_bin2bn(Bytes(raw), 32, nullptr);
  BIGNUM* s = BN_bin2bn(Bytes(raw) + 32, 32, nullptr);
  if (!sig || !r || !s || ECDSA_SIG_set0(sig.get(), r, s) != 1) {
    BN_free(r);
    BN_free(s);
    return std::nullopt;
  }
  const int size = i2d_ECDSA_SIG(sig.get(), nullptr);
  if (size <= 0) return std::nullopt;
  std::string der(static_cast<size_t>(size), '\0');
  auto* p = reinterpret_cast<unsigned char*>(der.data());
  if (i2d_ECDSA_SIG(sig.get(), &p) != size) return std::nullopt;
  return der;
}

bool VerifyWithKey(const Jwk& key, std::string_view alg, std::string_view signed_part,
                   std::string_view signature) {
  // Checked again here, whatever chose the key: an HMAC is computed only with an oct key's
  // secret of adequate length, never with an asymmetric key's (empty) secret.
  if (!KeyFitsAlg(key, alg)) return false;
  if (const EVP_MD* hmac_md = HmacDigest(alg)) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_size = 0;
    if (HMAC(hmac_md, key.secret.data(), static_cast<int>(key.secret.size()), Bytes(signed_part),
             signed_part.size(), mac, &mac_size) == nullptr) {
      return false;
    }
    return signature.size() == mac_size && CRYPTO_memcmp(mac, signature.data(), mac_size) == 0;
  }
  std::string der;
  if (alg == "ES256") {
    auto converted = Es256ToDer(signature);
    if (!converted) return false;
    der = std::move(*converted);
    signature = der;
  } else if (alg == "EdDSA" && signature.size() != 64) {
    return false;
  }
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_PKEY_CTX* pctx = nullptr;
  // Ed25519 hashes internally: no digest is given for it.
  const EVP_MD* md = alg == "EdDSA" ? nullptr : EVP_sha256();
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), &pctx, md, nullptr, key.key.get()) != 1) {
    return false;
  }
  if (alg == "RS256" && EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PADDING) != 1) return false;
  return EVP_DigestVerify(ctx.get(), Bytes(signature), signature.size(), Bytes(signed_part),
                          signed_part.size()) == 1;
}

// A JSON object from one base64url part of the token; `part` names it in errors.
Result<json> DecodeJsonPart(std::string_view encoded, const char* part) {
  auto bytes = Base64UrlDecode(encoded);
  if (!bytes) return Status::Error(std::string("malformed JWT: ") + part + " is not base64url");
  json value = json::parse(*bytes, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !value.is_object()) {
    return Status::Error(std::string("malformed JWT: ") + part + " is not a JSON object");
  }
  return value;
}

// A NumericDate claim (RFC 7519 2), or nullopt when absent; an error when present but not a number.
Result<std::optional<double>> NumericDate(const json& claims, const char* name) {
  auto it = claims.find(name);
  if (it == claims.end()) return std::optional<double>();
  if (!it->is_number()) {
    return Status::Error(std::string("invalid JWT: '") + name + "' is not a number of seconds");
  }
  return std::optional<double>(it->get<double>());
}

std::string Seconds(double t) {
  std::ostringstream out;
  out.precision(15);
  out << t;
  return out.str();
}

Status CheckTimes(const json& claims, std::chrono::system_clock::time_point now) {
  const double now_s = std::chrono::duration<double>(now.time_since_epoch()).count();
  auto exp = NumericDate(claims, "exp");
  if (!exp) return exp.status();
  // A token without an expiry would be good forever once leaked.
  if (!exp->has_value()) return Status::Error("invalid JWT: no 'exp' claim (expiry is required)");
  if (now_s >= **exp + kLeewaySeconds) {
    return Status::Error("JWT expired: exp " + Seconds(**exp) + " is before now (" +
                         Seconds(now_s) + ") by more than 60 s");
  }
  auto nbf = NumericDate(claims, "nbf");
  if (!nbf) return nbf.status();
  if (nbf->has_value() && **nbf > now_s + kLeewaySeconds) {
    return Status::Error("JWT not valid yet: nbf " + Seconds(**nbf) + " is after now (" +
                         Seconds(now_s) + ") by more than 60 s");
  }
  auto iat = NumericDate(claims, "iat");
  if (!iat) return iat.status();
  if (iat->has_value() && **iat > now_s + kLeewaySeconds) {
    return Status::Error("JWT issued in the future: iat " + Seconds(**iat) + " is after now (" +
                         Seconds(now_s) + ") by more than 60 s");
  }
  return Status::Ok();
}

// RFC 7519 4.1.3: when the policy names warden's audience, the token's `aud` (a string, or an
// array of strings) must hold it, so that a token the same issuer signed for another service is
// not accepted here. Without an `audience` setting, `aud` is not checked.
Status CheckAudience(const json& claims, const std::string& audience) {
  if (audience.empty()) return Status::Ok();
  auto aud = claims.find("aud");
  if (aud == claims.end()) {
    return Status::Error("JWT refused: no 'aud' claim (identity.jwt.audience is '" +
                         Printable(audience) + "')");
  }
  bool found = aud->is_string() && *aud == audience;
  if (aud->is_array()) {
    for (const json& entry : *aud) found = found || (entry.is_string() && entry == audience);
  }
  if (!found) {
    return Status::Error("JWT refused: wrong audience (expected '" + Printable(audience) + "')");
  }
  return Status::Ok();
}

// A string claim; `config` names the policy setting that chose the claim, for the message.
Result<std::optional<std::string>> StringClaim(const json& claims, const std::string& name,
                                               const char* config) {
  auto it = claims.find(name);
  if (it == claims.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string() || it->get_ref<const std::string&>().empty()) {
    return Status::Error("invalid JWT: claim '" + Printable(name) + "' (" + config +
                         ") is not a non-empty string");
  }
  return std::optional<std::string>(it->get<std::string>());
}

}  // namespace

Result<std::string_view> BearerCredentials(std::string_view header) {
  auto is_space = [](char c) { return c == ' ' || c == '\t'; };
  while (!header.empty() && is_space(header.front())) header.remove_prefix(1);
  while (!header.empty() && is_space(header.back())) header.remove_suffix(1);
  if (header.empty()) {
    return Status::Error("missing credentials: send 'Authorization: Bearer <API key or JWT>'");
  }
  if (header.size() > kMaxCredentials) {
    return Status::Error("credentials too long (" + std::to_string(header.size()) +
                         " bytes; at most 8192)");
  }
  constexpr std::string_view kScheme = "bearer";
  bool bearer = header.size() >= kScheme.size();
  for (size_t i = 0; bearer && i < kScheme.size(); ++i) {
    bearer = (header[i] | 0x20) == kScheme[i];
  }
  if (bearer && header.size() == kScheme.size()) {
    return Status::Error("missing credentials: 'Bearer' with nothing after it");
  }
  if (!bearer || !is_space(header[kScheme.size()])) {
    return Status::Error("unsupported Authorization header: expected 'Bearer <API key or JWT>'");
  }
  std::string_view credentials = header.substr(kScheme.size());
  while (!credentials.empty() && is_space(credentials.front())) credentials.remove_prefix(1);
  for (char c : credentials) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) {
      return Status::Error(
          "malformed Authorization header: the credentials after 'Bearer' must be one token of "
          "printable ASCII");
    }
  }
  return credentials;
}

namespace {

// The caller a verified token or key names, checked against the policy's tenants.
Result<Caller> KnownCaller(const Authenticator::State& state, const std::string& tenant,
                           const std::string& user, const std::string& agent) {
  auto t = state.tenants.find(tenant);
  if (t == state.tenants.end()) return Status::Error("unknown tenant '" + Printable(tenant) + "'");
  if (!t->second.users.contains(user)) {
    return Status::Error("unknown user '" + Printable(user) + "' in tenant '" + Printable(tenant) +
                         "'");
  }
  if (!agent.empty()) {
    auto a = t->second.agent_user.find(agent);
    if (a == t->second.agent_user.end()) {
      return Status::Error("unknown agent '" + Printable(agent) + "' in tenant '" +
                           Printable(tenant) + "'");
    }
    // An agent's credentials must not be usable to act for someone else.
    if (a->second != user) {
      return Status::Error("agent '" + Printable(agent) + "' acts for user '" +
                           Printable(a->second) + "', not for '" + Printable(user) + "'");
    }
  }
  return Caller{tenant, user, agent, ""};
}

Result<Caller> ApiKeyCaller(const Authenticator::State& state, std::string_view key) {
  const std::string hash = HashApiKey(key);
  // Every configured hash is compared, in constant time, whatever matches: how long this takes
  // says nothing about which hashes exist.
  const policy::KeyOwner* owner = nullptr;
  for (const auto& [configured, who] : state.key_owners) {
    const bool same = configured.size() == hash.size() &&
                      CRYPTO_memcmp(configured.data(), hash.data(), hash.size()) == 0;
    if (same) owner = &who;
  }
  if (owner == nullptr) return Status::Error("unknown API key");
  auto t = state.tenants.find(owner->tenant);
  if (t == state.tenants.end()) return Status::Error("unknown API key");
  if (owner->agent.empty()) {
    // A person's own key (`keys:` on the user): the user, and no agent.
    if (owner->user.empty() || !t->second.users.contains(owner->user))
      return Status::Error("unknown API key");
    return KnownCaller(state, owner->tenant, owner->user, "");
  }
  auto a = t->second.agent_user.find(owner->agent);
  if (a == t->second.agent_user.end()) return Status::Error("unknown API key");
  return KnownCaller(state, owner->tenant, a->second, owner->agent);
}

// The keys that may verify a token with this header, or why there are none.
Result<std::vector<const Jwk*>> CandidateKeys(const Authenticator::State& state,
                                              const std::string& alg, const json& header) {
  std::vector<const Jwk*> candidates;
  auto kid = header.find("kid");
  if (kid != header.end()) {
    if (!kid->is_string()) return Status::Error("malformed JWT: 'kid' is not a string");
    const std::string& wanted = kid->get_ref<const std::string&>();
    // An empty kid names no key; matched against keys that have none, it would pick every
    // kid-less key at once, whatever their types.
    if (wanted.empty()) return Status::Error("malformed JWT: 'kid' is empty");
    const Jwk* named = nullptr;
    for (const Jwk& key : state.jwks) {
      if (key.kid != wanted) continue;
      named = &key;
      // Every key the kid names is checked against the alg, not only the first.
      if (KeyFitsAlg(key, alg)) candidates.push_back(&key);
    }
    if (named == nullptr) {
      return Status::Error("JWT signed with unknown kid '" + Printable(wanted) + "' (not in " +
                           state.jwt->jwks_file + ")");
    }
    if (candidates.empty()) {
      return Status::Error(
          "JWT alg " + alg + " does not fit key '" + Printable(wanted) + "' (kty " + named->kty +
          (named->alg.empty() ? "" : ", alg " + named->alg) +
          (named->kty == "oct" ? ", " + std::to_string(named->secret.size()) + " bytes" : "") +
          ")");
    }
    return candidates;
  }
  for (const Jwk& key : state.jwks) {
    if (KeyFitsAlg(key, alg)) candidates.push_back(&key);
  }
  if (candidates.empty()) {
    return Status::Error("no key in " + state.jwt->jwks_file + " verifies alg " + alg);
  }
  return candidates;
}

Result<Caller> JwtCaller(const Authenticator::State& state, std::string_view token,
                         std::chrono::system_clock::time_point now) {
  if (!state.jwt) {
    return Status::Error("a JWT was presented but identity.jwt is not configured in the policy");
  }
  const size_t dot1 = token.find('.');
  const size_t dot2 = token.find('.', dot1 + 1);
  const std::string_view header_b64 = token.substr(0, dot1);
  const std::string_view payload_b64 = token.substr(dot1 + 1, dot2 - dot1 - 1);
  const std::string_view signature_b64 = token.substr(dot2 + 1);
  if (header_b64.empty() || payload_b64.empty() || signature_b64.empty()) {
    return Status::Error(
        "malformed JWT: expected three non-empty parts (header.payload.signature)");
  }
  auto header = DecodeJsonPart(header_b64, "header");
  if (!header) return header.status();
  auto alg_it = header->find("alg");
  if (alg_it == header->end() || !alg_it->is_string()) {
    return Status::Error("malformed JWT: header has no 'alg'");
  }
  const std::string alg = alg_it->get<std::string>();
  std::string lower_alg = alg;
  for (char& c : lower_alg) c = static_cast<char>(c | 0x20);
  if (lower_alg == "none")
    return Status::Error("JWT refused: alg 'none' (unsigned) is not accepted");
  if (KeyTypeFor(alg) == nullptr) {
    return Status::Error("JWT refused: unsupported alg '" + Printable(alg) +
                         "' (accepted: RS256, ES256, EdDSA, HS256, HS384, HS512)");
  }
  // RFC 7515 4.1.11: extensions we do not understand must make the token invalid.
  if (header->contains("crit")) {
    return Status::Error("JWT refused: header has 'crit' extensions warden does not implement");
  }
  auto candidates = CandidateKeys(state, alg, *header);
  if (!candidates) return candidates.status();
  auto signature = Base64UrlDecode(signature_b64);
  if (!signature) return Status::Error("malformed JWT: signature is not base64url");
  const std::string_view signed_part = token.substr(0, dot2);
  bool verified = false;
  for (const Jwk* key : *candidates) {
    verified = verified || VerifyWithKey(*key, alg, signed_part, *signature);
  }
  if (!verified) return Status::Error("JWT refused: bad signature");

  // Only signed claims are read from here on.
  auto claims = DecodeJsonPart(payload_b64, "payload");
  if (!claims) return claims.status();
  WARDEN_RETURN_IF_ERROR(CheckTimes(*claims, now));
  auto iss = claims->find("iss");
  if (iss == claims->end() || !iss->is_string() || *iss != state.jwt->issuer) {
    return Status::Error("JWT refused: wrong issuer (expected '" + state.jwt->issuer + "')");
  }
  WARDEN_RETURN_IF_ERROR(CheckAudience(*claims, state.jwt->audience));
  auto tenant = StringClaim(*claims, state.jwt->tenant_claim, "identity.jwt.claims.tenant");
  if (!tenant) return tenant.status();
  auto user = StringClaim(*claims, state.jwt->user_claim, "identity.jwt.claims.user");
  if (!user) return user.status();
  auto agent = StringClaim(*claims, state.jwt->agent_claim, "identity.jwt.claims.agent");
  if (!agent) return agent.status();
  if (!tenant->has_value() || !user->has_value()) {
    return Status::Error(
        "invalid JWT: no '" +
        Printable(tenant->has_value() ? state.jwt->user_claim : state.jwt->tenant_claim) +
        "' claim (the " + (tenant->has_value() ? "user" : "tenant") + ")");
  }
  return KnownCaller(state, **tenant, **user, agent->value_or(""));
}

}  // namespace

Result<Authenticator> Authenticator::Create(const policy::Policy& policy, IdentityOptions options) {
  auto state = std::make_shared<State>();
  for (const auto& [tenant_name, tenant] : policy.identity.tenants) {
    State::TenantEntry& entry = state->tenants[tenant_name];
    for (const auto& [user_name, user] : tenant.users) entry.users.insert(user_name);
    for (const auto& [agent_name, agent] : tenant.agents) entry.agent_user[agent_name] = agent.user;
  }
  state->key_owners = policy.identity.keys;
  state->jwt = policy.identity.jwt;
  if (options.local_single_user && options.local_user.empty()) {
    return Status::Error("identity: local single-user mode needs the local user's name");
  }
  state->options = std::move(options);
  if (state->jwt) {
    if (state->tenants.empty()) {
      return Status::Error(
          "identity.jwt is set but identity.tenants declares no tenant: no token could name a "
          "known caller");
    }
    auto keys = LoadJwks(state->jwt->jwks_file);
    if (!keys) return keys.status();
    state->jwks = std::move(*keys);
  }
  return Authenticator(std::move(state));
}

Result<Caller> Authenticator::Authenticate(std::string_view authorization,
                                           std::chrono::system_clock::time_point now) const {
  const State& state = *state_;
  if (state.tenants.empty()) {
    if (state.options.local_single_user) return Caller{"", state.options.local_user, "", ""};
    return Status::Error(
        "identity is not configured: the policy declares no tenants (declare identity.tenants "
        "with API keys or a JWT issuer; only a loopback listener serves such a policy to one "
        "local user without credentials)");
  }
  auto credentials = BearerCredentials(authorization);
  if (!credentials) return credentials.status();
  if (std::count(credentials->begin(), credentials->end(), '.') == 2) {
    return JwtCaller(state, *credentials, now);
  }
  return ApiKeyCaller(state, *credentials);
}

Result<std::string> NarrowScope(const policy::Policy& policy, const Caller& caller,
                                const std::string& requested) {
  if (requested.empty())
    return Status::Error("empty scope name: expected a scope the policy defines");
  if (!policy.scopes.contains(requested)) {
    return Status::Error("unknown scope '" + Printable(requested) + "': not defined under scopes");
  }
  // Two scopes are not ordered: moving from one to another may add tools, so only the same one is
  // accepted again.
  if (!caller.scope.empty() && caller.scope != requested) {
    return Status::Error("scope '" + Printable(requested) +
                         "' refused: the session is already in scope '" + caller.scope +
                         "' and a scope can only narrow a session, never switch");
  }
  return requested;
}

std::string HashApiKey(std::string_view key) { return "sha256:" + audit::Sha256Hex(key); }

}  // namespace warden::identity
