#include "audit/checkpoint.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <vector>

#include "common/base64.h"
#include "common/read_file.h"
#include "common/unique_fd.h"
#include "common/write_file.h"

namespace warden::audit {
namespace {

constexpr size_t kMaxKeyFile = 16 * 1024;
constexpr size_t kMaxNote = 64 * 1024;
// "—" (U+2014) and a space: what starts a signature line in a signed note.
constexpr std::string_view kSignaturePrefix = "\xe2\x80\x94 ";

struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using Bio = std::unique_ptr<BIO, BioFree>;

std::string Base64(std::string_view bytes) {
  std::string s = Base64NoPad(bytes, kBase64Alphabet);
  while (s.size() % 4 != 0) s.push_back('=');
  return s;
}

// Standard base64 with padding, strictly: a length that is a multiple of 4, nothing else.
Result<std::string> DecodeBase64(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) return Status::Error("not base64");
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool pad = c == '=' && i + 2 >= text.size() && (i + 1 == text.size() || text[i + 1] == '=');
    if (std::string_view(kBase64Alphabet, 64).find(c) == std::string_view::npos && !pad)
      return Status::Error("not base64");
  }
  std::string out(text.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return Status::Error("not base64");
  size_t len = static_cast<size_t>(n);
  if (text.ends_with("==")) len -= 2;
  else if (text.ends_with("=")) len -= 1;
  out.resize(len);
  return out;
}

Result<std::string> RawPublicKey(EVP_PKEY* key) {
  std::string raw(32, '\0');
  size_t len = raw.size();
  if (EVP_PKEY_get_raw_public_key(key, reinterpret_cast<unsigned char*>(raw.data()), &len) != 1 ||
      len != 32)
    return Status::Error("not an Ed25519 key");
  return raw;
}

// SHA-256(name || "\n" || 0x01 || public key)[:4]: the signed-note key id for Ed25519.
std::string KeyId(std::string_view name, std::string_view raw_public) {
  std::string input(name);
  input += '\n';
  input += '\x01';
  input += raw_public;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(input.data(), input.size(), digest, &len, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<char*>(digest), 4);
}

Result<std::string> CreateKeyFile(const std::string& path) {
  Pkey key(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  if (!key) return Status::Error("could not make an Ed25519 key");
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1)
    return Status::Error("could not write the Ed25519 key as PEM");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  std::string pem(data, static_cast<size_t>(n));
  Status st = CreateFileWith(path, pem, 0600, /*sync=*/true);
  if (!st.ok()) return st.Wrap("the checkpoint key");
  return pem;
}

}  // namespace

struct CheckpointKey::Impl {
  Pkey key;
  std::string raw_public;
};

CheckpointKey::CheckpointKey(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CheckpointKey::CheckpointKey(CheckpointKey&&) noexcept = default;
CheckpointKey& CheckpointKey::operator=(CheckpointKey&&) noexcept = default;
CheckpointKey::~CheckpointKey() = default;

std::string CheckpointBody(const Checkpoint& c) {
  return c.origin + "\n" + std::to_string(c.size) + "\n" +
         Base64({reinterpret_cast<const char*>(c.root.data()), c.root.size()}) + "\n";
}

std::string DefaultCheckpointKeyPath(const std::string& database) {
  const std::filesystem::path dir = std::filesystem::path(database).parent_path();
  return (dir.empty() ? std::filesystem::path(".") : dir).string() + "/audit-checkpoint.key";
}

Status ValidOrigin(std::string_view origin) {
  if (origin.empty() || origin.size() > 128)
    return Status::Error("the origin must be 1 to 128 characters");
  for (char c : origin) {
    if (c <= ' ' || c > '~')
      return Status::Error("the origin must be printable ASCII without spaces");
  }
  return Status::Ok();
}

Result<CheckpointKey> CheckpointKey::Load(const std::string& path, bool create) {
  struct stat st;
  Result<std::string> pem = Status::Error("");
  if (create && ::lstat(path.c_str(), &st) != 0 && errno == ENOENT) {
    pem = CreateKeyFile(path);
  } else {
    pem = ReadOwnerOnlyFile(path, path, "the checkpoint signing key", kMaxKeyFile);
  }
  if (!pem) return pem.status();
  Bio bio(BIO_new_mem_buf(pem->data(), static_cast<int>(pem->size())));
  Pkey key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  OPENSSL_cleanse(pem->data(), pem->size());
  if (!key) return Status::Error(path + " holds no PEM private key");
  if (EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519)
    return Status::Error(path + " is not an Ed25519 key (checkpoints are signed with Ed25519)");
  auto raw = RawPublicKey(key.get());
  if (!raw) return raw.status();
  auto impl = std::make_unique<Impl>();
  impl->key = std::move(key);
  impl->raw_public = std::move(*raw);
  return CheckpointKey(std::move(impl));
}

std::string CheckpointKey::PublicKeyPem() const {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PUBKEY(bio.get(), impl_->key.get()) != 1) return {};
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

Result<std::string> CheckpointKey::Sign(const Checkpoint& c) const {
  WARDEN_RETURN_IF_ERROR(ValidOrigin(c.origin));
  const std::string body = CheckpointBody(c);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  std::string sig(64, '\0');
  size_t len = sig.size();
  const bool ok = ctx != nullptr &&
                  EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, impl_->key.get()) == 1 &&
                  EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                                 reinterpret_cast<const unsigned char*>(body.data()), body.size()) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok || len != 64) return Status::Error("signing the checkpoint failed");
  return body + "\n" + std::string(kSignaturePrefix) + c.origin + " " +
         Base64(KeyId(c.origin, impl_->raw_public) + sig) + "\n";
}

Result<Checkpoint> VerifyCheckpoint(std::string_view note, std::string_view public_key_pem) {
  if (note.size() > kMaxNote) return Status::Error("the checkpoint is too large");
  Bio bio(BIO_new_mem_buf(public_key_pem.data(), static_cast<int>(public_key_pem.size())));
  Pkey key(bio ? PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key || EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519)
    return Status::Error("the public key is not an Ed25519 key in PEM");
  auto raw = RawPublicKey(key.get());
  if (!raw) return raw.status();

  const size_t split = note.find("\n\n");
  if (split == std::string_view::npos) return Status::Error("the checkpoint has no signature");
  const std::string_view body = note.substr(0, split + 1);
  std::string_view sigs = note.substr(split + 2);
  // Body: origin, size, root (extension lines after them are signed and ignored).
  std::vector<std::string_view> lines;
  for (size_t at = 0; at < body.size();) {
    const size_t nl = body.find('\n', at);
    lines.push_back(body.substr(at, nl - at));
    at = nl + 1;
  }
  if (lines.size() < 3) return Status::Error("the checkpoint needs origin, size and root lines");
  Checkpoint c;
  c.origin = std::string(lines[0]);
  WARDEN_RETURN_IF_ERROR(ValidOrigin(c.origin).Wrap("checkpoint"));
  if (lines[1].empty() || lines[1].size() > 20 || (lines[1].size() > 1 && lines[1][0] == '0'))
    return Status::Error("the checkpoint's size is not a decimal number");
  for (char ch : lines[1]) {
    if (ch < '0' || ch > '9') return Status::Error("the checkpoint's size is not a decimal number");
  }
  try {
    c.size = std::stoull(std::string(lines[1]));
  } catch (const std::exception&) {
    return Status::Error("the checkpoint's size is out of range");
  }
  auto root = DecodeBase64(lines[2]);
  if (!root || root->size() != 32) return Status::Error("the checkpoint's root is not 32 bytes of base64");
  std::copy(root->begin(), root->end(), c.root.begin());

  const std::string want_id = KeyId(c.origin, *raw);
  while (!sigs.empty()) {
    const size_t nl = sigs.find('\n');
    if (nl == std::string_view::npos) return Status::Error("the checkpoint's last line has no newline");
    std::string_view line = sigs.substr(0, nl);
    sigs.remove_prefix(nl + 1);
    if (!line.starts_with(kSignaturePrefix)) return Status::Error("a signature line must start with '— '");
    line.remove_prefix(kSignaturePrefix.size());
    const size_t space = line.find(' ');
    if (space == std::string_view::npos) return Status::Error("a signature line needs a key name and a signature");
    if (line.substr(0, space) != c.origin) continue;  // another key's signature
    auto blob = DecodeBase64(line.substr(space + 1));
    if (!blob || blob->size() != 68 || blob->substr(0, 4) != want_id) continue;
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    const bool ok =
        ctx != nullptr && EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, key.get()) == 1 &&
        EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(blob->data() + 4), 64,
                         reinterpret_cast<const unsigned char*>(body.data()), body.size()) == 1;
    EVP_MD_CTX_free(ctx);
    if (!ok) return Status::Error("the checkpoint's signature by " + c.origin + " does not verify");
    return c;
  }
  return Status::Error("the checkpoint carries no signature by this key (" + c.origin + ")");
}

}  // namespace warden::audit
