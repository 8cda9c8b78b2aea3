// What the proxy remembers of each attempt: one record per CONNECT, per SOCKS5 request and per
// plain-HTTP request, allowed or not, delivered when that attempt ends.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "egress/decision.h"

namespace warden::egress {

struct EgressRecord {
  std::chrono::system_clock::time_point time;  // when the attempt started
  std::string session_id;
  Protocol protocol = Protocol::kConnect;
  // The destination as the client named it: normalised when valid, else the quoted raw text.
  std::string host;
  uint16_t port = 0;
  // The address connected to, or the one the guard refused; empty when none was reached.
  std::string resolved_address;
  bool allowed = false;
  // Allowed: the rule ("*.example.com", "hook: ...", with the guard's exception appended when
  // one applied). Denied: the reason ("host evil.test is not on the allow-list").
  std::string rule_or_reason;
  // Set when an allowed attempt still failed: "connect: Connection refused", "idle timeout".
  std::string error;
  uint64_t bytes_up = 0;    // client -> destination, as forwarded (request heads included)
  uint64_t bytes_down = 0;  // destination -> client
  uint64_t duration_ms = 0;
  // Plain HTTP only: the request's method and origin-form target (cut at 1024 bytes).
  std::string http_method;
  std::string http_target;
  int http_status = 0;  // the status the client got (from upstream or from the proxy); 0 if none
};

// {"time": "2024-05-01T12:00:00.123Z", "session": ..., "protocol": "connect", "host", "port",
//  "resolved_address", "allowed", "rule_or_reason", "error", "bytes_up", "bytes_down",
//  "duration_ms", and for http: "method", "target", "status"}.
void to_json(nlohmann::json& j, const EgressRecord& record);
nlohmann::json ToJson(const EgressRecord& record);

// RFC 3339 UTC with milliseconds.
std::string FormatTime(std::chrono::system_clock::time_point t);

}  // namespace warden::egress
