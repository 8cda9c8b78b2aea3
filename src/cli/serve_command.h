// `warden serve [--config FILE] [--listen HOST:PORT] [--upstream ...] [--no-prefix] ...`: the
// gateway over MCP Streamable HTTP (http://127.0.0.1:8787/mcp by default) until SIGINT or
// SIGTERM; SIGHUP reloads the policy file. Exit status: 0 after a signal; 2 when warden could not
// start (bad policy, audit store, address in use).
#pragma once

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "cli/gateway_setup.h"

namespace warden::cli {

class ServeCommand {
 public:
  explicit ServeCommand(CLI::App& app, std::ostream& err = std::cerr);
  bool parsed() const { return sub_->parsed(); }
  int Execute();

 private:
  CLI::App* sub_;
  std::ostream& err_;
  GatewayFlags flags_;
  std::string listen_;
  std::vector<std::string> origins_;
  std::vector<std::string> hosts_;
  std::string max_body_ = "4M";
  std::string idle_ = "30m";
  int threads_ = 1;
};

}  // namespace warden::cli
