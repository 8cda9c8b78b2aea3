// Runs the compensating call of a call that ran earlier (`warden undo ID`, POST
// /api/calls/ID/undo): the plan the undo stage stored (state/undo_store.h), sent as a tools/call
// through an internal session of the gateway core for the original caller, so that it passes
// identity, kill switches, policy (and may itself wait for an approval), execute and audit like
// any call. Then links the two audit entries with an admin entry naming who asked, and marks the
// plan done, once. docs/approvals.md "Undo".
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "gateway/gateway.h"
#include "state/undo_store.h"

namespace warden::gateway {

// How an undo ended.
enum class UndoResult {
  kDone,           // the compensating call ran and succeeded
  kUnknownCall,    // no audit entry of that id
  kNotUndoable,    // the call has no compensating call (no undo rule, failed, refused...)
  kAlreadyUndone,  // done before (message says by whom, when)
  kInProgress,     // another undo of it is running now
  kFailed,         // the compensating call was refused, failed or did not answer in time
  kError,          // the store or the audit log could not be used
};

struct UndoOutcome {
  UndoResult result = UndoResult::kError;
  std::string message;  // one line: what happened, or why not
  uint64_t call_id = 0;
  std::string undo_tool;
  nlohmann::json undo_arguments = nlohmann::json::object();
  nlohmann::json reply;  // the compensating call's CallToolResult (or JSON-RPC error); null if none
  uint64_t undo_call_id = 0;  // its audit entry id (0: none was found)
  uint64_t link_id = 0;       // the admin entry linking the two
};

struct UndoRunnerOptions {
  // Longest wait for the compensating call's reply (an approval it needs included); then its
  // session is closed, which cancels it, and the undo fails.
  std::chrono::milliseconds timeout{60000};
};

class UndoRunner {
 public:
  // `core` and `store` (not owned) must outlive the runner.
  UndoRunner(GatewayCore& core, state::UndoStore& store, UndoRunnerOptions options = {})
      : core_(core), store_(store), options_(options) {}

  // Undoes call `call_id` on behalf of `who` (a person: "alice@acme (api)", "root (cli)").
  // Blocks until the compensating call has answered or the timeout passed: run it on a worker
  // or the CLI's thread, never on an I/O thread or the control executor.
  UndoOutcome Undo(uint64_t call_id, const std::string& who);

 private:
  // Why `call_id` has no plan row, from its audit entry.
  UndoOutcome NoPlan(uint64_t call_id);
  // Sends the compensating call through an internal session; the tools/call reply, or an
  // error message when it did not come.
  Result<nlohmann::json> RunCompensatingCall(const state::UndoRecord& record);
  // The audit entry id of the compensating call (the last call or decision entry of its
  // session for its tool), 0 when none is found.
  uint64_t CompensatingEntryId(const state::UndoRecord& record);

  GatewayCore& core_;
  state::UndoStore& store_;
  UndoRunnerOptions options_;
};

// "undo-<call_id>": the session id the compensating call runs in.
std::string UndoSessionId(uint64_t call_id);

}  // namespace warden::gateway
