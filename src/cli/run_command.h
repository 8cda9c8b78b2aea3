// `warden run [OPTIONS] -- COMMAND [ARG...]`: one command in a fresh sandbox.
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <string>
#include <vector>

namespace warden::cli {

class RunCommand {
 public:
  explicit RunCommand(CLI::App& app);
  bool parsed() const { return sub_->parsed(); }
  // Runs the sandbox; returns warden's exit status (the contract's mapping).
  int Execute();

 private:
  CLI::App* sub_;
  std::string profile_, timeout_, memory_, cpu_, output_limit_, tmpfs_size_, file_size_, workdir_, net_, backend_, json_, pool_;
  uint32_t pids_ = 0, open_files_ = 0;
  bool no_protect_ = false;
  std::vector<std::string> ro_, rw_, env_, allow_, resolve_, protect_, accept_missing_;
  std::vector<std::string> command_;
};

}  // namespace warden::cli
