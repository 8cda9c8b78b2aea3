// The gauges and per-stage figures /metrics computes from the gateway's own state at scrape time
// (docs/monitoring.md): nothing on the call path maintains them.
#include <map>

#include "gateway/approvals/approval_gate.h"
#include "gateway/gateway.h"
#include "gateway/session/upstream_instances.h"
#include "monitor/families.h"
#include "monitor/metrics.h"

namespace warden::gateway {

namespace {

void StageFigures(const Pipeline& pipeline, monitor::Exposition& e) {
  const std::vector<StageStats> stats = pipeline.Stats();
  e.Header("warden_stage_runs_total", "Runs of each pipeline stage by how they ended",
           monitor::Type::kCounter);
  for (const StageStats& s : stats) {
    e.Sample("warden_stage_runs_total", {{"stage", s.name}, {"result", "continue"}},
             static_cast<double>(s.continued));
    e.Sample("warden_stage_runs_total", {{"stage", s.name}, {"result", "deny"}},
             static_cast<double>(s.denied));
    e.Sample("warden_stage_runs_total", {{"stage", s.name}, {"result", "pause"}},
             static_cast<double>(s.paused));
  }
  e.Header("warden_stage_duration_seconds",
           "Time of each run of a pipeline stage, from its start to its end (a wait for an "
           "upstream or a person included)",
           monitor::Type::kHistogram);
  for (const StageStats& s : stats) {
    const std::string bucket = "warden_stage_duration_seconds_bucket";
    uint64_t cumulative = 0;
    for (std::size_t b = 0; b < s.buckets.size(); ++b) {
      cumulative += s.buckets[b];
      char le[32];
      if (b < monitor::kLatencyBuckets.size()) {
        std::snprintf(le, sizeof le, "%g", monitor::kLatencyBuckets[b]);
      } else {
        std::snprintf(le, sizeof le, "+Inf");
      }
      e.Sample(bucket, {{"stage", s.name}, {"le", le}}, static_cast<double>(cumulative));
    }
    e.Sample("warden_stage_duration_seconds_sum", {{"stage", s.name}},
             std::chrono::duration<double>(s.time).count());
    e.Sample("warden_stage_duration_seconds_count", {{"stage", s.name}},
             static_cast<double>(cumulative));
  }
}

}  // namespace

monitor::Registry::Handle GatewayCore::RegisterMetrics() {
  // The counted families are declared now, so that a scrape before the first call already
  // lists them (with no series yet).
  (void)monitor::Metrics();
  return monitor::DefaultRegistry().AddCollector([this](monitor::Exposition& e) {
    StageFigures(*pipeline_, e);

    std::map<std::string, int> switches;
    for (KillScope scope : {KillScope::kGlobal, KillScope::kTenant, KillScope::kUser,
                            KillScope::kAgent, KillScope::kSession, KillScope::kTask, KillScope::kTool})
      switches[std::string(state::ToString(scope))] = 0;
    for (const state::KillSwitch& k : switches_.Active()) ++switches[std::string(ToString(k.scope))];
    e.Header("warden_kill_switches_active", "Kill switches in force, by scope",
             monitor::Type::kGauge);
    for (const auto& [scope, n] : switches)
      e.Sample("warden_kill_switches_active", {{"scope", scope}}, n);

    e.Header("warden_approvals_pending", "Calls waiting for a person's decision in this process",
             monitor::Type::kGauge);
    const ApprovalGate* gate = options_.services.approvals;
    e.Sample("warden_approvals_pending", {}, gate ? static_cast<double>(gate->waiting()) : 0);

    e.Header("warden_sessions_open", "MCP sessions open", monitor::Type::kGauge);
    e.Sample("warden_sessions_open", {}, static_cast<double>(Sessions().size()));

    const auto instances = instances_->CountsByUpstream();
    e.Header("warden_upstream_instances", "Live instances of each upstream server",
             monitor::Type::kGauge);
    for (const auto& [name, c] : instances)
      e.Sample("warden_upstream_instances", {{"upstream", name}}, static_cast<double>(c.live));
    e.Header("warden_upstream_instances_held",
             "Live instances of each upstream server that a session holds",
             monitor::Type::kGauge);
    for (const auto& [name, c] : instances)
      e.Sample("warden_upstream_instances_held", {{"upstream", name}},
               static_cast<double>(c.held));
  });
}

}  // namespace warden::gateway
