// The metric families warden's components count into, declared once here (names, help, labels,
// limits) in the default registry: one place that says what /metrics holds (docs/monitoring.md
// lists them). Gauges that are computed at scrape time (kill switches in force, pending
// approvals, upstream instances, stage histograms, sessions) are collectors the gateway adds.
#pragma once

#include "monitor/metrics.h"

namespace warden::monitor {

// Distinct values kept per label before "other" (docs/monitoring.md, "Cardinality").
inline constexpr std::size_t kTenantLimit = 64;     // over the family
inline constexpr std::size_t kPerTenantLimit = 64;  // agents, users, tools: per tenant
inline constexpr std::size_t kUpstreamLimit = 64;

struct Families {
  // warden_tool_calls_total{tenant,agent,tool,decision}: every request the pipeline decided
  // (tools/call and forwarded requests, the latter under UPSTREAM__METHOD), by how it ended:
  // allow, deny, ask, error.
  Family& calls;
  // warden_tool_call_duration_seconds{decision}: from the request's arrival to its last stage.
  Family& call_seconds;
  // warden_audit_write_seconds: one audit append (the entry, its hash and, with sync full, the
  // fsync).
  Family& audit_write;
  // warden_sandbox_starts_total{backend}: sandbox__exec runs started (a run still going is a
  // start without an end).
  Family& sandbox_starts;
  // warden_sandbox_runs_total{backend,reason}: sandbox__exec runs by how they ended (exited,
  // signaled, timeout, memory, pids, cpu, output_limit, setup_error).
  Family& sandbox_runs;
  // warden_sandbox_violations_total{backend}: syscalls the seccomp filter refused in them.
  Family& sandbox_violations;
  // warden_egress_requests_total{source,result}: connections a sandbox's proxy or web__fetch
  // allowed or denied (source sandbox or web_fetch; result allowed or denied).
  Family& egress;
  // warden_upstream_restarts_total{upstream}: upstream servers restarted after they died.
  Family& upstream_restarts;
  // warden_http_refusals_total{status}: HTTP requests refused before any session (401, 403, ...).
  Family& http_refusals;
  // warden_audit_checkpoints_total{result}: checkpoints the gateway signed (ok), or failed to
  // sign, write or post (failed).
  Family& checkpoints;
  // warden_alerts_total{detector}: alerts raised (volume, denials, first_domain, sensitive,
  // tool_changed, sandbox_limits).
  Family& alerts;
};

// The families in DefaultRegistry(), created on first use.
const Families& Metrics();

}  // namespace warden::monitor
