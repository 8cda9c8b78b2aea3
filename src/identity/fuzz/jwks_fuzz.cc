// libFuzzer entry point for JWKS loading: the key file `identity.jwt.jwks_file` names, which an
// identity provider publishes and an operator copies in. The input is the file. Invariants, beyond
// not crashing:
//   * an error names the file, and never quotes an oct key's secret `k`;
//   * with the keys loaded, a token whose signature nobody could have made (RS256, ES256, EdDSA
//     with made-up signatures; alg none) is refused, and an HS256 token signed with a secret is
//     accepted only when that secret is in the file.
// Seed corpus: tests/fuzz/corpus/jwks/ (docs/testing-fuzz.md).
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

const std::string kPayload =
    R"({"iss":"warden-fuzz-issuer","exp":1767229200,"tenant":"acme","sub":"alice"})";

std::string Unsigned(std::string_view alg, std::string_view kid, std::string_view signature) {
  json header = {{"alg", alg}};
  if (!kid.empty()) header["kid"] = kid;
  return "Bearer " + Base64Url(header.dump()) + "." + Base64Url(kPayload) + "." +
         Base64Url(signature);
}

std::string Hs256Token(std::string_view kid) {
  json header = {{"alg", "HS256"}};
  if (!kid.empty()) header["kid"] = kid;
  return "Bearer " + SignedToken(header.dump(), kPayload);
}

// The `k` members of the file's keys, as its JSON says (escapes decoded).
std::vector<std::string> Secrets(std::string_view text) {
  std::vector<std::string> out;
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("keys") || !doc["keys"].is_array()) return out;
  for (const json& key : doc["keys"]) {
    if (key.is_object() && key.contains("k") && key["k"].is_string()) out.push_back(key["k"]);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static MemFile* file = new MemFile;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  file->Write(text);
  auto auth = Authenticator::Create(FuzzPolicy(file->path()), {});
  if (!auth.ok()) {
    const std::string message = auth.status().message();
    FUZZ_CHECK(message.rfind("identity.jwt.jwks_file " + file->path() + ": ", 0) == 0);
    for (const auto& k : Secrets(text)) {
      if (k.size() >= 8) FUZZ_CHECK(message.find(k) == std::string::npos);
    }
    return 0;
  }
  const std::string junk(64, '\x01');
  for (const char* kid : {"", "rs", "es", "ed", "hs"}) {
    for (const char* alg : {"RS256", "ES256", "EdDSA", "none", "HS512"}) {
      FUZZ_CHECK(!auth->Authenticate(Unsigned(alg, kid, junk), kNow).ok());
    }
    const bool accepted = auth->Authenticate(Hs256Token(kid), kNow).ok();
    if (accepted) {
      const auto secrets = Secrets(text);
      FUZZ_CHECK(std::find(secrets.begin(), secrets.end(), Base64Url(kSecret)) != secrets.end());
    }
  }
  return 0;
}
