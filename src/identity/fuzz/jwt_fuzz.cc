// libFuzzer entry point for the HTTP transport's authentication: the Authorization header any
// network client sends (API key or JWT), checked against a fixed policy and JWKS (an HS256 secret,
// and RSA, P-256 and Ed25519 public keys whose private halves nobody here has).
// The first input byte picks the mode: even, the rest is the header as sent; odd, the rest is
// "HEADER-JSON\nPAYLOAD-JSON" and the target signs it with the HS256 secret, so that the checks
// after the signature (exp, nbf, iat, iss, the caller's claims) are reached too.
// Invariants, beyond not crashing:
//   * an accepted caller exists in the policy (an agent only for its own user);
//   * an accepted JWT carries an HMAC under the one secret (nothing else can have signed it: no
//     algorithm confusion, no 'none'), alg HS256, no crit, the right issuer and an exp not past;
//   * an accepted API key is the one key configured;
//   * no error message holds the credentials or the secret.
// Seed corpus: tests/fuzz/corpus/jwt/ (docs/testing-fuzz.md).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "identity_fuzz_support.h"

namespace {

using namespace warden::identity;
using namespace warden::identity::fuzz;
using nlohmann::json;

const Authenticator& TheAuthenticator() {
  static MemFile* jwks = [] {
    auto* file = new MemFile;
    const json keys = {
        {"keys",
         {{{"kty", "oct"}, {"kid", "hs"}, {"alg", "HS256"}, {"k", Base64Url(kSecret)}},
          {{"kty", "RSA"},
           {"kid", "rs"},
           {"e", "AQAB"},
           {"n",
            "pz3spq5Ey9cHd9CcKiljZh6khT5I8uDnj3YO3wYzkVBAwxNOLqy8v0SmrqSgfm8UXVDPi9txvXL8vCdpVMBASQ"
            "TgLaAU8D_O6atP3tU3Xc0-sMeyd7COTDos_hO9hQw56Qu9dv_WYJNtsbC_RTcVzB1-"
            "wD6A6YTT02PUVkz8s22mg"
            "RmBS9RKnHgCbrBiUcTTKysPVL2Us79GKog73x_4HEXf1XmNcNeWd_RN8Nz2zhRQoV0rtx4Tk4lT4IrB046D3CH"
            "sig02MpIZx9GYrRMsSmoTopiZz6RFKXok808r_izTzwcoB8gRpRwp6qYA6ettlxJ8ww2-XgaEO-iLMUk6Zw"}},
          {{"kty", "EC"},
           {"kid", "es"},
           {"crv", "P-256"},
           {"x", "UvN8m3U0Y9Jb_KoV92mngTAT7Fj9XoJdO5jcIvRcNmc"},
           {"y", "ZBlADAHWXD6n7l2CWPzZ4DhPJAcphcavUPAyaoXNRis"}},
          {{"kty", "OKP"},
           {"kid", "ed"},
           {"crv", "Ed25519"},
           {"x", "BfWvE8B1Rcbudo6GEPvk9eJB9HEHsy582qsYUUjS-wU"}}}}};
    file->Write(keys.dump());
    return file;
  }();
  static const Authenticator* auth = [] {
    auto created = Authenticator::Create(FuzzPolicy(jwks->path()), {});
    FUZZ_CHECK(created.ok());
    return new Authenticator(std::move(*created));
  }();
  return *auth;
}

std::vector<std::string_view> Words(std::string_view text) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < text.size()) {
    const size_t end = text.find_first_of(" \t", i);
    if (end != i) out.push_back(text.substr(i, end == std::string_view::npos ? end : end - i));
    if (end == std::string_view::npos) break;
    i = end + 1;
  }
  return out;
}

json JsonPart(std::string_view b64) {
  return json::parse(Base64UrlDecodeLenient(b64), nullptr, /*allow_exceptions=*/false);
}

void CheckAcceptedJwt(std::string_view token) {
  const size_t dot1 = token.find('.');
  const size_t dot2 = token.find('.', dot1 + 1);
  FUZZ_CHECK(dot2 != std::string_view::npos && token.find('.', dot2 + 1) == std::string_view::npos);
  FUZZ_CHECK(Base64UrlDecodeLenient(token.substr(dot2 + 1)) == Hs256(token.substr(0, dot2)));
  const json header = JsonPart(token.substr(0, dot1));
  FUZZ_CHECK(header.is_object() && header.value("alg", json()) == "HS256");
  FUZZ_CHECK(!header.contains("crit"));
  const json claims = JsonPart(token.substr(dot1 + 1, dot2 - dot1 - 1));
  FUZZ_CHECK(claims.is_object() && claims.value("iss", json()) == kIssuer);
  FUZZ_CHECK(claims.contains("exp") && claims["exp"].is_number());
  const double now = std::chrono::duration<double>(kNow.time_since_epoch()).count();
  FUZZ_CHECK(now < claims["exp"].get<double>() + 60);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string header;
  if (data[0] & 1) {
    const size_t nl = rest.find('\n');
    header = "Bearer " + SignedToken(rest.substr(0, nl),
                                     nl == std::string_view::npos ? "" : rest.substr(nl + 1));
  } else {
    header = std::string(rest);
  }
  const auto caller = TheAuthenticator().Authenticate(header, kNow);
  const std::vector<std::string_view> words = Words(header);
  if (caller.ok()) {
    CheckKnownCaller(*caller);
    FUZZ_CHECK(!words.empty());
    const std::string_view credentials = words.back();
    if (std::count(credentials.begin(), credentials.end(), '.') == 2) {
      CheckAcceptedJwt(credentials);
    } else {
      FUZZ_CHECK(credentials == kApiKey);
    }
    return 0;
  }
  const std::string message = caller.status().message();
  FUZZ_CHECK(!message.empty());
  // Unless the input holds it itself: a signed claim may quote the secret (the fuzzer finds it).
  if (rest.find(kSecret) == std::string_view::npos) {
    FUZZ_CHECK(message.find(kSecret) == std::string::npos);
  }
  for (std::string_view word : words) {
    if (word.size() >= 24) FUZZ_CHECK(message.find(word) == std::string::npos);
  }
  return 0;
}
