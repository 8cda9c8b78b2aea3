#include "cli/alerts_command.h"

#include <chrono>
#include <nlohmann/json.hpp>

#include "audit/audit_log.h"
#include "audit/options.h"
#include "audit/time_format.h"
#include "cli/state_exit_codes.h"

namespace warden::cli {

AlertsCommand::AlertsCommand(CLI::App& app, std::ostream& out, std::ostream& err)
    : out_(out), err_(err), db_(audit::kDefaultDatabasePath) {
  alerts_ = app.add_subcommand("alerts", "The anomaly detectors' alerts: `alerts list`");
  list_ = alerts_->add_subcommand("list", "Alerts from the audit log, newest last");
  list_->add_option("--db", db_, "The SQLite store (default ./var/warden/warden.db)");
  list_->add_option("--tenant", tenant_, "Only this tenant's");
  list_->add_option("--agent", agent_, "Only this agent's");
  list_->add_option("--detector", detector_,
                    "Only this detector's (volume, denials, first_domain, sensitive, "
                    "tool_changed, sandbox_limits)");
  list_->add_option("--since", since_, "Only since: RFC 3339, a date, or an age (15m, 2h, 7d)");
  list_->add_option("-n,--lines", lines_, "How many (default 20, 0: all)");
  list_->add_flag("--json", json_, "One JSON array of the alerts ([] when none)");
}

int AlertsCommand::Execute() {
  if (!list_->parsed()) {
    err_ << "warden alerts: name a subcommand: list\n";
    return kExitError;
  }
  audit::AuditFilter filter;
  filter.decision = "alert";
  filter.tenant = tenant_;
  filter.agent = agent_;
  filter.limit = lines_;
  filter.newest = true;
  if (!detector_.empty()) filter.tool = "alert:" + detector_;
  if (!since_.empty()) {
    auto since = audit::ParseTimeBound(since_, std::chrono::system_clock::now());
    if (!since) {
      err_ << "warden alerts list: --since: " << since.status().message() << "\n";
      return kExitError;
    }
    filter.since = *since;
  }
  audit::AuditOptions options;
  options.path = db_;
  options.create = false;
  auto log = audit::AuditLog::Open(options);
  if (!log) {
    err_ << "warden alerts list: " << log.status().message() << "\n";
    return kExitError;
  }
  auto entries = (*log)->Query(filter);
  if (!entries) {
    err_ << "warden alerts list: " << entries.status().message() << "\n";
    return kExitError;
  }
  // --json: one array, `[]` when there is nothing (as every --json listing of warden's).
  nlohmann::json array = nlohmann::json::array();
  for (const audit::AuditEntry& e : *entries) {
    const std::string detector =
        e.tool.starts_with("alert:") ? e.tool.substr(6) : e.tool;
    if (json_) {
      array.push_back({{"id", e.id},         {"time", e.time},     {"detector", detector},
                       {"message", e.reason}, {"tenant", e.tenant}, {"user", e.user},
                       {"agent", e.agent},   {"session", e.session}, {"details", e.arguments}});
      continue;
    }
    std::string who = e.tenant.empty() ? "" : e.tenant;
    if (!e.agent.empty()) who += (who.empty() ? "" : "/") + e.agent;
    out_ << "#" << e.id << " " << e.time << " " << detector << (who.empty() ? "" : " " + who)
         << ": " << e.reason;
    if (auto k = e.arguments.find("kill"); k != e.arguments.end() && k->is_object()) {
      out_ << " [kill " << k->value("scope", std::string()) << " " << k->value("name", std::string())
           << (k->value("pulled", false) ? ": pulled" : ": not pulled") << "]";
    }
    out_ << "\n";
  }
  if (json_) {
    out_ << array.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else if (entries->empty()) {
    out_ << "no alerts\n";
  }
  return 0;
}

}  // namespace warden::cli
