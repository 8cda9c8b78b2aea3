// `warden tools list [--server NAME] [--json]` and `warden tools approve SERVER__TOOL` /
// `warden tools approve --server NAME`: the pinned definitions of upstream servers' tools
// (docs/state.md, "Tool pinning"). A changed or new tool stays hidden from agents until approved;
// `list` shows which ones and what changed.
// Exit status: 0 done; 1 approved, but the audit entry could not be written; 2 bad input, an
// unknown tool or server, or the database could not be used.
#pragma once

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

namespace warden::cli {

class ToolsCommand {
 public:
  // Adds the `tools` subcommand and its `list` and `approve` subcommands to `app`. Output goes
  // to `out`, messages about failures to `err` (tests pass string streams).
  explicit ToolsCommand(CLI::App& app, std::ostream& out = std::cout,
                        std::ostream& err = std::cerr);
  bool parsed() const { return sub_->parsed(); }
  // Runs the parsed subcommand; returns the exit status above.
  int Execute();

 private:
  int List();
  int Approve();

  CLI::App *sub_, *list_, *approve_;
  std::ostream& out_;
  std::ostream& err_;
  std::string db_;
  std::string server_;
  std::string tool_;
  bool json_ = false;
};

}  // namespace warden::cli
