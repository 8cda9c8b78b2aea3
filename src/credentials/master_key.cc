#include "credentials/master_key.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "common/read_file.h"
#include "common/unique_fd.h"

namespace warden::credentials {

namespace {

// A key file is 64 hex digits or 44 base64 characters and a newline; anything much larger is not
// a key file, and reading it whole would only cost memory.
constexpr size_t kMaxKeyFileBytes = 4096;

constexpr std::string_view kWhitespace = " \t\r\n\v\f";

// Zeroes a string's buffer before it is freed: key text read from a file or copied from the
// environment should not linger in freed heap memory.
void Cleanse(std::string& text) {
  if (!text.empty()) OPENSSL_cleanse(text.data(), text.size());
  text.clear();
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool DecodeHex(std::string_view text, std::array<uint8_t, 32>& out) {
  if (text.size() != 2 * out.size()) return false;
  for (size_t i = 0; i < out.size(); ++i) {
    const int high = HexValue(text[2 * i]);
    const int low = HexValue(text[2 * i + 1]);
    if (high < 0 || low < 0) return false;
    out[i] = static_cast<uint8_t>(high << 4 | low);
  }
  return true;
}

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with its padding, of exactly 32 bytes: 43 characters and one '='. Written out
// rather than through EVP_DecodeBlock, which accepts whitespace inside the text and reports the
// length before padding is taken off, so that "exactly 32 bytes" would need a second check of
// its own anyway.
bool DecodeBase64(std::string_view text, std::array<uint8_t, 32>& out) {
  if (text.size() != 44 || text[43] != '=') return false;
  uint32_t bits = 0;
  int nbits = 0;
  size_t n = 0;
  for (size_t i = 0; i < 43; ++i) {
    const int v = Base64Value(text[i]);
    if (v < 0) return false;
    bits = (bits << 6) | static_cast<uint32_t>(v);
    nbits += 6;
    if (nbits >= 8) {
      nbits -= 8;
      out[n++] = static_cast<uint8_t>(bits >> nbits);
    }
  }
  // 43 * 6 = 258 bits: 32 bytes and 2 bits left over, which canonical base64 leaves zero. A
  // nonzero remainder means the text was not produced by encoding 32 bytes.
  const bool canonical = n == out.size() && (bits & ((1u << nbits) - 1)) == 0;
  bits = 0;
  return canonical;
}

std::string KeyId(const std::array<uint8_t, 32>& key) {
  static constexpr std::string_view kLabel = "warden master key id\n";
  uint8_t input[kLabel.size() + 32];
  std::copy(kLabel.begin(), kLabel.end(), input);
  std::copy(key.begin(), key.end(), input + kLabel.size());
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_size = 0;
  const bool ok = EVP_Digest(input, sizeof input, digest, &digest_size, EVP_sha256(), nullptr) == 1;
  OPENSSL_cleanse(input, sizeof input);
  if (!ok || digest_size < 8) return std::string();
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id;
  for (int i = 0; i < 8; ++i) {
    id += kHex[digest[i] >> 4];
    id += kHex[digest[i] & 0xf];
  }
  return id;
}

Result<MasterKey> LoadFromFile(const std::string& path, const std::string& where) {
  auto text = ReadOwnerOnlyFile(path, where, "the master key", kMaxKeyFileBytes);
  if (!text) return text.status();
  auto key = ParseMasterKey(*text, where);
  Cleanse(*text);
  return key;
}

}  // namespace

std::string KeySource::Describe() const {
  if (!env.empty()) return "environment variable " + env;
  return "file " + file;
}

Result<MasterKey> ParseMasterKey(std::string_view text, const std::string& where) {
  const size_t begin = text.find_first_not_of(kWhitespace);
  if (begin == std::string_view::npos)
    return Status::Error("the master key in " + where + " is empty");
  const size_t end = text.find_last_not_of(kWhitespace);
  const std::string_view trimmed = text.substr(begin, end - begin + 1);
  MasterKey key;
  if (!DecodeHex(trimmed, key.bytes) && !DecodeBase64(trimmed, key.bytes)) {
    OPENSSL_cleanse(key.bytes.data(), key.bytes.size());
    // The text itself stays out of the message: it may be a key with a typo.
    return Status::Error("the master key in " + where +
                         " is neither 64 hex digits nor base64 of exactly 32 bytes (make one "
                         "with: openssl rand -hex 32)");
  }
  key.id = KeyId(key.bytes);
  if (key.id.empty()) {
    OPENSSL_cleanse(key.bytes.data(), key.bytes.size());
    return Status::Error("could not compute the id of the master key in " + where +
                         " (OpenSSL SHA-256 failed)");
  }
  return key;
}

Result<MasterKey> LoadMasterKey(const KeySource& source) {
  const std::string where = source.Describe();
  if (!source.env.empty()) {
    const char* value = std::getenv(source.env.c_str());
    if (value == nullptr) return Status::Error("the master key's " + where + " is not set");
    if (*value == '\0') return Status::Error("the master key's " + where + " is empty");
    return ParseMasterKey(value, where);
  }
  if (source.file.empty()) {
    return Status::Error(
        "the master key's source names neither an environment variable nor a file");
  }
  return LoadFromFile(source.file, where);
}

const MasterKey* KeyRing::Find(std::string_view id) const {
  for (const MasterKey& key : keys) {
    if (key.id == id) return &key;
  }
  return nullptr;
}

Result<KeyRing> LoadKeyRing(const KeySource& current, const std::vector<KeySource>& previous) {
  KeyRing ring;
  std::vector<std::string> where;
  auto add = [&](const KeySource& source) -> Status {
    auto key = LoadMasterKey(source);
    if (!key) return key.status();
    for (size_t i = 0; i < ring.keys.size(); ++i) {
      if (ring.keys[i].id == key->id) {
        OPENSSL_cleanse(key->bytes.data(), key->bytes.size());
        return Status::Error("the master keys in " + where[i] + " and " + source.Describe() +
                             " have the same id " + ring.keys[i].id +
                             ": list each key once (credentials.master_key, "
                             "credentials.previous_keys)");
      }
    }
    ring.keys.push_back(std::move(*key));
    where.push_back(source.Describe());
    return Status::Ok();
  };
  Status st = add(current);
  for (size_t i = 0; st.ok() && i < previous.size(); ++i) st = add(previous[i]);
  if (!st.ok()) {
    for (MasterKey& key : ring.keys) OPENSSL_cleanse(key.bytes.data(), key.bytes.size());
    return st;
  }
  return ring;
}

}  // namespace warden::credentials
