#include "cli/undo_command.h"

#include <nlohmann/json.hpp>

#include "cli/state_exit_codes.h"
#include "gateway/undo/undo_runner.h"
#include "state/admin_audit.h"

namespace warden::cli {

using nlohmann::json;

UndoCommand::UndoCommand(CLI::App& app, std::ostream& out, std::ostream& err)
    : out_(out), err_(err) {
  sub_ = app.add_subcommand(
      "undo",
      "Run the compensating call of a call (its rule's undo), as the original caller, through "
      "the policy and the audit log: `undo CALL_ID` (the audit entry id)");
  sub_->add_option("call_id", call_id_, "The call's audit entry id (warden audit tail)")
      ->required();
  flags_.AddTo(sub_);
  sub_->add_flag("--json", json_,
                 "Print {call_id, undo_tool, undo_arguments, result, undo_call_id} as JSON");
}

int UndoCommand::Execute() {
  const std::string who = state::OperatorName() + " (cli)";
  identity::Caller operator_caller{"", state::OperatorName(), "", ""};
  auto started = Gateway::Start(flags_, operator_caller, err_);
  if (!started) {
    err_ << "warden undo: " << started.status().message() << "\n";
    return kExitError;
  }
  gateway::UndoOutcome outcome =
      gateway::UndoRunner((*started)->core(), (*started)->undo()).Undo(call_id_, who);
  if (json_) {
    out_ << json{{"call_id", outcome.call_id},
                 {"undo_tool", outcome.undo_tool},
                 {"undo_arguments", outcome.undo_arguments},
                 {"result", outcome.reply},
                 {"undo_call_id", outcome.undo_call_id}}
                .dump()
         << "\n";
  } else if (!outcome.reply.is_null()) {
    out_ << outcome.reply.dump(2) << "\n";
  }
  switch (outcome.result) {
    case gateway::UndoResult::kDone:
      err_ << "warden undo: " << outcome.message << "\n";
      return 0;
    case gateway::UndoResult::kError:
      err_ << "warden undo: " << outcome.message << "\n";
      return outcome.undo_tool.empty() ? kExitError : kExitUnaudited;
    default:
      err_ << "warden undo: " << outcome.message << "\n";
      return kExitError;
  }
}

}  // namespace warden::cli
