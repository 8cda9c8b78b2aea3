// Caller identity: API keys, JWTs, single-user mode and scope narrowing (identity/identity.h).
// Tokens are signed here with OpenSSL and the test keys in fixtures/jwt/, and, for a check by an
// independent implementation, taken from fixtures/jwt/node_tokens.json (made by Node's crypto:
// fixtures/jwt/make_fixtures.mjs). The fixture keys are test keys, used nowhere else.
#include "identity/identity.h"

#include <gtest/gtest.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>

#include "policy/policy.h"

namespace warden::identity {
namespace {

using nlohmann::json;
using std::chrono::seconds;
using std::chrono::system_clock;

const std::filesystem::path kFixtures =
    std::filesystem::path(__FILE__).parent_path() / "fixtures" / "jwt";

// Keys whose hashes the policy below holds (computed with `printf %s KEY | sha256sum`, not with the
// code under test).
constexpr char kAliceKey[] = "wk_alice_0123456789abcdef";
constexpr char kAliceKeyHash[] =
    "sha256:4bdf3afe03bdb95fc6ab49c14e857115c76267bd39ca30b8794b4441c3cc68b2";
constexpr char kCarolKey[] = "wk_carol_fedcba9876543210";
constexpr char kCarolKeyHash[] =
    "sha256:9f9cbb81aaa6385dea77c0151aab1bb3a93f346994eefbda7f2bbe3c932bda76";
// bob's own key (`keys:` on the user): a person's credential.
constexpr char kBobKey[] = "wk_bob_person_key_0001";
constexpr char kBobKeyHash[] =
    "sha256:00d63c9fe009e17fd6c78c9e24dda93d09b5dce349f131f81603aabfc922d4c4";
constexpr char kIssuer[] = "https://idp.example.com";
// 2026-01-01T00:00:00Z: tokens here are issued then; checks run a minute later.
const system_clock::time_point kIssued = system_clock::from_time_t(1767225600);
const system_clock::time_point kNow = kIssued + seconds(60);

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string PolicyYaml(const std::string& jwks_file, const std::string& audience = "") {
  std::string yaml = std::string(
                         "version: 1\n"
                         "identity:\n"
                         "  tenants:\n"
                         "    acme:\n"
                         "      users:\n"
                         "        alice: {}\n"
                         "        bob: { approver: true, keys: [\"") +
                     kBobKeyHash +
                     "\"] }\n"
                     "      agents:\n"
                     "        alice-coder: { user: alice, keys: [\"" +
                     kAliceKeyHash +
                     "\"] }\n"
                     "        bob-bot: { user: bob }\n"
                     "    initech:\n"
                     "      users: { carol: {} }\n"
                     "      agents:\n"
                     "        carol-bot: { user: carol, keys: [\"" +
                     kCarolKeyHash + "\"] }\n";
  if (!jwks_file.empty()) {
    yaml += std::string("  jwt:\n    issuer: ") + kIssuer + "\n    jwks_file: \"" + jwks_file +
            "\"\n    claims: { tenant: org, user: sub, agent: azp }\n";
    if (!audience.empty()) yaml += "    audience: " + audience + "\n";
  }
  yaml +=
      "scopes:\n"
      "  read_mail: { tools: [\"mail__read_*\"], access: read }\n"
      "  triage: { tools: [\"tracker__*\"] }\n";
  return yaml;
}

policy::Policy LoadPolicy(const std::string& yaml) {
  auto policy = policy::LoadPolicyText(yaml, "test.yaml");
  EXPECT_TRUE(policy.ok()) << policy.status().message();
  return policy.ok() ? std::move(policy).value() : policy::Policy{};
}

Authenticator MakeAuthenticator(const std::string& jwks_file = (kFixtures / "jwks.json").string()) {
  auto auth = Authenticator::Create(LoadPolicy(PolicyYaml(jwks_file)), {});
  if (!auth.ok()) ADD_FAILURE() << auth.status().message();
  return std::move(auth).value();
}

// ---- signing tokens (the identity provider's side) ----

std::string B64Url(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  uint32_t buffer = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    buffer = (buffer << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kAlphabet[(buffer >> bits) & 63]);
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(buffer << (6 - bits)) & 63]);
  return out;
}

std::shared_ptr<EVP_PKEY> PrivateKey(const char* file) {
  const std::string pem = ReadFile(kFixtures / file);
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
  EXPECT_NE(key, nullptr) << file;
  return std::shared_ptr<EVP_PKEY>(key, EVP_PKEY_free);
}

std::string HmacSecret() {
  const json jwks = json::parse(ReadFile(kFixtures / "jwks.json"));
  for (const json& key : jwks["keys"]) {
    if (key["kty"] == "oct") {
      std::string k = key["k"];
      // Decode with OpenSSL's standard base64 after mapping the URL alphabet back.
      for (char& c : k) c = c == '-' ? '+' : c == '_' ? '/' : c;
      while (k.size() % 4 != 0) k.push_back('=');
      std::string out(k.size(), '\0');
      const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                    reinterpret_cast<const unsigned char*>(k.data()),
                                    static_cast<int>(k.size()));
      out.resize(static_cast<size_t>(n) - std::count(k.begin(), k.end(), '='));
      return out;
    }
  }
  ADD_FAILURE() << "no oct key in jwks.json";
  return "";
}

std::string Hs256(std::string_view secret, std::string_view data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, &size);
  return std::string(reinterpret_cast<char*>(mac), size);
}

std::string AsymmetricSign(EVP_PKEY* key, const EVP_MD* md, std::string_view data) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  size_t size = 0;
  EXPECT_EQ(EVP_DigestSignInit(ctx.get(), nullptr, md, nullptr, key), 1);
  const auto* in = reinterpret_cast<const unsigned char*>(data.data());
  EXPECT_EQ(EVP_DigestSign(ctx.get(), nullptr, &size, in, data.size()), 1);
  std::string sig(size, '\0');
  EXPECT_EQ(EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &size, in,
                           data.size()),
            1);
  sig.resize(size);
  return sig;
}

// DER ECDSA signature -> JWS r || s.
std::string DerToRaw(const std::string& der) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  std::unique_ptr<ECDSA_SIG, decltype(&ECDSA_SIG_free)> sig(
      d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der.size())), ECDSA_SIG_free);
  std::string raw(64, '\0');
  BN_bn2binpad(ECDSA_SIG_get0_r(sig.get()), reinterpret_cast<unsigned char*>(raw.data()), 32);
  BN_bn2binpad(ECDSA_SIG_get0_s(sig.get()), reinterpret_cast<unsigned char*>(raw.data()) + 32, 32);
  return raw;
}

// The signature of `input` under the fixture key for `alg` ("HS256" uses the JWKS's secret).
std::string FixtureSignature(const std::string& alg, const std::string& input) {
  if (alg == "RS256") return AsymmetricSign(PrivateKey("rsa.pem").get(), EVP_sha256(), input);
  if (alg == "ES256") {
    return DerToRaw(AsymmetricSign(PrivateKey("ec.pem").get(), EVP_sha256(), input));
  }
  if (alg == "EdDSA") return AsymmetricSign(PrivateKey("ed25519.pem").get(), nullptr, input);
  return Hs256(HmacSecret(), input);
}

std::string KidFor(const std::string& alg) {
  if (alg == "RS256") return "rsa-1";
  if (alg == "ES256") return "ec-1";
  if (alg == "EdDSA") return "ed-1";
  return "hs-1";
}

json GoodClaims() {
  const auto iat = system_clock::to_time_t(kIssued);
  return {{"iss", kIssuer},       {"org", "acme"}, {"sub", "alice"},
          {"azp", "alice-coder"}, {"iat", iat},    {"exp", iat + 3600}};
}

std::string Token(const json& header, const json& claims, const std::string& signing_alg) {
  const std::string input = B64Url(header.dump()) + "." + B64Url(claims.dump());
  return input + "." + B64Url(FixtureSignature(signing_alg, input));
}

std::string Token(const std::string& alg, const json& claims = GoodClaims()) {
  return Token(json{{"alg", alg}, {"typ", "JWT"}, {"kid", KidFor(alg)}}, claims, alg);
}

std::string Bearer(const std::string& credentials) { return "Bearer " + credentials; }

// The message of a refused Authenticate, or "" (and a failure) when it succeeded.
std::string Refusal(const Authenticator& auth, const std::string& header,
                    system_clock::time_point now = kNow) {
  auto caller = auth.Authenticate(header, now);
  EXPECT_FALSE(caller.ok()) << "accepted as " << caller->tenant << "/" << caller->user << "/"
                            << caller->agent;
  return caller.ok() ? "" : caller.status().message();
}

// ---- API keys ----

TEST(HashApiKeyTest, MatchesSha256sumOfTheKeyTextInTheLoadersLowerCaseHex) {
  EXPECT_EQ(HashApiKey(kAliceKey), kAliceKeyHash);
  EXPECT_EQ(HashApiKey(""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(ApiKeyTest, AgentsKeyGivesTheAgentItsTenantAndTheUserItActsFor) {
  const Authenticator auth = MakeAuthenticator("");
  auto caller = auth.Authenticate(Bearer(kAliceKey));
  ASSERT_TRUE(caller.ok()) << caller.status().message();
  EXPECT_EQ(caller->tenant, "acme");
  EXPECT_EQ(caller->user, "alice");
  EXPECT_EQ(caller->agent, "alice-coder");
  EXPECT_EQ(caller->scope, "");
}

TEST(ApiKeyTest, AUsersOwnKeyGivesThePersonWithoutAnAgent) {
  const Authenticator auth = MakeAuthenticator("");
  EXPECT_EQ(HashApiKey(kBobKey), kBobKeyHash);
  auto caller = auth.Authenticate(Bearer(kBobKey));
  ASSERT_TRUE(caller.ok()) << caller.status().message();
  EXPECT_EQ(caller->tenant, "acme");
  EXPECT_EQ(caller->user, "bob");
  EXPECT_EQ(caller->agent, "") << "a person: no agent, although bob has an agent (bob-bot)";
  EXPECT_EQ(caller->scope, "");
  // Built from the policy's key table directly: a person's entry whose user is gone (or names
  // none) is an unknown key, never a caller with an empty user.
  policy::Policy policy = LoadPolicy(PolicyYaml(""));
  policy.identity.keys[HashApiKey("orphan")] = policy::KeyOwner{"acme", "", "mallory"};
  policy.identity.keys[HashApiKey("nobody")] = policy::KeyOwner{"acme", "", ""};
  auto built = Authenticator::Create(policy, {});
  ASSERT_TRUE(built.ok()) << built.status().message();
  EXPECT_EQ(Refusal(*built, Bearer("orphan")), "unknown API key");
  EXPECT_EQ(Refusal(*built, Bearer("nobody")), "unknown API key");
  EXPECT_EQ(built->Authenticate(Bearer(kBobKey))->agent, "");
}

TEST(ApiKeyTest, EachTenantsKeyResolvesToThatTenantOnly) {
  const Authenticator auth = MakeAuthenticator("");
  auto carol = auth.Authenticate(Bearer(kCarolKey));
  ASSERT_TRUE(carol.ok()) << carol.status().message();
  EXPECT_EQ(carol->tenant, "initech");
  EXPECT_EQ(carol->user, "carol");
  EXPECT_EQ(carol->agent, "carol-bot");
  auto alice = auth.Authenticate(Bearer(kAliceKey));
  ASSERT_TRUE(alice.ok());
  EXPECT_EQ(alice->tenant, "acme");
}

TEST(ApiKeyTest, UnknownKeyIsRefusedWithoutEchoingIt) {
  const Authenticator auth = MakeAuthenticator("");
  const std::string guess = "wk_alice_0123456789abcdeX";
  const std::string message = Refusal(auth, Bearer(guess));
  EXPECT_EQ(message, "unknown API key");
  // The hash itself, or its upper-case hex, is not a key.
  EXPECT_EQ(Refusal(auth, Bearer(kAliceKeyHash)), "unknown API key");
  std::string upper = std::string(kAliceKeyHash).substr(7);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(Refusal(auth, Bearer(upper)), "unknown API key");
}

TEST(ApiKeyTest, AuthorizationHeaderForms) {
  const Authenticator auth = MakeAuthenticator("");
  EXPECT_TRUE(auth.Authenticate(std::string("bearer ") + kAliceKey).ok());
  EXPECT_TRUE(auth.Authenticate(std::string("  BEARER \t") + kAliceKey + "  ").ok());
  EXPECT_NE(Refusal(auth, "").find("missing credentials"), std::string::npos);
  EXPECT_NE(Refusal(auth, "Bearer").find("missing credentials"), std::string::npos);
  EXPECT_NE(Refusal(auth, "Bearer   ").find("missing credentials"), std::string::npos);
  // A key sent without a scheme, or in another scheme, is refused and never echoed.
  for (const std::string& header :
       {std::string(kAliceKey), std::string("Basic ") + kAliceKey,
        std::string("Bearer") + kAliceKey, std::string("Bearer ") + kAliceKey + " extra"}) {
    const std::string message = Refusal(auth, header);
    EXPECT_FALSE(message.empty()) << header;
    EXPECT_EQ(message.find(kAliceKey), std::string::npos) << message;
  }
}

TEST(ApiKeyTest, HugeCredentialsAreRefusedBeforeHashing) {
  const Authenticator auth = MakeAuthenticator("");
  EXPECT_NE(Refusal(auth, Bearer(std::string(100000, 'k'))).find("credentials too long"),
            std::string::npos);
}

// ---- JWT ----

TEST(JwtTest, EachAlgorithmIsAccepted) {
  const Authenticator auth = MakeAuthenticator();
  for (const std::string alg : {"RS256", "ES256", "EdDSA", "HS256"}) {
    auto caller = auth.Authenticate(Bearer(Token(alg)), kNow);
    ASSERT_TRUE(caller.ok()) << alg << ": " << caller.status().message();
    EXPECT_EQ(caller->tenant, "acme") << alg;
    EXPECT_EQ(caller->user, "alice") << alg;
    EXPECT_EQ(caller->agent, "alice-coder") << alg;
  }
}

TEST(JwtTest, TokensSignedByAnIndependentImplementationAreAccepted) {
  const Authenticator auth = MakeAuthenticator();
  const json fixtures = json::parse(ReadFile(kFixtures / "node_tokens.json"));
  const auto now = system_clock::from_time_t(fixtures["now"].get<time_t>());
  ASSERT_EQ(fixtures["tokens"].size(), 4u);
  for (const auto& [alg, token] : fixtures["tokens"].items()) {
    auto caller = auth.Authenticate(Bearer(token.get<std::string>()), now);
    ASSERT_TRUE(caller.ok()) << alg << ": " << caller.status().message();
    EXPECT_EQ(caller->user, "alice") << alg;
  }
}

TEST(JwtTest, WithoutKidTheKeyIsFoundByAlgorithmAndTheAgentClaimIsOptional) {
  const Authenticator auth = MakeAuthenticator();
  json claims = GoodClaims();
  claims.erase("azp");
  for (const std::string alg : {"RS256", "ES256", "EdDSA", "HS256"}) {
    auto caller = auth.Authenticate(Bearer(Token(json{{"alg", alg}}, claims, alg)), kNow);
    ASSERT_TRUE(caller.ok()) << alg << ": " << caller.status().message();
    EXPECT_EQ(caller->agent, "") << alg;
    EXPECT_EQ(caller->user, "alice") << alg;
  }
}

// A token naming a user and no agent is that person, as a user's own key is: an absent or null
// agent claim gives an empty agent; an empty one is refused rather than read as "no agent".
TEST(JwtTest, ATokenWithoutAnAgentClaimIsThePerson) {
  const Authenticator auth = MakeAuthenticator();
  json claims = GoodClaims();
  claims["sub"] = "bob";
  claims.erase("azp");
  auto absent = auth.Authenticate(Bearer(Token("ES256", claims)), kNow);
  ASSERT_TRUE(absent.ok()) << absent.status().message();
  EXPECT_EQ(absent->tenant, "acme");
  EXPECT_EQ(absent->user, "bob");
  EXPECT_EQ(absent->agent, "");
  claims["azp"] = nullptr;
  auto null_claim = auth.Authenticate(Bearer(Token("RS256", claims)), kNow);
  ASSERT_TRUE(null_claim.ok()) << null_claim.status().message();
  EXPECT_EQ(null_claim->agent, "");
  claims["azp"] = "";
  EXPECT_NE(Refusal(auth, Bearer(Token("RS256", claims))).find("is not a non-empty string"),
            std::string::npos);
  // With the agent claim it is the agent, not the person.
  claims["azp"] = "bob-bot";
  EXPECT_EQ(auth.Authenticate(Bearer(Token("EdDSA", claims)), kNow)->agent, "bob-bot");
}

TEST(JwtTest, TimeClaims) {
  const Authenticator auth = MakeAuthenticator();
  const auto iat = system_clock::to_time_t(kIssued);
  const std::string token = Bearer(Token("ES256"));
  // exp is iat + 3600; 60 s of clock skew are tolerated, no more.
  EXPECT_TRUE(auth.Authenticate(token, kIssued + seconds(3600 + 59)).ok());
  EXPECT_NE(Refusal(auth, token, kIssued + seconds(3600 + 61)).find("JWT expired"),
            std::string::npos);
  json claims = GoodClaims();
  claims.erase("exp");
  EXPECT_NE(Refusal(auth, Bearer(Token("ES256", claims))).find("no 'exp' claim"),
            std::string::npos);
  claims = GoodClaims();
  claims["exp"] = "tomorrow";
  EXPECT_NE(Refusal(auth, Bearer(Token("ES256", claims))).find("'exp' is not a number"),
            std::string::npos);
  claims = GoodClaims();
  claims["nbf"] = iat + 600;
  EXPECT_NE(Refusal(auth, Bearer(Token("ES256", claims))).find("not valid yet"), std::string::npos);
  EXPECT_TRUE(auth.Authenticate(Bearer(Token("ES256", claims)), kIssued + seconds(550)).ok());
  claims = GoodClaims();
  claims["iat"] = iat + 600;
  EXPECT_NE(Refusal(auth, Bearer(Token("ES256", claims))).find("issued in the future"),
            std::string::npos);
}

TEST(JwtTest, WrongOrMissingIssuerIsRefused) {
  const Authenticator auth = MakeAuthenticator();
  json claims = GoodClaims();
  claims["iss"] = "https://evil.example.com";
  EXPECT_NE(Refusal(auth, Bearer(Token("RS256", claims))).find("wrong issuer"), std::string::npos);
  claims.erase("iss");
  EXPECT_NE(Refusal(auth, Bearer(Token("RS256", claims))).find("wrong issuer"), std::string::npos);
}

TEST(JwtTest, FlippedSignatureByteIsABadSignature) {
  const Authenticator auth = MakeAuthenticator();
  for (const std::string alg : {"RS256", "ES256", "EdDSA", "HS256"}) {
    std::string token = Token(alg);
    char& c = token[token.rfind('.') + 5];  // inside the signature, away from its last bits
    c = c == 'A' ? 'B' : 'A';
    EXPECT_EQ(Refusal(auth, Bearer(token)), "JWT refused: bad signature") << alg;
  }
}

TEST(JwtTest, ClaimsChangedAfterSigningAreABadSignature) {
  const Authenticator auth = MakeAuthenticator();
  const std::string token = Token("RS256");
  json forged = GoodClaims();
  forged["sub"] = "bob";
  forged["azp"] = "bob-bot";
  const size_t dot1 = token.find('.'), dot2 = token.rfind('.');
  const std::string tampered =
      token.substr(0, dot1 + 1) + B64Url(forged.dump()) + token.substr(dot2);
  EXPECT_EQ(Refusal(auth, Bearer(tampered)), "JWT refused: bad signature");
}

TEST(JwtTest, AlgNoneIsRefused) {
  const Authenticator auth = MakeAuthenticator();
  const std::string unsigned_part =
      B64Url(json{{"alg", "none"}, {"typ", "JWT"}}.dump()) + "." + B64Url(GoodClaims().dump());
  EXPECT_NE(Refusal(auth, Bearer(unsigned_part + ".")).find("malformed JWT"), std::string::npos);
  EXPECT_NE(Refusal(auth, Bearer(unsigned_part + ".c2ln")).find("alg 'none'"), std::string::npos);
  const std::string upper =
      B64Url(json{{"alg", "NONE"}}.dump()) + "." + B64Url(GoodClaims().dump()) + ".c2ln";
  EXPECT_NE(Refusal(auth, Bearer(upper)).find("alg 'none'"), std::string::npos);
}

TEST(JwtTest, UnsupportedAlgorithmsAndCriticalExtensionsAreRefused) {
  const Authenticator auth = MakeAuthenticator();
  for (const std::string alg : {"RS512", "PS256", "ES384", "HS1", "hs256"}) {
    EXPECT_NE(Refusal(auth, Bearer(Token(json{{"alg", alg}}, GoodClaims(), "RS256")))
                  .find("unsupported alg '" + alg + "'"),
              std::string::npos);
  }
  const json crit = {{"alg", "RS256"}, {"kid", "rsa-1"}, {"crit", {"exp"}}};
  EXPECT_NE(Refusal(auth, Bearer(Token(crit, GoodClaims(), "RS256"))).find("'crit'"),
            std::string::npos);
}

// The classic attack: the RSA public key (public by definition) used as an HMAC secret, so that a
// verifier that takes the algorithm from the token checks the HMAC with the RSA key's bytes.
TEST(JwtTest, AlgorithmConfusionRsaPublicKeyAsHmacSecretIsRefused) {
  const Authenticator auth = MakeAuthenticator();
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  PEM_write_bio_PUBKEY(bio.get(), PrivateKey("rsa.pem").get());
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  const std::string public_pem(data, static_cast<size_t>(size));
  const json jwks = json::parse(ReadFile(kFixtures / "jwks.json"));
  for (const std::string& secret : {public_pem, jwks["keys"][0]["n"].get<std::string>()}) {
    for (const json& header : {json{{"alg", "HS256"}, {"kid", "rsa-1"}}, json{{"alg", "HS256"}}}) {
      const std::string input = B64Url(header.dump()) + "." + B64Url(GoodClaims().dump());
      const std::string token = input + "." + B64Url(Hs256(secret, input));
      const std::string message = Refusal(auth, Bearer(token));
      if (header.contains("kid")) {
        EXPECT_NE(message.find("JWT alg HS256 does not fit key 'rsa-1' (kty RSA"),
                  std::string::npos)
            << message;
      } else {  // only the oct key may check HS256, and this was not made with it
        EXPECT_EQ(message, "JWT refused: bad signature");
      }
    }
  }
  // With no oct key at all, HS256 has nothing to be checked against.
  json rsa_only = {{"keys", {jwks["keys"][0]}}};
  const auto dir =
      std::filesystem::temp_directory_path() / ("identity_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "rsa_only.json") << rsa_only.dump();
  const Authenticator rsa_auth = MakeAuthenticator((dir / "rsa_only.json").string());
  const std::string input =
      B64Url(json{{"alg", "HS256"}}.dump()) + "." + B64Url(GoodClaims().dump());
  EXPECT_NE(Refusal(rsa_auth, Bearer(input + "." + B64Url(Hs256(public_pem, input))))
                .find("verifies alg HS256"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

// A JWKS file holding `keys`, in a directory removed with the object.
class TempJwks {
 public:
  explicit TempJwks(const json& keys) {
    dir_ = std::filesystem::temp_directory_path() /
           ("identity_tmp_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "jwks.json") << json{{"keys", keys}}.dump();
  }
  ~TempJwks() { std::filesystem::remove_all(dir_); }
  std::string path() const { return (dir_ / "jwks.json").string(); }

 private:
  std::filesystem::path dir_;
};

// A token with `header` whose HMAC is computed with `secret` under `md`.
std::string HmacToken(const json& header, const json& claims, std::string_view secret,
                      const EVP_MD* md = EVP_sha256()) {
  const std::string input = B64Url(header.dump()) + "." + B64Url(claims.dump());
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(md, secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, &size);
  return input + "." + B64Url(std::string(reinterpret_cast<char*>(mac), size));
}

// Issue 10 item 7: a JWKS with a kid-less oct key and then a kid-less RSA key. `"kid": ""` named
// both; only the first (oct) was checked against HS256, and the RSA key's empty secret then
// "verified" an HMAC made with an empty key: anyone could be anyone.
TEST(JwtTest, ForgedHs256WithEmptyKidAndEmptyKeyAgainstKidlessOctAndRsaKeysIsRefused) {
  const json fixture = json::parse(ReadFile(kFixtures / "jwks.json"));
  json rsa = fixture["keys"][0];
  rsa.erase("kid");
  rsa.erase("alg");
  const TempJwks jwks(json::array({{{"kty", "oct"}, {"k", B64Url(std::string(32, 'k'))}}, rsa}));
  const Authenticator auth = MakeAuthenticator(jwks.path());
  for (const json& header : {json{{"alg", "HS256"}, {"kid", ""}}, json{{"alg", "HS256"}}}) {
    const std::string forged = HmacToken(header, GoodClaims(), "");
    const std::string message = Refusal(auth, Bearer(forged));
    EXPECT_FALSE(message.empty()) << header.dump();
  }
  // The oct key itself still works, by algorithm (no kid).
  EXPECT_TRUE(
      auth.Authenticate(
              Bearer(HmacToken(json{{"alg", "HS256"}}, GoodClaims(), std::string(32, 'k'))), kNow)
          .ok());
}

TEST(JwtTest, EmptyKidIsRefusedEvenWhenTheSignatureIsGood) {
  const TempJwks jwks(json::array({{{"kty", "oct"}, {"k", B64Url(std::string(32, 'k'))}}}));
  const Authenticator auth = MakeAuthenticator(jwks.path());
  const std::string token =
      HmacToken(json{{"alg", "HS256"}, {"kid", ""}}, GoodClaims(), std::string(32, 'k'));
  EXPECT_NE(Refusal(auth, Bearer(token)).find("'kid' is empty"), std::string::npos);
}

// HS256 against an RSA key, named by kid or not: never an HMAC with the RSA key's (empty) secret
// or its public bytes.
TEST(JwtTest, Hs256TokenAgainstAnRsaKeyWithAnEmptySecretIsRefused) {
  const json fixture = json::parse(ReadFile(kFixtures / "jwks.json"));
  json kidless = fixture["keys"][0];
  kidless.erase("kid");
  kidless.erase("alg");
  const TempJwks jwks(json::array({fixture["keys"][0], kidless}));
  const Authenticator auth = MakeAuthenticator(jwks.path());
  EXPECT_NE(
      Refusal(auth, Bearer(HmacToken(json{{"alg", "HS256"}, {"kid", "rsa-1"}}, GoodClaims(), "")))
          .find("does not fit key 'rsa-1'"),
      std::string::npos);
  EXPECT_NE(Refusal(auth, Bearer(HmacToken(json{{"alg", "HS256"}}, GoodClaims(), "")))
                .find("verifies alg HS256"),
            std::string::npos);
  EXPECT_FALSE(
      Refusal(auth, Bearer(HmacToken(json{{"alg", "HS256"}, {"kid", ""}}, GoodClaims(), "")))
          .empty());
}

// RFC 7518 3.2: the HMAC key is at least as long as the hash. A 32-byte secret verifies HS256
// but not HS512; a 64-byte one verifies all three.
TEST(JwtTest, HmacKeyShorterThanTheHashIsNotUsedForHs384OrHs512) {
  const std::string short_secret(32, 's'), long_secret(64, 'l');
  const TempJwks jwks(json::array({{{"kty", "oct"}, {"kid", "short"}, {"k", B64Url(short_secret)}},
                                   {{"kty", "oct"}, {"kid", "long"}, {"k", B64Url(long_secret)}}}));
  const Authenticator auth = MakeAuthenticator(jwks.path());
  const json claims = GoodClaims();
  EXPECT_TRUE(auth.Authenticate(Bearer(HmacToken(json{{"alg", "HS256"}, {"kid", "short"}}, claims,
                                                 short_secret)),
                                kNow)
                  .ok());
  EXPECT_NE(Refusal(auth, Bearer(HmacToken(json{{"alg", "HS512"}, {"kid", "short"}}, claims,
                                           short_secret, EVP_sha512())))
                .find("does not fit key 'short' (kty oct, 32 bytes)"),
            std::string::npos);
  EXPECT_EQ(
      Refusal(auth, Bearer(HmacToken(json{{"alg", "HS512"}}, claims, short_secret, EVP_sha512()))),
      "JWT refused: bad signature");
  for (const auto& [alg, md] :
       {std::pair{"HS384", EVP_sha384()}, std::pair{"HS512", EVP_sha512()}}) {
    auto caller = auth.Authenticate(
        Bearer(HmacToken(json{{"alg", alg}, {"kid", "long"}}, claims, long_secret, md)), kNow);
    EXPECT_TRUE(caller.ok()) << alg << ": " << caller.status().message();
  }
}

TEST(JwtTest, WrongOrMissingAudienceIsRefusedWhenConfigured) {
  auto made = Authenticator::Create(
      LoadPolicy(PolicyYaml((kFixtures / "jwks.json").string(), "https://warden.example.com")), {});
  ASSERT_TRUE(made.ok()) << made.status().message();
  const Authenticator& auth = *made;
  json claims = GoodClaims();
  EXPECT_NE(Refusal(auth, Bearer(Token("ES256", claims))).find("no 'aud' claim"),
            std::string::npos);
  claims["aud"] = "https://mail.example.com";
  EXPECT_NE(Refusal(auth, Bearer(Token("ES256", claims))).find("wrong audience"),
            std::string::npos);
  claims["aud"] = json::array({"https://mail.example.com", 7});
  EXPECT_NE(Refusal(auth, Bearer(Token("ES256", claims))).find("wrong audience"),
            std::string::npos);
  claims["aud"] = "https://warden.example.com";
  EXPECT_TRUE(auth.Authenticate(Bearer(Token("ES256", claims)), kNow).ok());
  claims["aud"] = json::array({"https://mail.example.com", "https://warden.example.com"});
  EXPECT_TRUE(auth.Authenticate(Bearer(Token("ES256", claims)), kNow).ok());
  // Without the setting, aud is not checked (the policy has no audience to compare with).
  claims["aud"] = "https://mail.example.com";
  EXPECT_TRUE(MakeAuthenticator().Authenticate(Bearer(Token("ES256", claims)), kNow).ok());
}

TEST(JwtTest, KidOfAnotherKeyTypeAndUnknownKidAreRefused) {
  const Authenticator auth = MakeAuthenticator();
  EXPECT_NE(
      Refusal(auth, Bearer(Token(json{{"alg", "ES256"}, {"kid", "rsa-1"}}, GoodClaims(), "ES256")))
          .find("does not fit key 'rsa-1'"),
      std::string::npos);
  EXPECT_NE(
      Refusal(auth, Bearer(Token(json{{"alg", "RS256"}, {"kid", "rsa-2"}}, GoodClaims(), "RS256")))
          .find("unknown kid 'rsa-2'"),
      std::string::npos);
  EXPECT_NE(Refusal(auth, Bearer(Token(json{{"alg", "RS256"}, {"kid", 7}}, GoodClaims(), "RS256")))
                .find("'kid' is not a string"),
            std::string::npos);
}

TEST(JwtTest, CallerMustExistInThePolicy) {
  const Authenticator auth = MakeAuthenticator();
  auto refused_with = [&](const json& changes) {
    json claims = GoodClaims();
    claims.update(changes);
    return Refusal(auth, Bearer(Token("EdDSA", claims)));
  };
  EXPECT_EQ(refused_with({{"org", "globex"}}), "unknown tenant 'globex'");
  EXPECT_EQ(refused_with({{"sub", "mallory"}}), "unknown user 'mallory' in tenant 'acme'");
  // carol exists, but in another tenant.
  EXPECT_EQ(refused_with({{"sub", "carol"}, {"azp", nullptr}}),
            "unknown user 'carol' in tenant 'acme'");
  EXPECT_EQ(refused_with({{"azp", "robot"}}), "unknown agent 'robot' in tenant 'acme'");
  EXPECT_EQ(refused_with({{"azp", "carol-bot"}}), "unknown agent 'carol-bot' in tenant 'acme'");
  // An agent acting for another user than the token's subject.
  EXPECT_EQ(refused_with({{"azp", "bob-bot"}}),
            "agent 'bob-bot' acts for user 'bob', not for 'alice'");
  EXPECT_NE(refused_with({{"org", nullptr}}).find("no 'org' claim"), std::string::npos);
  EXPECT_NE(refused_with({{"sub", nullptr}}).find("no 'sub' claim"), std::string::npos);
  EXPECT_NE(refused_with({{"sub", 42}}).find("claim 'sub'"), std::string::npos);
}

// `encoded` with the lowest unused bit of its last character set: a lax decoder reads the same
// bytes from it. Requires a length that leaves unused bits (not a multiple of 4 characters).
std::string UnusedBitSet(std::string encoded) {
  static const std::string kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  EXPECT_NE(encoded.size() % 4, 0u);
  encoded.back() = kAlphabet[kAlphabet.find(encoded.back()) + 1];
  return encoded;
}

TEST(JwtTest, MalformedTokensAreErrorsNeverCrashes) {
  const Authenticator auth = MakeAuthenticator();
  const std::string good = Token("RS256");
  const size_t dot1 = good.find('.'), dot2 = good.rfind('.');
  const std::string header = good.substr(0, dot1), payload = good.substr(dot1 + 1, dot2 - dot1 - 1),
                    signature = good.substr(dot2 + 1);
  const std::string base64_errors[] = {
      header + "=." + payload + "." + signature,               // padding
      header + "." + payload + "." + signature + "==",         // padding on the signature
      "eyJhbGciOiJSUzI1NiJ9+." + payload + "." + signature,    // '+' is standard base64, not url
      "eyJhbGciOiJSUzI1NiJ9A." + payload + "." + signature,    // impossible length
      header + "." + payload + "." + UnusedBitSet(signature),  // same bytes, another spelling
      header + "." + payload + "." + signature.substr(0, signature.size() - 1) + "/",
  };
  for (const std::string& token : base64_errors) {
    EXPECT_NE(Refusal(auth, Bearer(token)).find("malformed JWT"), std::string::npos) << token;
  }
  EXPECT_NE(Refusal(auth, Bearer("..")).find("malformed JWT"), std::string::npos);
  EXPECT_NE(Refusal(auth, Bearer(header + ".." + signature)).find("malformed JWT"),
            std::string::npos);
  EXPECT_NE(Refusal(auth, Bearer(B64Url("not json") + "." + payload + "." + signature))
                .find("header is not a JSON object"),
            std::string::npos);
  EXPECT_NE(Refusal(auth, Bearer(B64Url("[1]") + "." + payload + "." + signature))
                .find("header is not a JSON object"),
            std::string::npos);
  // Two or four parts are not a JWT: they are taken for an (unknown) API key.
  EXPECT_EQ(Refusal(auth, Bearer(header + "." + payload)), "unknown API key");
  EXPECT_EQ(Refusal(auth, Bearer(good + "." + signature)), "unknown API key");
  // A signed payload that is not an object.
  const std::string input = header + "." + B64Url("[\"sub\"]");
  EXPECT_NE(Refusal(auth, Bearer(input + "." + B64Url(FixtureSignature("RS256", input))))
                .find("payload is not a JSON object"),
            std::string::npos);
  // Huge: refused for its size, before anything is decoded.
  const std::string huge = header + "." + std::string(20000, 'A') + "." + signature;
  EXPECT_NE(Refusal(auth, Bearer(huge)).find("credentials too long"), std::string::npos);
  // Deep nesting in the (unsigned) header, within the size limit.
  const std::string deep = B64Url(std::string(4000, '[')) + "." + payload + "." + signature;
  EXPECT_NE(Refusal(auth, Bearer(deep)).find("malformed JWT"), std::string::npos);
}

TEST(JwtTest, RandomMutationsOfAValidTokenAreNeverAccepted) {
  const Authenticator auth = MakeAuthenticator();
  const std::string good = Token("ES256");
  std::mt19937 rng(20260101);
  const std::string alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ ";
  int refused = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string token = good;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % token.size();
      switch (rng() % 3) {
        case 0:
          token[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          token.erase(at, 1 + rng() % 8);
          break;
        default:
          token.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
      }
      if (token.empty()) token = "x";
    }
    const size_t first = token.find_first_not_of(' '), last = token.find_last_not_of(' ');
    if (first != std::string::npos && token.substr(first, last - first + 1) == good) continue;
    auto caller = auth.Authenticate(Bearer(token), kNow);
    // A mutation may only pass if it decodes to the very same bytes, which strict base64url
    // rules out; so every changed token must be refused.
    EXPECT_FALSE(caller.ok()) << token;
    refused += caller.ok() ? 0 : 1;
  }
  EXPECT_GT(refused, 2900);
}

TEST(JwtTest, TokenWithoutJwtConfigurationIsRefused) {
  const Authenticator auth = MakeAuthenticator("");
  EXPECT_NE(Refusal(auth, Bearer(Token("RS256"))).find("identity.jwt is not configured"),
            std::string::npos);
}

// ---- building the authenticator ----

class JwksFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("identity_jwks_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The error Create gives for a JWKS file holding `text`, or "" when it succeeds.
  std::string CreateError(const std::string& text) {
    const std::string path = (dir_ / "jwks.json").string();
    std::ofstream(path) << text;
    auto auth = Authenticator::Create(LoadPolicy(PolicyYaml(path)), {});
    return auth.ok() ? "" : auth.status().message();
  }

  std::filesystem::path dir_;
};

TEST_F(JwksFileTest, ErrorsNameTheFileAndWhatIsWrong) {
  const std::string missing = (dir_ / "absent.json").string();
  auto auth = Authenticator::Create(LoadPolicy(PolicyYaml(missing)), {});
  ASSERT_FALSE(auth.ok());
  EXPECT_NE(auth.status().message().find(missing + ": cannot open"), std::string::npos)
      << auth.status().message();
  EXPECT_NE(CreateError("{not json").find("jwks.json: not valid JSON"), std::string::npos);
  EXPECT_NE(CreateError("[]").find("expected a JWK Set"), std::string::npos);
  EXPECT_NE(CreateError(R"({"keys": []})").find("no usable signing key"), std::string::npos);
  EXPECT_NE(CreateError(R"({"keys": [{"kty": "EC", "crv": "P-521", "x": "AA", "y": "AA"}]})")
                .find("no usable signing key"),
            std::string::npos);
  EXPECT_NE(CreateError(R"({"keys": [{"kid": "a"}]})").find("keys[0]: missing 'kty'"),
            std::string::npos);
  EXPECT_NE(CreateError(R"({"keys": [{"kty": "oct", "k": "c2hvcnQ"}]})")
                .find("keys[0]: oct key of 5 bytes; HS256 needs at least 32"),
            std::string::npos);
  EXPECT_NE(CreateError(R"({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "AA=="}]})")
                .find("keys[0]: 'x' is not base64url"),
            std::string::npos);
}

TEST_F(JwksFileTest, WeakOrInvalidPublicKeysAreRefused) {
  // A 1024-bit RSA modulus.
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> small(EVP_RSA_gen(1024), EVP_PKEY_free);
  BIGNUM* n = nullptr;
  ASSERT_EQ(EVP_PKEY_get_bn_param(small.get(), "n", &n), 1);
  std::string n_bytes(static_cast<size_t>(BN_num_bytes(n)), '\0');
  BN_bn2bin(n, reinterpret_cast<unsigned char*>(n_bytes.data()));
  BN_free(n);
  const json rsa = {{"keys", {{{"kty", "RSA"}, {"n", B64Url(n_bytes)}, {"e", "AQAB"}}}}};
  EXPECT_NE(CreateError(rsa.dump()).find("RSA modulus of 1024 bits"), std::string::npos);
  // A P-256 "point" that is not on the curve (an invalid-curve attack's key).
  const json ec = {{"keys",
                    {{{"kty", "EC"},
                      {"crv", "P-256"},
                      {"x", B64Url(std::string(32, '\1'))},
                      {"y", B64Url(std::string(32, '\2'))}}}}};
  EXPECT_NE(CreateError(ec.dump()).find("not a point on P-256"), std::string::npos);
  const json twice = {{"keys",
                       {{{"kty", "oct"}, {"kid", "k"}, {"k", B64Url(std::string(32, 'a'))}},
                        {{"kty", "oct"}, {"kid", "k"}, {"k", B64Url(std::string(32, 'b'))}}}}};
  EXPECT_NE(CreateError(twice.dump()).find("kid 'k' is used twice"), std::string::npos);
}

// Chosen: a short oct key is an error when the JWKS is loaded (the whole file is refused), and
// the error names the entry and its kid.
TEST_F(JwksFileTest, ShortOctKeyIsRefusedAtLoadNamingTheKey) {
  const std::string short16 = CreateError(
      json{{"keys", {{{"kty", "oct"}, {"kid", "weak"}, {"k", B64Url(std::string(16, 'x'))}}}}}
          .dump());
  EXPECT_NE(short16.find("keys[0] (kid 'weak'): oct key of 16 bytes; HS256 needs at least 32"),
            std::string::npos)
      << short16;
  const std::string hs512 = CreateError(json{
      {"keys",
       {{{"kty", "oct"}, {"kid", "k5"}, {"alg", "HS512"}, {"k", B64Url(std::string(32, 'x'))}}}}}
                                            .dump());
  EXPECT_NE(hs512.find("keys[0] (kid 'k5'): oct key of 32 bytes; HS512 needs at least 64"),
            std::string::npos)
      << hs512;
  const std::string hs384 = CreateError(
      json{{"keys", {{{"kty", "oct"}, {"alg", "HS384"}, {"k", B64Url(std::string(47, 'x'))}}}}}
          .dump());
  EXPECT_NE(hs384.find("keys[0]: oct key of 47 bytes; HS384 needs at least 48"), std::string::npos)
      << hs384;
}

TEST_F(JwksFileTest, EncryptionKeysAreNotUsedToVerify) {
  json jwks = json::parse(ReadFile(kFixtures / "jwks.json"));
  jwks["keys"][0]["use"] = "enc";  // rsa-1
  ASSERT_EQ(CreateError(jwks.dump()), "");
  auto auth = Authenticator::Create(LoadPolicy(PolicyYaml((dir_ / "jwks.json").string())), {});
  ASSERT_TRUE(auth.ok());
  EXPECT_NE(Refusal(*auth, Bearer(Token("RS256"))).find("unknown kid 'rsa-1'"), std::string::npos);
  EXPECT_TRUE(auth->Authenticate(Bearer(Token("ES256")), kNow).ok());
}

TEST(AuthenticatorTest, JwtWithoutTenantsIsAConfigurationError) {
  auto policy = LoadPolicy("version: 1\nidentity:\n  jwt:\n    issuer: x\n    jwks_file: \"" +
                           (kFixtures / "jwks.json").string() + "\"\n");
  auto auth = Authenticator::Create(policy, {});
  ASSERT_FALSE(auth.ok());
  EXPECT_NE(auth.status().message().find("declares no tenant"), std::string::npos);
}

// ---- single-user mode ----

TEST(SingleUserTest, LocalModeServesTheLocalUserToEveryRequest) {
  auto auth = Authenticator::Create(LoadPolicy("version: 1\n"), {true, "dana"});
  ASSERT_TRUE(auth.ok()) << auth.status().message();
  for (const std::string& header : {std::string(), std::string("Bearer whatever")}) {
    auto caller = auth->Authenticate(header);
    ASSERT_TRUE(caller.ok()) << caller.status().message();
    EXPECT_EQ(caller->user, "dana");
    EXPECT_EQ(caller->tenant, "");
    EXPECT_EQ(caller->agent, "");
  }
}

TEST(SingleUserTest, WithoutLocalModeAPolicyWithoutTenantsRefusesEverything) {
  auto auth = Authenticator::Create(LoadPolicy("version: 1\n"), {});
  ASSERT_TRUE(auth.ok());
  for (const std::string& header : {std::string(), Bearer(kAliceKey)}) {
    EXPECT_NE(Refusal(*auth, header).find("identity is not configured"), std::string::npos);
  }
}

TEST(SingleUserTest, LocalModeNeedsAUserAndIsIgnoredOnceTenantsExist) {
  EXPECT_FALSE(Authenticator::Create(LoadPolicy("version: 1\n"), {true, ""}).ok());
  auto auth = Authenticator::Create(LoadPolicy(PolicyYaml("")), {true, "dana"});
  ASSERT_TRUE(auth.ok());
  EXPECT_NE(Refusal(*auth, "").find("missing credentials"), std::string::npos);
  EXPECT_EQ(auth->Authenticate(Bearer(kAliceKey))->user, "alice");
}

// ---- scopes ----

TEST(NarrowScopeTest, ASessionMayNarrowToADeclaredScope) {
  const policy::Policy policy = LoadPolicy(PolicyYaml(""));
  auto scope = NarrowScope(policy, Caller{"acme", "alice", "alice-coder", ""}, "read_mail");
  ASSERT_TRUE(scope.ok()) << scope.status().message();
  EXPECT_EQ(*scope, "read_mail");
  // Asking again for the scope it is in changes nothing.
  scope = NarrowScope(policy, Caller{"acme", "alice", "alice-coder", "read_mail"}, "read_mail");
  ASSERT_TRUE(scope.ok());
  EXPECT_EQ(*scope, "read_mail");
}

TEST(NarrowScopeTest, UnknownScopeIsRefusedByName) {
  const policy::Policy policy = LoadPolicy(PolicyYaml(""));
  auto scope = NarrowScope(policy, Caller{"acme", "alice", "", ""}, "everything");
  ASSERT_FALSE(scope.ok());
  EXPECT_NE(scope.status().message().find("unknown scope 'everything'"), std::string::npos);
  EXPECT_FALSE(NarrowScope(policy, Caller{"acme", "alice", "", ""}, "").ok());
}

TEST(NarrowScopeTest, SwitchingOrWideningAScopeIsRefused) {
  const policy::Policy policy = LoadPolicy(PolicyYaml(""));
  const Caller in_read_scope{"acme", "alice", "", "read_mail"};
  auto other = NarrowScope(policy, in_read_scope, "triage");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("scope 'triage' refused"), std::string::npos);
  EXPECT_NE(other.status().message().find("already in scope 'read_mail'"), std::string::npos);
  // Leaving the scope (no scope at all) is the widest widening: an empty request is refused.
  EXPECT_FALSE(NarrowScope(policy, in_read_scope, "").ok());
}

}  // namespace
}  // namespace warden::identity
