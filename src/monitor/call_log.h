// One JSON line per call (docs/monitoring.md, "Call logs"), for log pipelines that want calls as
// events: field names follow the OpenTelemetry semantic conventions for GenAI tool execution
// and for MCP where they fit (gen_ai.operation.name = execute_tool, gen_ai.tool.name,
// gen_ai.tool.call.id, mcp.method.name, mcp.session.id, jsonrpc.request.id), and warden's own
// under `warden.` (the audit entry's id, so a line leads to its entry and its proof).
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace warden::monitor {

// What a line says about one call; the caller redacts arguments and result before.
struct CallRecord {
  std::string tenant, user, agent, session, task;
  std::string tool, method;
  nlohmann::json request_id;  // null when unknown
  std::string decision, rule, reason;
  uint64_t audit_id = 0;  // 0: no entry was written
  std::chrono::microseconds latency{0};
  bool is_error = false;  // the call ran and its result is an error
  std::optional<nlohmann::json> arguments;  // only when the operator opted in
  std::optional<nlohmann::json> result;     // a summary {size, sha256, excerpt}, likewise
};

// The line (no newline) for a call that ended at `when`.
std::string CallLogLine(const CallRecord& record, std::chrono::system_clock::time_point when);

}  // namespace warden::monitor
