#include "state/admin_audit.h"

#include <unistd.h>

#include "audit/audit_log.h"
#include "common/login_name.h"

namespace warden::state {

Status RecordAdminAction(const std::string& db_path, const AdminAction& action) {
  audit::AuditOptions options;
  options.path = db_path;
  auto log = audit::AuditLog::Open(options);
  if (!log) return log.status();
  audit::AuditEntry entry;
  entry.kind = audit::EntryKind::kAdmin;
  entry.user = action.who;
  entry.tenant = action.tenant;
  entry.agent = action.agent;
  entry.session = action.session;
  entry.tool = action.tool;
  entry.decision = action.action;
  entry.rule = action.rule;
  entry.reason = action.reason;
  entry.arguments = action.arguments;
  auto receipt = (*log)->Append(std::move(entry));
  if (!receipt) return receipt.status();
  return Status::Ok();
}

std::string OperatorName() {
  return LoginName("uid " + std::to_string(geteuid()));
}

}  // namespace warden::state
