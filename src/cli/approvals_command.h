// `warden approvals list [--all] [--json]`, `warden approvals show ID [--json]`,
// `warden approvals approve ID [--comment TEXT]` and `warden approvals deny ID [--comment TEXT]`:
// the calls the policy sent to a person (docs/approvals.md), on the store like `warden kill`
// (`--db PATH`, or `--config FILE` for its storage.sqlite). The CLI on the host is an approver for
// every approval; it decides as "LOGIN (cli)". A gateway on the same database sees the decision
// within its poll interval.
// Exit status: 0 done (an approval recorded, also one of two); 1 decided, but the audit entry
// could not be written; 2 bad input, an unknown id, or a database that could not be used; 3 the
// approval is no longer pending (the message says how it ended and by whom), or this operator
// already approved it and it needs a different second approver.
#pragma once

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

#include "common/status.h"

namespace warden::cli {

// `warden approvals approve|deny` on an approval that cannot take this decision (the API's 409).
inline constexpr int kExitNotPending = 3;

class ApprovalsCommand {
 public:
  // Adds the `approvals` subcommand and its `list`, `show`, `approve` and `deny` subcommands to
  // `app`. Output goes to `out`, messages about failures to `err`.
  explicit ApprovalsCommand(CLI::App& app, std::ostream& out = std::cout,
                            std::ostream& err = std::cerr);
  bool parsed() const { return sub_->parsed(); }
  // Runs the parsed subcommand; returns the exit status above.
  int Execute();

 private:
  // --db, else the --config file's storage.sqlite, else ./var/warden/warden.db.
  Result<std::string> DatabasePath() const;
  int List();
  int Show();
  int Decide(bool approve);

  CLI::App *sub_, *list_, *show_, *approve_, *deny_;
  std::ostream& out_;
  std::ostream& err_;
  std::string db_, config_;
  std::string id_;
  std::string comment_;
  bool all_ = false;
  bool json_ = false;
};

}  // namespace warden::cli
