// Signed checkpoints of the audit tree: "this log had N entries and this Merkle root", signed with
// Ed25519, in the signed-note text format (the C2SP tlog-checkpoint layout) so that anyone with
// the public key can check one with openssl alone. docs/audit.md, "Checkpoints".
//
//   <origin>\n<size>\n<base64 root>\n\n— <origin> <base64(key id || signature)>\n
//
// The signature covers the first three lines (with their newlines); the key id is the first 4
// bytes of SHA-256(origin || "\n" || 0x01 || the 32-byte public key).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "audit/merkle.h"
#include "common/status.h"

namespace warden::audit {

struct Checkpoint {
  std::string origin;  // names the log; printable ASCII, no spaces
  uint64_t size = 0;
  Digest root{};
};

// The signed part: "<origin>\n<size>\n<base64 root>\n".
std::string CheckpointBody(const Checkpoint& c);

// Where a log's key is unless named: audit-checkpoint.key beside the database file `database`.
std::string DefaultCheckpointKeyPath(const std::string& database);

// An origin is 1 to 128 printable ASCII characters without spaces (it is also the key's name).
Status ValidOrigin(std::string_view origin);

class CheckpointKey {
 public:
  // The Ed25519 private key in `path` (PEM, PKCS#8). With `create`, a missing file is made
  // (mode 0600, O_EXCL). Refused: a symbolic link, not a regular file, a mode that lets group
  // or others read it, anything but an Ed25519 key.
  static Result<CheckpointKey> Load(const std::string& path, bool create);
  CheckpointKey(CheckpointKey&&) noexcept;
  CheckpointKey& operator=(CheckpointKey&&) noexcept;
  ~CheckpointKey();

  // The public key as PEM (SubjectPublicKeyInfo), what a verifier is given.
  std::string PublicKeyPem() const;
  // The signed note for `c`.
  Result<std::string> Sign(const Checkpoint& c) const;

 private:
  struct Impl;
  explicit CheckpointKey(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Parses a signed note and checks its signature by `public_key_pem` (a line signed by another
// key, or none at all, is an error naming why).
Result<Checkpoint> VerifyCheckpoint(std::string_view note, std::string_view public_key_pem);

}  // namespace warden::audit
