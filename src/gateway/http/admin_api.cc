#include "gateway/http/admin_api.h"

#include <cstdio>
#include <optional>
#include <string_view>
#include <nlohmann/json.hpp>

#include "audit/display_text.h"
#include "audit/filter.h"
#include "gateway/http/approvals_api.h"
#include "gateway/http/undo_api.h"
#include "state/kill_store.h"

namespace warden::gateway {
namespace {

using nlohmann::json;

json ErrorJson(const std::string& message) { return json{{"error", message}}; }

json SwitchJson(KillScope scope, const std::string& name) {
  return {
      {"scope", state::ToString(scope)}, {"name", name}, {"switch", state::KillKey(scope, name)}};
}

// Who made a change, as the kill store records it.
std::string Who(const identity::Caller& caller, bool local_operator) {
  if (local_operator) return caller.user + " (local operator, api)";
  return caller.user + "@" + caller.tenant + " (api)";
}

// Whether tenant `t` has a user (kUser) or an agent (kAgent) called `name`.
bool HasName(const policy::Tenant& t, KillScope scope, const std::string& name) {
  return scope == KillScope::kUser ? t.users.contains(name) : t.agents.contains(name);
}

// Whether a tenant other than `tenant` has one called `name` too: switch names are global, so
// the switch would stop theirs as well.
bool NameElsewhere(const policy::Policy& policy, const std::string& tenant, KillScope scope,
                   const std::string& name) {
  return !policy::OtherTenantNaming(policy, tenant, scope == KillScope::kUser, name).empty();
}

// The caller's tenant when the caller's user is an approver there; nullptr otherwise.
const policy::Tenant* ApproverTenant(const policy::Policy& policy, const identity::Caller& caller) {
  auto t = policy.identity.tenants.find(caller.tenant);
  if (t == policy.identity.tenants.end()) return nullptr;
  auto u = t->second.users.find(caller.user);
  if (u == t->second.users.end() || !u->second.approver) return nullptr;
  return &t->second;
}

}  // namespace

bool AdminApi::IsOperator(const identity::Caller& caller, const policy::Policy& policy) const {
  return options_.local_operator && policy.identity.tenants.empty() && caller.tenant.empty() &&
         !caller.user.empty();
}

AdminReply AdminApi::Refuse(const identity::Caller& caller, const AdminRequest& request, int status,
                            const std::string& message) {
  core_.AuditRefusal(
      caller, "", "http " + std::to_string(status),
      message + " (" + request.method + " " + request.path + " from " + request.peer + ")");
  AdminReply reply{status, ErrorJson(message).dump(), {}};
  return reply;
}

void AdminApi::Submit(const identity::Caller& caller, AdminRequest request,
                      std::function<void(AdminReply)> done) {
  // An undo waits for its compensating call: on the workers, never on the control executor.
  if (UndoApi::Handles(request.path)) {
    core_.Post([api = shared_from_this(), caller, request = std::move(request),
                done = std::move(done)] { done(api->Handle(caller, request)); });
    return;
  }
  core_.PostControl([api = shared_from_this(), caller, request = std::move(request),
                     done = std::move(done)] { done(api->Handle(caller, request)); });
}

AdminReply AdminApi::Handle(const identity::Caller& caller, const AdminRequest& request) {
  // People only, on every endpoint, whoever the agent's user is: an agent that could release a
  // switch or approve a call would let prompt injection undo the very controls meant to stop it.
  if (!caller.agent.empty()) {
    return Refuse(caller, request, 403,
                  "agent '" + caller.agent + "' may not use the admin API, which is for people: " +
                      "use a person's own key (keys: on user '" + caller.user +
                      "' in the policy) or a JWT that names the user without an agent claim");
  }
  if (UndoApi::Handles(request.path)) {
    auto policy = core_.policy().Current();
    return UndoApi(core_).Handle(caller, request, policy && IsOperator(caller, *policy));
  }
  if (request.path == "/api/approvals" || request.path.starts_with("/api/approvals/")) {
    auto policy = core_.policy().Current();
    return ApprovalsApi(core_).Handle(caller, request, policy && IsOperator(caller, *policy));
  }
  if (request.path == "/api/kill") {
    if (request.method == "GET") return List(caller, request);
    if (request.method == "POST") return Apply(caller, request, true);
    if (request.method == "DELETE") return Apply(caller, request, false);
    AdminReply reply = Refuse(caller, request, 405,
                              "method " + request.method +
                                  " is not allowed on /api/kill; use GET, "
                                  "POST or DELETE");
    reply.headers.emplace_back("Allow", "GET, POST, DELETE, OPTIONS");
    return reply;
  }
  if (request.path == "/api/activity") {
    if (request.method == "GET") return Activity(caller, request);
    AdminReply reply = Refuse(caller, request, 405,
                              "method " + request.method + " is not allowed on /api/activity; use GET");
    reply.headers.emplace_back("Allow", "GET, OPTIONS");
    return reply;
  }
  if (request.path == "/api/unkill") {
    if (request.method == "POST") return Apply(caller, request, false);
    AdminReply reply = Refuse(caller, request, 405,
                              "method " + request.method +
                                  " is not allowed on /api/unkill; use "
                                  "POST");
    reply.headers.emplace_back("Allow", "POST, OPTIONS");
    return reply;
  }
  return Refuse(caller, request, 404,
                "no such admin endpoint '" + request.path +
                    "'; the API has /api/kill, /api/unkill, /api/activity and /api/approvals");
}

// The switches in force that `caller` may see: all for the operator; for an approver of
// `tenant`, what stops their tenant (global and tool switches, their tenant's switch, their users'
// and their agents'), never another tenant's names, nor session switches (a session id does not
// say whose it is).
nlohmann::json AdminApi::VisibleSwitches(const identity::Caller& caller,
                                         const policy::Policy& policy,
                                         const policy::Tenant* tenant) const {
  json out = json::array();
  for (const state::KillSwitch& s : core_.kill_switches().Active()) {
    if (tenant != nullptr) {
      if (s.scope == KillScope::kTenant && s.name != caller.tenant) continue;
      if ((s.scope == KillScope::kAgent || s.scope == KillScope::kUser) &&
          (!HasName(*tenant, s.scope, s.name) ||
           NameElsewhere(policy, caller.tenant, s.scope, s.name)))
        continue;
      if (s.scope == KillScope::kSession || s.scope == KillScope::kTask) continue;
    }
    json j = SwitchJson(s.scope, s.name);
    j["reason"] = s.reason, j["who"] = s.who, j["since"] = s.since;
    // A tool or session switch is named by what an agent sent: the console shows _display.
    audit::AddDisplayFields(j, {"switch", "name", "reason", "who"});
    out.push_back(std::move(j));
  }
  return out;
}

AdminReply AdminApi::List(const identity::Caller& caller, const AdminRequest& request) {
  auto policy = core_.policy().Current();
  const bool op = IsOperator(caller, *policy);
  const policy::Tenant* tenant = op ? nullptr : ApproverTenant(*policy, caller);
  if (!op && tenant == nullptr) {
    return Refuse(caller, request, 403,
                  "only approvers (approver: true in the policy) and the local operator may use "
                  "the kill switch API");
  }
  return AdminReply{200, json{{"switches", VisibleSwitches(caller, *policy, tenant)}}.dump(), {}};
}

AdminReply AdminApi::Activity(const identity::Caller& caller, const AdminRequest& request) {
  auto policy = core_.policy().Current();
  const bool op = IsOperator(caller, *policy);
  const policy::Tenant* tenant = op ? nullptr : ApproverTenant(*policy, caller);
  if (!op && tenant == nullptr) {
    return Refuse(caller, request, 403,
                  "only approvers (approver: true in the policy) and the local operator may see "
                  "the activity");
  }
  size_t limit = kActivityCalls;
  std::optional<std::string> asked;
  for (size_t pos = 0; pos <= request.query.size();) {
    size_t end = request.query.find('&', pos);
    if (end == std::string::npos) end = request.query.size();
    std::string_view part(request.query.data() + pos, end - pos);
    if (part.starts_with("limit=")) asked = std::string(part.substr(6));
    else if (!part.empty())
      return Refuse(caller, request, 400,
                    "unknown query parameter in '" + request.query + "': /api/activity takes limit");
    pos = end + 1;
  }
  if (asked) {
    const std::string& text = *asked;
    if (text.empty() || text.size() > 4 || text.find_first_not_of("0123456789") != std::string::npos ||
        std::stoul(text) < 1 || std::stoul(text) > kActivityMaxCalls)
      return Refuse(caller, request, 400,
                    "limit must be a number from 1 to " + std::to_string(kActivityMaxCalls));
    limit = std::stoul(text);
  }
  // An approver sees their own tenant's entries; the operator everyone's.
  audit::AuditFilter filter;
  filter.tenant = op ? "" : caller.tenant;
  filter.newest = true;
  filter.limit = limit * 2;  // room for the admin entries and alerts dropped below
  auto recent = core_.audit().Query(filter);
  if (!recent) return Refuse(caller, request, 500, "the audit log: " + recent.status().message());
  json calls = json::array();
  for (auto it = recent->rbegin(); it != recent->rend() && calls.size() < limit; ++it) {
    const audit::AuditEntry& e = *it;
    if (e.kind == audit::EntryKind::kAdmin || e.decision == "alert") continue;
    calls.push_back({{"id", e.id},           {"time", e.time},         {"tenant", e.tenant},
                     {"user", e.user},       {"agent", e.agent},       {"session", e.session},
                     {"tool", e.tool},       {"decision", e.decision}, {"rule", e.rule},
                     {"reason", e.reason},   {"latency_us", e.latency_us}});
    audit::AddDisplayFields(calls.back(),
                            {"tool", "tenant", "user", "agent", "session", "rule", "reason"});
  }
  audit::AuditFilter alerts_filter;
  alerts_filter.tenant = filter.tenant;
  alerts_filter.decision = "alert";
  alerts_filter.newest = true;
  alerts_filter.limit = kActivityAlerts;
  auto raised = core_.audit().Query(alerts_filter);
  if (!raised) return Refuse(caller, request, 500, "the audit log: " + raised.status().message());
  json alerts = json::array();
  for (auto it = raised->rbegin(); it != raised->rend(); ++it) {
    const audit::AuditEntry& e = *it;
    alerts.push_back({{"id", e.id},
                      {"time", e.time},
                      {"detector", e.tool.starts_with("alert:") ? e.tool.substr(6) : e.tool},
                      {"message", e.reason},
                      {"tenant", e.tenant},
                      {"user", e.user},
                      {"agent", e.agent}});
    audit::AddDisplayFields(alerts.back(), {"detector", "message", "tenant", "user", "agent"});
  }
  json out = {{"calls", std::move(calls)},
              {"alerts", std::move(alerts)},
              {"switches", VisibleSwitches(caller, *policy, tenant)},
              // What the console offers: approvers may not stop tools or sessions, nor everything.
              {"may", {{"tool", op}, {"session", op}, {"global", op}}}};
  return AdminReply{200, out.dump(), {}};
}

AdminReply AdminApi::Apply(const identity::Caller& caller, const AdminRequest& request, bool kill) {
  // The body: {"scope": "all|tenant|user|agent|session|tool", "name": "...", "reason": "..."}.
  json body = json::parse(request.body, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    return Refuse(caller, request, 400,
                  "the body must be a JSON object {\"scope\", \"name\", \"reason\"}");
  }
  for (const auto& [key, value] : body.items()) {
    if (key != "scope" && key != "name" && key != "reason") {
      return Refuse(caller, request, 400,
                    "unknown field '" + key + "': expected scope, name and reason");
    }
    if (!value.is_string()) return Refuse(caller, request, 400, "'" + key + "' must be a string");
  }
  if (!body.contains("scope")) {
    return Refuse(caller, request, 400,
                  "'scope' is required: all, tenant, user, agent, session or tool");
  }
  auto scope = state::ParseKillScope(body["scope"].get<std::string>());
  if (!scope) return Refuse(caller, request, 400, scope.status().message());
  const std::string name = body.value("name", "");
  const std::string reason = body.value("reason", "");
  if (Status valid = state::ValidateKill(*scope, name); !valid.ok()) {
    return Refuse(caller, request, 400, valid.message());
  }

  // Authorization.
  auto policy = core_.policy().Current();
  const bool op = IsOperator(caller, *policy);
  if (!op) {
    const policy::Tenant* tenant = ApproverTenant(*policy, caller);
    if (tenant == nullptr) {
      return Refuse(caller, request, 403,
                    "user '" + caller.user + "' is not an approver of tenant '" + caller.tenant +
                        "': only approvers (approver: true) and the local operator may change "
                        "kill switches");
    }
    switch (*scope) {
      case KillScope::kGlobal:
      case KillScope::kTool:
        return Refuse(caller, request, 403,
                      std::string("a ") + (*scope == KillScope::kTool ? "tool" : "global") +
                          " switch stops every tenant: only the local operator may change it "
                          "(warden kill/unkill on the host)");
      case KillScope::kSession:
      case KillScope::kTask:
        return Refuse(caller, request, 403,
                      std::string("a ") + std::string(state::ToString(*scope)) +
                          " switch names an id of any tenant: only the local operator may "
                          "change it (warden kill " + std::string(state::ToString(*scope)) +
                          " ID on the host)");
      case KillScope::kTenant:
        if (name != caller.tenant) {
          return Refuse(caller, request, 403,
                        "an approver may stop only their own tenant '" + caller.tenant + "'");
        }
        break;
      case KillScope::kUser:
      case KillScope::kAgent: {
        const bool user = *scope == KillScope::kUser;
        if (!HasName(*tenant, *scope, name)) {
          return Refuse(caller, request, 403,
                        "tenant '" + caller.tenant + "' has no " + (user ? "user '" : "agent '") +
                            name + "'");
        }
        if (NameElsewhere(*policy, caller.tenant, *scope, name)) {
          return Refuse(caller, request, 403,
                        std::string("another tenant also has ") + (user ? "a user '" : "an agent '") +
                            name + "' and the switch would stop " + (user ? "them" : "it") +
                            " too: only the local operator may change it");
        }
        break;
      }
    }
    if (!kill) {
      // A caller a switch stops (a stopped tenant's approver; with an agent's credential, the
      // agent itself, though Handle refuses those first) may not release switches: the release
      // has to come from outside what was stopped.
      if (auto stopped = core_.kill_switches().Check({caller.tenant, caller.user, caller.agent, "", ""})) {
        return Refuse(caller, request, 403,
                      "you are stopped by kill switch " + stopped->first +
                          ": a stopped caller may not release switches");
      }
    }
  }

  const std::string key = state::KillKey(*scope, name);
  bool was_active = false;
  for (const state::KillSwitch& s : core_.kill_switches().Active()) {
    if (s.scope == *scope && s.name == name) was_active = true;
  }
  const std::string who = Who(caller, op);
  Status changed = kill ? core_.kill_switches().Kill(*scope, name, reason, who)
                        : core_.kill_switches().Unkill(*scope, name, who);
  if (!changed.ok()) {
    return Refuse(caller, request, 500,
                  std::string(kill ? "the switch could not be pulled: "
                                   : "the switch could not be released: ") +
                      changed.message());
  }
  const bool did_change = kill ? !was_active : was_active;

  json result = SwitchJson(*scope, name);
  result["active"] = kill;
  result["changed"] = did_change;
  if (kill) result["reason"] = reason;

  audit::AuditEntry entry;
  entry.kind = audit::EntryKind::kAdmin;
  entry.user = caller.user;
  entry.tenant = *scope == KillScope::kTenant ? name : caller.tenant;
  if (*scope == KillScope::kAgent) entry.agent = name;
  if (*scope == KillScope::kSession) entry.session = name;
  if (*scope == KillScope::kTool) entry.tool = name;
  entry.decision = kill ? "kill" : "unkill";
  entry.rule = "kill_switch." + key;
  entry.reason = reason;
  entry.arguments = SwitchJson(*scope, name);
  entry.arguments["changed"] = did_change;
  entry.arguments["via"] = "api";
  entry.arguments["by"] = {{"tenant", caller.tenant},
                           {"user", caller.user},
                           {"agent", caller.agent},
                           {"peer", request.peer},
                           {"local_operator", op}};
  if (auto written = core_.audit().Append(std::move(entry)); !written) {
    std::fprintf(stderr, "warden: audit: %s\n", written.status().message().c_str());
    result["error"] = std::string("the switch is ") + (kill ? "in force" : "released") +
                      ", but its audit entry could not be written: " + written.status().message();
    return AdminReply{500, result.dump(), {}};
  }
  return AdminReply{200, result.dump(), {}};
}

}  // namespace warden::gateway
