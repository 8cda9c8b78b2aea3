// Approvals, durably: the calls the policy sent to a person (`ask`), each with exactly what will
// run, and what became of it. One table in the warden database, state_approvals (docs/state.md,
// docs/approvals.md). The gateway creates a row when a call pauses and waits for a decision;
// decisions come from the API and console (in the gateway's process) or `warden approvals`
// (another process, on the same file), so the gateway also polls DataVersion. Thread-safe.
//
// State machine (one row):
//   pending --approve (enough approvers)--> approved --Consume--> approved + consumed_at
//   pending --deny--> denied          pending --Expire--> expired
//   pending --Cancel--> cancelled     (client cancelled, session closed, kill switch, definition
//                                      changed, gateway restarted)
// Every transition out of pending happens once: a second decision gets kAlreadyDecided (the
// API's 409). An approved row runs its call once: Consume succeeds for exactly one caller.
#pragma once

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
#include "state/database.h"

namespace warden::state {

enum class ApprovalStatus { kPending, kApproved, kDenied, kExpired, kCancelled };
// "pending", "approved", "denied", "expired", "cancelled".
std::string_view ToString(ApprovalStatus status);
Result<ApprovalStatus> ParseApprovalStatus(std::string_view text);

// Who decides an approval. People are told apart by who they are (tenant and user id), never by
// the name shown: two names of one person are one vote. The host's CLI decides as its login
// name with no tenant, which is also who single-user mode's local operator is. An answer of the
// agent's own client (the in-band elicitation) comes over the agent's connection, authenticated
// by the agent's key: it is `in_band`, speaks for nobody as a person, and never counts toward a
// two-person approval (docs/approvals.md, "Who decides").
struct Decider {
  std::string tenant, user;  // the person (in_band: the user the agent acts for)
  std::string name;          // what records, the audit log and people read
  bool in_band = false;
};
// A person of `tenant` (empty: the host or single-user mode) named as `user` unless `name` says.
Decider Person(std::string tenant, std::string user, std::string name = "");
// The requesting user's agent's client answering in-band: named "the agent's client (in-band)".
Decider AgentClient(std::string tenant, std::string user);
inline constexpr const char* kAgentClientName = "the agent's client (in-band)";

// One approver's yes, for calls that need two (approvals.two_person).
struct ApprovalVote {
  std::string who, at;  // who: Decider::name; at: RFC 3339 UTC
  std::string comment;  // what this approver said (the record's comment is the last vote's)
  std::string tenant, user;  // the person (Decider); rows stored before these: "" and `who`
  bool in_band = false;
};

struct ApprovalRecord {
  std::string id;  // "apr_" + 32 lower-case hex digits (128 random bits)
  std::string tenant, user, agent, session;
  std::string tool;    // the full exposed name (mail__send_email)
  std::string server;  // the upstream (or built-in) serving it
  // The exact arguments, as canonical JSON text (RFC 8785: audit::CanonicalJson); what approving
  // runs.
  std::string arguments;
  std::string risk;    // "low", "medium", "high"
  std::string rule;    // the rule that asked ("tools[3] {tool: ...}", "defaults.unknown_tool")
  std::string reason;  // the policy's reason
  // What later stages add, one line each (the trifecta's legs): shown to the approver.
  std::vector<std::string> reasons;
  // Lower-case hex SHA-256 the call is bound to: tenant, user, agent, session, tool, canonical
  // arguments and the pinned definition's hash (gateway::ApprovalBinding). Approving releases
  // only a call with this binding.
  std::string binding;
  // The same without the session: how a call retried after a restart (in a new session) finds
  // the approval the restart cancelled.
  std::string retry_key;
  std::string definition_hash;   // state::DefinitionHash of the tool's definition; "" built-ins
  std::string created, expires;  // RFC 3339 UTC
  ApprovalStatus status = ApprovalStatus::kPending;
  std::string decided_by, decided_at;  // "" while pending
  std::string comment;                 // the decider's comment, or why it expired or was cancelled
  int votes_needed = 1;                // 2 for two_person risks
  std::vector<ApprovalVote> votes;     // the approvals so far (the last one decided it)
  std::string consumed_at;             // "" until the approved call was released (once)
  // After a restart cancelled it: whether a retry has been told (it is told once).
  bool retry_told = false;
  // The process that waits for it ("PID:STARTTIME", gateway::ApprovalOwnerId); "" for none.
  std::string owner;
};

// The JSON the CLI (`--json`), the API and the webhook show: every field above except
// retry_key, retry_told and owner (a pid is nobody's business outside the host), with `arguments`
// as a JSON value (not text) and `votes` as
// [{who, at, comment, tenant, user, in_band}].
nlohmann::json ToJson(const ApprovalRecord& record);

// Why a decision could not be recorded.
enum class DecideError {
  kNone,
  kNotFound,        // no approval has this id (API 404)
  kAlreadyDecided,  // it is not pending any more (API 409); the record says how it ended
  kSameApprover,    // this person already approved it; two_person needs someone else (409)
  kNeedsPerson,     // an in-band answer cannot be a vote of a two-person approval
};

struct DecideResult {
  DecideError error = DecideError::kNone;
  ApprovalRecord record;  // as it stands after the attempt (when found)
  bool decided = false;   // this attempt ended the pending state (approve with enough votes,
                          // or deny)
};

class ApprovalStore {
 public:
  // Opens the database (see DatabaseOptions); with options.create, creates the table. A
  // read-only store reads a file without the table as holding no approvals.
  static Result<std::unique_ptr<ApprovalStore>> Open(const DatabaseOptions& options);

  // Stores a new pending approval. `record.id` empty: a fresh random id is assigned; created
  // and expires must be set by the caller. Returns the stored record.
  // (Checked: binding and retry_key 64 lower-case hex, definition_hash that or "", arguments
  // JSON text, risk low|medium|high, votes_needed 1 or 2, created <= expires in state::Now()'s
  // format, text fields bounded; the decision fields are reset to pending.)
  Result<ApprovalRecord> Create(ApprovalRecord record);

  // nullopt when no approval has this id.
  Result<std::optional<ApprovalRecord>> Get(const std::string& id);

  // Pending approvals, oldest first; with `all`, every approval, newest first, at most `limit`
  // (0: no limit).
  Result<std::vector<ApprovalRecord>> List(bool all, size_t limit = 0);

  // An approver's yes: adds a vote; when votes reach votes_needed the row becomes approved
  // (decided_by: the approvers' names joined by ", "). A person who voted already (same tenant
  // and user, whatever the name) gets kSameApprover; an in-band answer on a row that needs two
  // votes gets kNeedsPerson. Errors of the decision itself come back in DecideResult; a Status
  // error is a storage failure (or a name or user that is empty, over 256 bytes or has control
  // characters; a comment over 1024 bytes, not UTF-8, or with control characters but newline
  // and tab). A pending row past its `expires` is not decided late: the attempt expires it and
  // gets kAlreadyDecided.
  Result<DecideResult> Approve(const std::string& id, const Decider& who,
                               const std::string& comment);
  // A no: denied at once, whoever else approved.
  Result<DecideResult> Deny(const std::string& id, const Decider& who, const std::string& comment);
  // pending -> expired (decided_by "warden", comment `why`), or pending -> cancelled. Returns
  // false when it was not pending (someone decided first: their decision stands).
  Result<bool> Expire(const std::string& id, const std::string& why);
  Result<bool> Cancel(const std::string& id, const std::string& why);

  // Marks an approved row as released. True exactly once per approved row; false when it was
  // not approved or was already consumed.
  Result<bool> Consume(const std::string& id);

  // On gateway start: every pending row becomes cancelled with comment `why` ("gateway
  // restarted"). Returns how many.
  Result<size_t> CancelAllPending(const std::string& why);
  // The same for the pending rows whose owner `gone(owner)` says has ended (what a gateway
  // that starts beside another one on the same file does); returns them as they now stand.
  // (Like CancelAllPending's, these count as cancelled by a restart for TakeRestartCancelled.
  // `gone` runs inside the write transaction: keep it quick.)
  Result<std::vector<ApprovalRecord>> CancelOrphaned(
      const std::string& why, const std::function<bool(const std::string& owner)>& gone);

  // The newest approval with this retry key that a restart cancelled and no retry has been
  // told about; marks it told. nullopt when there is none.
  Result<std::optional<ApprovalRecord>> TakeRestartCancelled(const std::string& retry_key);

  // Approvals that are no longer pending and were decided (or expired, or cancelled) at or after
  // `since` (RFC 3339 UTC, as Now() gives), oldest first: what the gateway re-reads when another
  // process has written, to wake the calls that wait for them.
  Result<std::vector<ApprovalRecord>> DecidedSince(const std::string& since);

  // PRAGMA data_version (see KillStore::DataVersion): changes when another connection commits.
  Result<int64_t> DataVersion();

  const std::string& path() const { return options_.path; }

 private:
  ApprovalStore(DatabaseOptions options, Db db)
      : options_(std::move(options)), db_(std::move(db)) {}
  Status Writable() const;
  // Whether state_approvals exists; an error when a store that created it misses it. Under mu_.
  Result<bool> HasTable();
  Result<DecideResult> Decide(const std::string& id, const Decider& who,
                              const std::string& comment, bool approve);
  Result<bool> End(const std::string& id, ApprovalStatus status, const std::string& why);

  DatabaseOptions options_;
  std::mutex mu_;  // one statement at a time on db_
  Db db_;
};

}  // namespace warden::state
