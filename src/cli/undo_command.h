// `warden undo CALL_ID [--config FILE] [--audit-db PATH] [--upstream ...] [--json]`: runs the
// compensating call of call CALL_ID (its audit entry id, as `warden audit` shows it) through a
// gateway core started from the same flags as `warden mcp`, as the original caller, policy-checked
// and audited like any call; links the two audit entries with an admin entry naming the operator
// (docs/approvals.md "Undo"). Prints the compensating call's result.
// Exit status: 0 undone; 1 the compensating call ran but the link or the store could not be
// written; 2 bad input, warden could not start, or nothing was undone (unknown call, no
// compensating call, already undone, refused or failed).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <iostream>
#include <string>

#include "cli/gateway_setup.h"

namespace warden::cli {

class UndoCommand {
 public:
  explicit UndoCommand(CLI::App& app, std::ostream& out = std::cout, std::ostream& err = std::cerr);
  bool parsed() const { return sub_->parsed(); }
  int Execute();

 private:
  CLI::App* sub_;
  std::ostream& out_;
  std::ostream& err_;
  GatewayFlags flags_;
  uint64_t call_id_ = 0;
  bool json_ = false;
};

}  // namespace warden::cli
