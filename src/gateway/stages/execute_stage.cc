#include "gateway/approvals/approval_gate.h"
#include "gateway/stages/stages.h"
#include "gateway/trifecta/flow_tracker.h"

namespace warden::gateway {

Result<sandbox::Options> ChooseSandboxProfile(const CallContext& call) {
  if (!call.policy) return DefaultExecProfile();
  std::string name = call.decision ? call.decision->sandbox_profile : "";
  const auto& profiles = call.policy->sandbox.profiles;
  auto it = profiles.find(name.empty() ? std::string("default") : name);
  if (it != profiles.end()) return it->second;
  if (!name.empty()) return Status::Error("sandbox profile '" + name + "' is not defined");
  return DefaultExecProfile();
}

StageOutcome ExecuteStage::Run(CallContext& call) {
  // Fail closed whatever the chain: a call the policy sent to a person runs only once an
  // approval released it.
  if (call.decision && call.decision->effect == policy::Effect::kAsk &&
      call.state.Find<ApprovalGranted>() == nullptr) {
    StageOutcome ask = StageOutcome::Deny(
        Refusal::kDenied, "approval required: " + call.decision->reason, call.decision->rule);
    ask.decision = "ask";
    return ask;
  }
  if (call.forward) {
    // Parked until the upstream answers: the pipeline goes on on the thread that delivers it.
    call.park = [&call](std::function<void(StageOutcome)> resume) {
      call.forward(call, [&call, resume = std::move(resume)](Result<CallResult> result) {
        if (!result) {
          // A kill switch or the client ended it: say why rather than the upstream's "cancelled".
          std::string why = result.status().message();
          if (call.cancel && call.cancel->cancelled())
            why = "the call was cancelled (" + call.cancel->reason() + "): " + why;
          resume(StageOutcome::Deny(Refusal::kInternal, why));
          return;
        }
        call.result = std::move(*result);
        resume(StageOutcome::Continue());
      });
    };
    return StageOutcome{StageResult::kPause, Refusal::kNone, "waiting for the upstream", ""};
  }
  const BuiltinTool* tool = tools_.Find(call.tool);
  if (tool == nullptr)
    return StageOutcome::Deny(Refusal::kUnknownTool, "unknown tool: " + call.tool);
  auto chosen = ChooseSandboxProfile(call);
  if (!chosen) return StageOutcome::Deny(Refusal::kInternal, chosen.status().message());
  sandbox::Options profile = std::move(*chosen);
  if (tool->server == "sandbox") {
    // Which isolation ran the code, and why, goes into the audit entry (issue 5: the backend
    // chosen by profile or policy is recorded with its reason).
    const std::string rule = call.decision ? call.decision->rule : "";
    const bool named = call.decision && !call.decision->sandbox_profile.empty();
    call.execution =
        "sandbox profile '" + (named ? call.decision->sandbox_profile : std::string("default")) +
        "'" + (named && !rule.empty() ? " from rule " + rule : "") + ", backend " + profile.backend;
  }
  ToolEnv env{.profile = std::move(profile), .policy = call.policy.get(), .cancel = call.cancel};
  if (const SandboxLaunchEnv* launch = call.state.Find<SandboxLaunchEnv>()) env.launch_env = launch->env;
  if (const TrifectaCall* t = call.state.Find<TrifectaCall>(); t != nullptr && t->tracker != nullptr)
  {
    env.trifecta_recheck = TrifectaRecheck(*t);
    env.trifecta_egress = TrifectaEgressCheck(*t);
    if (tool->server == "task") {
      env.end_task = [&call, t, end = end_task_]() -> Result<nlohmann::json> {
        const std::string why = "the task ended (task__end)";
        const size_t cancelled = end ? end(call, why) : 0;
        Status forgot = t->tracker->Forget(t->ticket.keys);
        if (!forgot.ok()) return forgot.Wrap("the task's legs could not be forgotten");
        const std::string task = call.task.empty() ? "the session's task" : "task '" + call.task + "'";
        return nlohmann::json{
            {"summary", task + " ended: its trifecta legs are forgotten and " +
                            std::to_string(cancelled) + " other call(s) of it were cancelled"},
            {"task", call.task},
            {"keys_forgotten", t->ticket.keys.size()},
            {"calls_cancelled", cancelled}};
      };
    }
  }
  auto result = tool->run(call.arguments, env);
  if (!result)
    return StageOutcome::Deny(Refusal::kInvalidArguments, "invalid arguments for " + call.tool +
                                                              ": " + result.status().message());
  call.result = std::move(*result);
  if (!call.result->execution.empty() && !call.execution.empty())
    call.execution += " (" + call.result->execution + ")";
  return StageOutcome::Continue();
}

std::unique_ptr<Stage> MakeExecuteStage(const StageServices& services) {
  return std::make_unique<ExecuteStage>(*services.tools, services.end_task);
}

}  // namespace warden::gateway
