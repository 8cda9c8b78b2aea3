// `warden kill SCOPE [NAME] [--reason TEXT]`, `warden unkill SCOPE [NAME]`, `warden kill list`
// and `warden kill history`: the kill switches in the warden database (docs/state.md). SCOPE is
// all, tenant, user, agent, session or tool; NAME is an exact tenant, user, agent, session id or
// tool (SERVER__TOOL) name; `all` takes none. A running gateway on the same database refuses new calls within a second.
// Exit status: 0 done (also when the switch already was in that state); 1 the switch changed but
// its audit entry could not be written; 2 bad input or the database could not be used.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <iostream>
#include <string>
#include <vector>

namespace warden::cli {

class KillCommand {
 public:
  // Adds the `kill` and `unkill` subcommands to `app`. Output goes to `out`, messages about
  // failures to `err` (tests pass string streams).
  explicit KillCommand(CLI::App& app, std::ostream& out = std::cout, std::ostream& err = std::cerr);
  bool parsed() const { return kill_->parsed() || unkill_->parsed(); }
  // Runs the parsed subcommand; returns the exit status above.
  int Execute();

 private:
  int Change(bool kill);
  int List();
  int History();

  CLI::App *kill_, *unkill_;
  std::ostream& out_;
  std::ostream& err_;
  std::string db_;
  std::vector<std::string> args_;  // SCOPE [NAME], or list / history
  std::string reason_;
  bool json_ = false;
  size_t lines_ = 20;
};

}  // namespace warden::cli
