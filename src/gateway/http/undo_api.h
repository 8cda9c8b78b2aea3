// POST /api/calls/ID/undo (docs/approvals.md "Undo"): runs the compensating call of call ID (its
// audit entry id) through gateway::UndoRunner and answers once it has, with
// {call_id, undo_tool, undo_arguments, result, undo_call_id}. AdminApi hands it every
// /api/calls/ request after refusing agents. Who may: the local operator, an approver of the
// call's tenant, or the call's own user. The undo waits for a call (for minutes when that call
// needs an approval, bounded by the runner's timeout): AdminApi::Submit runs it on the workers,
// never on the control executor.
#pragma once

#include <string>
#include <string_view>

#include "gateway/gateway.h"
#include "gateway/http/http_server.h"

namespace warden::gateway {

class UndoApi {
 public:
  explicit UndoApi(GatewayCore& core) : core_(core) {}

  // Whether `path` is this API's (/api/calls/...).
  static bool Handles(std::string_view path);

  // `local_operator`: the caller is single-user mode's local user. Blocks until the compensating
  // call answered: run on a worker (GatewayCore::Post).
  AdminReply Handle(const identity::Caller& caller, const AdminRequest& request,
                    bool local_operator);

 private:
  GatewayCore& core_;
};

}  // namespace warden::gateway
