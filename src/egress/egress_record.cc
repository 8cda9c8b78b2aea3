#include "egress/egress_record.h"

#include <nlohmann/json.hpp>

#include "common/clock.h"

namespace warden::egress {

std::string_view ProtocolName(Protocol protocol) {
  switch (protocol) {
    case Protocol::kConnect:
      return "connect";
    case Protocol::kHttp:
      return "http";
    case Protocol::kSocks5:
      return "socks5";
    case Protocol::kHttps:
      return "https";
  }
  return "unknown";
}

std::string FormatTime(std::chrono::system_clock::time_point t) { return Rfc3339Millis(t); }

void to_json(nlohmann::json& j, const EgressRecord& r) {
  j = nlohmann::json{
      {"time", FormatTime(r.time)},
      {"session", r.session_id},
      {"protocol", std::string(ProtocolName(r.protocol))},
      {"host", r.host},
      {"port", r.port},
      {"resolved_address", r.resolved_address},
      {"allowed", r.allowed},
      {"rule_or_reason", r.rule_or_reason},
      {"error", r.error},
      {"bytes_up", r.bytes_up},
      {"bytes_down", r.bytes_down},
      {"duration_ms", r.duration_ms},
  };
  if (r.protocol == Protocol::kHttp || r.protocol == Protocol::kHttps) {
    j["method"] = r.http_method;
    j["target"] = r.http_target;
    j["status"] = r.http_status;
  }
}

nlohmann::json ToJson(const EgressRecord& record) {
  nlohmann::json j;
  to_json(j, record);
  return j;
}

}  // namespace warden::egress
