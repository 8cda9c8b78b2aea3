// A DNS stub for the sandbox's loopback: it never forwards a query anywhere (so DNS cannot carry
// data out), it answers at once (so tools that resolve before connecting fail fast instead of
// waiting for a timeout, and fall back to the proxy when they can), and it records every query.
// This file is the packet logic; EgressProxy::AddDnsSocket serves it on a UDP socket.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "egress/allow_list.h"
#include "egress/ip_address.h"

namespace warden::egress {

struct DnsQueryRecord {
  std::chrono::system_clock::time_point time;
  std::string name;  // normalised when valid, else the quoted raw name
  uint16_t qtype = 0;
  bool allowed = false;  // the name matches an allow entry (any port)
  std::string rule_or_reason;
  uint8_t rcode = 0;  // what the stub answered: 0 NOERROR, 3 NXDOMAIN, 5 REFUSED, ...
};
void to_json(nlohmann::json& j, const DnsQueryRecord& record);

struct DnsStubOptions {
  static constexpr uint8_t kNoError = 0;
  static constexpr uint8_t kNxDomain = 3;
  static constexpr uint8_t kRefused = 5;
  // The answer code for names on the allow-list when no address is configured below, and for
  // all other names. REFUSED makes resolvers give up at once (EAI_AGAIN); NXDOMAIN says the
  // name does not exist (EAI_NONAME).
  uint8_t allowed_rcode = kRefused;
  uint8_t denied_rcode = kRefused;
  // When set, A / AAAA queries for allowed names get this address (TTL 0): one that leads to
  // the proxy, for transparent capture. Other query types for allowed names get NOERROR with no
  // answer.
  std::optional<IpAddress> answer_v4;
  std::optional<IpAddress> answer_v6;
};

class DnsStub {
 public:
  DnsStub(AllowList allow_list, DnsStubOptions options);

  // The reply to one UDP query packet, or nullopt when the packet is not a standard query with
  // exactly one well-formed question (such packets are ignored, never answered). `record` (if
  // not null) is filled whenever a reply is returned.
  std::optional<std::string> Answer(std::string_view packet, DnsQueryRecord* record) const;

 private:
  AllowList allow_list_;
  DnsStubOptions options_;
};

}  // namespace warden::egress
