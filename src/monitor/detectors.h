// The anomaly detectors (docs/monitoring.md, "Detectors and alerts"): each call, as a small
// CallEvent, goes through them and may come out as alerts. Pure: no I/O, no clock of its own
// (the caller passes the time), memory bounded. What an alert then does (an audit entry, a
// metric, a webhook, a kill switch) is the gateway's (gateway/alerts.h); a detector never blocks
// a call and never writes.
//
//   monitor::Detectors detectors;
//   for (monitor::Alert& a : detectors.Observe(settings, event, now)) dispatch(std::move(a));
//
// Thread-safe: one mutex, held for a few map look-ups per call.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace warden::monitor {

// What an alert of a detector does beyond being recorded: pull the kill switch of the caller's
// agent, user, tenant or session (the alert is the switch's reason).
enum class KillAction { kNone, kAgent, kUser, kTenant, kSession };
const char* KillActionName(KillAction action);  // "", "agent", "user", "tenant", "session"
std::optional<KillAction> ParseKillAction(std::string_view text);

// One detector's settings; the meaning of the numbers depends on the detector (below).
struct DetectorSettings {
  bool enabled = false;
  KillAction kill = KillAction::kNone;
  // volume: the baseline's window (the EWMA spans it, and no alert comes before the key has been
  // seen that long); denials: the sliding window the denials are counted in.
  std::chrono::milliseconds window{0};
  double deviations = 4;   // volume: how far above the mean, in standard deviations
  uint64_t min_calls = 20;  // volume: a minute with fewer calls never alerts
  uint64_t threshold = 10;  // denials: this many in `window` alert
};

// Every detector's settings for one tenant (monitoring.detectors, with monitoring.tenants.T over
// them). All off by default: a policy turns on what it wants.
struct DetectorConfig {
  DetectorSettings volume{.window = std::chrono::minutes(30)};
  DetectorSettings denials{.window = std::chrono::minutes(1)};
  DetectorSettings first_domain;
  DetectorSettings sensitive;
  DetectorSettings tool_changed;
  DetectorSettings sandbox_limits;
  bool any() const {
    return volume.enabled || denials.enabled || first_domain.enabled || sensitive.enabled ||
           tool_changed.enabled || sandbox_limits.enabled;
  }
};

// A decided call, as the detectors see it. Views: valid for the call to Observe only.
struct CallEvent {
  std::string_view tenant, user, agent, session, tool;
  std::string_view decision;  // allow, deny, ask, error, pause (as the audit log says)
  // Hosts the call reached (web__fetch's hops, a sandbox's allowed egress connections).
  std::vector<std::string> hosts;
  bool sensitive = false;        // the call's rule carries the `sensitive` label
  std::string_view sandbox_end;  // sandbox__exec: how the run ended ("timeout", "exited"...)
  uint64_t refused_syscalls = 0;  // sandbox__exec: syscalls the filter refused in the run
};

struct Alert {
  std::string detector;  // volume, denials, first_domain, sensitive, tool_changed, sandbox_limits
  std::string message;   // one line for a person
  nlohmann::json details = nlohmann::json::object();
  KillAction kill = KillAction::kNone;
  // Whose call raised it ("" for tool_changed, which no call raises).
  std::string tenant, user, agent, session, tool;
};

// The registrable domain of `host` (its public suffix plus one label: "api.github.com" ->
// "github.com", "a.b.example.co.uk" -> "example.co.uk"), lower-cased without a trailing dot; an
// IP address, a single label or a public suffix itself stays as it is.
std::string RegistrableDomain(std::string_view host);

class Detectors {
 public:
  // Keys (per agent, per tool, seen domains...) kept per detector before the least recently
  // used is forgotten.
  static constexpr std::size_t kDefaultMaxKeys = 10000;
  explicit Detectors(std::size_t max_keys = kDefaultMaxKeys);
  ~Detectors();
  Detectors(const Detectors&) = delete;
  Detectors& operator=(const Detectors&) = delete;

  // The alerts `event`, at `now`, raises under `config` (the tenant's).
  std::vector<Alert> Observe(const DetectorConfig& config, const CallEvent& event,
                             std::chrono::system_clock::time_point now);

  // A pinned tool of upstream `server` whose definition differs from its pin, or a tool its pin
  // does not know (`status` "changed" or "new"), with `fingerprint` naming the definition seen
  // (its hash): an alert the first time each fingerprint is reported, none after.
  std::vector<Alert> ToolChanged(const DetectorConfig& config, const std::string& server,
                                 const std::string& tool, const std::string& status,
                                 const std::string& fingerprint,
                                 const std::vector<std::string>& members);

  // Domains already used before this process (the store's), so that a restart does not alert on
  // each again. `agent` "" is the tenant's own set.
  void SeedDomain(const std::string& tenant, const std::string& agent, const std::string& domain);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace warden::monitor
