#include "cli/mcp_command.h"

#include <signal.h>
#include <unistd.h>

#include <memory>

#include "common/login_name.h"
#include "gateway/session/session.h"
#include "gateway/stdio/stdio_server.h"

namespace warden::cli {

namespace {

// Over stdio the caller is whoever started warden: the login name, unless --user says otherwise.
std::string LocalUserName() { return LoginName("local"); }

}  // namespace

McpCommand::McpCommand(CLI::App& app, std::ostream& err) : err_(err) {
  sub_ = app.add_subcommand("mcp",
                            "Serve MCP over stdio: every tool call decided by policy and audited");
  flags_.AddTo(sub_);
  sub_->add_option("--tenant", tenant_,
                   "Tenant this stdio session speaks for (multi-tenant policies)");
  sub_->add_option("--user", user_, "User this stdio session speaks for (default: the login name)");
  sub_->add_option("--agent", agent_, "Agent this stdio session speaks for");
}

int McpCommand::Execute() {
  // A client that goes away must end warden with an error status, not a signal.
  signal(SIGPIPE, SIG_IGN);
  return Serve(STDIN_FILENO, STDOUT_FILENO);
}

int McpCommand::Serve(int in_fd, int out_fd) {
  identity::Caller caller{tenant_, user_.empty() ? LocalUserName() : user_, agent_, ""};
  auto started = Gateway::Start(flags_, caller, err_);
  if (!started) {
    err_ << "warden mcp: " + started.status().message() + "\n";
    return 2;
  }
  Gateway& g = **started;
  auto session = std::make_shared<gateway::McpSession>(g.core(), caller,
                                                       gateway::SessionOptions{.transport = "stdio"});
  g.core().Register(session);
  // One write per line: the exec pool (a child) writes to the same stderr.
  err_ << "warden mcp: serving MCP over stdio; policy " +
              (flags_.config.empty() ? std::string("<embedded default>") : flags_.config) +
              ", audit log " + g.audit_path() + ", session " + session->id() + "\n";
  err_.flush();

  gateway::StdioServer server(
      session, 4 * 1024 * 1024,
      [&g](const identity::Caller& who, gateway::SessionOptions options) {
        options.transport = "stdio";
        auto context = std::make_shared<gateway::McpSession>(g.core(), who, std::move(options));
        g.core().Register(context);
        return context;
      });
  Status st = server.Serve(in_fd, out_fd);
  if (!st.ok()) {
    err_ << "warden mcp: " + st.message() + "\n";
    return 1;
  }
  return 0;
}

}  // namespace warden::cli
