// AES-256-GCM (OpenSSL EVP) for the secret store: a random 96-bit nonce per encryption, a 128-bit
// tag, and associated data that binds a ciphertext to the row it belongs to, so that a row copied
// under another name, user or tenant fails to decrypt.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "credentials/master_key.h"

namespace warden::credentials {

struct Sealed {
  std::string nonce;       // 12 bytes
  std::string ciphertext;  // the encrypted bytes followed by the 16-byte tag
};

Result<Sealed> Seal(const MasterKey& key, std::string_view plaintext, std::string_view aad);
// Fails with "the ciphertext does not decrypt under key ID (tampered, or another key)" when the
// tag does not verify, the nonce is not 12 bytes or the ciphertext is shorter than the tag.
Result<std::string> Open(const MasterKey& key, const Sealed& sealed, std::string_view aad);

}  // namespace warden::credentials
