// Undo plans, durably: for each call that ran under a rule with `undo: { tool, args }` (and each
// medium-risk sandbox__exec), the compensating call with its arguments resolved, or why there is
// none, keyed by the audit entry id of the original call. One table in the warden database,
// state_undo (docs/state.md, docs/approvals.md "Undo"). Written by the gateway's undo stage;
// read and marked by gateway::UndoRunner (`warden undo`, POST /api/calls/ID/undo). Thread-safe.
//
// State machine (one row):
//   available --Claim--> running --Finish(ok)--> done
//                                --Finish(failed)--> failed --Claim--> running ...
//   unavailable (never changes: there is nothing to run)
// Claim succeeds for exactly one caller at a time: two undos racing, one runs the compensating
// call and the other is refused. A row is done once and stays done.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "state/database.h"

namespace warden::state {

enum class UndoStatus { kAvailable, kUnavailable, kRunning, kDone, kFailed };
// "available", "unavailable", "running", "done", "failed".
std::string_view ToString(UndoStatus status);
Result<UndoStatus> ParseUndoStatus(std::string_view text);

struct UndoRecord {
  uint64_t call_id = 0;  // the audit entry id of the original call
  std::string time;      // when the plan was recorded (RFC 3339 UTC); set by Record when empty
  // The original caller: the compensating call runs as them.
  std::string tenant, user, agent, scope, session;
  std::string tool;       // the original call's tool
  std::string undo_tool;  // the compensating call's tool ("" when unavailable without a rule)
  nlohmann::json undo_args = nlohmann::json::object();  // resolved; stored as canonical JSON
  UndoStatus status = UndoStatus::kAvailable;
  std::string reason;         // unavailable: why; failed: what the compensating call said
  std::string undone_by;      // who claimed it last (running, done, failed)
  std::string undone_at;      // when it was done or failed
  uint64_t undo_call_id = 0;  // the compensating call's audit entry id (0: none yet)
  std::string snapshot;       // sandbox__exec: where the workspace snapshot is ("" when none)
};

// What Claim found.
struct UndoClaim {
  bool claimed = false;  // this caller holds the row (now running) and must Finish it
  UndoRecord record;     // the row as it was before the claim
};

class UndoStore {
 public:
  // Opens the database (see DatabaseOptions); with options.create, creates the table.
  static Result<std::unique_ptr<UndoStore>> Open(const DatabaseOptions& options);

  // Stores a new plan (status available or unavailable). Error when a row for record.call_id
  // exists already (an audit id is recorded once), on a read-only store, on SQLite failures.
  Status Record(const UndoRecord& record);
  // The row for `call_id`, or nullopt.
  Result<std::optional<UndoRecord>> Find(uint64_t call_id);
  // Takes the row for running (available or failed -> running, undone_by = who), atomically
  // (BEGIN IMMEDIATE): only one caller gets claimed = true. Not claimed: the row as it is (any
  // status), or nullopt in `record.call_id == 0` when there is no row.
  Result<UndoClaim> Claim(uint64_t call_id, const std::string& who);
  // Ends a claim: running -> done (with the compensating call's audit id) or failed (with
  // `reason`). Returns false when the row was not running (someone else ended it).
  Result<bool> Finish(uint64_t call_id, bool done, const std::string& reason,
                      uint64_t undo_call_id);

  const std::string& path() const { return options_.path; }

 private:
  UndoStore(DatabaseOptions options, Db db) : options_(std::move(options)), db_(std::move(db)) {}
  Result<std::optional<UndoRecord>> FindLocked(uint64_t call_id);

  DatabaseOptions options_;
  std::mutex mu_;  // one statement at a time on db_
  Db db_;
};

}  // namespace warden::state
