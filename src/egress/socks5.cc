#include "egress/socks5.h"

#include <array>

#include "egress/ip_address.h"

namespace warden::egress::socks5 {

namespace {
uint8_t Byte(std::string_view d, size_t i) { return static_cast<uint8_t>(d[i]); }
}  // namespace

Greeting ParseGreeting(std::string_view data) {
  Greeting g;
  if (data.size() < 2) return g;
  if (Byte(data, 0) != kVersion || Byte(data, 1) == 0) {
    g.status = ParseStatus::kBad;
    return g;
  }
  size_t n = Byte(data, 1);
  if (data.size() < 2 + n) return g;
  for (size_t i = 0; i < n; ++i) g.offers_no_auth |= Byte(data, 2 + i) == kMethodNoAuth;
  g.status = ParseStatus::kDone;
  g.size = 2 + n;
  return g;
}

Request ParseRequest(std::string_view data) {
  Request r;
  if (data.size() < 4) return r;
  if (Byte(data, 0) != kVersion) {
    r.status = ParseStatus::kBad;
    r.error = Reply::kGeneralFailure;
    return r;
  }
  r.command = Byte(data, 1);
  const uint8_t atyp = Byte(data, 3);
  size_t addr_len;
  size_t offset = 4;
  if (atyp == 0x01) {
    addr_len = 4;
  } else if (atyp == 0x04) {
    addr_len = 16;
  } else if (atyp == 0x03) {
    if (data.size() < 5) return r;
    addr_len = Byte(data, 4);
    offset = 5;
  } else {
    r.status = ParseStatus::kBad;
    r.error = Reply::kAddressTypeNotSupported;
    return r;
  }
  if (data.size() < offset + addr_len + 2) return r;
  std::string_view addr = data.substr(offset, addr_len);
  if (atyp == 0x01) {
    uint8_t b[4] = {Byte(addr, 0), Byte(addr, 1), Byte(addr, 2), Byte(addr, 3)};
    r.host = IpAddress::V4(b).ToString();
  } else if (atyp == 0x04) {
    std::array<uint8_t, 16> b{};
    for (size_t i = 0; i < 16; ++i) b[i] = Byte(addr, i);
    r.host = IpAddress::V6(b).ToString();
  } else {
    r.host = std::string(addr);
  }
  r.port =
      static_cast<uint16_t>(Byte(data, offset + addr_len) << 8 | Byte(data, offset + addr_len + 1));
  r.size = offset + addr_len + 2;
  r.status = ParseStatus::kDone;
  return r;
}

std::string MethodReply(uint8_t method) {
  return std::string{static_cast<char>(kVersion), static_cast<char>(method)};
}

std::string BuildReply(Reply code) {
  return std::string{
      static_cast<char>(kVersion), static_cast<char>(code), 0, 0x01, 0, 0, 0, 0, 0, 0};
}

}  // namespace warden::egress::socks5
