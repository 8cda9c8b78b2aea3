// The per-call pipeline: an ordered chain of small stages that every tool call passes through
// (ARCHITECTURE.md section 2). Each stage continues, denies with a reason that names the rule, or
// pauses: the execute stage parks a forwarded call until its upstream answers (Park, below), and
// the approval stage will park a call until a person decides. New behaviour is a new stage,
// never an `if` in the middle of the core. Contract: docs/gateway.md.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "policy/policy.h"

namespace warden::gateway {

enum class StageResult { kContinue, kDeny, kPause };
std::string_view StageResultName(StageResult result);  // "continue", "deny", "pause"

// Why a call was refused, so that the transport can answer in the protocol's terms: a policy or
// kill-switch denial is a tool result with isError (the agent reads the reason); an unknown or
// hidden tool and bad arguments are JSON-RPC -32602; a failure inside warden is -32603.
enum class Refusal { kNone, kDenied, kUnknownTool, kInvalidArguments, kInternal };

// What one stage returns.
struct StageOutcome {
  StageResult result = StageResult::kContinue;
  Refusal refusal = Refusal::kNone;  // set when result is kDeny
  std::string reason;                // one line for the agent and the audit log
  std::string rule;                  // the policy rule or switch behind a denial, or ""

  static StageOutcome Continue() { return {}; }
  static StageOutcome Deny(Refusal refusal, std::string reason, std::string rule = "") {
    return {StageResult::kDeny, refusal, std::move(reason), std::move(rule)};
  }
};

// What an executed tool returned: the MCP CallToolResult to send back, plus the text the audit
// log summarises (never the whole result: audit keeps size, hash and a redacted excerpt).
struct ToolResult {
  nlohmann::json mcp_result;  // {content: [...], structuredContent?: {...}, isError?: bool}
  std::string text;           // the result's text content, for the audit summary
  bool is_error = false;
  std::string execution;  // how the tool ran, when it knows more than the stage ("pre-warmed pool")
};

// Cancels one call in flight: the client sent notifications/cancelled, the session closed, or a
// kill switch was pulled. Whoever runs the tool registers how to stop it (end the sandbox's
// process, cancel the upstream request); Cancel runs that at once or, when the tool has not
// started yet, as soon as it registers. Thread-safe.
class CancelToken {
 public:
  void Cancel(const std::string& reason);
  bool cancelled() const { return cancelled_.load(); }
  std::string reason() const;
  // Sets what stopping means now (replacing the previous action); runs it at once when the call
  // is already cancelled. Pass {} when the tool finished.
  void OnCancel(std::function<void()> stop);

 private:
  mutable std::mutex mu_;
  std::atomic<bool> cancelled_{false};
  std::string reason_;
  std::function<void()> stop_;
};

// Everything the stages know about one call. Filled progressively: identity fills the caller,
// policy the decision, execute the result; the pipeline fills `verdict` before the final stages.
struct CallContext {
  // Caller, as the identity stage established it ("" when not applicable).
  std::string tenant, user, agent, session, scope;
  // The call.
  std::string server;  // the upstream's or built-in's name (sandbox for sandbox__exec), or ""
  std::string tool;    // the full exposed name
  nlohmann::json arguments = nlohmann::json::object();

  // The policy snapshot and decision the policy stage used: one call never sees two policies.
  std::shared_ptr<const policy::Policy> policy;
  std::optional<policy::Decision> decision;
  // Set by the session when an upstream serves the tool: forwards the call (under its upstream
  // name) and calls `done` exactly once, on any thread, with the upstream's CallToolResult, or
  // an error Status when the upstream failed (the agent gets -32603 naming the upstream). The
  // execute stage pauses meanwhile: no thread waits for the upstream. Unset: a built-in tool.
  using ForwardDone = std::function<void(Result<ToolResult>)>;
  std::function<void(CallContext&, ForwardDone done)> forward;
  // The upstream's Tool object (as its tools/list gave it) when an upstream serves the call: the
  // arguments stage checks the arguments against its inputSchema. Null for built-ins.
  nlohmann::json tool_definition;
  // Set when the call can be cancelled; tools register how to stop themselves on it.
  std::shared_ptr<CancelToken> cancel;
  // Set by the execute stage when the tool ran.
  std::optional<ToolResult> result;
  // How the execute stage ran a built-in, for the audit entry's reason ("sandbox profile
  // 'untrusted' from rule tools[3], backend gvisor"); empty for upstream tools.
  std::string execution;

  // A stage that returns kPause sets this to say how it resumes: the pipeline calls it once
  // with `resume`, and the stage (or whatever it waits for) calls resume exactly once, on any
  // thread, with how the stage ended. A pause without `park` is final (nothing resumes it).
  std::function<void(std::function<void(StageOutcome)> resume)> park;

  // How the decision stages ended: kContinue with an empty stage when every stage continued.
  StageOutcome verdict;
  std::string verdict_stage;  // the name of the stage that denied or paused

  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

class Stage {
 public:
  virtual ~Stage() = default;
  // A stable name, used in stats and in denials ("policy", "kill_switches").
  virtual std::string_view name() const = 0;
  // Runs on `call`. Must not throw; a stage that fails for its own reasons denies (fail closed).
  virtual StageOutcome Run(CallContext& call) = 0;
};

// Counters for one stage, under its stable name (ready for /metrics). A run that parks counts
// once in `paused` when it parks, and once more by how it ends when it resumes (`resumed` and
// `continued` or `denied`); a pause without park (final) counts in `paused` only.
struct StageStats {
  std::string name;
  uint64_t continued = 0, denied = 0, paused = 0, resumed = 0;
  // From each run's start to its end, parked time included; and the parked part alone.
  std::chrono::nanoseconds time{0}, parked{0};
};

// Runs stages in order. Ordinary stages stop at the first one that does not continue; final
// stages (audit) run after that whatever happened, and a final stage that denies turns the whole
// call into that denial (the audit stage does so when the entry could not be written: the result
// must not go back unrecorded). Thread-safe to Run once built; Add* only before the first Run.
class Pipeline {
 public:
  void AddStage(std::unique_ptr<Stage> stage);
  void AddFinalStage(std::unique_ptr<Stage> stage);

  // Runs `call` through the chain and calls `done` with the outcome the transport answers with
  // (also left in call.verdict). When no stage parks, everything runs on this thread before
  // RunAsync returns; a stage that parks (execute waiting for an upstream, later an approval)
  // lets this thread go, and the rest of the chain and `done` run on the thread that resumes it.
  // `call` must stay alive until `done` has been called. A pause without park is returned as is.
  using Done = std::function<void(const StageOutcome&)>;
  void RunAsync(CallContext& call, Done done);
  // RunAsync, waiting on this thread for a parked stage to resume.
  StageOutcome Run(CallContext& call);

  // The stage names in the order they run (final stages last).
  std::vector<std::string> StageNames() const;
  std::vector<StageStats> Stats() const;

 private:
  struct Entry {
    std::unique_ptr<Stage> stage;
    StageStats stats;
  };
  using Clock = std::chrono::steady_clock;
  // Counts how one run of `entry` ended, started at `started` (parked from `parked_at` when it
  // parked).
  void Count(Entry& entry, StageResult result, Clock::time_point started,
             std::optional<Clock::time_point> parked_at = std::nullopt);
  void CountPause(Entry& entry);
  // Runs ordinary stages from index `next`, then the final stages.
  void Step(CallContext& call, std::size_t next, Done done);
  // Records how stage `index` ended; false when the chain stops there.
  bool Settle(CallContext& call, std::size_t index, StageOutcome outcome,
              Clock::time_point started, std::optional<Clock::time_point> parked_at);
  void Finish(CallContext& call, const Done& done);

  std::vector<Entry> stages_, final_stages_;
  mutable std::mutex stats_mu_;
};

}  // namespace warden::gateway
