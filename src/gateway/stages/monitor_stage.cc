#include <unistd.h>

#include <algorithm>
#include <mutex>

#include "audit/redact.h"
#include "audit/result_summary.h"
#include "gateway/alerts.h"
#include "gateway/stages/stages.h"
#include "gateway/undo/audit_recorded.h"
#include "monitor/call_log.h"
#include "monitor/families.h"

namespace warden::gateway {

namespace {

// One write per line under a lock: lines from concurrent calls never interleave, and the
// exec pool (a child writing to the same stderr) writes whole lines too.
void WriteStderrLine(std::string_view line) {
  static std::mutex mu;
  std::string out(line);
  out += '\n';
  std::lock_guard lock(mu);
  const char* p = out.data();
  size_t left = out.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // a log that cannot be written must not fail the call (the audit log has it)
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace

MonitorStage::MonitorStage(Alerts* alerts) : sink_(WriteStderrLine), alerts_(alerts) {}

void MonitorStage::Detect(const CallContext& call, const std::string& decision) {
  monitor::CallEvent e;
  e.tenant = call.tenant;
  e.user = call.user;
  e.agent = call.agent;
  e.session = call.session;
  e.tool = call.tool;
  e.decision = decision;
  if (call.decision)
    e.sensitive = std::find(call.decision->labels.begin(), call.decision->labels.end(),
                            "sensitive") != call.decision->labels.end();
  if (call.result) {
    e.hosts = call.result->facts.hosts;
    e.sandbox_end = call.result->facts.sandbox_end;
    e.refused_syscalls = call.result->facts.refused_syscalls;
  }
  alerts_->OnCall(call.policy, e);
}

StageOutcome MonitorStage::Run(CallContext& call) {
  const std::string decision = CallDecision(call);
  const auto latency = std::chrono::steady_clock::now() - call.started;
  const monitor::Families& metrics = monitor::Metrics();
  metrics.calls.Add({call.tenant, call.agent, call.tool, decision});
  metrics.call_seconds.Observe({decision}, std::chrono::duration<double>(latency).count());
  if (alerts_ != nullptr && call.policy && call.policy->monitoring.DetectorsOn())
    Detect(call, decision);

  if (call.policy && call.policy->monitoring.call_logs && sink_) {
    const policy::MonitoringSection& m = call.policy->monitoring;
    monitor::CallRecord r;
    r.tenant = call.tenant;
    r.user = call.user;
    r.agent = call.agent;
    r.session = call.session;
    r.task = call.task;
    r.tool = call.tool;
    r.method = call.method;
    r.request_id = call.request_id;
    r.decision = decision;
    if (call.verdict.result == StageResult::kContinue) {
      if (call.decision) r.rule = call.decision->rule;
    } else {
      r.rule = call.verdict.rule;
      r.reason = audit::RedactText(call.verdict_stage + ": " + call.verdict.reason);
    }
    if (const AuditRecorded* recorded = call.state.Find<AuditRecorded>()) r.audit_id = recorded->id;
    r.latency = std::chrono::duration_cast<std::chrono::microseconds>(latency);
    r.is_error = call.result && call.result->is_error;
    // As the audit log keeps them: arguments through its redaction, the result as a summary.
    if (m.log_arguments) r.arguments = audit::Redact(call.arguments);
    if (m.log_results && call.result) {
      audit::ResultSummary s = audit::SummarizeResult(call.result->Text());
      r.result = nlohmann::json{{"size", s.size}, {"sha256", s.sha256}, {"excerpt", s.excerpt}};
    }
    sink_(monitor::CallLogLine(r, std::chrono::system_clock::now()));
  }
  return StageOutcome::Continue();
}

std::unique_ptr<Stage> MakeMonitorStage(const StageServices& services) {
  return std::make_unique<MonitorStage>(services.alerts);
}

}  // namespace warden::gateway
