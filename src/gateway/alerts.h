// What an alert does (docs/monitoring.md, "Detectors and alerts"). The monitor stage hands each
// decided call to OnCall, which runs the tenant's detectors (monitor/detectors.h) under one lock
// and returns; every alert they raise is then handled on the control executor, never on the call
// path, in this order:
//   1. the kill switch its detector asks for (agent, user, tenant or session), pulled with the
//      alert as the reason and "monitor:DETECTOR" as who: first, so that the window in which the
//      next call of a stopped caller can still start is as short as it can be;
//   2. an audit entry (decision "alert", tool "alert:DETECTOR", the message as its reason, the
//      details as its arguments): tamper-evident like every entry, and what `warden alerts list`
//      reads;
//   3. warden_alerts_total{detector};
//   4. an "alert.raised" event to monitoring.alerts.webhook, signed and retried by its sender.
// Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "gateway/approvals/approval_webhook.h"
#include "monitor/detectors.h"
#include "policy/model.h"

namespace warden::gateway {

class KillSwitches;

class Alerts {
 public:
  using Post = std::function<void(std::function<void()>)>;
  // A domain first used (tenant, agent or "" for the tenant's set, domain): to be stored, so that
  // a restart does not alert on it again.
  using RememberDomain = std::function<void(const std::string& tenant, const std::string& agent,
                                            const std::string& domain)>;
  struct Options {
    audit::AuditLog* audit = nullptr;    // where alerts are recorded (required)
    KillSwitches* switches = nullptr;    // null: a detector's kill is logged, not pulled
    Post post;                           // the control executor; unset: handled inline (tests)
    RememberDomain remember_domain;      // unset: first uses are kept in memory only
    std::size_t max_keys = monitor::Detectors::kDefaultMaxKeys;
  };
  explicit Alerts(Options options);
  ~Alerts();

  // The call path: the detectors of `event.tenant` under `policy` (null: nothing is checked).
  // Cheap when no detector is on; never blocks on I/O.
  void OnCall(const std::shared_ptr<const policy::Policy>& policy, const monitor::CallEvent& event);
  // The pin review found a changed or new tool (status "changed" or "new").
  void OnToolChanged(const std::shared_ptr<const policy::Policy>& policy, const std::string& server,
                     const std::string& tool, const std::string& status,
                     const std::string& fingerprint, const std::vector<std::string>& members);
  // Domains used before this process started (the store's).
  void SeedDomain(const std::string& tenant, const std::string& agent, const std::string& domain) {
    detectors_.SeedDomain(tenant, agent, domain);
  }

  notify::WebhookStats WebhookStats() { return webhook_.Stats(); }

 private:
  void Dispatch(const std::shared_ptr<const policy::Policy>& policy,
                std::vector<monitor::Alert> alerts);
  void Handle(const std::shared_ptr<const policy::Policy>& policy, const monitor::Alert& alert);

  Options options_;
  monitor::Detectors detectors_;
  WebhookSlot webhook_{"monitoring.alerts.webhook"};
};

}  // namespace warden::gateway
