// What the identity fuzz targets (jwt_fuzz.cc, jwks_fuzz.cc) share: a policy with one tenant, a
// JWKS file in memory (a memfd, named by its /proc/self/fd path, so that no iteration touches the
// disk), and the encoding and HS256 signing of test tokens. Only the public API of
// gateway/identity.h is used.
#pragma once

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "identity/identity.h"
#include "policy/model.h"

namespace warden::identity::fuzz {

inline constexpr std::string_view kIssuer = "warden-fuzz-issuer";
inline constexpr std::string_view kApiKey = "wk_fuzz_0123456789abcdef";
// The oct key of the fixed JWKS: the only secret anything in these targets can sign with.
inline constexpr std::string_view kSecret = "0123456789abcdef0123456789abcdef";
// 2026-01-01T00:00:00Z: tokens in the corpus have exp after it.
inline const std::chrono::system_clock::time_point kNow{std::chrono::seconds(1767225600)};

inline std::string Base64Url(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const unsigned v = static_cast<unsigned char>(bytes[i]) << 16 |
                       static_cast<unsigned char>(bytes[i + 1]) << 8 |
                       static_cast<unsigned char>(bytes[i + 2]);
    for (int shift : {18, 12, 6, 0}) out += kAlphabet[(v >> shift) & 63];
  }
  if (bytes.size() - i == 1) {
    const unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
  } else if (bytes.size() - i == 2) {
    const unsigned v =
        static_cast<unsigned char>(bytes[i]) << 16 | static_cast<unsigned char>(bytes[i + 1]) << 8;
    for (int shift : {18, 12, 6}) out += kAlphabet[(v >> shift) & 63];
  }
  return out;
}

// Decodes base64url without checking anything warden's strict decoder checks: for an input that
// decoder accepted, the same bytes.
inline std::string Base64UrlDecodeLenient(std::string_view text) {
  std::string out;
  unsigned buffer = 0;
  int bits = 0;
  for (char c : text) {
    int v = c >= 'A' && c <= 'Z'   ? c - 'A'
            : c >= 'a' && c <= 'z' ? c - 'a' + 26
            : c >= '0' && c <= '9' ? c - '0' + 52
            : c == '-'             ? 62
            : c == '_'             ? 63
                                   : -1;
    if (v < 0) continue;
    buffer = (buffer << 6 | static_cast<unsigned>(v)) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xff);
    }
  }
  return out;
}

// HMAC-SHA256 of `data` under kSecret.
inline std::string Hs256(std::string_view data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  FUZZ_CHECK(HMAC(EVP_sha256(), kSecret.data(), static_cast<int>(kSecret.size()),
                  reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac,
                  &size) != nullptr);
  return std::string(reinterpret_cast<const char*>(mac), size);
}

// header.payload.signature with the HS256 signature under kSecret, whatever the header says.
inline std::string SignedToken(std::string_view header, std::string_view payload) {
  const std::string signed_part = Base64Url(header) + "." + Base64Url(payload);
  return signed_part + "." + Base64Url(Hs256(signed_part));
}

// A file whose contents each iteration replaces; path() opens it like any file.
class MemFile {
 public:
  MemFile() : fd_(memfd_create("warden-fuzz", 0)) { FUZZ_CHECK(fd_ >= 0); }
  ~MemFile() { close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  void Write(std::string_view bytes) {
    FUZZ_CHECK(ftruncate(fd_, 0) == 0);
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n =
          pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
      FUZZ_CHECK(n > 0);
      done += static_cast<size_t>(n);
    }
  }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

// Tenant acme: users alice and bob; agent coder acts for alice and holds kApiKey.
inline policy::Policy FuzzPolicy(const std::string& jwks_file) {
  policy::Policy p;
  policy::Tenant& acme = p.identity.tenants["acme"];
  acme.users["alice"];
  acme.users["bob"];
  acme.agents["coder"].user = "alice";
  p.identity.keys[HashApiKey(kApiKey)] = policy::KeyOwner{"acme", "coder"};
  policy::JwtConfig jwt;
  jwt.issuer = std::string(kIssuer);
  jwt.jwks_file = jwks_file;
  p.identity.jwt = jwt;
  return p;
}

// What every accepted caller must be: a user of the tenant, and an agent that acts for that user.
inline void CheckKnownCaller(const Caller& caller) {
  FUZZ_CHECK(caller.tenant == "acme");
  FUZZ_CHECK(caller.user == "alice" || caller.user == "bob");
  FUZZ_CHECK(caller.agent.empty() || (caller.agent == "coder" && caller.user == "alice"));
  FUZZ_CHECK(caller.scope.empty());
}

}  // namespace warden::identity::fuzz
