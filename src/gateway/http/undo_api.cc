#include "gateway/http/undo_api.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "gateway/undo/undo_runner.h"
#include "state/undo_store.h"

namespace warden::gateway {
namespace {

using nlohmann::json;

constexpr std::string_view kUndoBase = "/api/calls/";

AdminReply UndoJson(int status, const json& body) { return AdminReply{status, body.dump(), {}}; }

// Whether `caller` may undo a call of `record`: the local operator; a user of its tenant who is
// its own user or an approver there.
bool CallerMayUndo(const policy::Policy& policy, const identity::Caller& caller,
                   const state::UndoRecord& record, bool local_operator) {
  if (local_operator) return true;
  if (caller.tenant != record.tenant || caller.user.empty()) return false;
  if (caller.user == record.user) return true;
  auto tenant = policy.identity.tenants.find(caller.tenant);
  if (tenant == policy.identity.tenants.end()) return false;
  auto user = tenant->second.users.find(caller.user);
  return user != tenant->second.users.end() && user->second.approver;
}

int UndoHttpStatus(UndoResult result) {
  switch (result) {
    case UndoResult::kDone:
      return 200;
    case UndoResult::kUnknownCall:
      return 404;
    case UndoResult::kNotUndoable:
    case UndoResult::kAlreadyUndone:
    case UndoResult::kInProgress:
      return 409;
    case UndoResult::kFailed:
      return 502;
    case UndoResult::kError:
      break;
  }
  return 500;
}

}  // namespace

bool UndoApi::Handles(std::string_view path) {
  return path.starts_with(kUndoBase) || path == "/api/calls";
}

AdminReply UndoApi::Handle(const identity::Caller& caller, const AdminRequest& request,
                           bool local_operator) {
  auto refuse = [&](int status, const std::string& message) {
    core_.AuditRefusal(
        caller, "", "http " + std::to_string(status),
        message + " (" + request.method + " " + request.path + " from " + request.peer + ")");
    return UndoJson(status, json{{"error", message}});
  };
  state::UndoStore* store = core_.options().services.undo;
  if (store == nullptr) return refuse(404, "undo is not enabled in this gateway");
  if (!caller.agent.empty()) return refuse(403, "agents may not undo calls: a person decides");
  // /api/calls/ID/undo
  std::string_view rest =
      std::string_view(request.path).substr(std::min(request.path.size(), kUndoBase.size()));
  const size_t slash = rest.find('/');
  std::string_view id_text = rest.substr(0, slash);
  uint64_t id = 0;
  auto [end, ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id);
  if (slash == std::string_view::npos || rest.substr(slash) != "/undo" || id_text.empty() ||
      ec != std::errc() || end != id_text.data() + id_text.size() || id == 0)
    return refuse(404, "no such endpoint '" + request.path + "': use POST /api/calls/ID/undo");
  if (request.method != "POST") {
    AdminReply r = refuse(
        405, "method " + request.method + " is not allowed on " + request.path + "; use POST");
    r.headers.emplace_back("Allow", "POST, OPTIONS");
    return r;
  }
  auto record = store->Find(id);
  if (!record) return refuse(500, "the undo store could not be read: " + record.status().message());
  auto policy = core_.policy().Current();
  if (!policy) return refuse(500, "no policy is in force");
  // A call of another tenant reads as unknown to those who may not undo it.
  if (*record && !CallerMayUndo(*policy, caller, **record, local_operator))
    return refuse(403,
                  "only the call's own user, an approver of its tenant or the local "
                  "operator may undo call " +
                      std::to_string(id));
  if (!*record && !local_operator) return refuse(404, "no undoable call " + std::to_string(id));

  const std::string who = local_operator ? caller.user + " (local operator, api)"
                                         : caller.user + "@" + caller.tenant + " (api)";
  UndoOutcome outcome = UndoRunner(core_, *store).Undo(id, who);
  json body = {{"call_id", id},
               {"undo_tool", outcome.undo_tool},
               {"undo_arguments", outcome.undo_arguments},
               {"result", outcome.reply},
               {"undo_call_id", outcome.undo_call_id}};
  if (outcome.result != UndoResult::kDone) body["error"] = outcome.message;
  return UndoJson(UndoHttpStatus(outcome.result), body);
}

}  // namespace warden::gateway
