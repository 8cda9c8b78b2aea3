#include <spdlog/spdlog.h>

#include "audit/display_text.h"
#include "audit/entry.h"
#include "gateway/approvals/approval_gate.h"
#include "gateway/stages/stages.h"
#include "state/pins.h"

namespace warden::gateway {

namespace {

using state::ApprovalStatus;

StageOutcome Refuse(Refusal refusal, std::string reason, std::string rule, std::string decision) {
  StageOutcome out = StageOutcome::Deny(refusal, std::move(reason), std::move(rule));
  out.decision = std::move(decision);
  return out;
}

std::string DefinitionHashOf(const nlohmann::json& definition) {
  return definition.is_null() ? std::string() : state::DefinitionHash(definition);
}

// How a wait that ended is answered: the stored call, exactly, or a tool error saying why not.
StageOutcome Release(ApprovalGate& gate, CallContext& call, const ApprovalOutcome& out) {
  if (call.cancel) call.cancel->OnCancel({});
  const std::string rule = call.decision ? call.decision->rule : "";
  const state::ApprovalRecord& r = out.record;
  switch (out.status) {
    case ApprovalStatus::kApproved:
      break;
    case ApprovalStatus::kDenied:
      return Refuse(Refusal::kDenied, out.message, rule, "deny");
    case ApprovalStatus::kExpired:
      return Refuse(Refusal::kDenied, out.message, rule, "expired");
    default:
      if (call.cancel && call.cancel->cancelled())
        return Refuse(Refusal::kDenied, out.message, rule, "cancelled");
      return Refuse(Refusal::kDenied, out.message, rule, "cancelled");
  }
  // A kill switch pulled, or the client gone, between the decision and now.
  if (call.cancel && call.cancel->cancelled())
    return Refuse(
        Refusal::kDenied,
        "approved, but the call was cancelled before it ran (" + call.cancel->reason() + ")", rule,
        "cancelled");
  // The tool must still be the one the person saw.
  if (call.definition_now) {
    const nlohmann::json now = call.definition_now();
    if (DefinitionHashOf(now) != r.definition_hash) {
      (void)gate;
      return Refuse(Refusal::kDenied,
                    "approval " + r.id +
                        " is void: the tool's definition changed while the call waited "
                        "(call again to ask again)",
                    rule, "cancelled");
    }
  }
  const std::string binding = ApprovalBinding(call.tenant, call.user, call.agent, call.session,
                                              call.task, call.tool, call.arguments, r.definition_hash);
  if (binding != r.binding)
    return Refuse(Refusal::kDenied, "approval " + r.id + " does not match this call", rule,
                  "cancelled");
  auto consumed = gate.Consume(r.id);
  if (!consumed)
    return Refuse(Refusal::kInternal, "approval " + r.id + ": " + consumed.status().message(), rule,
                  "error");
  if (!*consumed)
    return Refuse(Refusal::kDenied, "approval " + r.id + " was already used", rule, "cancelled");
  // Exactly what the person approved runs (the stored canonical text, parsed back).
  auto stored = nlohmann::json::parse(r.arguments, nullptr, /*allow_exceptions=*/false);
  if (stored.is_discarded())
    return Refuse(Refusal::kInternal, "approval " + r.id + ": its stored arguments are unreadable",
                  rule, "error");
  call.arguments = std::move(stored);
  ApprovalGranted& granted = call.state.Get<ApprovalGranted>();
  granted.id = r.id;
  granted.votes = r.votes;
  return StageOutcome::Continue();
}

// In-band: where the policy lets the requesting user approve their own agent's calls, the
// client is asked too (elicitation/create, form mode), showing the exact call. The form asks only
// for a decision and a comment: never for a secret (the spec forbids that in form mode). A person
// may still decide in the console meanwhile; whoever decides first wins.
void AskInBand(ApprovalGate& gate, CallContext& call, const state::ApprovalRecord& record) {
  if (!call.ask_client || !call.policy || !call.policy->approvals.self_approve) return;
  // The answer comes over the agent's own connection: it is not a person's vote, so it can never
  // be one of a two-person approval's (the store refuses it too).
  if (record.votes_needed > 1) return;
  const identity::Caller self{call.tenant, call.user, "", ""};
  const bool local = call.policy->identity.tenants.empty();
  if (WhyMayNotDecide(*call.policy, self, local, record)) return;
  const nlohmann::json args = nlohmann::json::parse(record.arguments, nullptr, false);
  std::string message = "warden: an agent" +
                        (record.agent.empty() ? std::string() : " (" + record.agent + ")") +
                        " asks to run " + audit::ForDisplay(record.tool) + " (risk " +
                        record.risk + "). Approve exactly this call?\n\narguments:\n" +
                        audit::JsonForDisplay(args) +
                        "\n\nwhy a person decides: " + record.reason;
  for (const std::string& line : record.reasons) message += "\n" + line;
  message += "\n\napproval " + record.id + ", expires " + record.expires;
  nlohmann::json params = {
      {"mode", "form"},
      {"message", message},
      {"requestedSchema",
       {{"type", "object"},
        {"properties",
         {{"decision",
           {{"type", "string"},
            {"title", "Decision"},
            {"enum", {"approve", "deny"}},
            {"enumNames", {"Approve", "Deny"}}}},
          {"comment", {{"type", "string"}, {"title", "Comment"}, {"maxLength", 1024}}}}},
        {"required", {"decision"}}}}};
  const state::Decider who = state::AgentClient(call.tenant, call.user);
  const bool decline_denies = call.policy->approvals.client_decline_denies;
  call.ask_client(
      "elicitation/create", std::move(params),
      [&gate, id = record.id, who, decline_denies](mcp::Message answer) {
        const auto* ok = std::get_if<mcp::Response>(&answer);
        if (!ok || !ok->result.is_object()) return;  // no answer: others may decide
        // A client's answer is untrusted input: a field of the wrong type is no answer.
        const auto& result = ok->result;
        const std::string action = result.contains("action") && result["action"].is_string()
                                       ? result["action"].get<std::string>()
                                       : "";
        const nlohmann::json content = ok->result.value("content", nlohmann::json::object());
        std::string comment;
        if (content.is_object() && content.contains("comment") && content["comment"].is_string())
          comment = content["comment"].get<std::string>().substr(0, 1024);
        const nlohmann::json details = {{"via", "elicitation"}};
        const std::string decision =
            content.is_object() && content.contains("decision") && content["decision"].is_string()
                ? content["decision"].get<std::string>()
                : "";
        if (action == "accept" && decision == "approve") {
          (void)gate.Approve(id, who, comment, details);
        } else if (action == "accept" && decision == "deny") {
          // Deny chosen in the form: an answer, not a dismissal.
          (void)gate.Deny(id, who, comment.empty() ? "denied in the client" : comment, details);
        } else if (action == "decline" && decline_denies) {
          (void)gate.Deny(id, who, comment.empty() ? "declined in the client" : comment, details);
        } else if (action == "decline") {
          // Some clients decline every elicitation by themselves (codex exec): a person decides.
          spdlog::info("approvals: the agent's client declined {} in-band; it waits for a person "
                       "(approvals.client_decline: pending)",
                       id);
        }
        // "cancel": dismissed without a choice; the approval stays pending.
      });
}

}  // namespace

StageOutcome ApprovalStage::Run(CallContext& call) {
  if (!call.decision || call.decision->effect != policy::Effect::kAsk)
    return StageOutcome::Continue();
  const policy::Decision& d = *call.decision;
  if (gate_ == nullptr)
    return Refuse(Refusal::kDenied, "approval required: " + d.reason, d.rule, "ask");

  state::ApprovalRecord record;
  record.tenant = call.tenant;
  record.user = call.user;
  record.agent = call.agent;
  record.session = call.session;
  record.tool = call.tool;
  record.server = call.server;
  record.arguments = audit::CanonicalJson(call.arguments);
  record.risk = policy::RiskName(d.risk);
  record.rule = d.rule;
  record.reason = d.reason;
  if (const ApprovalReasons* more = call.state.Find<ApprovalReasons>())
    record.reasons = more->lines;
  record.definition_hash = DefinitionHashOf(call.tool_definition);
  record.binding = ApprovalBinding(call.tenant, call.user, call.agent, call.session, call.task, call.tool,
                                   call.arguments, record.definition_hash);
  record.retry_key = ApprovalBinding(call.tenant, call.user, call.agent, call.session, call.task, call.tool,
                                     call.arguments, record.definition_hash, /*retry=*/true);
  std::chrono::milliseconds timeout{600000};
  if (call.policy) {
    timeout = std::chrono::milliseconds(call.policy->approvals.timeout_ms);
    for (policy::Risk r : call.policy->approvals.two_person)
      if (r == d.risk) record.votes_needed = 2;
  }

  // The first retry of a call whose approval a restart cancelled hears so; later ones ask again.
  auto cancelled = gate_->TakeRestartCancelled(record.retry_key);
  if (!cancelled)
    return Refuse(Refusal::kInternal, "the approvals store failed: " + cancelled.status().message(),
                  d.rule, "error");
  if (*cancelled)
    return Refuse(Refusal::kDenied,
                  "approval " + (*cancelled)->id + " was cancelled (" + (*cancelled)->comment +
                      "); call again to ask again",
                  d.rule, "cancelled");

  record.id = NewApprovalId();
  const std::string id = record.id;
  ApprovalGate* gate = gate_;
  audit::AuditLog* log = audit_;
  auto post = post_;
  call.park = [gate, log, post, &call, record = std::move(record),
               timeout](std::function<void(StageOutcome)> resume) mutable {
    ApprovalGate::Waiter waiter;
    auto shared_resume = std::make_shared<std::function<void(StageOutcome)>>(std::move(resume));
    waiter.done = [gate, post, &call, shared_resume](ApprovalOutcome out) {
      // On the gate's (or the decider's) thread: the rest of the chain runs on a worker.
      auto work = [gate, &call, shared_resume, out = std::move(out)] {
        (*shared_resume)(Release(*gate, call, out));
      };
      if (post) {
        post(std::move(work));
      } else {
        work();
      }
    };
    if (call.notify && !call.progress_token.is_null()) {
      waiter.keepalive = [notify = call.notify, token = call.progress_token,
                          id = record.id](int tick) {
        notify(mcp::Notification{
            "notifications/progress",
            nlohmann::json{{"progressToken", token},
                           {"progress", tick},
                           {"message", "waiting for approval " + id + " (a person decides)"}}});
      };
    }
    const std::string id = record.id;
    audit::AuditEntry asked;
    asked.kind = audit::EntryKind::kDecision;
    asked.tenant = call.tenant;
    asked.user = call.user;
    asked.agent = call.agent;
    asked.session = call.session;
    asked.tool = call.tool;
    asked.arguments = call.arguments;
    asked.decision = "ask";
    asked.rule = record.rule;
    asked.reason = "approval " + id + " requested (expires in " + FormatDuration(timeout) +
                   "): " + record.reason;
    if (call.decision) asked.labels = call.decision->labels;
    auto stored = gate->Ask(record, timeout, std::move(waiter));
    if (!stored) {
      (*shared_resume)(Refuse(Refusal::kInternal,
                              "the approval could not be stored, so the call does not run: " +
                                  stored.status().message(),
                              asked.rule, "error"));
      return;
    }
    // The person's view is in the store; the asking is in the chain. A call that cannot be
    // recorded as asked does not wait (fail closed).
    if (log) {
      auto written = log->Append(std::move(asked));
      if (!written) {
        gate->Cancel(id,
                     "the audit log could not record the request: " + written.status().message());
        return;
      }
    }
    AskInBand(*gate, call, *stored);
    if (call.cancel) {
      std::weak_ptr<CancelToken> token = call.cancel;
      call.cancel->OnCancel([gate, id, token] {
        auto t = token.lock();
        gate->Cancel(id, t ? "the call was cancelled: " + t->reason() : "the call was cancelled");
      });
    }
  };
  return StageOutcome{StageResult::kPause, Refusal::kNone, "waiting for approval " + id, d.rule,
                      ""};
}

std::unique_ptr<Stage> MakeApprovalStage(const StageServices& services) {
  return std::make_unique<ApprovalStage>(services.approvals, services.audit, services.post);
}

}  // namespace warden::gateway
