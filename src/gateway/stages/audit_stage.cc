#include "audit/result_summary.h"
#include "gateway/approvals/approval_gate.h"
#include "gateway/stages/stages.h"
#include "gateway/undo/audit_recorded.h"
#include "monitor/families.h"

namespace warden::gateway {

std::string CallDecision(const CallContext& call) {
  const StageOutcome& v = call.verdict;
  if (!v.decision.empty()) return v.decision;
  switch (v.result) {
    case StageResult::kContinue:
      return "allow";
    case StageResult::kPause:
      return "pause";
    case StageResult::kDeny:
      break;
  }
  switch (v.refusal) {
    case Refusal::kInvalidArguments:
    case Refusal::kInternal:
      return "error";
    default:
      break;
  }
  return "deny";
}

audit::AuditEntry AuditEntryFor(const CallContext& call) {
  audit::AuditEntry e;
  e.tenant = call.tenant;
  e.user = call.user;
  e.agent = call.agent;
  e.session = call.session;
  e.tool = call.tool;
  e.arguments = call.arguments;
  e.decision = CallDecision(call);
  if (call.verdict.result == StageResult::kContinue) {
    e.rule = call.decision ? call.decision->rule : "";
    e.reason = call.decision ? call.decision->reason : "";
  } else {
    e.rule = call.verdict.rule;
    e.reason = call.verdict_stage + ": " + call.verdict.reason;
  }
  if (!call.execution.empty())
    e.reason += (e.reason.empty() ? "" : "; ") + std::string("ran in ") + call.execution;
  if (call.decision) e.labels = call.decision->labels;
  if (const ApprovalGranted* granted = call.state.Find<ApprovalGranted>()) {
    for (const state::ApprovalVote& v : granted->votes)
      e.approvals.push_back({v.who, v.at, "approve"});
    e.reason += (e.reason.empty() ? "" : "; ") + std::string("approved (") + granted->id + ")";
  }
  if (call.result) {
    e.result = audit::SummarizeResult(call.result->Text());
    e.kind = audit::EntryKind::kCall;
  } else {
    e.kind = audit::EntryKind::kDecision;
  }
  auto elapsed = std::chrono::steady_clock::now() - call.started;
  e.latency_us =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count());
  return e;
}

StageOutcome AuditStage::Run(CallContext& call) {
  audit::AuditEntry entry = AuditEntryFor(call);
  const auto started = std::chrono::steady_clock::now();
  auto receipt = log_.Append(std::move(entry));
  monitor::Metrics().audit_write.Observe(
      {}, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  if (!receipt)
    return StageOutcome::Deny(
        Refusal::kInternal, "the audit log could not record the call, so its result is withheld: " +
                                receipt.status().message());
  call.state.Get<AuditRecorded>().id = receipt->id;  // for the undo stage (undo/audit_recorded.h)
  return StageOutcome::Continue();
}

std::unique_ptr<Stage> MakeAuditStage(const StageServices& services) {
  return std::make_unique<AuditStage>(*services.audit);
}

}  // namespace warden::gateway
