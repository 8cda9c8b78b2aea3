// libFuzzer entry point for the egress proxy's SOCKS5 reader: the bytes a sandboxed client sends,
// a greeting then a CONNECT request, read the way the proxy reads them (each message from the
// start of what is buffered, the next one after its `size`). Invariants, beyond not crashing:
//   * every proper prefix of a complete message is kNeedMore: a message is never taken as done
//     or bad before all of it arrived, and its outcome does not depend on what follows it;
//   * a request rebuilt from what was parsed (IPv4 and IPv6 from their canonical text) is the
//     bytes that were read, but for the reserved byte.
// Seed corpus: tests/fuzz/corpus/socks5/ (docs/testing-fuzz.md).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "egress/ip_address.h"
#include "egress/socks5.h"
#include "fuzz_check.h"

namespace {

using namespace warden::egress;
using socks5::ParseStatus;

void CheckGreeting(std::string_view data, const socks5::Greeting& g) {
  if (g.status != ParseStatus::kDone) return;
  FUZZ_CHECK(g.size >= 3 && g.size <= data.size());
  FUZZ_CHECK(g.size == 2u + static_cast<uint8_t>(data[1]));
  for (size_t n = 0; n < g.size; ++n) {
    FUZZ_CHECK(socks5::ParseGreeting(data.substr(0, n)).status == ParseStatus::kNeedMore);
  }
  const auto exact = socks5::ParseGreeting(data.substr(0, g.size));
  FUZZ_CHECK(exact.status == ParseStatus::kDone && exact.size == g.size &&
             exact.offers_no_auth == g.offers_no_auth);
}

void CheckRequest(std::string_view data, const socks5::Request& r) {
  if (r.status == ParseStatus::kBad) {
    // Decided by the first four bytes: the version or the address type.
    FUZZ_CHECK(socks5::ParseRequest(data.substr(0, 4)).status == ParseStatus::kBad);
    return;
  }
  if (r.status != ParseStatus::kDone) return;
  FUZZ_CHECK(r.size <= data.size());
  for (size_t n = 0; n < r.size; ++n) {
    FUZZ_CHECK(socks5::ParseRequest(data.substr(0, n)).status == ParseStatus::kNeedMore);
  }
  const auto exact = socks5::ParseRequest(data.substr(0, r.size));
  FUZZ_CHECK(exact.status == ParseStatus::kDone && exact.size == r.size && exact.host == r.host &&
             exact.port == r.port && exact.command == r.command);

  std::string rebuilt{static_cast<char>(socks5::kVersion), static_cast<char>(r.command), data[2],
                      data[3]};
  const auto atyp = static_cast<uint8_t>(data[3]);
  if (atyp == 0x03) {
    FUZZ_CHECK(r.host.size() <= 255);
    rebuilt += static_cast<char>(r.host.size());
    rebuilt += r.host;
  } else {
    auto address = ParseCanonicalIp(r.host);
    FUZZ_CHECK(address.has_value());
    FUZZ_CHECK(address->is_v4() == (atyp == 0x01));
    FUZZ_CHECK(address->ToString() == r.host);
    rebuilt.append(reinterpret_cast<const char*>(address->bytes.data()), address->is_v4() ? 4 : 16);
  }
  rebuilt += static_cast<char>(r.port >> 8);
  rebuilt += static_cast<char>(r.port & 0xff);
  FUZZ_CHECK(rebuilt == data.substr(0, r.size));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  std::string_view data(reinterpret_cast<const char*>(bytes), size);
  const auto greeting = socks5::ParseGreeting(data);
  CheckGreeting(data, greeting);
  // A stream that is not a greeting is still tried as a request: both parsers see any bytes.
  if (greeting.status == ParseStatus::kDone) data.remove_prefix(greeting.size);
  const auto request = socks5::ParseRequest(data);
  CheckRequest(data, request);
  (void)socks5::BuildReply(static_cast<socks5::Reply>(size % 9));
  return 0;
}
