// `warden mcp [--config POLICY.yaml] [--audit-db PATH] [--upstream ...] [--no-prefix]`: serves MCP over stdio (the client spawns
// warden and speaks newline-delimited JSON-RPC on its stdin/stdout). Messages go to stderr only:
// stdout belongs to the protocol. Exit status: 0 when the client closed stdin; 1 when reading or
// writing the streams failed; 2 when warden could not start (bad policy, audit store).
#pragma once

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

#include "cli/gateway_setup.h"

namespace warden::cli {

class McpCommand {
 public:
  explicit McpCommand(CLI::App& app, std::ostream& err = std::cerr);
  bool parsed() const { return sub_->parsed(); }
  // Serves stdin/stdout until end of input; returns the exit status above.
  int Execute();
  // The same on any pair of fds (tests).
  int Serve(int in_fd, int out_fd);

 private:
  CLI::App* sub_;
  std::ostream& err_;
  GatewayFlags flags_;
  std::string tenant_, user_, agent_;
};

}  // namespace warden::cli
