#include "cli/tools_command.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "audit/options.h"
#include "cli/state_exit_codes.h"
#include "state/admin_audit.h"
#include "state/pins.h"

namespace warden::cli {
namespace {

using nlohmann::json;
using state::PinnedTool;
using state::PinStatus;

// How much of a changed member `list` prints: enough to read an injected sentence.
constexpr size_t kShownBytes = 300;

json ToolJson(const PinnedTool& t) {
  return {{"server", t.server},
          {"tool", t.upstream_name},
          {"name", t.exposed_name},
          {"status", state::ToString(t.status)},
          {"shown", t.status == PinStatus::kPinned},
          {"changed", t.changed},
          {"definition", t.definition},
          {"pinned_definition", t.pinned_definition},
          {"first_seen", t.first_seen},
          {"changed_at", t.changed_at},
          {"approved_by", t.approved_by},
          {"approved_at", t.approved_at}};
}

// A member's value on one line: strings as they are, JSON otherwise; cut at kShownBytes.
std::string Excerpt(const json& definition, const std::string& member) {
  if (!definition.is_object() || !definition.contains(member)) return "(absent)";
  const json& value = definition[member];
  std::string text = value.is_string() ? value.get<std::string>() : value.dump();
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  if (text.size() > kShownBytes) text = text.substr(0, kShownBytes) + "...";
  return text;
}

}  // namespace

ToolsCommand::ToolsCommand(CLI::App& app, std::ostream& out, std::ostream& err)
    : out_(out), err_(err), db_(audit::kDefaultDatabasePath) {
  sub_ = app.add_subcommand("tools", "Upstream tools' pinned definitions: list, approve changes");
  sub_->require_subcommand(1);
  list_ = sub_->add_subcommand("list", "Show each upstream tool, its pin status and what changed");
  approve_ = sub_->add_subcommand(
      "approve", "Accept a changed or new tool definition (SERVER__TOOL) or a whole --server");
  for (CLI::App* s : {list_, approve_}) {
    s->add_option("--db", db_, "The SQLite store (default ./var/warden/warden.db)");
    s->add_flag("--json", json_, "Print JSON");
  }
  list_->add_option("--server", server_, "Only this upstream server's tools");
  approve_->add_option("tool", tool_, "The tool's name as agents see it (SERVER__TOOL)");
  approve_->add_option("--server", server_, "Approve every waiting tool of this server");
}

int ToolsCommand::Execute() {
  if (list_->parsed()) return List();
  if (approve_->parsed()) return Approve();
  err_ << "warden tools: name a subcommand: list or approve\n";
  return kExitError;
}

int ToolsCommand::List() {
  auto store = state::PinStore::Open({.path = db_, .create = false});
  if (!store) {
    err_ << "warden tools list: " << store.status().message() << "\n";
    return kExitError;
  }
  auto tools = (*store)->List(server_);
  if (!tools) {
    err_ << "warden tools list: " << tools.status().message() << "\n";
    return kExitError;
  }
  if (json_) {
    json array = json::array();
    for (const PinnedTool& t : *tools) array.push_back(ToolJson(t));
    out_ << array.dump() << "\n";
    return 0;
  }
  if (tools->empty()) {
    out_ << "no pinned tools" << (server_.empty() ? "" : " for server " + server_) << "\n";
    return 0;
  }
  size_t waiting = 0;
  for (const PinnedTool& t : *tools) {
    out_ << state::ToString(t.status) << "  " << t.exposed_name << "  (server " << t.server << ")";
    if (t.status != PinStatus::kPinned) ++waiting;
    switch (t.status) {
      case PinStatus::kPinned:
        out_ << "\n";
        break;
      case PinStatus::kNew:
        out_ << "  hidden: not in the pinned manifest\n";
        out_ << "    description: " << Excerpt(t.definition, "description") << "\n";
        break;
      case PinStatus::kRemoved:
        out_ << "  no longer listed by the server\n";
        break;
      case PinStatus::kChanged: {
        std::string members;
        for (const std::string& m : t.changed) members += (members.empty() ? "" : ", ") + m;
        out_ << "  hidden: changed " << members << "\n";
        for (const std::string& m : t.changed) {
          out_ << "    " << m << " pinned: " << Excerpt(t.pinned_definition, m) << "\n";
          out_ << "    " << m << " now:    " << Excerpt(t.definition, m) << "\n";
        }
        break;
      }
    }
  }
  if (waiting > 0) {
    out_ << waiting << " tool" << (waiting == 1 ? "" : "s")
         << " waiting for review: `warden tools approve SERVER__TOOL` or "
            "`warden tools approve --server NAME`\n";
  }
  return 0;
}

int ToolsCommand::Approve() {
  if (tool_.empty() == server_.empty()) {
    err_ << "warden tools approve: name one tool (SERVER__TOOL) or one --server, not "
         << (tool_.empty() ? "neither" : "both") << "\n";
    return kExitError;
  }
  auto store = state::PinStore::Open({.path = db_, .create = false});
  if (!store) {
    err_ << "warden tools approve: " << store.status().message() << "\n";
    return kExitError;
  }
  // Opened read-only first so that a mistyped --db does not create an empty database; then for
  // writing.
  store = state::PinStore::Open({.path = db_});
  if (!store) {
    err_ << "warden tools approve: " << store.status().message() << "\n";
    return kExitError;
  }
  const std::string who = state::OperatorName();
  std::vector<PinnedTool> approved;
  if (!tool_.empty()) {
    auto before = (*store)->Approve(tool_, who);
    if (!before) {
      err_ << "warden tools approve: " << before.status().message() << "\n";
      return kExitError;
    }
    if (before->status == PinStatus::kPinned) {
      out_ << before->exposed_name << " is pinned and shown already: nothing to approve\n";
      return 0;
    }
    approved.push_back(std::move(*before));
  } else {
    auto all = (*store)->ApproveServer(server_, who);
    if (!all) {
      err_ << "warden tools approve: " << all.status().message() << "\n";
      return kExitError;
    }
    if (all->empty()) out_ << "nothing of server " << server_ << " was waiting for approval\n";
    approved = std::move(*all);
  }

  json array = json::array();
  int status = 0;
  for (const PinnedTool& t : approved) {
    array.push_back(
        {{"name", t.exposed_name}, {"server", t.server}, {"was", state::ToString(t.status)}});
    if (!json_) {
      out_ << "approved " << t.exposed_name << " (was " << state::ToString(t.status) << ")"
           << (t.status == PinStatus::kRemoved ? ": its pin is forgotten" : ": shown again")
           << "\n";
    }
    std::string what = t.status == PinStatus::kChanged ? "changed definition"
                       : t.status == PinStatus::kNew   ? "new tool"
                                                       : "removal";
    state::AdminAction action{.who = who,
                              .action = "approve",
                              .tool = t.exposed_name,
                              .rule = "tool_pin." + t.exposed_name,
                              .reason = "approved the " + what + " of " + t.exposed_name,
                              .arguments = {{"server", t.server},
                                            {"tool", t.upstream_name},
                                            {"was", state::ToString(t.status)},
                                            {"changed", t.changed},
                                            {"sha256", t.status == PinStatus::kRemoved
                                                           ? std::string()
                                                           : state::DefinitionHash(t.definition)}}};
    if (Status st = state::RecordAdminAction(db_, action); !st.ok()) {
      err_ << "warden tools approve: " << t.exposed_name
           << " is approved, but its audit entry could not be written: " << st.message() << "\n";
      status = kExitUnaudited;
    }
  }
  if (json_) out_ << array.dump() << "\n";
  return status;
}

}  // namespace warden::cli
