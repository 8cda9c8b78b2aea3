#include "gateway/http/approvals_api.h"

#include <nlohmann/json.hpp>

#include "gateway/approvals/approval_display.h"
#include "gateway/approvals/approval_gate.h"
#include "state/approval_store.h"

namespace warden::gateway {

namespace {

using nlohmann::json;
using state::ApprovalRecord;

constexpr size_t kHistoryLimit = 200;
constexpr size_t kMaxCommentBytes = 1024;

AdminReply Json(int status, const json& body) { return AdminReply{status, body.dump(), {}}; }

bool QueryFlag(const std::string& query, const std::string& name) {
  size_t pos = 0;
  while (pos <= query.size()) {
    size_t end = query.find('&', pos);
    if (end == std::string::npos) end = query.size();
    std::string part = query.substr(pos, end - pos);
    if (part == name || part == name + "=1" || part == name + "=true") return true;
    pos = end + 1;
  }
  return false;
}

}  // namespace

AdminReply ApprovalsApi::Handle(const identity::Caller& caller, const AdminRequest& request,
                                bool local_operator) {
  auto refuse = [&](int status, const std::string& message) {
    core_.AuditRefusal(
        caller, "", "http " + std::to_string(status),
        message + " (" + request.method + " " + request.path + " from " + request.peer + ")");
    return Json(status, json{{"error", message}});
  };
  if (core_.options().services.approvals == nullptr)
    return refuse(404, "approvals are not enabled in this gateway");
  // A person decides: AdminApi refused agents already; this stays true if it is ever called
  // from elsewhere.
  if (!caller.agent.empty())
    return refuse(403, "agents may not use the approvals API: a person decides");
  const std::string base = "/api/approvals";
  if (request.path == base || request.path == base + "/") {
    if (request.method != "GET") {
      AdminReply r =
          refuse(405, "method " + request.method + " is not allowed on " + base + "; use GET");
      r.headers.emplace_back("Allow", "GET, OPTIONS");
      return r;
    }
    return List(caller, request, local_operator);
  }
  std::string rest = request.path.substr(base.size() + 1);  // after "/api/approvals/"
  std::string id = rest.substr(0, rest.find('/'));
  std::string action = rest.find('/') == std::string::npos ? "" : rest.substr(rest.find('/') + 1);
  if (id.empty() || id.size() > 64) return refuse(404, "no such approval");
  if (action.empty()) {
    if (request.method != "GET") {
      AdminReply r = refuse(405, "method " + request.method +
                                     " is not allowed on an approval; "
                                     "use GET, or POST to .../approve or .../deny");
      r.headers.emplace_back("Allow", "GET, OPTIONS");
      return r;
    }
    return Show(caller, id, local_operator);
  }
  if (action != "approve" && action != "deny")
    return refuse(404, "no such approvals endpoint '" + request.path +
                           "': use /api/approvals/ID/approve or /api/approvals/ID/deny");
  if (request.method != "POST") {
    AdminReply r = refuse(
        405, "method " + request.method + " is not allowed on " + request.path + "; use POST");
    r.headers.emplace_back("Allow", "POST, OPTIONS");
    return r;
  }
  return Decide(caller, request, id, action == "approve", local_operator);
}

AdminReply ApprovalsApi::List(const identity::Caller& caller, const AdminRequest& request,
                              bool op) {
  ApprovalGate& gate = *core_.options().services.approvals;
  auto policy = core_.policy().Current();
  if (!policy) return Json(500, json{{"error", "no policy is in force"}});
  const bool all = QueryFlag(request.query, "all");
  auto records = gate.store().List(all, all ? kHistoryLimit : 0);
  if (!records) return Json(500, json{{"error", "approvals store: " + records.status().message()}});
  json out = json::array();
  for (const ApprovalRecord& r : *records) {
    if (!op && r.tenant != caller.tenant) continue;
    const bool may = !WhyMayNotDecide(*policy, caller, op, r).has_value();
    // The pending list is what the caller may decide; the history is what the caller may see:
    // the tenant's approvers see the tenant's, another user only the calls of their own agents.
    if (!all && !may) continue;
    if (all && !may && WhyMayNotSee(*policy, caller, op, r)) continue;
    json j = ApprovalJsonForPeople(r);
    j["may_decide"] = may && r.status == state::ApprovalStatus::kPending;
    out.push_back(std::move(j));
  }
  return Json(200, json{{"approvals", std::move(out)}});
}

AdminReply ApprovalsApi::Show(const identity::Caller& caller, const std::string& id, bool op) {
  ApprovalGate& gate = *core_.options().services.approvals;
  auto policy = core_.policy().Current();
  if (!policy) return Json(500, json{{"error", "no policy is in force"}});
  auto record = gate.store().Get(id);
  if (!record) return Json(500, json{{"error", "approvals store: " + record.status().message()}});
  if (!*record) return Json(404, json{{"error", "no approval has id '" + id + "'"}});
  // Another tenant's approval is answered as not found would leak that it exists: 403 says no
  // more than that it is not the caller's.
  if (!op && (*record)->tenant != caller.tenant)
    return Json(403, json{{"error", "approval " + id + " belongs to another tenant"}});
  if (auto why = WhyMayNotSee(*policy, caller, op, **record))
    return Json(403, json{{"error", *why}});
  json j = ApprovalJsonForPeople(**record);
  j["may_decide"] = !WhyMayNotDecide(*policy, caller, op, **record).has_value() &&
                    (*record)->status == state::ApprovalStatus::kPending;
  return Json(200, j);
}

AdminReply ApprovalsApi::Decide(const identity::Caller& caller, const AdminRequest& request,
                                const std::string& id, bool approve, bool op) {
  ApprovalGate& gate = *core_.options().services.approvals;
  auto refuse = [&](int status, const std::string& message) {
    core_.AuditRefusal(
        caller, "", "http " + std::to_string(status),
        message + " (" + request.method + " " + request.path + " from " + request.peer + ")");
    return Json(status, json{{"error", message}});
  };
  std::string comment;
  if (!request.body.empty()) {
    json body = json::parse(request.body, nullptr, false);
    if (body.is_discarded() || !body.is_object())
      return refuse(400, "the body must be a JSON object, {\"comment\": \"...\"}");
    for (const auto& [key, value] : body.items()) {
      if (key != "comment")
        return refuse(400, "unknown field '" + key + "'; only comment is taken");
      if (!value.is_string()) return refuse(400, "comment must be a string");
      comment = value.get<std::string>();
    }
    if (comment.size() > kMaxCommentBytes)
      return refuse(400, "comment is longer than " + std::to_string(kMaxCommentBytes) + " bytes");
  }
  auto policy = core_.policy().Current();
  if (!policy) return refuse(500, "no policy is in force");
  auto record = gate.store().Get(id);
  if (!record) return refuse(500, "approvals store: " + record.status().message());
  if (!*record) return refuse(404, "no approval has id '" + id + "'");
  if (!op && (*record)->tenant != caller.tenant)
    return refuse(403, "approval " + id + " belongs to another tenant");
  if (auto why = WhyMayNotDecide(*policy, caller, op, **record)) return refuse(403, *why);

  const state::Decider who = DeciderOf(caller, op);
  const json details = {
      {"via", "api"},
      {"by", {{"tenant", caller.tenant}, {"user", caller.user}, {"peer", request.peer}}}};
  auto result =
      approve ? gate.Approve(id, who, comment, details) : gate.Deny(id, who, comment, details);
  if (!result) return refuse(500, "approvals store: " + result.status().message());
  switch (result->error) {
    case state::DecideError::kNone:
      break;
    case state::DecideError::kNotFound:
      return refuse(404, "no approval has id '" + id + "'");
    case state::DecideError::kAlreadyDecided: {
      const ApprovalRecord& r = result->record;
      json j = ApprovalJsonForPeople(r);
      j["error"] = "approval " + id + " is already " + std::string(state::ToString(r.status)) +
                   (r.decided_by.empty() ? std::string() : " (by " + r.decided_by + ")");
      core_.AuditRefusal(caller, "", "http 409", j["error"].get<std::string>());
      return Json(409, j);
    }
    case state::DecideError::kSameApprover: {
      json j = ApprovalJsonForPeople(result->record);
      j["error"] = who.name + " already approved " + id + ": it needs another person's approval too";
      core_.AuditRefusal(caller, "", "http 409", j["error"].get<std::string>());
      return Json(409, j);
    }
    case state::DecideError::kNeedsPerson:  // only in-band answers get it
      return refuse(409, "approval " + id + " needs a person's vote");
  }

  json out = ApprovalJsonForPeople(result->record);
  out["may_decide"] = false;
  return Json(200, out);
}

}  // namespace warden::gateway
