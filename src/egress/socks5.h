// SOCKS5 (RFC 1928) messages, as much as the proxy serves: the no-authentication method and the
// CONNECT command with domain names, IPv4 and IPv6 addresses. Pure parsing and building, no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace warden::egress::socks5 {

constexpr uint8_t kVersion = 5;
constexpr uint8_t kMethodNoAuth = 0x00;
constexpr uint8_t kMethodNoneAcceptable = 0xff;
constexpr uint8_t kCommandConnect = 0x01;

enum class Reply : uint8_t {
  kSucceeded = 0x00,
  kGeneralFailure = 0x01,
  kNotAllowedByRuleset = 0x02,
  kNetworkUnreachable = 0x03,
  kHostUnreachable = 0x04,
  kConnectionRefused = 0x05,
  kTtlExpired = 0x06,
  kCommandNotSupported = 0x07,
  kAddressTypeNotSupported = 0x08,
};

enum class ParseStatus { kNeedMore, kDone, kBad };

// VER NMETHODS METHODS[NMETHODS].
struct Greeting {
  ParseStatus status = ParseStatus::kNeedMore;
  size_t size = 0;              // bytes of the message when kDone
  bool offers_no_auth = false;  // method 0x00 is among those offered
};
Greeting ParseGreeting(std::string_view data);

// VER CMD RSV ATYP DST.ADDR DST.PORT.
struct Request {
  ParseStatus status = ParseStatus::kNeedMore;
  size_t size = 0;
  uint8_t command = 0;
  // The destination as text: the domain name as sent (may be anything: the caller validates it),
  // or the canonical text of an IPv4/IPv6 address.
  std::string host;
  uint16_t port = 0;
  // Why a kBad request is bad, as the reply to send: kAddressTypeNotSupported for an unknown
  // ATYP, kGeneralFailure for a wrong version.
  Reply error = Reply::kGeneralFailure;
};
Request ParseRequest(std::string_view data);

// The two-byte method selection reply.
std::string MethodReply(uint8_t method);
// A reply with BND.ADDR 0.0.0.0 and BND.PORT 0: the proxy's own addresses are none of the
// client's business.
std::string BuildReply(Reply code);

}  // namespace warden::egress::socks5
