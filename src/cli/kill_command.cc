#include "cli/kill_command.h"

#include <nlohmann/json.hpp>

#include "audit/options.h"
#include "cli/state_exit_codes.h"
#include "state/admin_audit.h"
#include "state/kill_store.h"

namespace warden::cli {
namespace {

using nlohmann::json;
using state::KillScope;

json SwitchJson(KillScope scope, const std::string& name) {
  return {
      {"scope", state::ToString(scope)}, {"name", name}, {"switch", state::KillKey(scope, name)}};
}

// "agent coder", "tool files__write_file", "everything".
std::string Describe(KillScope scope, const std::string& name) {
  if (scope == KillScope::kGlobal) return "everything (global switch)";
  return std::string(state::ToString(scope)) + " " + name;
}

}  // namespace

KillCommand::KillCommand(CLI::App& app, std::ostream& out, std::ostream& err)
    : out_(out), err_(err), db_(audit::kDefaultDatabasePath) {
  kill_ = app.add_subcommand(
      "kill",
      "Stop calls: `kill all|tenant NAME|user NAME|agent NAME|session ID|tool SERVER__TOOL "
      "[--reason TEXT]`; "
      "`kill list` shows the switches in force, `kill history` every change");
  unkill_ =
      app.add_subcommand("unkill",
                         "Release a kill switch: `unkill all|tenant|user|agent|session|tool NAME`");
  for (CLI::App* sub : {kill_, unkill_}) {
    sub->add_option("args", args_,
                    "SCOPE [NAME]: all, tenant NAME, user NAME, agent NAME, session ID, "
                    "tool SERVER__TOOL");
    sub->add_option("--db", db_, "The SQLite store (default ./var/warden/warden.db)");
    sub->add_flag("--json", json_, "Print JSON");
  }
  kill_->add_option("--reason", reason_, "Why: shown to agents whose calls the switch refuses");
  kill_->add_option("-n,--lines", lines_, "kill history: how many events (default 20, 0: all)");
}

int KillCommand::Execute() {
  const bool kill = kill_->parsed();
  const char* command = kill ? "warden kill" : "warden unkill";
  if (args_.empty()) {
    err_ << command << ": name what to " << (kill ? "stop" : "release")
         << ": all, tenant NAME, user NAME, agent NAME, session ID, task ID or tool SERVER__TOOL"
         << (kill ? " (or list, history)" : "") << "\n";
    return kExitError;
  }
  if (kill && (args_[0] == "list" || args_[0] == "history")) {
    if (args_.size() > 1) {
      err_ << command << " " << args_[0] << ": takes no name (got '" << args_[1] << "')\n";
      return kExitError;
    }
    return args_[0] == "list" ? List() : History();
  }
  return Change(kill);
}

int KillCommand::Change(bool kill) {
  const char* command = kill ? "warden kill" : "warden unkill";
  auto scope = state::ParseKillScope(args_[0]);
  if (!scope) {
    err_ << command << ": " << scope.status().message() << "\n";
    return kExitError;
  }
  if (args_.size() > 2) {
    err_ << command << ": one name at a time (got " << args_.size() - 1 << ")\n";
    return kExitError;
  }
  std::string name = args_.size() == 2 ? args_[1] : "";
  if (Status valid = state::ValidateKill(*scope, name); !valid.ok()) {
    err_ << command << ": " << valid.message() << "\n";
    return kExitError;
  }
  auto store = state::KillStore::Open({.path = db_});
  if (!store) {
    err_ << command << ": " << store.status().message() << "\n";
    return kExitError;
  }
  const std::string who = state::OperatorName();
  auto changed =
      kill ? (*store)->Kill(*scope, name, reason_, who) : (*store)->Unkill(*scope, name, who);
  if (!changed) {
    err_ << command << ": " << changed.status().message() << "\n";
    return kExitError;
  }
  if (json_) {
    json j = SwitchJson(*scope, name);
    j["active"] = kill;
    j["changed"] = *changed;
    if (kill) j["reason"] = reason_;
    out_ << j.dump() << "\n";
  } else if (kill) {
    out_ << (*changed ? "killed " : "already killed (reason updated): ") << Describe(*scope, name)
         << (*changed ? ": new calls are refused within a second" : "") << "\n";
  } else {
    out_ << (*changed ? "released " : "was not killed: ") << Describe(*scope, name) << "\n";
  }

  state::AdminAction action{.who = who,
                            .action = kill ? "kill" : "unkill",
                            .rule = "kill_switch." + state::KillKey(*scope, name),
                            .reason = reason_,
                            .arguments = SwitchJson(*scope, name)};
  action.arguments["changed"] = *changed;
  if (*scope == KillScope::kTenant) action.tenant = name;
  if (*scope == KillScope::kAgent) action.agent = name;
  if (*scope == KillScope::kSession) action.session = name;
  if (*scope == KillScope::kTool) action.tool = name;
  if (Status st = state::RecordAdminAction(db_, action); !st.ok()) {
    err_ << command << ": the switch is " << (kill ? "in force" : "released")
         << ", but its audit entry could not be written: " << st.message() << "\n";
    return kExitUnaudited;
  }
  return 0;
}

int KillCommand::List() {
  auto store = state::KillStore::Open({.path = db_, .create = false});
  if (!store) {
    err_ << "warden kill list: " << store.status().message() << "\n";
    return kExitError;
  }
  auto active = (*store)->Active();
  if (!active) {
    err_ << "warden kill list: " << active.status().message() << "\n";
    return kExitError;
  }
  if (json_) {
    json array = json::array();
    for (const state::KillSwitch& s : *active) {
      json j = SwitchJson(s.scope, s.name);
      j["reason"] = s.reason, j["who"] = s.who, j["since"] = s.since;
      array.push_back(std::move(j));
    }
    out_ << array.dump() << "\n";
    return 0;
  }
  if (active->empty()) out_ << "no kill switches in force\n";
  for (const state::KillSwitch& s : *active) {
    out_ << state::KillKey(s.scope, s.name) << "  since " << s.since << "  by "
         << (s.who.empty() ? "-" : s.who) << (s.reason.empty() ? "" : "  " + s.reason) << "\n";
  }
  return 0;
}

int KillCommand::History() {
  auto store = state::KillStore::Open({.path = db_, .create = false});
  if (!store) {
    err_ << "warden kill history: " << store.status().message() << "\n";
    return kExitError;
  }
  auto events = (*store)->History(lines_);
  if (!events) {
    err_ << "warden kill history: " << events.status().message() << "\n";
    return kExitError;
  }
  if (json_) {
    json array = json::array();
    for (const state::KillEvent& e : *events) {
      json j = SwitchJson(e.scope, e.name);
      j["id"] = e.id, j["time"] = e.time, j["action"] = e.action, j["reason"] = e.reason,
      j["who"] = e.who;
      array.push_back(std::move(j));
    }
    out_ << array.dump() << "\n";
    return 0;
  }
  for (const state::KillEvent& e : *events) {
    out_ << e.id << "  " << e.time << "  " << e.action << "  " << state::KillKey(e.scope, e.name)
         << "  by " << (e.who.empty() ? "-" : e.who) << (e.reason.empty() ? "" : "  " + e.reason)
         << "\n";
  }
  return 0;
}

}  // namespace warden::cli
