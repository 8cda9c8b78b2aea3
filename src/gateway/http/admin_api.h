// The admin API of `warden serve` (docs/gateway.md "Admin API"): kill switches over HTTP, on the
// same listener as MCP and behind the same authentication. The HTTP layer routes every /api/
// request here (SessionHost::Admin); this class decides who may do what, changes the switches
// through the same KillSwitches as `warden kill` (so the effect is the same: new calls refused at
// once, in-flight calls of what was stopped cancelled through the kill-switch listeners), and
// audits every change and every refusal.
//
// Endpoints (JSON in, JSON out):
//   GET    /api/kill                 the switches in force that the caller may see
//   POST   /api/kill    {scope, name, reason}   pull a switch
//   DELETE /api/kill    {scope, name}           release it (also POST /api/unkill)
//   GET    /api/activity[?limit=N]  the console's activity view: the newest calls (N, default
//                                   50, at most 500), the newest 20 alerts and the switches in
//                                   force, as far as the caller may see them (an approver: their
//                                   own tenant's)
// Who may (docs/identity.md "Admin API"):
//   * people only: a caller with an agent (an agent's API key, a JWT with an agent claim) is
//     refused with 403 on every /api/ path, checked in Handle before anything is dispatched;
//   * the local operator (single-user mode: a policy without tenants on a loopback listener, the
//     one local user): everything;
//   * a user marked `approver: true` in tenant T (through their own key, `keys:` on the user, or
//     a JWT naming the user without an agent): the tenant switch of T and agent switches of T's
//     agents, as long as no other tenant has an agent of that name (switch names are global);
//   * nobody else, and nobody through the API for `tool` and `all` switches, which cross
//     tenants (the operator uses `warden kill` on the host, or the local mode);
//   * a caller that a switch stops (its tenant, or global) may not release any.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "gateway/gateway.h"
#include "gateway/http/http_server.h"

namespace warden::gateway {

struct AdminApiOptions {
  // True in the local single-user mode (a loopback listener; the policy, embedded or a file,
  // declares no tenants): the caller the authenticator gives there (no tenant) is the local
  // operator.
  bool local_operator = false;
};

// Owned by a shared_ptr (Submit's job holds the API: it may run after the host that made it is
// gone).
class AdminApi : public std::enable_shared_from_this<AdminApi> {
 public:
  // `core` (its policy, kill switches and audit log) must outlive the API.
  AdminApi(GatewayCore& core, AdminApiOptions options) : core_(core), options_(options) {}

  // Answers one request on the core's control executor (GatewayCore::PostControl), never behind
  // the calls that hold the workers, and hands the reply to `done` there. What
  // SessionHost::Admin does.
  void Submit(const identity::Caller& caller, AdminRequest request,
              std::function<void(AdminReply)> done);

  // Answers one request: an agent's credential is refused (403) whatever the path, then the
  // request is dispatched by path. Blocks (the store write, the audit append): run it off I/O
  // threads.
  AdminReply Handle(const identity::Caller& caller, const AdminRequest& request);

 private:
  static constexpr size_t kActivityCalls = 50, kActivityMaxCalls = 500, kActivityAlerts = 20;
  AdminReply List(const identity::Caller& caller, const AdminRequest& request);
  AdminReply Activity(const identity::Caller& caller, const AdminRequest& request);
  // `tenant`: the approver's tenant, or null for the operator.
  nlohmann::json VisibleSwitches(const identity::Caller& caller, const policy::Policy& policy,
                                 const policy::Tenant* tenant) const;
  AdminReply Apply(const identity::Caller& caller, const AdminRequest& request, bool kill);
  // An error reply, audited as a refusal.
  AdminReply Refuse(const identity::Caller& caller, const AdminRequest& request, int status,
                    const std::string& message);
  bool IsOperator(const identity::Caller& caller, const policy::Policy& policy) const;

  GatewayCore& core_;
  const AdminApiOptions options_;
};

}  // namespace warden::gateway
