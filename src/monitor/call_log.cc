#include "monitor/call_log.h"

#include "common/clock.h"

namespace warden::monitor {

std::string CallLogLine(const CallRecord& r, std::chrono::system_clock::time_point when) {
  nlohmann::json line = {
      {"time", Rfc3339Millis(when)},
      {"level", r.decision == "error" ? "error" : r.decision == "allow" ? "info" : "warn"},
      {"event", "tool_call"},
      {"gen_ai.operation.name", "execute_tool"},
      {"gen_ai.tool.name", r.tool},
      {"mcp.method.name", r.method},
      {"warden.decision", r.decision},
      {"warden.latency_us", r.latency.count()},
  };
  if (!r.request_id.is_null()) {
    // The protocol's id of the call within its session: the closest a gateway has to the
    // model's tool call id.
    line["gen_ai.tool.call.id"] = r.request_id.is_string() ? r.request_id.get<std::string>()
                                                           : r.request_id.dump();
    line["jsonrpc.request.id"] = line["gen_ai.tool.call.id"];
  }
  if (!r.session.empty()) line["mcp.session.id"] = r.session;
  if (!r.agent.empty()) line["gen_ai.agent.name"] = r.agent;
  if (!r.user.empty()) line["enduser.id"] = r.user;
  if (!r.tenant.empty()) line["warden.tenant"] = r.tenant;
  if (!r.task.empty()) line["warden.task"] = r.task;
  if (!r.rule.empty()) line["warden.rule"] = r.rule;
  if (!r.reason.empty()) line["warden.reason"] = r.reason;
  if (r.audit_id != 0) line["warden.audit.id"] = r.audit_id;
  if (r.is_error) line["error.type"] = "tool_error";
  if (r.arguments) line["gen_ai.tool.call.arguments"] = *r.arguments;
  if (r.result) line["gen_ai.tool.call.result"] = *r.result;
  // Invalid UTF-8 (a tool name is the caller's) is replaced, never thrown on.
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace warden::monitor
