#include "gateway/alerts.h"

#include <spdlog/spdlog.h>

#include "gateway/stages/kill_switches.h"
#include "monitor/families.h"

namespace warden::gateway {

namespace {

// The switch an alert asks for, or nullopt (none asked, or the caller has no such name: a
// sessionless caller has no session to stop).
std::optional<std::pair<KillScope, std::string>> SwitchOf(const monitor::Alert& a) {
  switch (a.kill) {
    case monitor::KillAction::kNone: return std::nullopt;
    case monitor::KillAction::kAgent:
      if (a.agent.empty()) return std::nullopt;
      return std::pair{KillScope::kAgent, a.agent};
    case monitor::KillAction::kUser:
      if (a.user.empty()) return std::nullopt;
      return std::pair{KillScope::kUser, a.user};
    case monitor::KillAction::kTenant:
      if (a.tenant.empty()) return std::nullopt;
      return std::pair{KillScope::kTenant, a.tenant};
    case monitor::KillAction::kSession:
      if (a.session.empty()) return std::nullopt;
      return std::pair{KillScope::kSession, a.session};
  }
  return std::nullopt;
}

// Switches are by name, not per tenant: an agent or user name another tenant of the policy also
// declares would stop that tenant's caller too. The detector does not do that on its own (a
// person can); returns the other tenant, or "".
std::string SharedWith(const policy::Policy* policy, KillScope scope, const std::string& name,
                       const std::string& tenant) {
  if (policy == nullptr || (scope != KillScope::kAgent && scope != KillScope::kUser)) return "";
  return policy::OtherTenantNaming(*policy, tenant, scope == KillScope::kUser, name);
}

}  // namespace

Alerts::Alerts(Options options)
    : options_(std::move(options)), detectors_(options_.max_keys) {}

Alerts::~Alerts() = default;

void Alerts::OnCall(const std::shared_ptr<const policy::Policy>& policy,
                    const monitor::CallEvent& event) {
  if (!policy) return;
  const monitor::DetectorConfig& config = policy->monitoring.DetectorsFor(event.tenant);
  if (!config.any()) return;
  auto alerts = detectors_.Observe(config, event, std::chrono::system_clock::now());
  if (!alerts.empty()) Dispatch(policy, std::move(alerts));
}

void Alerts::OnToolChanged(const std::shared_ptr<const policy::Policy>& policy,
                           const std::string& server, const std::string& tool,
                           const std::string& status, const std::string& fingerprint,
                           const std::vector<std::string>& members) {
  if (!policy) return;
  auto alerts = detectors_.ToolChanged(policy->monitoring.detectors, server, tool, status,
                                       fingerprint, members);
  if (!alerts.empty()) Dispatch(policy, std::move(alerts));
}

void Alerts::Dispatch(const std::shared_ptr<const policy::Policy>& policy,
                      std::vector<monitor::Alert> alerts) {
  auto work = [this, policy, alerts = std::move(alerts)] {
    for (const monitor::Alert& a : alerts) {
      try {
        Handle(policy, a);
      } catch (const std::exception& e) {
        spdlog::error("alerts: {} alert not handled: {}", a.detector, e.what());
      }
    }
  };
  if (options_.post) {
    options_.post(std::move(work));
  } else {
    work();
  }
}

void Alerts::Handle(const std::shared_ptr<const policy::Policy>& policy,
                    const monitor::Alert& alert) {
  spdlog::warn("alert {}: {}", alert.detector, alert.message);
  // 1. The switch, first.
  nlohmann::json kill = nullptr;
  const auto target = SwitchOf(alert);
  if (alert.kill != monitor::KillAction::kNone) {
    kill = {{"scope", monitor::KillActionName(alert.kill)}};
    if (!target) {
      kill["pulled"] = false;
      kill["error"] = std::string("the caller has no ") + monitor::KillActionName(alert.kill);
    } else if (options_.switches == nullptr) {
      kill["pulled"] = false;
      kill["error"] = "no kill switches here";
    } else if (std::string other =
                   SharedWith(policy.get(), target->first, target->second, alert.tenant);
               !other.empty()) {
      kill["name"] = target->second;
      kill["pulled"] = false;
      kill["error"] = std::string(monitor::KillActionName(alert.kill)) + " '" + target->second +
                      "' is also one of tenant '" + other +
                      "': its switch would stop that tenant's too; pull it by hand";
    } else {
      kill["name"] = target->second;
      Status pulled = options_.switches->Kill(target->first, target->second,
                                              alert.detector + " alert: " + alert.message,
                                              "monitor:" + alert.detector);
      kill["pulled"] = pulled.ok();
      if (!pulled.ok()) {
        kill["error"] = pulled.message();
        spdlog::error("alert {}: the {} switch could not be pulled: {}", alert.detector,
                      monitor::KillActionName(alert.kill), pulled.message());
      }
    }
  }

  // 2. The audit entry.
  audit::AuditEntry entry;
  entry.kind = audit::EntryKind::kDecision;
  entry.tenant = alert.tenant;
  entry.user = alert.user;
  entry.agent = alert.agent;
  entry.session = alert.session;
  entry.tool = "alert:" + alert.detector;
  entry.decision = "alert";
  entry.rule = "monitor." + alert.detector;
  entry.reason = alert.message;
  entry.arguments = alert.details;
  entry.arguments["tool"] = alert.tool;
  if (!kill.is_null()) entry.arguments["kill"] = kill;
  uint64_t id = 0;
  std::string time;
  if (options_.audit) {
    auto written = options_.audit->Append(std::move(entry));
    if (written) {
      id = written->id;
      time = written->time;
    } else {
      spdlog::error("alert {}: its audit entry could not be written: {}", alert.detector,
                    written.status().message());
    }
  }
  if (target && options_.switches && options_.audit && kill.value("pulled", false)) {
    // The switch as every switch is recorded (`warden audit query --decision kill`).
    audit::AuditEntry k;
    k.kind = audit::EntryKind::kAdmin;
    k.tenant = target->first == KillScope::kTenant ? target->second : alert.tenant;
    if (target->first == KillScope::kAgent) k.agent = target->second;
    if (target->first == KillScope::kUser) k.user = target->second;
    if (target->first == KillScope::kSession) k.session = target->second;
    k.decision = "kill";
    k.rule = "kill_switch." + state::KillKey(target->first, target->second);
    k.reason = alert.detector + " alert: " + alert.message;
    k.arguments = {{"scope", std::string(state::ToString(target->first))},
                   {"name", target->second},
                   {"via", "monitor"},
                   {"by", "monitor:" + alert.detector},
                   {"alert", id}};
    if (auto written = options_.audit->Append(std::move(k)); !written)
      spdlog::error("alert {}: the kill's audit entry could not be written: {}", alert.detector,
                    written.status().message());
  }

  // 3. The metric; the first use of a domain is remembered.
  monitor::Metrics().alerts.Add({alert.detector});
  if (alert.detector == "first_domain" && options_.remember_domain) {
    const std::string domain = alert.details.value("domain", std::string());
    if (!domain.empty()) {
      options_.remember_domain(alert.tenant, "", domain);
      options_.remember_domain(alert.tenant, alert.agent, domain);
    }
  }

  // 4. The webhook (its own thread does the network).
  if (policy && policy->monitoring.alert_webhook) {
    nlohmann::json payload = {{"alert",
                               {{"id", id},
                                {"time", time},
                                {"detector", alert.detector},
                                {"message", alert.message},
                                {"details", alert.details},
                                {"tenant", alert.tenant},
                                {"user", alert.user},
                                {"agent", alert.agent},
                                {"session", alert.session},
                                {"tool", alert.tool},
                                {"kill", kill}}}};
    webhook_.Post(policy->monitoring.alert_webhook, "alert.raised", std::move(payload));
  }
}

}  // namespace warden::gateway
