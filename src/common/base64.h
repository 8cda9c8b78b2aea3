// Base64 encoding without padding (RFC 4648 sections 4 and 5): what JWS needs (base64url, RFC
// 7515 section 2) and what the redactor matches (both alphabets); and one strict decoder for new
// callers (MCP 2026-07-28's `=?base64?...?=` header values, warden's sealed request states).
// Older decoders stay with their callers, whose rules for what to refuse differ (identity.cc's JWS
// decoder, the master key's exact length).
#pragma once

#include <cstdint>
#include <optional>
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

// `text` decoded strictly: only characters of `alphabet`, no whitespace, and '=' padding only
// when `padded` (then required: the length is a multiple of 4) and otherwise refused; the unused
// bits of the last character must be zero, so that every byte string has exactly one text.
// nullopt when `text` breaks any of these rules.
inline std::optional<std::string> Base64Decode(std::string_view text, const char* alphabet,
                                               bool padded) {
  if (padded) {
    if (text.size() % 4 != 0) return std::nullopt;
    size_t pad = 0;
    while (pad < 2 && pad < text.size() && text[text.size() - 1 - pad] == '=') ++pad;
    text.remove_suffix(pad);
  }
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    const char* at = c == '\0' ? nullptr : std::char_traits<char>::find(alphabet, 64, c);
    if (at == nullptr) return std::nullopt;
    acc = ((acc << 6) | static_cast<uint32_t>(at - alphabet)) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if ((acc & ((1u << bits) - 1)) != 0) return std::nullopt;  // non-zero unused bits
  return out;
}

}  // namespace warden
