// The undo stage (final, after audit): records the compensating call of each call that ran under
// a rule with `undo: { tool, args }`, keyed by the call's audit entry id, so that `warden undo ID`
// and POST /api/calls/ID/undo can run it later (gateway/undo/undo_runner.h). A medium-risk
// sandbox__exec without an undo rule gets a row too, saying why it cannot be undone. It never
// denies: the call has run and its result is recorded; a plan that cannot be stored is logged.
#include <cstdio>

#include "gateway/stages/stages.h"
#include "gateway/undo/audit_recorded.h"
#include "gateway/undo/undo_plan.h"
#include "state/undo_store.h"

namespace warden::gateway {
namespace {

constexpr const char* kUndoSandboxExec = "sandbox__exec";

// The writable host paths of the sandbox profile a sandbox__exec call ran on (as the execute
// stage chooses it: the rule's profile, else sandbox.profiles.default, else the built-in one,
// which has none).
std::string UndoWritableBinds(const CallContext& call) {
  if (!call.policy) return "";
  std::string name = call.decision && !call.decision->sandbox_profile.empty()
                         ? call.decision->sandbox_profile
                         : "default";
  auto profile = call.policy->sandbox.profiles.find(name);
  if (profile == call.policy->sandbox.profiles.end()) return "";
  std::string out;
  for (const sandbox::Bind& bind : profile->second.binds)
    if (bind.writable) out += (out.empty() ? "" : ", ") + bind.host;
  return out;
}

// Why a medium-risk sandbox__exec cannot be undone (no snapshot is taken yet).
std::string UndoSandboxExecReason(const CallContext& call) {
  std::string binds = UndoWritableBinds(call);
  if (binds.empty())
    return "sandbox__exec ran in a fresh /work workspace, discarded after the call, with no "
           "writable host path: there is nothing to restore";
  return "sandbox__exec wrote to host paths of its profile (" + binds +
         ") that warden does not snapshot yet: there is nothing to restore from";
}

class UndoStage : public Stage {
 public:
  explicit UndoStage(state::UndoStore* store) : store_(store) {}
  std::string_view name() const override { return "undo"; }

  StageOutcome Run(CallContext& call) override {
    if (store_ == nullptr || call.method != "tools/call" || !call.decision || !call.policy)
      return StageOutcome::Continue();
    // Only calls that ran and were recorded: the verdict is final by now.
    const AuditRecorded* recorded = call.state.Find<AuditRecorded>();
    if (recorded == nullptr || call.verdict.result != StageResult::kContinue || !call.result)
      return StageOutcome::Continue();
    const policy::Undo* undo = nullptr;
    const int index = call.decision->rule_index;
    if (index >= 0 && static_cast<size_t>(index) < call.policy->rules.size() &&
        call.policy->rules[index].undo)
      undo = &*call.policy->rules[index].undo;
    const bool sandbox_exec =
        call.tool == kUndoSandboxExec && call.decision->risk == policy::Risk::kMedium;
    if (undo == nullptr && !sandbox_exec) return StageOutcome::Continue();

    state::UndoRecord record;
    record.call_id = recorded->id;
    record.tenant = call.tenant;
    record.user = call.user;
    record.agent = call.agent;
    record.scope = call.scope;
    record.session = call.session;
    record.tool = call.tool;
    if (undo == nullptr) {
      record.status = state::UndoStatus::kUnavailable;
      record.reason = UndoSandboxExecReason(call);
    } else if (call.result->is_error) {
      record.undo_tool = undo->tool;
      record.status = state::UndoStatus::kUnavailable;
      record.reason = "the call failed (its result is an error): there is nothing to undo";
    } else {
      UndoPlan plan = PlanUndo(*undo, call.arguments, call.result->value);
      record.undo_tool = plan.tool;
      record.undo_args = std::move(plan.arguments);
      record.status =
          plan.available ? state::UndoStatus::kAvailable : state::UndoStatus::kUnavailable;
      record.reason = std::move(plan.reason);
    }
    if (Status st = store_->Record(record); !st.ok()) {
      // The call ran and is audited; withholding its result now would not unmake it.
      std::fprintf(stderr, "warden: undo: the plan for call %llu was not stored: %s\n",
                   static_cast<unsigned long long>(record.call_id), st.message().c_str());
    }
    return StageOutcome::Continue();
  }

 private:
  state::UndoStore* store_;
};

}  // namespace

std::unique_ptr<Stage> MakeUndoStage(const StageServices& services) {
  return std::make_unique<UndoStage>(services.undo);
}

}  // namespace warden::gateway
