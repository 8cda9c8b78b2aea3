// `warden pool start --socket PATH [--size N] [--idle-timeout D] [--profile FILE] [RUN OPTIONS]`
// runs a pool of pre-warmed native sandboxes in the foreground (docs/pool.md); `warden pool status
// --socket PATH [--json]` prints its state. Exit status: 0, or 125 when the pool cannot start or
// cannot be reached (the message says why).
#pragma once

#include <sys/types.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/profile_flags.h"

namespace warden::cli {

class PoolCommand {
 public:
  explicit PoolCommand(CLI::App& app);
  bool parsed() const { return sub_->parsed(); }
  int Execute();

 private:
  int Start();
  int ShowStatus();

  CLI::App *sub_, *start_, *status_;
  std::string socket_;
  uint32_t size_ = 4;
  std::string idle_timeout_;
  bool json_ = false;
  ProfileFlags flags_;
  bool workspace_ = false;
  pid_t parent_pid_ = 0;
};

}  // namespace warden::cli
