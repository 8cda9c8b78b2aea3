#include "cli/approvals_command.h"

#include <time.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "audit/display_text.h"
#include "audit/options.h"
#include "cli/state_exit_codes.h"
#include "policy/policy.h"
#include "state/admin_audit.h"
#include "state/approval_store.h"

namespace warden::cli {
namespace {

using nlohmann::json;
using state::ApprovalRecord;
using state::ApprovalStatus;

std::string Dump(const json& value, int indent = -1) {
  return value.dump(indent, ' ', false, json::error_handler_t::replace);
}

// What an agent's call carried (its arguments, and every field that came with it) is printed
// through the one display rule, audit::ForDisplay: controls and format characters become \uXXXX
// escapes, invalid UTF-8 U+FFFD, newline, tab and backslash \n, \t and \\.
std::string Field(const std::string& text) { return text.empty() ? "-" : audit::ForDisplay(text); }

// Seconds since the epoch of a stored time (state::Now()'s format); nullopt for other text.
std::optional<int64_t> EpochSeconds(const std::string& time) {
  struct tm tm {};
  char tail = 0;
  if (std::sscanf(time.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &tail) != 7) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(timegm(&tm));
}

// "45s", "12m", "3h", "2d": how long ago `time` was (or, negative, how far ahead).
std::string Age(const std::string& time) {
  auto then = EpochSeconds(time);
  if (!then) return "?";
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  int64_t s = now - *then;
  const char* sign = s < 0 ? "-" : "";
  if (s < 0) s = -s;
  if (s < 120) return sign + std::to_string(s) + "s";
  if (s < 2 * 3600) return sign + std::to_string(s / 60) + "m";
  if (s < 2 * 86400) return sign + std::to_string(s / 3600) + "h";
  return sign + std::to_string(s / 86400) + "d";
}

// "expires in 9m", or "past its expiry" once the gateway's timer is due.
std::string Until(const std::string& expires) {
  const std::string age = Age(expires);
  if (age.empty() || age[0] != '-') return "past its expiry";
  return "expires in " + age.substr(1);
}

std::string VotesSoFar(const ApprovalRecord& r) {
  return std::to_string(r.votes.size()) + " of " + std::to_string(r.votes_needed);
}

// "approved by alice (cli), bob (cli) at T", "expired (by warden) at T: why".
std::string HowItEnded(const ApprovalRecord& r) {
  std::string text = std::string(state::ToString(r.status));
  if (r.status == ApprovalStatus::kPending) return text;
  text += " by " + Field(r.decided_by) + " at " + Field(r.decided_at);
  if (!r.comment.empty()) text += ": " + audit::ForDisplay(r.comment);
  return text;
}

bool IsApprovalIdText(const std::string& id) {
  if (id.size() != 36 || id.compare(0, 4, "apr_") != 0) return false;
  for (size_t i = 4; i < id.size(); ++i) {
    const char c = id[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

ApprovalsCommand::ApprovalsCommand(CLI::App& app, std::ostream& out, std::ostream& err)
    : out_(out), err_(err) {
  sub_ = app.add_subcommand("approvals",
                            "Calls waiting for a person's decision: list, show, approve, deny");
  sub_->require_subcommand(1);
  list_ = sub_->add_subcommand("list", "The pending approvals, oldest first (--all: every one)");
  show_ = sub_->add_subcommand("show", "Every field of one approval, its arguments in full");
  approve_ = sub_->add_subcommand("approve", "Approve a pending call (it then runs once)");
  deny_ = sub_->add_subcommand("deny", "Deny a pending call (the agent reads who and why)");
  for (CLI::App* s : {list_, show_, approve_, deny_}) {
    s->add_option("--db", db_,
                  "The SQLite store (default: the --config file's storage.sqlite, "
                  "else ./var/warden/warden.db)");
    s->add_option("--config", config_, "Policy file whose storage.sqlite to use");
    s->add_flag("--json", json_, "Print JSON (the approval's record; list: an array of them)");
  }
  list_->add_flag("--all", all_, "Every approval, newest first, not only the pending ones");
  for (CLI::App* s : {show_, approve_, deny_}) {
    s->add_option("id", id_, "The approval's id (apr_...)")->required();
  }
  for (CLI::App* s : {approve_, deny_}) {
    s->add_option("--comment", comment_,
                  "Why (at most 1024 bytes; recorded, and a deny's shown to the agent)");
  }
}

Result<std::string> ApprovalsCommand::DatabasePath() const {
  if (!db_.empty()) return db_;
  if (config_.empty()) return std::string(audit::kDefaultDatabasePath);
  auto policy = policy::LoadPolicyFile(config_);
  if (!policy) return policy.status();
  if (!policy->storage.postgres.empty()) {
    return Status::Error(config_ + ": storage.postgres is not supported yet; use --db");
  }
  return policy->storage.sqlite;
}

int ApprovalsCommand::Execute() {
  if (list_->parsed()) return List();
  if (show_->parsed()) return Show();
  return Decide(approve_->parsed());
}

int ApprovalsCommand::List() {
  auto path = DatabasePath();
  if (!path) {
    err_ << "warden approvals list: " << path.status().message() << "\n";
    return kExitError;
  }
  auto store = state::ApprovalStore::Open({.path = *path, .create = false});
  if (!store) {
    err_ << "warden approvals list: " << store.status().message() << "\n";
    return kExitError;
  }
  auto records = (*store)->List(all_);
  if (!records) {
    err_ << "warden approvals list: " << records.status().message() << "\n";
    return kExitError;
  }
  if (json_) {
    json array = json::array();
    for (const ApprovalRecord& r : *records) array.push_back(state::ToJson(r));
    out_ << Dump(array) << "\n";
    return 0;
  }
  if (records->empty()) out_ << (all_ ? "no approvals\n" : "no approvals pending\n");
  for (const ApprovalRecord& r : *records) {
    std::string status(state::ToString(r.status));
    if (r.status == ApprovalStatus::kPending && r.votes_needed > 1) status += " " + VotesSoFar(r);
    out_ << r.id << "  " << status << "  " << Age(r.created) << "  " << Field(r.tenant) << "/"
         << Field(r.user) << "/" << Field(r.agent) << "  " << Field(r.tool) << "  " << Field(r.risk)
         << "\n";
  }
  return 0;
}

int ApprovalsCommand::Show() {
  auto path = DatabasePath();
  if (!path) {
    err_ << "warden approvals show: " << path.status().message() << "\n";
    return kExitError;
  }
  auto store = state::ApprovalStore::Open({.path = *path, .create = false});
  if (!store) {
    err_ << "warden approvals show: " << store.status().message() << "\n";
    return kExitError;
  }
  auto found = (*store)->Get(id_);
  if (!found) {
    err_ << "warden approvals show: " << found.status().message() << "\n";
    return kExitError;
  }
  if (!*found) {
    err_ << "warden approvals show: no approval " << audit::ForDisplay(id_) << " in " << *path
         << "\n";
    return kExitError;
  }
  const ApprovalRecord& r = **found;
  if (json_) {
    out_ << Dump(state::ToJson(r)) << "\n";
    return 0;
  }
  out_ << "id:              " << r.id << "\n"
       << "status:          " << state::ToString(r.status)
       << (r.status == ApprovalStatus::kPending ? " (" + Until(r.expires) + ")" : "") << "\n"
       << "tool:            " << Field(r.tool) << "\n"
       << "server:          " << Field(r.server) << "\n"
       << "risk:            " << Field(r.risk) << "\n"
       << "tenant:          " << Field(r.tenant) << "\n"
       << "user:            " << Field(r.user) << "\n"
       << "agent:           " << Field(r.agent) << "\n"
       << "session:         " << Field(r.session) << "\n"
       << "owner:           " << Field(r.owner) << "\n"
       << "rule:            " << Field(r.rule) << "\n"
       << "reason:          " << Field(r.reason) << "\n"
       << "reasons:" << (r.reasons.empty() ? "         -" : "") << "\n";
  for (const std::string& line : r.reasons) out_ << "  - " << audit::ForDisplay(line) << "\n";
  out_ << "created:         " << Field(r.created) << " (" << Age(r.created) << " ago)\n"
       << "expires:         " << Field(r.expires) << "\n"
       << "decided_by:      " << Field(r.decided_by) << "\n"
       << "decided_at:      " << Field(r.decided_at) << "\n"
       << "comment:         " << Field(r.comment) << "\n"
       << "votes:           " << VotesSoFar(r) << "\n";
  for (const state::ApprovalVote& v : r.votes) {
    out_ << "  - " << Field(v.who) << " at " << Field(v.at)
         << (v.comment.empty() ? "" : ": " + audit::ForDisplay(v.comment)) << "\n";
  }
  out_ << "consumed_at:     " << Field(r.consumed_at) << "\n"
       << "binding:         " << Field(r.binding) << "\n"
       << "definition_hash: " << Field(r.definition_hash) << "\n"
       << "arguments:\n"
       << audit::JsonForDisplay(state::ToJson(r)["arguments"]) << "\n";
  return 0;
}

int ApprovalsCommand::Decide(bool approve) {
  const std::string command = approve ? "warden approvals approve" : "warden approvals deny";
  if (!IsApprovalIdText(id_)) {
    err_ << command << ": '" << audit::ForDisplay(id_)
         << "' is not an approval id (apr_ and 32 lower-case hex digits)\n";
    return kExitError;
  }
  auto path = DatabasePath();
  if (!path) {
    err_ << command << ": " << path.status().message() << "\n";
    return kExitError;
  }
  // A missing database holds no approvals: say so rather than create one.
  if (auto reader = state::ApprovalStore::Open({.path = *path, .create = false}); !reader) {
    err_ << command << ": " << reader.status().message() << "\n";
    return kExitError;
  }
  auto store = state::ApprovalStore::Open({.path = *path});
  if (!store) {
    err_ << command << ": " << store.status().message() << "\n";
    return kExitError;
  }
  // The host's operator, as their login: the same person as single-user mode's local operator.
  const std::string login = state::OperatorName();
  const state::Decider decider = state::Person("", login, login + " (cli)");
  const std::string& who = decider.name;
  auto result = approve ? (*store)->Approve(id_, decider, comment_)
                        : (*store)->Deny(id_, decider, comment_);
  if (!result) {
    err_ << command << ": " << result.status().message() << "\n";
    return kExitError;
  }
  const ApprovalRecord& r = result->record;
  switch (result->error) {
    case state::DecideError::kNone:
      break;
    case state::DecideError::kNotFound:
      err_ << command << ": no approval " << id_ << " in " << *path << "\n";
      return kExitError;
    case state::DecideError::kAlreadyDecided:
      err_ << command << ": " << r.id << " is no longer pending: " << HowItEnded(r) << "\n";
      return kExitNotPending;
    case state::DecideError::kSameApprover:
      err_ << command << ": " << Field(who) << " already approved " << r.id << " (" << VotesSoFar(r)
           << "); it needs a different person's approval\n";
      return kExitNotPending;
    case state::DecideError::kNeedsPerson:  // only in-band answers get it
      err_ << command << ": " << r.id << " needs a person's vote\n";
      return kExitError;
  }
  if (json_) {
    out_ << Dump(state::ToJson(r)) << "\n";
  } else if (r.status == ApprovalStatus::kPending) {
    out_ << r.id << ": approved " << VotesSoFar(r) << " by " << Field(who)
         << "; still pending: it needs another person's approval\n";
  } else if (r.status == ApprovalStatus::kApproved) {
    out_ << r.id << ": approved by " << Field(r.decided_by)
         << "; the waiting call is released once\n";
  } else {
    out_ << r.id << ": " << HowItEnded(r) << "\n";
  }

  state::AdminAction action{.who = who,
                            .action = approve ? "approve" : "deny",
                            .tenant = r.tenant,
                            .agent = r.agent,
                            .tool = r.tool,
                            .rule = "approval." + r.id,
                            .reason = comment_,
                            .arguments = {{"approval", r.id},
                                          {"user", r.user},
                                          {"status", state::ToString(r.status)},
                                          {"votes", r.votes.size()},
                                          {"votes_needed", r.votes_needed},
                                          {"via", "cli"}}};
  if (Status st = state::RecordAdminAction(*path, action); !st.ok()) {
    err_ << command << ": " << r.id << " is " << state::ToString(r.status)
         << ", but its audit entry could not be written: " << st.message() << "\n";
    return kExitUnaudited;
  }
  return 0;
}

}  // namespace warden::cli
