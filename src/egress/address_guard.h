// The address guard: the last check before the proxy connects. Whatever name a client asked
// for, the address the proxy is about to use must be an ordinary public unicast address, so that
// an allowed name that resolves (or is rebound) to loopback, a private network or the cloud
// metadata service (169.254.169.254) gets nowhere.
//
// Refused by default: loopback, unspecified, "this network" 0/8, RFC 1918, CGNAT 100.64/10,
// link-local (169.254/16, fe80::/10), multicast, broadcast, reserved and documentation ranges
// (240/4, 192.0.0/24, 192.0.2/24, 198.18/15, 198.51.100/24, 203.0.113/24, 2001:db8::/32, ...),
// ULA fc00::/7, every IPv6 address outside 2000::/3, Teredo and 6to4, and the IPv4-mapped,
// IPv4-compatible and NAT64 (64:ff9b::/96) forms of refused IPv4 addresses.
// Exceptions: an allow entry that names the address literally (and allows the port), or a
// `--resolve` mapping of the very host being connected to.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "egress/allow_list.h"
#include "egress/host_name.h"
#include "egress/ip_address.h"
#include "egress/resolve_map.h"

namespace warden::egress {

// Why `address` is not an ordinary public address ("private (RFC 1918)", "loopback",
// "link-local (cloud metadata range)", ...), or nullopt when it is one.
std::optional<std::string> SpecialPurpose(const IpAddress& address);

class AddressGuard {
 public:
  AddressGuard() = default;  // no exceptions: every special-purpose address is refused
  // Takes the exceptions: the allow-list's literal address entries and the --resolve mappings.
  AddressGuard(const AllowList& allow_list, ResolveMap resolve);

  // Whether the proxy may connect to `address`:`port` on behalf of a client that asked for
  // `host`. Allowed: rule_or_reason is "public address", the allow entry's text, or
  // "--resolve HOST=IP". Denied: "address 10.0.0.1 is private (RFC 1918)".
  Verdict Check(const Host& host, const IpAddress& address, uint16_t port) const;

 private:
  std::vector<AllowRule> address_rules_;
  ResolveMap resolve_;
};

}  // namespace warden::egress
