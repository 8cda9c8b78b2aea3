// Base64 encoding without padding (RFC 4648 sections 4 and 5): what JWS needs (base64url, RFC
// 7515 section 2) and what the redactor matches (both alphabets). Decoding stays with each caller,
// because each one's rules for what to refuse differ (identity.cc's strict JWS decoder, the
// master key's exact length).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace warden {

inline constexpr char kBase64Alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
inline constexpr char kBase64UrlAlphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

// `bytes` in `alphabet` (one of the two above), without '=' padding: the last character carries
// zero bits for the missing ones.
inline std::string Base64NoPad(std::string_view bytes, const char* alphabet = kBase64UrlAlphabet) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : bytes) {
    acc = ((acc << 8) | static_cast<unsigned char>(c)) & 0xffff;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(alphabet[(acc >> bits) & 0x3f]);
    }
  }
  if (bits > 0) out.push_back(alphabet[(acc << (6 - bits)) & 0x3f]);
  return out;
}

}  // namespace warden
