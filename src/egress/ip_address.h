// IP addresses as the egress proxy sees them, and the strict parsing of host strings that are
// IP spellings. No I/O, no Asio: a plain value type that every other egress file can use.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace warden::egress {

// An IPv4 or IPv6 address. IPv4 uses the first 4 bytes of `bytes`; the rest are zero.
struct IpAddress {
  enum class Family : uint8_t { kV4, kV6 };

  Family family = Family::kV4;
  std::array<uint8_t, 16> bytes{};

  static IpAddress V4(uint32_t host_order);
  static IpAddress V4(const uint8_t (&b)[4]);
  static IpAddress V6(const std::array<uint8_t, 16>& b);

  bool is_v4() const { return family == Family::kV4; }
  bool is_v6() const { return family == Family::kV6; }
  // The IPv4 address as a host-order integer. Requires is_v4().
  uint32_t v4() const;
  // Canonical text: dotted quad for IPv4, RFC 5952 form for IPv6 (no brackets).
  std::string ToString() const;
  // ToString() with brackets around IPv6, for "address:port" texts.
  std::string ToUrlHost() const;

  friend bool operator==(const IpAddress&, const IpAddress&) = default;
  friend auto operator<=>(const IpAddress&, const IpAddress&) = default;
};

// Parses canonical literals only: a dotted quad of four decimal numbers without leading zeros
// ("10.0.0.1"), or an IPv6 address as inet_pton accepts it ("::1", "::ffff:1.2.3.4"), optionally in
// brackets. Used for allow entries and --resolve values, where an odd spelling is a mistake.
std::optional<IpAddress> ParseCanonicalIp(std::string_view text);

// What a client-supplied host string means, read the way the C library and browsers read it, so
// that no spelling of an address can slip past the address guard as if it were a name:
//   - IPv6 in brackets or bare ("[::1]", "::1"); zone ids ("fe80::1%eth0") are refused;
//   - IPv4 in the inet_aton forms: 1 to 4 parts, each decimal, octal (leading 0) or hex (0x),
//     the last part filling the remaining bytes ("127.1", "2130706433", "0x7f000001",
//     "0177.0.0.1").
// Returns:
//   kName     the text is not an IP spelling (it may still be an invalid host name);
//   kAddress  `address` holds the address it spells;
//   kInvalid  it looks numeric (its last label is a number) but is not a valid address, e.g.
//             "1.2.3.4.5", "256.1.1.1", "09.1.1.1": such strings are refused, never looked up.
struct HostSpelling {
  enum class Kind { kName, kAddress, kInvalid };
  Kind kind = Kind::kName;
  IpAddress address;
};
HostSpelling ClassifyHostSpelling(std::string_view host);

}  // namespace warden::egress
