// `warden audit ...` driven through CLI11's parser exactly as main() drives it, with its output
// captured: what the audit command tests share.
#pragma once

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "cli/audit_command.h"

namespace warden::audit::testing {

struct CliRun {
  int code;
  std::string out, err;
};

inline CliRun RunCli(std::vector<std::string> args) {
  args.insert(args.begin(), "warden");
  CLI::App app{"warden"};
  app.require_subcommand(1);
  std::ostringstream out, err;
  cli::AuditCommand command(app, out, err);
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return {e.get_exit_code() == 0 ? 0 : 125, out.str(), e.what()};
  }
  EXPECT_TRUE(command.parsed());
  int code = command.Execute();
  return {code, out.str(), err.str()};
}

}  // namespace warden::audit::testing
