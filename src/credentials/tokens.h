// Short-lived tokens warden mints per call for an upstream (docs/credentials.md, "Tokens"): JWTs
// signed ES256 (ECDSA P-256, SHA-256; RFC 7518 3.4: the signature is r || s, 64 bytes), with
//   iss   the policy's credentials.tokens.issuer (default "warden")
//   sub   the user the agent acts for
//   act   {"sub": AGENT} when an agent calls (RFC 8693 4.1, the actor claim); absent for a person
//   aud   the upstream's audience (credentials.tokens.audience, default its URL, else its name)
//   scope "read" for a read call, "read write" for a write call (RFC 8693 4.2 form: space
//         separated); a read scope never gets "write"
//   tool  the exposed tool name, when minted for a tools/call
//   tenant the caller's tenant, when there is one
//   iat, nbf, exp (lifetime: 5 minutes by default), jti (128 random bits, hex)
// and the header {"alg":"ES256","typ":"JWT","kid":KID}. The public keys are the JWKS (RFC 7517)
// the gateway serves at /.well-known/jwks.json: the current key and every retired key whose
// tokens may still be alive, so that rotation never breaks a token in flight.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace warden::credentials {

// One P-256 key pair. kid is 16 hex digits of the SHA-256 of the public key's JWK thumbprint
// input (RFC 7638), so that the same key always has the same kid.
class SigningKey {
 public:
  static Result<SigningKey> Generate();
  static Result<SigningKey> FromDer(std::string_view pkcs8_der);  // a PKCS#8 P-256 private key
  const std::string& kid() const { return kid_; }
  std::string PrivateDer() const;    // PKCS#8 DER (for the store, which encrypts it)
  nlohmann::json PublicJwk() const;  // {kty:EC, crv:P-256, x, y, kid, use:sig, alg:ES256}
  // The JWS signature (r || s, 64 bytes) of `signing_input`.
  Result<std::string> Sign(std::string_view signing_input) const;

  SigningKey(const SigningKey&) = default;
  SigningKey& operator=(const SigningKey&) = default;
  SigningKey(SigningKey&&) = default;
  SigningKey& operator=(SigningKey&&) = default;
  ~SigningKey();

  struct Impl;

 private:
  SigningKey() = default;
  // The key of a built pair, with its kid.
  static Result<SigningKey> FromImpl(Result<std::shared_ptr<Impl>> impl);
  std::shared_ptr<Impl> impl_;
  std::string kid_;
};

struct TokenRequest {
  std::string issuer = "warden";
  std::string tenant, user, agent;  // agent "" when a person calls
  std::string audience;
  bool write = false;  // the call's access: write adds "write" to the scope
  std::string tool;    // "" when not for a tool call
  std::chrono::seconds lifetime{300};
};

struct Token {
  std::string jwt;
  std::string jti;
  std::chrono::system_clock::time_point expires;
};

// Mints with the current key; publishes current and retired keys. Thread-safe.
class TokenMinter {
 public:
  struct KeyEntry {
    SigningKey key;
    std::chrono::system_clock::time_point created;
    // Unset: the current key. Set: retired then; published until retired + max_lifetime.
    std::optional<std::chrono::system_clock::time_point> retired;
  };
  // `keys` must hold exactly one current key (the newest one is used when several claim to be).
  // max_lifetime bounds every token it mints and how long a retired key stays published.
  static Result<std::unique_ptr<TokenMinter>> Create(std::vector<KeyEntry> keys,
                                                     std::chrono::seconds max_lifetime);

  // Refuses an empty user or audience, a lifetime of zero or over max_lifetime, and text
  // claims with control characters.
  Result<Token> Mint(const TokenRequest& request, std::chrono::system_clock::time_point now =
                                                      std::chrono::system_clock::now()) const;
  // {"keys":[...]}: the current key and retired keys whose tokens may still be alive at `now`.
  nlohmann::json Jwks(
      std::chrono::system_clock::time_point now = std::chrono::system_clock::now()) const;
  // Replaces the key set (after a rotation stored by another process).
  Status Replace(std::vector<KeyEntry> keys);
  std::string current_kid() const;
  std::chrono::seconds max_lifetime() const { return max_lifetime_; }

 private:
  TokenMinter(std::vector<KeyEntry> keys, std::chrono::seconds max_lifetime)
      : keys_(std::move(keys)), max_lifetime_(max_lifetime) {}
  mutable std::mutex mu_;
  std::vector<KeyEntry> keys_;
  std::chrono::seconds max_lifetime_;
};

// The signing keys a store holds (credentials_signing_keys) as the minter takes them.
class SecretStore;
Result<std::vector<TokenMinter::KeyEntry>> SigningKeyEntries(SecretStore& store);

}  // namespace warden::credentials
