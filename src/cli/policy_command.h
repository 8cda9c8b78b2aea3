// `warden policy check FILE` (validate and explain) and `warden policy test FILE CASES.yaml`
// (the decision, risk, rule and reason for each case). Exit 0, or 1 with the error on stderr
// (check) / when any case's expectation is not met (test).
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>

namespace warden::cli {

class PolicyCommand {
 public:
  explicit PolicyCommand(CLI::App& app);
  bool parsed() const { return sub_->parsed(); }
  // Runs the chosen subcommand; returns its exit status.
  int Execute();

 private:
  CLI::App* sub_;
  CLI::App* check_;
  CLI::App* test_;
  std::string check_file_, test_file_, test_cases_;
};

// The subcommands' bodies, callable from tests: results to `out`, errors to `err`.
int PolicyCheck(const std::string& file, std::ostream& out, std::ostream& err);
int PolicyTest(const std::string& file, const std::string& cases, std::ostream& out,
               std::ostream& err);

}  // namespace warden::cli
