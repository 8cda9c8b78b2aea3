#include "monitor/detectors.h"

#include <arpa/inet.h>
#include <libpsl.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <deque>
#include <list>
#include <mutex>
#include <unordered_map>

namespace warden::monitor {

const char* KillActionName(KillAction action) {
  switch (action) {
    case KillAction::kNone: return "";
    case KillAction::kAgent: return "agent";
    case KillAction::kUser: return "user";
    case KillAction::kTenant: return "tenant";
    case KillAction::kSession: return "session";
  }
  return "";
}

std::optional<KillAction> ParseKillAction(std::string_view text) {
  if (text == "agent") return KillAction::kAgent;
  if (text == "user") return KillAction::kUser;
  if (text == "tenant") return KillAction::kTenant;
  if (text == "session") return KillAction::kSession;
  return std::nullopt;
}

namespace {

// The public suffix list: Debian's file (package publicsuffix) when it can be read, else the copy
// built into libpsl. Loaded once, never freed (it lives as long as the process).
const psl_ctx_t* SuffixList() {
  static const psl_ctx_t* ctx = [] {
    const psl_ctx_t* latest = psl_latest(nullptr);
    return latest != nullptr ? latest : psl_builtin();
  }();
  return ctx;
}

bool IsAddress(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// A map that forgets its least recently used key past `cap` keys.
template <typename V>
class LruMap {
 public:
  explicit LruMap(std::size_t cap) : cap_(std::max<std::size_t>(cap, 1)) {}
  // The value for `key`, created (default) when missing; `created` says which.
  V& Touch(const std::string& key, bool* created = nullptr) {
    if (auto it = map_.find(key); it != map_.end()) {
      order_.splice(order_.begin(), order_, it->second.pos);
      if (created) *created = false;
      return it->second.value;
    }
    if (map_.size() >= cap_) {
      map_.erase(order_.back());
      order_.pop_back();
    }
    order_.push_front(key);
    auto [it, inserted] = map_.emplace(key, Entry{V{}, order_.begin()});
    (void)inserted;
    if (created) *created = true;
    return it->second.value;
  }
  std::size_t size() const { return map_.size(); }

 private:
  struct Entry {
    V value;
    std::list<std::string>::iterator pos;
  };
  std::size_t cap_;
  std::unordered_map<std::string, Entry> map_;
  std::list<std::string> order_;
};

std::string Key(std::initializer_list<std::string_view> parts) {
  std::string key;
  for (std::string_view p : parts) {
    key.append(p);
    key.push_back('\0');
  }
  return key;
}

// One key's call counts per minute against an exponentially weighted mean and variance of its
// past minutes.
struct Volume {
  bool started = false, baseline = false;
  int64_t first_minute = 0, minute = 0, alerted_minute = -1;
  uint64_t count = 0;  // calls in `minute`
  double mean = 0, var = 0;

  void Fold(double x, double alpha) {
    if (!baseline) {
      mean = x;
      var = 0;
      baseline = true;
      return;
    }
    const double diff = x - mean;
    const double incr = alpha * diff;
    mean += incr;
    var = (1 - alpha) * (var + diff * incr);
  }
};

struct Denials {
  std::deque<std::chrono::system_clock::time_point> times;  // at most `threshold` of them
  std::chrono::system_clock::time_point quiet_until{};
};

std::string Fixed(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string Who(const CallEvent& e) {
  return "agent '" + std::string(e.agent) + "' of tenant '" + std::string(e.tenant) + "'";
}

Alert AlertFor(const CallEvent& e, std::string detector, const DetectorSettings& s) {
  Alert a;
  a.detector = std::move(detector);
  a.kill = s.kill;
  a.tenant = e.tenant;
  a.user = e.user;
  a.agent = e.agent;
  a.session = e.session;
  a.tool = e.tool;
  return a;
}

bool IsLimitEnd(std::string_view end) {
  return end == "timeout" || end == "memory" || end == "pids" || end == "cpu" ||
         end == "output_limit";
}

}  // namespace

std::string RegistrableDomain(std::string_view host) {
  std::string h(host);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  while (!h.empty() && h.back() == '.') h.pop_back();
  std::transform(h.begin(), h.end(), h.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (h.empty() || IsAddress(h) || h.find('.') == std::string::npos) return h;
  const char* registrable = psl_registrable_domain(SuffixList(), h.c_str());
  return registrable != nullptr ? std::string(registrable) : h;
}

struct Detectors::State {
  explicit State(std::size_t cap)
      : volume(cap), denials(cap), domains(cap), tools_seen(cap) {}
  std::mutex mu;
  LruMap<Volume> volume;    // "v" agent keys and "t" tool keys
  LruMap<Denials> denials;  // per (tenant, agent)
  LruMap<char> domains;     // (tenant, "", domain) and (tenant, agent, domain) seen
  LruMap<char> tools_seen;  // (server, tool, fingerprint) reported

  // Counts one call for `key`; returns the alert's message when this minute is anomalous.
  std::optional<std::string> CountVolume(const std::string& key, const DetectorSettings& s,
                                         int64_t minute, const std::string& what) {
    Volume& v = volume.Touch(key);
    const int64_t window = std::max<int64_t>(
        1, std::chrono::duration_cast<std::chrono::minutes>(s.window).count());
    const double alpha = 2.0 / (static_cast<double>(window) + 1.0);
    if (!v.started) {
      v.started = true;
      v.first_minute = v.minute = minute;
    } else if (minute > v.minute) {
      v.Fold(static_cast<double>(v.count), alpha);
      // The minutes without a call count as zeros; past a few windows the baseline has forgotten
      // everything before, so the rest need not be folded.
      const int64_t zeros = std::min<int64_t>(minute - v.minute - 1, 4 * window);
      for (int64_t i = 0; i < zeros; ++i) v.Fold(0, alpha);
      v.minute = minute;
      v.count = 0;
    }
    ++v.count;
    if (minute - v.first_minute < window || !v.baseline) return std::nullopt;  // warming up
    if (v.count < s.min_calls || v.alerted_minute == minute) return std::nullopt;
    const double sd = std::sqrt(std::max(v.var, 0.0));
    const double limit = v.mean + s.deviations * sd;
    if (static_cast<double>(v.count) <= limit) return std::nullopt;
    v.alerted_minute = minute;
    return what + " made " + std::to_string(v.count) + " calls this minute; its baseline is " +
           Fixed(v.mean) + " +/- " + Fixed(sd) + " a minute (alert above " + Fixed(limit) + ")";
  }
};

Detectors::Detectors(std::size_t max_keys) : state_(std::make_unique<State>(max_keys)) {}
Detectors::~Detectors() = default;

void Detectors::SeedDomain(const std::string& tenant, const std::string& agent,
                           const std::string& domain) {
  std::lock_guard lock(state_->mu);
  state_->domains.Touch(Key({tenant, agent, domain}));
}

std::vector<Alert> Detectors::Observe(const DetectorConfig& config, const CallEvent& e,
                                      std::chrono::system_clock::time_point now) {
  std::vector<Alert> out;
  if (!config.any()) return out;
  std::lock_guard lock(state_->mu);
  State& st = *state_;

  if (config.volume.enabled) {
    const int64_t minute =
        std::chrono::duration_cast<std::chrono::minutes>(now.time_since_epoch()).count();
    if (auto msg = st.CountVolume(Key({"a", e.tenant, e.agent}), config.volume, minute, Who(e))) {
      Alert a = AlertFor(e, "volume", config.volume);
      a.message = *msg;
      a.details = {{"key", "agent"}, {"agent", e.agent}};
      out.push_back(std::move(a));
    }
    std::string tool_who =
        "tool '" + std::string(e.tool) + "' of tenant '" + std::string(e.tenant) + "'";
    if (auto msg = st.CountVolume(Key({"t", e.tenant, e.tool}), config.volume, minute, tool_who)) {
      Alert a = AlertFor(e, "volume", config.volume);
      a.message = *msg;
      a.details = {{"key", "tool"}, {"tool", e.tool}};
      out.push_back(std::move(a));
    }
  }

  if (config.denials.enabled && e.decision == "deny") {
    Denials& d = st.denials.Touch(Key({e.tenant, e.agent}));
    const auto since = now - config.denials.window;
    d.times.push_back(now);
    while (!d.times.empty() && (d.times.front() < since || d.times.size() > config.denials.threshold))
      d.times.pop_front();
    if (d.times.size() >= std::max<uint64_t>(config.denials.threshold, 1) && now >= d.quiet_until) {
      Alert a = AlertFor(e, "denials", config.denials);
      const auto secs =
          std::chrono::duration_cast<std::chrono::seconds>(config.denials.window).count();
      a.message = Who(e) + " was denied " + std::to_string(d.times.size()) + " calls within " +
                  std::to_string(secs) + " s (threshold " +
                  std::to_string(config.denials.threshold) + ")";
      a.details = {{"denials", d.times.size()}, {"window_seconds", secs}};
      out.push_back(std::move(a));
      // One alert per burst: the next can come once a whole window has passed.
      d.quiet_until = now + config.denials.window;
      d.times.clear();
    }
  }

  if (config.first_domain.enabled) {
    std::vector<std::string> done;
    for (const std::string& host : e.hosts) {
      std::string domain = RegistrableDomain(host);
      if (domain.empty() || std::find(done.begin(), done.end(), domain) != done.end()) continue;
      done.push_back(domain);
      bool new_for_tenant = false, new_for_agent = false;
      st.domains.Touch(Key({e.tenant, "", domain}), &new_for_tenant);
      st.domains.Touch(Key({e.tenant, e.agent, domain}), &new_for_agent);
      if (!new_for_tenant && !new_for_agent) continue;
      Alert a = AlertFor(e, "first_domain", config.first_domain);
      const std::string scope = new_for_tenant ? "tenant" : "agent";
      a.message = "first use of " + domain + " (" + host + ") by " +
                  (new_for_tenant ? "tenant '" + std::string(e.tenant) + "'" : Who(e)) +
                  ", through " + std::string(e.tool);
      a.details = {{"domain", domain}, {"host", host}, {"scope", scope}};
      out.push_back(std::move(a));
    }
  }

  if (config.sensitive.enabled && e.sensitive) {
    Alert a = AlertFor(e, "sensitive", config.sensitive);
    a.message = Who(e) + " called " + std::string(e.tool) + ", which the policy labels sensitive (" +
                std::string(e.decision) + ")";
    a.details = {{"decision", e.decision}};
    out.push_back(std::move(a));
  }

  if (config.sandbox_limits.enabled && (IsLimitEnd(e.sandbox_end) || e.refused_syscalls > 0)) {
    Alert a = AlertFor(e, "sandbox_limits", config.sandbox_limits);
    std::string what;
    if (IsLimitEnd(e.sandbox_end)) what = "hit its " + std::string(e.sandbox_end) + " limit";
    if (e.refused_syscalls > 0)
      what += (what.empty() ? "" : " and ") + std::string("had ") +
              std::to_string(e.refused_syscalls) + " syscalls refused";
    a.message = "a sandbox of " + Who(e) + " (" + std::string(e.tool) + ") " + what;
    a.details = {{"end", e.sandbox_end}, {"refused_syscalls", e.refused_syscalls}};
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<Alert> Detectors::ToolChanged(const DetectorConfig& config, const std::string& server,
                                          const std::string& tool, const std::string& status,
                                          const std::string& fingerprint,
                                          const std::vector<std::string>& members) {
  std::vector<Alert> out;
  if (!config.tool_changed.enabled) return out;
  std::lock_guard lock(state_->mu);
  bool created = false;
  state_->tools_seen.Touch(Key({server, tool, fingerprint}), &created);
  if (!created) return out;
  Alert a;
  a.detector = "tool_changed";
  a.kill = KillAction::kNone;  // no caller raised it: there is no one to stop
  a.tool = tool;
  if (status == "new") {
    a.message = "upstream '" + server + "' lists a new tool " + tool +
                ", hidden until `warden tools approve`";
  } else {
    std::string which;
    for (const std::string& m : members) which += (which.empty() ? "" : ", ") + m;
    a.message = "the definition of " + tool + " on upstream '" + server + "' changed" +
                (which.empty() ? "" : " (" + which + ")") +
                "; hidden until `warden tools approve`";
  }
  a.details = {{"server", server},   {"tool", tool}, {"status", status},
               {"members", members}, {"definition_sha256", fingerprint}};
  out.push_back(std::move(a));
  return out;
}

}  // namespace warden::monitor
