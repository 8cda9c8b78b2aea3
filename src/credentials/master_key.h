// The master key the secret store is encrypted under (docs/credentials.md, "The master key").
// It never comes from the policy file: the policy's `credentials.master_key` names where it is,
// an environment variable (`{env: VAR}`) or a file (`{file: PATH}`), and that place holds 32
// random bytes written as 64 hex digits or as base64 (surrounding whitespace ignored). Older keys
// (`credentials.previous_keys`) still decrypt, never encrypt: that is how keys are rotated.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace warden::credentials {

// Where a key is: exactly one of env and file is set (the policy loader checks that).
struct KeySource {
  std::string env;               // an environment variable's name
  std::string file;              // a path; relative to the working directory
  std::string Describe() const;  // "environment variable WARDEN_MASTER_KEY" / "file /etc/k"
};

struct MasterKey {
  std::array<uint8_t, 32> bytes{};
  // 16 hex digits naming the key without revealing it: the first 8 bytes of
  // SHA-256("warden master key id\n" || bytes). Stored beside each secret.
  std::string id;
};

// Reads one key. Errors name the source and what is wrong, never the key's text: the variable is
// unset or empty; the file is missing, a symbolic link, not a regular file, or readable or
// writable by group or others (mode must be 0600 or 0400, like ssh's private keys); the text is
// neither 64 hex digits nor base64 of exactly 32 bytes.
Result<MasterKey> LoadMasterKey(const KeySource& source);

// Parses key text (tests and LoadMasterKey).
Result<MasterKey> ParseMasterKey(std::string_view text, const std::string& where);

// The current key first, then the previous ones, in the order given; a key id that appears twice
// is an error (the same key listed twice, or a collision).
struct KeyRing {
  std::vector<MasterKey> keys;  // keys[0] encrypts; all decrypt
  const MasterKey& current() const { return keys.front(); }
  const MasterKey* Find(std::string_view id) const;
};
Result<KeyRing> LoadKeyRing(const KeySource& current, const std::vector<KeySource>& previous);

}  // namespace warden::credentials
