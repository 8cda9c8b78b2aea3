// The per-call pipeline: an ordered chain of small stages that every request a session serves
// passes through (ARCHITECTURE.md section 2): tools/call, and the requests forwarded to an
// upstream (resources/read, prompts/get, completion/complete, subscriptions, logging/setLevel)
// or relayed from one to the client (sampling, elicitation, roots). On the way in each stage
// continues, denies with a reason that names the rule, or pauses: the execute stage parks a
// forwarded call until its upstream answers (Park, below), and the approval stage will park a
// call until a person decides. On the way back every stage that let the call through sees its
// result, last stage first, and may rewrite it (redact) or refuse it; messages that belong to the
// call and go out before its result (progress) pass through the stages too. New behaviour is a
// new stage (stages/chain.cc declares the order), never an `if` in the middle of the core; what
// a stage keeps per call lives in CallContext::state, not in a new field. Contract:
// docs/gateway.md ("The pipeline").
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <typeindex>
#include <vector>

#include "common/status.h"
#include "mcp/jsonrpc.h"
#include "monitor/metrics.h"
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
  // The decision the audit log records when this outcome ends the call ("ask" for a call the
  // policy sends to a person); "" lets the audit stage derive it (allow, deny, error).
  std::string decision;

  static StageOutcome Continue() { return {}; }
  static StageOutcome Deny(Refusal refusal, std::string reason, std::string rule = "") {
    return {StageResult::kDeny, refusal, std::move(reason), std::move(rule), ""};
  }
};

// What a request returned, held once: the method's result exactly as the client will receive it
// (a CallToolResult for tools/call, a ReadResourceResult for resources/read, a GetPromptResult,
// a CompleteResult, the client's answer to a relayed sampling request), or the JSON-RPC error the
// upstream answered with. Stages on the response path rewrite `value` in place; nothing else
// holds a copy, so what they leave is what goes back (and what the audit log summarises).
struct CallResult {
  nlohmann::json value = nlohmann::json::object();
  bool is_error = false;   // the CallToolResult's isError, or true for rpc_error
  bool rpc_error = false;  // value is the JSON-RPC error object {code, message, data?}
  std::string execution;  // how the tool ran, when it knows more than the stage ("pre-warmed pool")
  // What a built-in reached, for the anomaly detectors (monitor stage); never sent to the client.
  struct Facts {
    std::vector<std::string> hosts;  // hosts its allowed connections went to (web__fetch, egress)
    std::string sandbox_end;         // sandbox__exec: how the run ended ("exited", "timeout"...)
    uint64_t refused_syscalls = 0;   // sandbox__exec: syscalls the seccomp filter refused
  } facts;

  // A CallToolResult with one text content.
  static CallResult FromText(std::string text, bool is_error);
  // An upstream's JSON-RPC error, passed on as the reply.
  static CallResult FromError(int code, std::string message,
                              nlohmann::json data = nlohmann::json());
  // The text for the audit summary: the text parts of `content` (a tool's result), `contents`
  // (a resource's) or `messages` (a prompt's), joined by newlines; an error's message; else the
  // whole value as JSON.
  std::string Text() const;
};

// What the stages keep per call without a field in CallContext (Envoy's FilterState): one object
// of each type, created on first use and destroyed with the call. A stage defines its own type
// (a struct in its .cc) and reaches it with call.state.Get<T>(); no other stage need know it.
// Get and Find are thread-safe; the object itself is the stage's to lock when it is touched from
// two threads (OnStreamed runs beside the call's own stages).
class CallState {
 public:
  CallState() = default;
  CallState(CallState&& other) noexcept : slots_(std::move(other.slots_)) {}
  CallState& operator=(CallState&& other) noexcept {
    slots_ = std::move(other.slots_);
    return *this;
  }

  template <class T>
  T& Get() {
    std::lock_guard lock(mu_);
    std::unique_ptr<Slot>& slot = slots_[std::type_index(typeid(T))];
    if (!slot) slot = std::make_unique<Holder<T>>();
    return static_cast<Holder<T>&>(*slot).value;
  }
  template <class T>
  T* Find() {
    std::lock_guard lock(mu_);
    auto it = slots_.find(std::type_index(typeid(T)));
    return it == slots_.end() ? nullptr : &static_cast<Holder<T>&>(*it->second).value;
  }
  template <class T>
  const T* Find() const {
    std::lock_guard lock(mu_);
    auto it = slots_.find(std::type_index(typeid(T)));
    return it == slots_.end() ? nullptr : &static_cast<const Holder<T>&>(*it->second).value;
  }

 private:
  struct Slot {
    virtual ~Slot() = default;
  };
  template <class T>
  struct Holder final : Slot {
    T value{};
  };
  mutable std::mutex mu_;
  std::map<std::type_index, std::unique_ptr<Slot>> slots_;
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
// What only one stage needs goes in `state`.
struct CallContext {
  // Caller, as the identity stage established it ("" when not applicable).
  std::string tenant, user, agent, session, scope;
  // The task the client says the call belongs to (params._meta["warden/task"]), or "": what the
  // trifecta tracks a caller without a session by (docs/trifecta.md, "Whose state").
  std::string task;
  // The call.
  std::string server;  // the upstream's or built-in's name (sandbox for sandbox__exec), or ""
  // The full exposed name of a tool; for another request, UPSTREAM__METHOD (MethodToolName):
  // the name the policy matches.
  std::string tool;
  // The tool's arguments; for another request, its params.
  nlohmann::json arguments = nlohmann::json::object();
  // The JSON-RPC method ("tools/call", "resources/read", "sampling/createMessage" ...).
  std::string method = "tools/call";
  // The request's JSON-RPC id as the client sent it (null when unknown): what the client and a
  // log line name the call by within its session.
  nlohmann::json request_id;

  // The policy snapshot and decision the policy stage used: one call never sees two policies.
  std::shared_ptr<const policy::Policy> policy;
  std::optional<policy::Decision> decision;
  // Set by the session when an upstream (or, for a relayed request, the client) serves the call:
  // sends it and calls `done` exactly once, on any thread, with what came back, or an error
  // Status when it could not be had (the agent gets -32603 naming why). The execute stage pauses
  // meanwhile: no thread waits. Unset: a built-in tool.
  using ForwardDone = std::function<void(Result<CallResult>)>;
  std::function<void(CallContext&, ForwardDone done)> forward;
  // The upstream's Tool object (as its tools/list gave it) when an upstream serves the call: the
  // arguments stage checks the arguments against its inputSchema. Null for built-ins.
  nlohmann::json tool_definition;
  // The upstream's current Tool object for this call's tool, read when asked: null when the
  // upstream no longer lists it or its definition is no longer the pinned one. The approval
  // stage checks it before releasing a call that waited. Unset: built-ins (and tests).
  std::function<nlohmann::json()> definition_now;
  // Set when the call can be cancelled; tools register how to stop themselves on it.
  std::shared_ptr<CancelToken> cancel;
  // The client's progress token for this call (params._meta.progressToken), null when it sent
  // none; and how to send a notification that belongs to the call to the client (its related
  // stream), unset when there is nowhere to send. A stage that holds a call for long (the
  // approval stage) sends notifications/progress so that the client does not time out.
  nlohmann::json progress_token;
  std::function<void(mcp::Notification)> notify;
  // Sends a request of warden's own to the client for this call (elicitation/create) and gets
  // its answer (or an error: the client lacks the capability, did not answer in time, the
  // session ended) once, on any thread. Unset when there is no client to ask.
  using ClientAnswer = std::function<void(mcp::Message)>;
  std::function<void(const std::string& method, nlohmann::json params, ClientAnswer done)>
      ask_client;
  // Set by the execute stage when the call ran; the response path may rewrite it.
  std::optional<CallResult> result;
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

  // Per-stage state (see CallState).
  CallState state;

  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

class Stage {
 public:
  virtual ~Stage() = default;
  // A stable name, used in stats and in denials ("policy", "kill_switches").
  virtual std::string_view name() const = 0;
  // Runs on `call` on its way in. Must not throw; a stage that fails for its own reasons denies
  // (fail closed).
  virtual StageOutcome Run(CallContext& call) = 0;
  // The response path: once the call has run (call.result is set), each stage that continued
  // sees it on the way back, last stage first, and may rewrite call.result (redact, label) or
  // refuse it (kDeny: the result is withheld and the call answered with the denial; the audit
  // entry still summarises what was withheld). Not called when the call was refused or failed
  // before it had a result. Must not pause: a kPause is taken as a denial (fail closed).
  virtual StageOutcome OnResult(CallContext& call) {
    (void)call;
    return StageOutcome::Continue();
  }
  // A message that belongs to the call and goes out before its result (a progress notification
  // of the upstream serving it): may rewrite it, or return false to drop it. Runs on the thread
  // that delivers the message, possibly while the call's own stages run on another: touch only
  // what is yours in call.state, under your own lock.
  virtual bool OnStreamed(CallContext& call, mcp::Notification& message) {
    (void)call;
    (void)message;
    return true;
  }
};

// Counters for one stage, under its stable name (ready for /metrics). A run that parks counts
// once in `paused` when it parks, and once more by how it ends when it resumes (`resumed` and
// `continued` or `denied`); a pause without park (final) counts in `paused` only.
// The response path counts apart: `results` each OnResult, `results_denied` those that refused.
struct StageStats {
  std::string name;
  uint64_t continued = 0, denied = 0, paused = 0, resumed = 0;
  uint64_t results = 0, results_denied = 0;
  // From each run's start to its end, parked time included; and the parked part alone.
  std::chrono::nanoseconds time{0}, parked{0};
  // Each run's time by monitor::kLatencyBuckets (the last: longer than all), not cumulative:
  // warden_stage_duration_seconds in /metrics.
  std::array<uint64_t, monitor::kLatencyBuckets.size() + 1> buckets{};
};

// Runs stages in order. Ordinary stages stop at the first one that does not continue; when all
// of them continued and the call has a result, the response path runs (OnResult, last stage
// first); final stages (audit) run after that whatever happened, and a final stage that denies
// turns the whole call into that denial (the audit stage does so when the entry could not be
// written: the result must not go back unrecorded). Thread-safe to Run once built; Add* only before
// the first Run.
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
  // RunAsync, waiting on this thread for a parked stage to resume (tests and tools only: a
  // session never waits).
  StageOutcome Run(CallContext& call);
  // A message that belongs to `call` (see Stage::OnStreamed): every ordinary stage's OnStreamed,
  // last stage first; false when one dropped it. Thread-safe.
  bool Streamed(CallContext& call, mcp::Notification& message);

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
  // Runs ordinary stages from index `next`, then the response path, then the final stages.
  void Step(CallContext& call, std::size_t next, Done done);
  // The response path: OnResult of every ordinary stage, last first, until one refuses.
  void Respond(CallContext& call);
  // Records how stage `index` ended; false when the chain stops there.
  bool Settle(CallContext& call, std::size_t index, StageOutcome outcome, Clock::time_point started,
              std::optional<Clock::time_point> parked_at);
  void Finish(CallContext& call, const Done& done);

  std::vector<Entry> stages_, final_stages_;
  mutable std::mutex stats_mu_;
};

}  // namespace warden::gateway
