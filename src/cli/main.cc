// The `warden` command. Subcommands parse their options into the component's own option struct
// and call the component; no logic lives here that tests cannot reach through the libraries.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "cli/alerts_command.h"
#include "cli/approvals_command.h"
#include "cli/audit_command.h"
#include "cli/kill_command.h"
#include "cli/mcp_command.h"
#include "cli/policy_command.h"
#include "cli/pool_command.h"
#include "cli/run_command.h"
#include "cli/secrets_command.h"
#include "cli/serve_command.h"
#include "cli/tools_command.h"
#include "cli/undo_command.h"

int main(int argc, char** argv) {
  CLI::App app{"warden: run AI agents' code and actions safely"};
  app.set_version_flag("--version", "warden 0.1.0");
  app.require_subcommand(1);
  warden::cli::RunCommand run(app);
  warden::cli::PolicyCommand policy(app);
  warden::cli::AuditCommand audit(app);
  warden::cli::McpCommand mcp(app);
  warden::cli::ServeCommand serve(app);
  warden::cli::KillCommand kill(app);
  warden::cli::ToolsCommand tools(app);
  warden::cli::PoolCommand pool(app);
  warden::cli::ApprovalsCommand approvals(app);
  warden::cli::UndoCommand undo(app);
  warden::cli::SecretsCommand secrets(app);
  warden::cli::AlertsCommand alerts(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "warden: %s\n", e.what());
    std::fprintf(stderr, "Run 'warden %s--help' for usage.\n", run.parsed() ? "run " : "");
    return 125;
  }
  if (run.parsed()) return run.Execute();
  if (policy.parsed()) return policy.Execute();
  if (audit.parsed()) return audit.Execute();
  if (mcp.parsed()) return mcp.Execute();
  if (serve.parsed()) return serve.Execute();
  if (kill.parsed()) return kill.Execute();
  if (tools.parsed()) return tools.Execute();
  if (pool.parsed()) return pool.Execute();
  if (approvals.parsed()) return approvals.Execute();
  if (undo.parsed()) return undo.Execute();
  if (secrets.parsed()) return secrets.Execute();
  if (alerts.parsed()) return alerts.Execute();
  return 125;
}
