#include "monitor/families.h"

namespace warden::monitor {

const Families& Metrics() {
  static const Families families = [] {
    Registry& r = DefaultRegistry();
    return Families{
        .calls = r.Add("warden_tool_calls_total",
                       "Requests the gateway's pipeline decided, by caller, tool and decision",
                       Type::kCounter,
                       {{"tenant", kTenantLimit},
                        {"agent", kPerTenantLimit},
                        {"tool", kPerTenantLimit},
                        {"decision", 0}}),
        .call_seconds =
            r.Add("warden_tool_call_duration_seconds",
                  "Time from a request's arrival to its last pipeline stage, by decision",
                  Type::kHistogram, {{"decision", 0}}),
        .audit_write = r.Add("warden_audit_write_seconds",
                             "Time to append one entry to the audit log", Type::kHistogram, {}),
        .sandbox_starts = r.Add("warden_sandbox_starts_total", "sandbox__exec runs started",
                                Type::kCounter, {{"backend", 0}}),
        .sandbox_runs = r.Add("warden_sandbox_runs_total",
                              "sandbox__exec runs by backend and by how they ended",
                              Type::kCounter, {{"backend", 0}, {"reason", 0}}),
        .sandbox_violations =
            r.Add("warden_sandbox_violations_total",
                  "System calls the seccomp filter refused inside sandbox__exec runs",
                  Type::kCounter, {{"backend", 0}}),
        .egress = r.Add("warden_egress_requests_total",
                        "Outbound connections allowed or denied by the egress allow-list",
                        Type::kCounter, {{"source", 0}, {"result", 0}}),
        .upstream_restarts =
            r.Add("warden_upstream_restarts_total",
                  "Upstream MCP servers restarted after they died", Type::kCounter,
                  {{"upstream", kUpstreamLimit}}),
        .http_refusals = r.Add("warden_http_refusals_total",
                               "HTTP requests refused before any session handled them, by status",
                               Type::kCounter, {{"status", 0}}),
        .checkpoints = r.Add("warden_audit_checkpoints_total",
                             "Audit checkpoints the gateway signed (ok) or could not (failed)",
                             Type::kCounter, {{"result", 0}}),
        .alerts = r.Add("warden_alerts_total", "Alerts the anomaly detectors raised, by detector",
                        Type::kCounter, {{"detector", 0}}),
    };
  }();
  return families;
}

}  // namespace warden::monitor
