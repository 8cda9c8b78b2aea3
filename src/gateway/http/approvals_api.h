// The approvals API (docs/approvals.md, "The API"): the pending calls a person may decide, one
// approval, and approve or deny, over the admin API's routing (AdminApi hands it every
// /api/approvals request, after refusing agents). Decisions go through the gateway's
// ApprovalGate, which wakes the waiting call at once; every decision is an audit entry naming
// who made it.
#pragma once

#include <string>

#include "gateway/gateway.h"
#include "gateway/http/http_server.h"

namespace warden::gateway {

class ApprovalsApi {
 public:
  explicit ApprovalsApi(GatewayCore& core) : core_(core) {}

  // `local_operator`: the caller is single-user mode's local user. Blocks (store and audit
  // writes): run off I/O threads, as AdminApi does.
  AdminReply Handle(const identity::Caller& caller, const AdminRequest& request,
                    bool local_operator);

 private:
  AdminReply List(const identity::Caller& caller, const AdminRequest& request, bool op);
  AdminReply Show(const identity::Caller& caller, const std::string& id, bool op);
  AdminReply Decide(const identity::Caller& caller, const AdminRequest& request,
                    const std::string& id, bool approve, bool op);

  GatewayCore& core_;
};

}  // namespace warden::gateway
