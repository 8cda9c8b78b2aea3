// The egress allow-list: which hosts (and ports) sandboxed code may reach. Default deny.
//
// Entries (case-insensitive, a trailing dot is ignored):
//   example.com           exactly this host, ports 80 and 443
//   *.example.com         any subdomain (a.example.com, a.b.example.com), not example.com itself
//                         and not evilexample.com; ports 80 and 443
//   example.com:8443      a port given replaces the default ports
//   10.1.2.3, [::1]:8080  an IP literal (canonical spelling); it also lifts the address guard's
//                         refusal for that address (see address_guard.h)
// Refused, with an error naming the entry: empty, "*", a wildcard over a single label ("*.com",
// a whole top-level domain), wildcards anywhere but a leading "*.", URLs ("http://...", paths),
// names that are not valid host names, non-canonical IP spellings ("127.1"), bad ports.
// Known limit: without a public-suffix list, "*.co.uk" is accepted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "egress/host_name.h"
#include "egress/ip_address.h"

namespace warden::egress {

struct AllowRule {
  enum class Kind { kExactHost, kSubdomains, kAddress };
  Kind kind = Kind::kExactHost;
  // kExactHost: the name; kSubdomains: the parent name ("example.com" for "*.example.com");
  // kAddress: the address's canonical text.
  std::string host;
  std::optional<IpAddress> address;  // kAddress only
  std::optional<uint16_t> port;      // unset: ports 80 and 443
  // The entry in canonical form ("*.example.com", "example.com:8443", "[::1]:8080"): the name
  // records and messages use for this rule.
  std::string text;

  bool AllowsPort(uint16_t p) const { return port ? *port == p : (p == 80 || p == 443); }
  bool MatchesHost(const Host& h) const;
};

// The outcome of a check: when allowed, `rule_or_reason` is the text of the rule that allowed it;
// when denied, a short reason naming the host, e.g. "host evil.test is not on the allow-list".
struct Verdict {
  bool allowed = false;
  std::string rule_or_reason;

  static Verdict Allow(std::string rule) { return {true, std::move(rule)}; }
  static Verdict Deny(std::string reason) { return {false, std::move(reason)}; }
};

class AllowList {
 public:
  AllowList() = default;  // empty: denies everything

  // Parses every entry; the first bad one fails the whole list, with the entry named:
  // `allow entry "*.com" would allow a whole top-level domain`.
  static Result<AllowList> Parse(const std::vector<std::string>& entries);
  static Result<AllowRule> ParseEntry(std::string_view entry);

  // Whether `host` (a client's text, any spelling; see host_name.h) may be reached on `port`.
  // Rules are tried in order; the first that matches host and port wins.
  Verdict Permits(std::string_view host, uint16_t port) const;
  Verdict Permits(const Host& host, uint16_t port) const;

  // The first kAddress rule naming exactly `address` and allowing `port`, or nullptr.
  const AllowRule* FindAddressRule(const IpAddress& address, uint16_t port) const;

  const std::vector<AllowRule>& rules() const { return rules_; }
  bool empty() const { return rules_.empty(); }

 private:
  std::vector<AllowRule> rules_;
};

// "80, 443" or "8443": the ports a rule allows, for messages.
std::string DescribePorts(const AllowRule& rule);

}  // namespace warden::egress
