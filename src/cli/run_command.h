// `warden run [OPTIONS] -- COMMAND [ARG...]`: one command in a fresh sandbox.
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <string>
#include <vector>

#include "cli/profile_flags.h"

namespace warden::cli {

class RunCommand {
 public:
  explicit RunCommand(CLI::App& app);
  bool parsed() const { return sub_->parsed(); }
  // Runs the sandbox; returns warden's exit status (the contract's mapping).
  int Execute();

 private:
  CLI::App* sub_;
  ProfileFlags flags_;
  std::string net_, backend_, json_, pool_;
  std::vector<std::string> allow_, resolve_, credentials_;
  std::vector<std::string> command_;
  int decision_fd_ = -1;
};

}  // namespace warden::cli
