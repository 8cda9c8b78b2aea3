// Tokens warden mints for upstreams (credentials/tokens.h). Signatures are checked twice: by
// OpenSSL directly, from the JWK's x and y alone (not through the code under test), and by
// warden's own JWT verifier (identity/identity.h) reading the minter's JWKS from a file.
#include "credentials/tokens.h"

#include <gtest/gtest.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "identity/identity.h"
#include "policy/model.h"

namespace warden::credentials {
namespace {

using nlohmann::json;
using std::chrono::seconds;
using std::chrono::system_clock;

// 2026-01-01T00:00:00Z: tokens here are minted then.
const system_clock::time_point kNow = system_clock::from_time_t(1767225600);
constexpr seconds kMaxLifetime{900};
constexpr char kAudience[] = "https://mail.example.com";

// ---- an independent JWS reader (the upstream's side) ----

std::string B64UrlDecode(std::string_view in) {
  std::string out;
  uint32_t buffer = 0;
  int bits = 0;
  for (char c : in) {
    int v = -1;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    if (c >= '0' && c <= '9') v = c - '0' + 52;
    if (c == '-') v = 62;
    if (c == '_') v = 63;
    EXPECT_GE(v, 0) << "not base64url (or padded): " << in;
    buffer = (buffer << 6) | static_cast<uint32_t>(v & 63);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xff));
    }
  }
  return out;
}

struct Parts {
  json header, claims;
  std::string signing_input, signature;
};

Parts Split(const std::string& jwt) {
  const size_t dot1 = jwt.find('.');
  const size_t dot2 = jwt.find('.', dot1 + 1);
  EXPECT_NE(dot2, std::string::npos);
  EXPECT_EQ(jwt.find('.', dot2 + 1), std::string::npos);
  Parts parts;
  parts.header = json::parse(B64UrlDecode(jwt.substr(0, dot1)));
  parts.claims = json::parse(B64UrlDecode(jwt.substr(dot1 + 1, dot2 - dot1 - 1)));
  parts.signing_input = jwt.substr(0, dot2);
  parts.signature = B64UrlDecode(jwt.substr(dot2 + 1));
  return parts;
}

// A P-256 public key from a JWK's x and y, built with OpenSSL alone.
std::shared_ptr<EVP_PKEY> PublicKeyFromJwk(const json& jwk) {
  const std::string point = std::string(1, '\x04') + B64UrlDecode(jwk["x"].get<std::string>()) +
                            B64UrlDecode(jwk["y"].get<std::string>());
  std::unique_ptr<OSSL_PARAM_BLD, decltype(&OSSL_PARAM_BLD_free)> builder(OSSL_PARAM_BLD_new(),
                                                                          OSSL_PARAM_BLD_free);
  OSSL_PARAM_BLD_push_utf8_string(builder.get(), OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0);
  OSSL_PARAM_BLD_push_octet_string(builder.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(),
                                   point.size());
  std::unique_ptr<OSSL_PARAM, decltype(&OSSL_PARAM_free)> params(
      OSSL_PARAM_BLD_to_param(builder.get()), OSSL_PARAM_free);
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(
      EVP_PKEY_CTX_new_from_name(nullptr, "EC", nullptr), EVP_PKEY_CTX_free);
  EVP_PKEY* key = nullptr;
  EXPECT_EQ(EVP_PKEY_fromdata_init(ctx.get()), 1);
  EXPECT_EQ(EVP_PKEY_fromdata(ctx.get(), &key, EVP_PKEY_PUBLIC_KEY, params.get()), 1);
  return std::shared_ptr<EVP_PKEY>(key, EVP_PKEY_free);
}

// Whether `signature` (JWS r || s) is `key`'s ES256 signature of `input`: converted back to DER
// and checked with EVP_DigestVerify.
bool VerifiesWith(const json& jwk, const std::string& input, const std::string& signature) {
  if (signature.size() != 64) return false;
  const auto* raw = reinterpret_cast<const unsigned char*>(signature.data());
  ECDSA_SIG* sig = ECDSA_SIG_new();
  ECDSA_SIG_set0(sig, BN_bin2bn(raw, 32, nullptr), BN_bin2bn(raw + 32, 32, nullptr));
  unsigned char* der = nullptr;
  const int der_size = i2d_ECDSA_SIG(sig, &der);
  ECDSA_SIG_free(sig);
  const std::shared_ptr<EVP_PKEY> key = PublicKeyFromJwk(jwk);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  const bool ok =
      key && EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) == 1 &&
      EVP_DigestVerify(ctx.get(), der, static_cast<size_t>(der_size),
                       reinterpret_cast<const unsigned char*>(input.data()), input.size()) == 1;
  OPENSSL_free(der);
  return ok;
}

// ---- warden's own verifier, reading the minter's JWKS ----

// The minter's JWKS at `now`, in a file removed with the object.
class JwksFile {
 public:
  JwksFile(const TokenMinter& minter, system_clock::time_point now) {
    path_ = std::filesystem::temp_directory_path() /
            ("tokens_test_" + std::to_string(getpid()) + "_" + std::to_string(counter_++) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json");
    std::ofstream(path_) << minter.Jwks(now).dump();
  }
  ~JwksFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

// A policy with tenant acme (user alice, her agent alice-coder) trusting the JWKS at `jwks_file`
// for tokens from "warden" for kAudience. The agent is read from `azp`, the verifier's default: it
// reads flat string claims only, so the minter's `act: {sub}` is not an agent to it.
policy::Policy VerifierPolicy(const std::string& jwks_file) {
  policy::Policy policy;
  policy::Tenant& acme = policy.identity.tenants["acme"];
  acme.users["alice"] = {};
  acme.agents["alice-coder"].user = "alice";
  policy::JwtConfig jwt;
  jwt.issuer = "warden";
  jwt.jwks_file = jwks_file;
  jwt.audience = kAudience;
  jwt.tenant_claim = "tenant";
  jwt.user_claim = "sub";
  jwt.agent_claim = "azp";
  policy.identity.jwt = jwt;
  return policy;
}

// What warden's verifier says of `jwt`, given the minter's JWKS at `jwks_at`, checked at `now`.
Result<identity::Caller> Authenticate(const TokenMinter& minter, const std::string& jwt,
                                      system_clock::time_point jwks_at,
                                      system_clock::time_point now) {
  const JwksFile file(minter, jwks_at);
  auto auth = identity::Authenticator::Create(VerifierPolicy(file.path()), {});
  if (!auth.ok()) return auth.status();
  return auth->Authenticate("Bearer " + jwt, now);
}

// ---- helpers ----

SigningKey NewKey() {
  auto key = SigningKey::Generate();
  EXPECT_TRUE(key.ok()) << key.status().message();
  return std::move(key).value();
}

std::unique_ptr<TokenMinter> NewMinter(std::vector<TokenMinter::KeyEntry> keys) {
  auto minter = TokenMinter::Create(std::move(keys), kMaxLifetime);
  EXPECT_TRUE(minter.ok()) << minter.status().message();
  return minter.ok() ? std::move(minter).value() : nullptr;
}

std::unique_ptr<TokenMinter> NewMinter(const SigningKey& key) {
  return NewMinter({{key, kNow - seconds(3600), std::nullopt}});
}

TokenRequest AgentRequest() {
  TokenRequest request;
  request.tenant = "acme";
  request.user = "alice";
  request.agent = "alice-coder";
  request.audience = kAudience;
  request.tool = "mail__read_inbox";
  return request;
}

Token MintOk(const TokenMinter& minter, const TokenRequest& request,
             system_clock::time_point now = kNow) {
  auto token = minter.Mint(request, now);
  EXPECT_TRUE(token.ok()) << token.status().message();
  return token.ok() ? std::move(token).value() : Token{};
}

std::string Refusal(const TokenMinter& minter, const TokenRequest& request) {
  auto token = minter.Mint(request, kNow);
  EXPECT_FALSE(token.ok());
  return token.ok() ? std::string() : token.status().message();
}

bool IsLowerHex(const std::string& text, size_t size) {
  return text.size() == size && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// ---- keys ----

TEST(SigningKeyTest, GenerateMakesAP256KeyWhoseKidIsItsThumbprint) {
  const SigningKey key = NewKey();
  const json jwk = key.PublicJwk();
  EXPECT_EQ(jwk["kty"], "EC");
  EXPECT_EQ(jwk["crv"], "P-256");
  EXPECT_EQ(jwk["use"], "sig");
  EXPECT_EQ(jwk["alg"], "ES256");
  EXPECT_EQ(jwk["kid"], key.kid());
  EXPECT_FALSE(jwk.contains("d"));  // never the private scalar
  const std::string x = jwk["x"], y = jwk["y"];
  EXPECT_EQ(B64UrlDecode(x).size(), 32u);
  EXPECT_EQ(B64UrlDecode(y).size(), 32u);
  // RFC 7638 3.2, computed here from the published JWK.
  const std::string input = R"({"crv":"P-256","kty":"EC","x":")" + x + R"(","y":")" + y + R"("})";
  unsigned char digest[32];
  unsigned int size = 0;
  ASSERT_EQ(EVP_Digest(input.data(), input.size(), digest, &size, EVP_sha256(), nullptr), 1);
  char hex[17] = {};
  for (int i = 0; i < 8; ++i) snprintf(hex + 2 * i, 3, "%02x", digest[i]);
  EXPECT_EQ(key.kid(), hex);
  EXPECT_NE(NewKey().kid(), key.kid());
}

TEST(SigningKeyTest, DerRoundTripKeepsTheKeyAndItsKid) {
  const SigningKey key = NewKey();
  const std::string der = key.PrivateDer();
  ASSERT_FALSE(der.empty());
  // PKCS#8, which OpenSSL itself reads back.
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  PKCS8_PRIV_KEY_INFO* info = d2i_PKCS8_PRIV_KEY_INFO(nullptr, &p, static_cast<long>(der.size()));
  EXPECT_NE(info, nullptr);
  PKCS8_PRIV_KEY_INFO_free(info);

  auto copy = SigningKey::FromDer(der);
  ASSERT_TRUE(copy.ok()) << copy.status().message();
  EXPECT_EQ(copy->kid(), key.kid());
  EXPECT_EQ(copy->PublicJwk(), key.PublicJwk());
  EXPECT_EQ(copy->PrivateDer(), der);
  // The copy signs for the original's public key.
  auto signature = copy->Sign("payload");
  ASSERT_TRUE(signature.ok());
  EXPECT_TRUE(VerifiesWith(key.PublicJwk(), "payload", *signature));
}

TEST(SigningKeyTest, FromDerRefusesWhatIsNotAP256PrivateKey) {
  const std::string der = NewKey().PrivateDer();
  EXPECT_FALSE(SigningKey::FromDer("").ok());
  EXPECT_FALSE(SigningKey::FromDer("not a key").ok());
  EXPECT_FALSE(SigningKey::FromDer(der.substr(0, der.size() - 1)).ok());
  EXPECT_FALSE(SigningKey::FromDer(der + "x").ok());

  // A P-384 key is a valid PKCS#8 key of the wrong curve.
  EVP_PKEY* p384 = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-384");
  ASSERT_NE(p384, nullptr);
  PKCS8_PRIV_KEY_INFO* info = EVP_PKEY2PKCS8(p384);
  unsigned char* out = nullptr;
  const int size = i2d_PKCS8_PRIV_KEY_INFO(info, &out);
  const std::string p384_der(reinterpret_cast<char*>(out), static_cast<size_t>(size));
  OPENSSL_free(out);
  PKCS8_PRIV_KEY_INFO_free(info);
  EVP_PKEY_free(p384);
  auto refused = SigningKey::FromDer(p384_der);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("not an EC P-256 key"), std::string::npos);
}

// ---- minting ----

TEST(TokenMinterTest, TheSignatureVerifiesIndependentlyWithTheJwk) {
  const SigningKey key = NewKey();
  const auto minter = NewMinter(key);
  const Token token = MintOk(*minter, AgentRequest());
  const Parts parts = Split(token.jwt);
  EXPECT_EQ(parts.header, (json{{"alg", "ES256"}, {"typ", "JWT"}, {"kid", key.kid()}}));
  EXPECT_EQ(token.jwt.find('='), std::string::npos);  // base64url without padding
  ASSERT_EQ(parts.signature.size(), 64u);

  const json jwks = minter->Jwks(kNow);
  ASSERT_EQ(jwks["keys"].size(), 1u);
  EXPECT_EQ(jwks["keys"][0], key.PublicJwk());
  EXPECT_TRUE(VerifiesWith(jwks["keys"][0], parts.signing_input, parts.signature));
  // A changed signature or payload does not verify.
  std::string flipped = parts.signature;
  flipped[10] = static_cast<char>(flipped[10] ^ 1);
  EXPECT_FALSE(VerifiesWith(jwks["keys"][0], parts.signing_input, flipped));
  EXPECT_FALSE(VerifiesWith(jwks["keys"][0], parts.signing_input + "x", parts.signature));
  EXPECT_FALSE(VerifiesWith(NewKey().PublicJwk(), parts.signing_input, parts.signature));
}

TEST(TokenMinterTest, WardensVerifierAcceptsTheTokenWithItsUserAndTenant) {
  const auto minter = NewMinter(NewKey());
  // Minted for an agent: the verifier reads the agent from a flat claim (azp by default), not
  // from act.sub, so it sees the user the agent acts for and no agent.
  auto caller = Authenticate(*minter, MintOk(*minter, AgentRequest()).jwt, kNow, kNow);
  ASSERT_TRUE(caller.ok()) << caller.status().message();
  EXPECT_EQ(caller->tenant, "acme");
  EXPECT_EQ(caller->user, "alice");
  EXPECT_EQ(caller->agent, "");

  TokenRequest person = AgentRequest();
  person.agent.clear();
  person.write = true;
  caller = Authenticate(*minter, MintOk(*minter, person).jwt, kNow, kNow);
  ASSERT_TRUE(caller.ok()) << caller.status().message();
  EXPECT_EQ(caller->user, "alice");
  EXPECT_EQ(caller->agent, "");
}

TEST(TokenMinterTest, ExpiryIsIatPlusTheLifetimeAndTheVerifierRefusesAfterIt) {
  const auto minter = NewMinter(NewKey());
  TokenRequest request = AgentRequest();
  request.lifetime = seconds(120);
  // Sub-second parts of `now` are dropped: NumericDates are whole seconds.
  const Token token = MintOk(*minter, request, kNow + std::chrono::milliseconds(700));
  const json claims = Split(token.jwt).claims;
  const int64_t iat = system_clock::to_time_t(kNow);
  EXPECT_EQ(claims["iat"], iat);
  EXPECT_EQ(claims["nbf"], iat);
  EXPECT_EQ(claims["exp"], iat + 120);
  EXPECT_EQ(token.expires, kNow + seconds(120));

  const system_clock::time_point exp = token.expires;
  EXPECT_TRUE(Authenticate(*minter, token.jwt, kNow, exp - seconds(1)).ok());
  // The verifier tolerates 60 s of clock skew past exp, and no more.
  EXPECT_TRUE(Authenticate(*minter, token.jwt, kNow, exp + seconds(59)).ok());
  auto late = Authenticate(*minter, token.jwt, kNow, exp + seconds(61));
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.status().message().find("JWT expired"), std::string::npos);
  // Default lifetime: 5 minutes.
  EXPECT_EQ(Split(MintOk(*minter, AgentRequest()).jwt).claims["exp"], iat + 300);
}

TEST(TokenMinterTest, AudienceIsTheRequestedStringAndTheVerifierChecksIt) {
  const auto minter = NewMinter(NewKey());
  TokenRequest request = AgentRequest();
  EXPECT_EQ(Split(MintOk(*minter, request).jwt).claims["aud"], kAudience);
  request.audience = "https://other.example.com";
  const Token other = MintOk(*minter, request);
  EXPECT_EQ(Split(other.jwt).claims["aud"], "https://other.example.com");
  auto refused = Authenticate(*minter, other.jwt, kNow, kNow);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("wrong audience"), std::string::npos);
}

TEST(TokenMinterTest, ScopeIsReadForReadCallsAndReadWriteForWriteCalls) {
  const auto minter = NewMinter(NewKey());
  TokenRequest request = AgentRequest();
  request.write = false;
  EXPECT_EQ(Split(MintOk(*minter, request).jwt).claims["scope"], "read");
  request.write = true;
  EXPECT_EQ(Split(MintOk(*minter, request).jwt).claims["scope"], "read write");
}

TEST(TokenMinterTest, OptionalClaimsArePresentOnlyWhenSet) {
  const auto minter = NewMinter(NewKey());
  json claims = Split(MintOk(*minter, AgentRequest()).jwt).claims;
  EXPECT_EQ(claims["iss"], "warden");
  EXPECT_EQ(claims["sub"], "alice");
  EXPECT_EQ(claims["act"], (json{{"sub", "alice-coder"}}));
  EXPECT_EQ(claims["tool"], "mail__read_inbox");
  EXPECT_EQ(claims["tenant"], "acme");

  TokenRequest person = AgentRequest();
  person.agent.clear();
  person.tool.clear();
  person.tenant.clear();
  person.issuer = "https://warden.example.com";
  claims = Split(MintOk(*minter, person).jwt).claims;
  EXPECT_FALSE(claims.contains("act"));
  EXPECT_FALSE(claims.contains("tool"));
  EXPECT_FALSE(claims.contains("tenant"));
  EXPECT_EQ(claims["iss"], "https://warden.example.com");
  std::set<std::string> names;
  for (const auto& [name, value] : claims.items()) names.insert(name);
  EXPECT_EQ(names,
            (std::set<std::string>{"iss", "sub", "aud", "scope", "iat", "nbf", "exp", "jti"}));
}

TEST(TokenMinterTest, JtiIsUniqueRandomHex) {
  const auto minter = NewMinter(NewKey());
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const Token token = MintOk(*minter, AgentRequest());
    ASSERT_TRUE(IsLowerHex(token.jti, 32)) << token.jti;
    ASSERT_EQ(Split(token.jwt).claims["jti"], token.jti);
    seen.insert(token.jti);
  }
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(TokenMinterTest, RefusesBadRequestsNamingTheField) {
  const auto minter = NewMinter(NewKey());
  TokenRequest request = AgentRequest();
  request.user.clear();
  EXPECT_NE(Refusal(*minter, request).find("'user' is empty"), std::string::npos);
  request = AgentRequest();
  request.audience.clear();
  EXPECT_NE(Refusal(*minter, request).find("'audience' is empty"), std::string::npos);
  request = AgentRequest();
  request.issuer.clear();
  EXPECT_NE(Refusal(*minter, request).find("'issuer' is empty"), std::string::npos);
  for (const int lifetime : {0, -1}) {
    request = AgentRequest();
    request.lifetime = seconds(lifetime);
    EXPECT_NE(Refusal(*minter, request).find("'lifetime' must be positive"), std::string::npos);
  }
  request = AgentRequest();
  request.lifetime = kMaxLifetime + seconds(1);
  EXPECT_NE(Refusal(*minter, request).find("over the maximum of 900 s"), std::string::npos);
  request.lifetime = kMaxLifetime;
  EXPECT_TRUE(minter->Mint(request, kNow).ok());

  for (std::string TokenRequest::*field :
       {&TokenRequest::issuer, &TokenRequest::tenant, &TokenRequest::user, &TokenRequest::agent,
        &TokenRequest::audience, &TokenRequest::tool}) {
    // C0 controls (newline, carriage return, NUL), DEL and a C1 control (U+0085, NEL).
    for (const std::string& bad : {std::string("a\nb"), std::string("a\rb"), std::string("a\0b", 3),
                                   std::string("a\x7f"), std::string("a\xc2\x85")}) {
      request = AgentRequest();
      request.*field = bad;
      const std::string message = Refusal(*minter, request);
      EXPECT_NE(message.find("contains a control character"), std::string::npos) << message;
      EXPECT_EQ(message.find(bad), std::string::npos);  // the value is not echoed
    }
    request = AgentRequest();
    request.*field = "caf\xe9";  // Latin-1, not UTF-8
    EXPECT_NE(Refusal(*minter, request).find("is not valid UTF-8"), std::string::npos);
  }
  // The field is named.
  request = AgentRequest();
  request.tool = "x\ty";
  EXPECT_NE(Refusal(*minter, request).find("'tool'"), std::string::npos);
  request = AgentRequest();
  request.tenant = "x\ty";
  EXPECT_NE(Refusal(*minter, request).find("'tenant'"), std::string::npos);
  // Non-ASCII text is fine.
  request = AgentRequest();
  request.user = "z\xc3\xa9lie";
  EXPECT_EQ(Split(MintOk(*minter, request).jwt).claims["sub"], "z\xc3\xa9lie");
}

TEST(TokenMinterTest, CreateAndReplaceRefuseAKeySetWithoutACurrentKey) {
  const SigningKey key = NewKey();
  EXPECT_FALSE(TokenMinter::Create({}, kMaxLifetime).ok());
  EXPECT_FALSE(TokenMinter::Create({{key, kNow, kNow}}, kMaxLifetime).ok());
  EXPECT_FALSE(TokenMinter::Create({{key, kNow, std::nullopt}}, seconds(0)).ok());
  EXPECT_FALSE(TokenMinter::Create({{key, kNow, std::nullopt}, {key, kNow, kNow}}, kMaxLifetime)
                   .ok());  // the same kid twice
  const auto minter = NewMinter(key);
  EXPECT_FALSE(minter->Replace({}).ok());
  EXPECT_FALSE(minter->Replace({{NewKey(), kNow, kNow}}).ok());
  EXPECT_EQ(minter->current_kid(), key.kid());  // unchanged by a refused Replace
}

TEST(TokenMinterTest, TheNewestOfSeveralCurrentKeysSigns) {
  const SigningKey older = NewKey(), newer = NewKey();
  const auto minter = NewMinter(
      {{newer, kNow - seconds(10), std::nullopt}, {older, kNow - seconds(20), std::nullopt}});
  EXPECT_EQ(minter->current_kid(), newer.kid());
  EXPECT_EQ(Split(MintOk(*minter, AgentRequest()).jwt).header["kid"], newer.kid());
}

// ---- rotation ----

TEST(TokenMinterTest, RotationKeepsTheRetiredKeyPublishedWhileItsTokensMayLive) {
  const SigningKey old_key = NewKey(), new_key = NewKey();
  const auto minter = NewMinter(old_key);
  const Token old_token = MintOk(*minter, AgentRequest(), kNow);
  EXPECT_EQ(Split(old_token.jwt).header["kid"], old_key.kid());

  // Rotation, stored elsewhere and loaded with Replace.
  const system_clock::time_point rotated = kNow + seconds(30);
  ASSERT_TRUE(
      minter->Replace({{old_key, kNow - seconds(3600), rotated}, {new_key, rotated, std::nullopt}})
          .ok());
  EXPECT_EQ(minter->current_kid(), new_key.kid());
  const Token new_token = MintOk(*minter, AgentRequest(), rotated);
  EXPECT_EQ(Split(new_token.jwt).header["kid"], new_key.kid());

  auto kids = [&](system_clock::time_point at) {
    std::vector<std::string> out;
    const json jwks = minter->Jwks(at);  // kept: a range-for over a temporary's member dangles
    for (const json& jwk : jwks["keys"]) out.push_back(jwk["kid"]);
    return out;
  };
  const std::vector<std::string> both = {new_key.kid(), old_key.kid()};
  const std::vector<std::string> current = {new_key.kid()};
  EXPECT_EQ(kids(rotated), both);
  EXPECT_EQ(kids(rotated + kMaxLifetime - seconds(1)), both);
  EXPECT_EQ(kids(rotated + kMaxLifetime), current);
  EXPECT_EQ(kids(rotated + kMaxLifetime + seconds(3600)), current);

  // During the overlap both tokens verify against the published keys, by warden's verifier and
  // independently.
  const system_clock::time_point overlap = rotated + seconds(10);
  auto caller = Authenticate(*minter, old_token.jwt, overlap, overlap);
  EXPECT_TRUE(caller.ok()) << caller.status().message();
  caller = Authenticate(*minter, new_token.jwt, overlap, overlap);
  EXPECT_TRUE(caller.ok()) << caller.status().message();
  const Parts old_parts = Split(old_token.jwt);
  bool verified = false;
  const json overlap_jwks = minter->Jwks(overlap);
  for (const json& jwk : overlap_jwks["keys"]) {
    if (jwk["kid"] == old_key.kid()) {
      verified = VerifiesWith(jwk, old_parts.signing_input, old_parts.signature);
    }
  }
  EXPECT_TRUE(verified);

  // Once the retired key is gone from the JWKS, its tokens name an unknown kid.
  const system_clock::time_point after = rotated + kMaxLifetime;
  caller = Authenticate(*minter, old_token.jwt, after, kNow);
  ASSERT_FALSE(caller.ok());
  EXPECT_NE(caller.status().message().find("unknown kid"), std::string::npos);
}

TEST(TokenMinterTest, MintJwksAndReplaceMayRunConcurrently) {
  const SigningKey a = NewKey(), b = NewKey();
  const auto minter = NewMinter(a);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        auto token = minter->Mint(AgentRequest(), kNow);
        EXPECT_TRUE(token.ok());
        EXPECT_FALSE(minter->Jwks(kNow)["keys"].empty());
      }
    });
  }
  threads.emplace_back([&] {
    for (int i = 0; i < 50; ++i) {
      const bool a_current = i % 2 == 0;
      EXPECT_TRUE(minter
                      ->Replace({{a, kNow, a_current ? std::nullopt : std::optional(kNow)},
                                 {b, kNow, a_current ? std::optional(kNow) : std::nullopt}})
                      .ok());
    }
  });
  for (std::thread& thread : threads) thread.join();
}

}  // namespace
}  // namespace warden::credentials
