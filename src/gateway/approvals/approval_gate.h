// The approval gate: calls the policy sends to a person wait here, stored durably
// (state::ApprovalStore), until someone decides, the approval expires, or the call is cancelled.
// No thread waits per call: one thread of the gate's own keeps the deadlines, sends the
// keep-alive ticks (progress notifications) and polls the store for decisions another process
// made (`warden approvals approve`); a decision made here (the API, the console) wakes its call
// at once. The approval stage (stages/approval_stage.cc) asks; the API and console decide.
// Contract: docs/approvals.md.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "audit/audit_log.h"
#include "common/status.h"
#include "identity/caller.h"
#include "policy/model.h"
#include "state/approval_store.h"
#include "state/database.h"

namespace warden::gateway {

struct ApprovalGateOptions {
  // How often the store is checked for decisions made by other processes (a few microseconds
  // when nothing changed: PRAGMA data_version).
  std::chrono::milliseconds poll_interval{50};
  // How often a waiting call whose client sent a progress token hears that it still waits.
  std::chrono::milliseconds keepalive_interval{5000};
  // Said in the comment of every approval still pending when the gate opens.
  std::string restart_reason = "gateway restarted";
};

// How a wait ended.
struct ApprovalOutcome {
  state::ApprovalStatus status = state::ApprovalStatus::kCancelled;
  state::ApprovalRecord record;  // as it stood when it ended
  std::string message;           // what the agent reads when it did not end approved
};

// The binding an approval is tied to: lower-case hex SHA-256 of the canonical JSON of
// {tenant, user, agent, session, task, tool, arguments, definition} (the task only when there is
// one, so that bindings of calls without a task stay what they were); `retry` leaves out the
// session, never the task: a call made again in another task is another task's call.
std::string ApprovalBinding(const std::string& tenant, const std::string& user,
                            const std::string& agent, const std::string& session,
                            const std::string& task, const std::string& tool,
                            const nlohmann::json& arguments,
                            const std::string& definition_hash, bool retry = false);

// A fresh approval id: "apr_" and 32 lower-case hex digits (128 random bits).
std::string NewApprovalId();

// This process as the owner of the approvals it waits for ("PID:STARTTIME"), and whether the
// process an owner names has ended (a pid now used by another process counts as ended).
std::string ApprovalOwnerId();
bool ApprovalOwnerGone(const std::string& owner);

// "10m", "90s", "1h30m": how the agent and the audit log say a timeout.
std::string FormatDuration(std::chrono::milliseconds duration);

// Who may decide `record` under `policy` (docs/approvals.md, "Who decides"). `local_operator`:
// the caller is the one local user of single-user mode. Nullopt when they may; else why not, in
// one line (for the 403).
std::optional<std::string> WhyMayNotDecide(const policy::Policy& policy,
                                           const identity::Caller& caller, bool local_operator,
                                           const state::ApprovalRecord& record);

// Whether `caller` may see `record` and its arguments (the history, GET /api/approvals/ID): the
// local operator; else a person of the record's tenant who is an approver (`approver: true`) or
// the user whose agent made the call. Nullopt when they may; else why not, in one line.
std::optional<std::string> WhyMayNotSee(const policy::Policy& policy,
                                        const identity::Caller& caller, bool local_operator,
                                        const state::ApprovalRecord& record);

// Who a person deciding through the API or console is: tenant and user, named "alice" or
// "alice (local operator)".
state::Decider DeciderOf(const identity::Caller& caller, bool local_operator);

class ApprovalGate {
 public:
  // Opens the store in the warden database (created when missing), marks cancelled every
  // approval still pending there whose owner process has ended (options.restart_reason: their
  // callers' connections ended with it), records each in `audit`, and starts the gate's thread.
  // `audit` must outlive the gate.
  static Result<std::unique_ptr<ApprovalGate>> Open(const state::DatabaseOptions& database,
                                                    audit::AuditLog& audit,
                                                    ApprovalGateOptions options = {});
  ~ApprovalGate();  // StopAll("gateway stopping")
  ApprovalGate(const ApprovalGate&) = delete;
  ApprovalGate& operator=(const ApprovalGate&) = delete;

  // What a waiting call gets told. Both run on the gate's thread (or the deciding thread) and
  // must be quick: post real work elsewhere.
  struct Waiter {
    std::function<void(ApprovalOutcome)> done;  // exactly once
    std::function<void(int tick)> keepalive;    // may be empty
  };

  // Stores `record` as pending (created and expires filled here from `timeout`; the id too when
  // empty) and waits for it. Returns the stored record; on error nothing waits and nothing was
  // stored.
  Result<state::ApprovalRecord> Ask(state::ApprovalRecord record, std::chrono::milliseconds timeout,
                                    Waiter waiter);

  // A decision (a person through the API or the console; the agent's client in-band,
  // state::AgentClient). Wakes the waiting call when it ends the wait. A vote or decision that
  // took is an admin audit entry naming `who`, with `details` (how it came: {"via": "api",
  // "peer": ...}) and the decider's person in its arguments.
  Result<state::DecideResult> Approve(const std::string& id, const state::Decider& who,
                                      const std::string& comment,
                                      const nlohmann::json& details = nlohmann::json::object());
  Result<state::DecideResult> Deny(const std::string& id, const state::Decider& who,
                                   const std::string& comment,
                                   const nlohmann::json& details = nlohmann::json::object());
  // The call went away (client cancelled, session closed, kill switch): the row becomes
  // cancelled with `why` (unless someone decided first) and the waiter is told.
  void Cancel(const std::string& id, const std::string& why);

  // Ends every wait now as cancelled with `why` (callers told; later Asks refused): what a
  // gateway that stops does while its core can still finish the calls. The rows stay pending
  // in the store: the next gateway to open it cancels them as restarted, so that a caller who
  // retries is told.
  void StopAll(const std::string& why);

  // Marks an approved approval released: true exactly once.
  Result<bool> Consume(const std::string& id) { return store_->Consume(id); }
  // See ApprovalStore::TakeRestartCancelled.
  Result<std::optional<state::ApprovalRecord>> TakeRestartCancelled(const std::string& retry_key) {
    return store_->TakeRestartCancelled(retry_key);
  }

  // Called with each approval as it is created (the webhook), on the asking thread: must not
  // block. Set before the first Ask.
  void OnCreated(std::function<void(const state::ApprovalRecord&)> listener);

  state::ApprovalStore& store() { return *store_; }
  size_t waiting() const;

 private:
  struct Wait {
    Waiter waiter;
    std::chrono::steady_clock::time_point deadline, next_tick;
    std::chrono::milliseconds timeout{0};
    int ticks = 0;
  };
  ApprovalGate(std::unique_ptr<state::ApprovalStore> store, audit::AuditLog& audit,
               ApprovalGateOptions options);
  void Run();
  // Takes the wait for `id` out (nullopt when none) and tells it how `record` ended.
  void Finish(const std::string& id, const state::ApprovalRecord& record);
  // pending -> `status` (expired or cancelled) with `why`, unless decided first; tells the wait.
  void End(const std::string& id, state::ApprovalStatus status, const std::string& why);
  void CheckStore();
  void Audit(const state::ApprovalRecord& record, const std::string& decision,
             const std::string& who, const std::string& why);
  Result<state::DecideResult> Decided(Result<state::DecideResult> result, bool approve,
                                      const state::Decider& who, const std::string& comment,
                                      const nlohmann::json& details);

  std::unique_ptr<state::ApprovalStore> store_;
  audit::AuditLog& audit_;
  const ApprovalGateOptions options_;
  std::function<void(const state::ApprovalRecord&)> on_created_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Wait> waits_;
  bool stop_ = false;
  int64_t data_version_ = 0;
  std::string checked_since_;  // RFC 3339: decisions at or after this are looked at
  std::thread thread_;         // last
};

// What stages before the approval stage add to what the approver is shown (the trifecta's
// legs), one line each (CallContext::state).
struct ApprovalReasons {
  std::vector<std::string> lines;
};

// What an approved call carries through the rest of the pipeline (CallContext::state): the
// execute stage refuses a call the policy sent to a person without it (fail closed, whatever
// the chain), and the audit entry lists the votes.
struct ApprovalGranted {
  std::string id;
  std::vector<state::ApprovalVote> votes;
};

}  // namespace warden::gateway
