// X-Warden-Signature: "t=UNIX_SECONDS,v1=HEX", HEX = hex(HMAC-SHA256(secret, "UNIX_SECONDS." +
// body)). The timestamp is inside the MAC so that a captured request cannot be replayed later
// than the receiver's tolerance.
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <charconv>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "notify/webhook.h"

namespace warden::notify {
namespace {

constexpr std::size_t kHexLength = 64;  // SHA-256

std::string HmacSha256Hex(std::string_view secret, int64_t unix_seconds, std::string_view body) {
  const std::string signed_text = std::to_string(unix_seconds) + "." + std::string(body);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_length = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(signed_text.data()), signed_text.size(), mac,
           &mac_length) == nullptr)
    return "";
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * mac_length);
  for (unsigned int i = 0; i < mac_length; ++i) {
    hex.push_back(kDigits[mac[i] >> 4]);
    hex.push_back(kDigits[mac[i] & 0xf]);
  }
  return hex;
}

}  // namespace

std::string SignatureHeader(std::string_view secret, int64_t unix_seconds, std::string_view body) {
  return "t=" + std::to_string(unix_seconds) + ",v1=" + HmacSha256Hex(secret, unix_seconds, body);
}

bool VerifySignature(std::string_view secret, std::string_view header, std::string_view body,
                     int64_t now_unix_seconds, std::chrono::seconds tolerance) {
  std::optional<int64_t> timestamp;
  std::vector<std::string_view> candidates;  // every v1= (a sender may rotate secrets)
  while (!header.empty()) {
    const size_t comma = header.find(',');
    std::string_view part = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    if (part.starts_with("t=")) {
      std::string_view digits = part.substr(2);
      int64_t value = 0;
      auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
      if (error != std::errc() || end != digits.data() + digits.size() || digits.empty() ||
          digits.front() == '-' || timestamp)
        return false;
      timestamp = value;
    } else if (part.starts_with("v1=")) {
      candidates.push_back(part.substr(3));
    }
  }
  if (!timestamp || candidates.empty()) return false;
  // Compared as unsigned distances: no overflow for any pair of int64 values.
  const uint64_t distance = *timestamp >= now_unix_seconds
                                ? static_cast<uint64_t>(*timestamp) - now_unix_seconds
                                : static_cast<uint64_t>(now_unix_seconds) - *timestamp;
  if (tolerance.count() < 0 || distance > static_cast<uint64_t>(tolerance.count())) return false;
  const std::string expected = HmacSha256Hex(secret, *timestamp, body);
  if (expected.size() != kHexLength) return false;
  bool match = false;
  for (std::string_view candidate : candidates) {
    if (candidate.size() == kHexLength &&
        CRYPTO_memcmp(candidate.data(), expected.data(), kHexLength) == 0)
      match = true;
  }
  return match;
}

}  // namespace warden::notify
