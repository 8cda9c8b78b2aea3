// The trifecta stage (docs/trifecta.md): a call that would complete the lethal trifecta (send
// data out while the session holds untrusted content and private data), or that sends to a
// destination only untrusted content named, is denied or sent to a person, with the calls behind
// each leg named. Every call it lets through is in flight under its key until trifecta_record.

#include "gateway/approvals/approval_gate.h"
#include "gateway/stages/stages.h"
#include "gateway/trifecta/flow_tracker.h"

namespace warden::gateway {
namespace {

class TrifectaStage : public Stage {
 public:
  explicit TrifectaStage(FlowTracker* tracker) : tracker_(tracker) {
    if (tracker_ == nullptr) {
      own_ = std::make_unique<FlowTracker>(nullptr);
      tracker_ = own_.get();
    }
  }
  std::string_view name() const override { return "trifecta"; }

  StageOutcome Run(CallContext& call) override {
    if (!call.decision || !call.policy) return StageOutcome::Continue();
    policy::Decision& d = *call.decision;
    const policy::Policy& p = *call.policy;
    const policy::FlowSpec* flow =
        d.rule_index >= 0 && static_cast<size_t>(d.rule_index) < p.rules.size()
            ? &p.rules[static_cast<size_t>(d.rule_index)].flow
            : nullptr;
    // Decide has added what built-ins and stdio upstreams with egress always carry.
    const policy::LabelSet labels = policy::LabelSetOf(d.labels);
    const FlowKey key = FlowKeyFor(call.tenant, call.user, call.agent, call.session, call.task);
    const policy::TrifectaSettings settings =
        policy::SettingsFor(p.trifecta, call.tenant, call.agent, call.tool);

    TrifectaCall& mine = call.state.Get<TrifectaCall>();
    auto check = tracker_->Begin(
        key, FlowWindows{.caller_ms = p.trifecta.caller_window_ms, .task_ms = p.trifecta.task_window_ms},
        settings, flow, labels, call.tool, call.arguments, &mine.ticket);
    if (!check)  // fail closed: a session whose exposure is unknown sends nothing
      return StageOutcome::Deny(
          Refusal::kInternal,
          "the session's trifecta state could not be read: " + check.status().message(),
          "trifecta");
    mine.tracker = tracker_;
    mine.labels = labels;
    mine.flow = flow;
    mine.settings = settings;
    if (check->effect == policy::Effect::kAllow) return StageOutcome::Continue();

    const std::string reason = "trifecta: " + check->reason;
    if (check->effect == policy::Effect::kDeny) {
      return StageOutcome::Deny(Refusal::kDenied, reason, check->rule);
    }
    // ask: the approval stage holds the call, and the approver sees the legs.
    mine.asked = true;
    if (d.effect == policy::Effect::kAsk) {
      d.reason += "; " + reason;
    } else {
      d.effect = policy::Effect::kAsk;
      d.reason = reason;
      d.rule = check->rule + " (" + d.rule + ")";
    }
    std::vector<std::string>& lines = call.state.Get<ApprovalReasons>().lines;
    lines.push_back(reason);
    for (const std::string& leg : check->legs) lines.push_back("session holds " + leg);
    return StageOutcome::Continue();
  }

 private:
  FlowTracker* tracker_;
  std::unique_ptr<FlowTracker> own_;  // when the gateway gave none: in memory only
};

}  // namespace

std::unique_ptr<Stage> MakeTrifectaStage(const StageServices& services) {
  return std::make_unique<TrifectaStage>(services.trifecta);
}

}  // namespace warden::gateway
