#include "cli/mcp_command.h"

#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <memory>

#include "audit/audit_log.h"
#include "gateway/builtin_tools.h"
#include "gateway/default_policy.h"
#include "gateway/kill_switches.h"
#include "gateway/session.h"
#include "gateway/stages.h"
#include "gateway/stdio_server.h"
#include "policy/holder.h"
#include "policy/policy.h"

namespace warden::cli {

namespace {

// Over stdio the caller is whoever started warden: the login name, unless --user says otherwise.
std::string LocalUserName() {
  if (const passwd* pw = getpwuid(geteuid()); pw != nullptr && pw->pw_name != nullptr)
    return pw->pw_name;
  return "local";
}

}  // namespace

McpCommand::McpCommand(CLI::App& app, std::ostream& err) : err_(err) {
  sub_ = app.add_subcommand("mcp",
                            "Serve MCP over stdio: every tool call decided by policy and audited");
  sub_->add_option("--config", config_,
                   "Policy file (YAML); default: the embedded safe default policy");
  sub_->add_option("--audit-db", audit_db_,
                   "Audit log database (SQLite); default: the policy's storage.sqlite, else "
                   "./var/warden/warden.db");
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
  auto loaded = config_.empty() ? gateway::LoadDefaultPolicy() : policy::LoadPolicyFile(config_);
  if (!loaded) {
    err_ << "warden mcp: " << loaded.status().message() << "\n";
    return 2;
  }
  auto policy = std::make_shared<const policy::Policy>(std::move(*loaded));
  if (audit_db_.empty() && !config_.empty() && !policy->storage.postgres.empty()) {
    err_ << "warden mcp: storage.postgres is not supported yet; use storage.sqlite or --audit-db\n";
    return 2;
  }
  audit::AuditOptions audit_options;
  audit_options.path = !audit_db_.empty() ? audit_db_
                       : config_.empty()  ? audit_options.path
                                          : policy->storage.sqlite;
  audit_options.sync =
      policy->storage.sync_full ? audit::SyncLevel::kFull : audit::SyncLevel::kNormal;
  auto log = audit::AuditLog::Open(audit_options);
  if (!log) {
    err_ << "warden mcp: audit log " << audit_options.path << ": " << log.status().message()
         << "\n";
    return 2;
  }

  policy::PolicyHolder holder(policy);
  gateway::KillSwitches kill_switches;
  gateway::BuiltinTools tools = gateway::BuiltinTools::Default();
  gateway::Caller caller{tenant_, user_.empty() ? LocalUserName() : user_, agent_, ""};
  auto pipeline = gateway::BuildStandardPipeline({.policy = &holder,
                                                  .kill_switches = &kill_switches,
                                                  .tools = &tools,
                                                  .audit = log->get(),
                                                  .caller = caller});
  gateway::McpSession session(*pipeline, tools, holder, caller);
  err_ << "warden mcp: serving MCP over stdio; policy "
       << (config_.empty() ? "<embedded default>" : config_) << ", audit log " << audit_options.path
       << ", session " << session.session_id() << "\n";
  err_.flush();

  gateway::StdioServer server(session);
  Status st = server.Serve(in_fd, out_fd);
  if (!st.ok()) {
    err_ << "warden mcp: " << st.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace warden::cli
