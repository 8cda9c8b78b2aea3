// monitoring: { metrics, logs, detectors, tenants, alerts } (docs/monitoring.md).
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "policy/loader.h"
#include "sandbox/options.h"

namespace warden::policy::internal {
namespace {

monitor::DetectorSettings* SettingsOf(monitor::DetectorConfig& c, const std::string& name) {
  if (name == "volume") return &c.volume;
  if (name == "denials") return &c.denials;
  if (name == "first_domain") return &c.first_domain;
  if (name == "sensitive") return &c.sensitive;
  if (name == "tool_changed") return &c.tool_changed;
  if (name == "sandbox_limits") return &c.sandbox_limits;
  return nullptr;
}

// One detector's value: on / off (true / false), or a mapping of its settings, which turns it on
// and changes what it names over `*s` (the defaults', or the built-in ones).
Status LoadDetector(const YamlReader& r, const std::string& name, const YAML::Node& node,
                    const std::string& path, monitor::DetectorSettings* s) {
  if (node.IsScalar()) {
    const std::string text = node.Scalar();
    if (text == "on" || text == "true") {
      s->enabled = true;
      return Status::Ok();
    }
    if (text == "off" || text == "false") {
      s->enabled = false;
      return Status::Ok();
    }
    return r.Error(node, path, "expected on, off or a mapping of the detector's settings, got '" +
                                   text + "'");
  }
  if (node.IsNull()) {
    s->enabled = true;
    return Status::Ok();
  }
  s->enabled = true;
  const KeyVisitor visit =
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        const std::string kpath = path + "." + key;
        if (key == "kill") {
          auto text = r.NonEmptyString(value, kpath);
          if (!text) return text.status();
          if (*text == "none" || *text == "off") {
            s->kill = monitor::KillAction::kNone;
            return Status::Ok();
          }
          if (name == "tool_changed")
            return r.Error(value, kpath,
                           "tool_changed has no caller whose switch it could pull (the tool is "
                           "already hidden until approved); only kill: none");
          auto action = monitor::ParseKillAction(*text);
          if (!action)
            return r.Error(value, kpath,
                           "expected agent, user, tenant, session or none, got '" + *text + "'");
          s->kill = *action;
          return Status::Ok();
        }
        if (key == "window") {
          auto text = r.NonEmptyString(value, kpath);
          if (!text) return text.status();
          auto ms = sandbox::ParseDuration(*text);
          if (!ms) return r.Error(value, kpath, ms.status().message());
          const uint64_t min_ms = name == "volume" ? 60000 : 1000;
          if (*ms < min_ms || *ms > 7ull * 24 * 3600 * 1000)
            return r.Error(value, kpath,
                           std::string("expected a duration from ") +
                               (name == "volume" ? "1m" : "1s") + " to 168h, got '" + *text + "'");
          s->window = std::chrono::milliseconds(*ms);
          return Status::Ok();
        }
        if (key == "deviations") {
          auto text = r.NonEmptyString(value, kpath);
          if (!text) return text.status();
          errno = 0;
          char* end = nullptr;
          const double d = std::strtod(text->c_str(), &end);
          if (errno != 0 || end != text->c_str() + text->size() || !std::isfinite(d) || d <= 0 ||
              d > 100)
            return r.Error(value, kpath,
                           "expected a number of standard deviations above 0 and at most 100, "
                           "got '" + *text + "'");
          s->deviations = d;
          return Status::Ok();
        }
        auto n = r.Count(value, kpath);
        if (!n) return n.status();
        if (*n < 1 || *n > 1000000)
          return r.Error(value, kpath, "expected a count from 1 to 1000000");
        (key == "min_calls" ? s->min_calls : s->threshold) = *n;
        return Status::Ok();
      };
  if (name == "volume") return r.Fields(node, path, {"kill", "window", "deviations", "min_calls"}, visit);
  if (name == "denials") return r.Fields(node, path, {"kill", "window", "threshold"}, visit);
  return r.Fields(node, path, {"kill"}, visit);
}

Status LoadDetectors(const YamlReader& r, const YAML::Node& node, const std::string& path,
                     monitor::DetectorConfig* config) {
  return r.Fields(
      node, path,
      {"volume", "denials", "first_domain", "sensitive", "tool_changed", "sandbox_limits"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        return LoadDetector(r, key, value, path + "." + key, SettingsOf(*config, key));
      });
}

Status LoadMetrics(const YamlReader& r, const YAML::Node& node, Policy* policy) {
  return r.Fields(
      node, "monitoring.metrics", {"keys"},
      [&](const std::string&, const YAML::Node&, const YAML::Node& keys) -> Status {
        auto list = r.NonEmptyStrings(keys, "monitoring.metrics.keys");
        if (!list) return list.status();
        std::vector<std::string>& out = policy->monitoring.metrics_keys;
        for (size_t i = 0; i < list->size(); ++i) {
          const std::string& k = (*list)[i];
          const std::string ipath = "monitoring.metrics.keys[" + std::to_string(i) + "]";
          if (!IsKeyHash(k))
            return r.Error(keys[i], ipath,
                           "expected 'sha256:' and 64 lower-case hex digits (the key's hash, "
                           "never the key)");
          if (auto owner = policy->identity.keys.find(k); owner != policy->identity.keys.end())
            return r.Error(keys[i], ipath,
                           "this key already belongs to " + OwnerName(owner->second) +
                               ": a metrics key reads /metrics and nothing else, so it must be "
                               "a key of its own");
          if (std::find(out.begin(), out.end(), k) != out.end())
            return r.Error(keys[i], ipath, "the same key twice");
          out.push_back(k);
        }
        return Status::Ok();
      });
}

Status LoadLogs(const YamlReader& r, const YAML::Node& node, Policy* policy) {
  bool has_format = false;
  MonitoringSection& m = policy->monitoring;
  WARDEN_RETURN_IF_ERROR(r.Fields(
      node, "monitoring.logs", {"format", "arguments", "results"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        const std::string path = "monitoring.logs." + key;
        if (key == "format") {
          auto s = r.NonEmptyString(value, path);
          if (!s) return s.status();
          if (*s != "json" && *s != "off")
            return r.Error(value, path,
                           "expected json (one JSON line per call on stderr) or off, got '" + *s +
                               "'");
          m.call_logs = *s == "json";
          has_format = true;
          return Status::Ok();
        }
        auto b = r.Bool(value, path);
        if (!b) return b.status();
        (key == "arguments" ? m.log_arguments : m.log_results) = *b;
        return Status::Ok();
      }));
  if (!has_format)
    return r.Error(node, "monitoring.logs", "missing format: expected 'format: json' (or off)");
  return Status::Ok();
}

}  // namespace

Status LoadMonitoring(const YamlReader& r, const YAML::Node& node, Policy* policy) {
  YAML::Node tenants;
  WARDEN_RETURN_IF_ERROR(r.Fields(
      node, "monitoring", {"metrics", "logs", "detectors", "tenants", "alerts"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        if (key == "metrics") return LoadMetrics(r, value, policy);
        if (key == "logs") return LoadLogs(r, value, policy);
        if (key == "detectors")
          return LoadDetectors(r, value, "monitoring.detectors", &policy->monitoring.detectors);
        if (key == "tenants") {
          tenants = value;  // after the defaults, whatever the order in the file
          if (!value.IsMap())
            return r.Error(value, "monitoring.tenants", "expected a mapping of tenant names");
          return Status::Ok();
        }
        return r.Fields(value, "monitoring.alerts", {"webhook"},
                        [&](const std::string&, const YAML::Node&, const YAML::Node& hook) {
                          auto webhook =
                              LoadWebhook(r, hook, "monitoring.alerts.webhook", "alerts");
                          if (!webhook) return webhook.status();
                          policy->monitoring.alert_webhook = std::move(*webhook);
                          return Status::Ok();
                        });
      }));
  if (!tenants) return Status::Ok();
  return r.Entries(
      tenants, "monitoring.tenants",
      [&](const std::string& tenant, const YAML::Node& key_node, const YAML::Node& value) {
        const std::string path = "monitoring.tenants." + tenant;
        if (!policy->identity.tenants.contains(tenant))
          return r.Error(key_node, path,
                         policy->identity.tenants.empty()
                             ? "names a tenant, but identity.tenants declares none"
                             : "no such tenant in identity.tenants");
        monitor::DetectorConfig merged = policy->monitoring.detectors;
        WARDEN_RETURN_IF_ERROR(LoadDetectors(r, value, path, &merged));
        policy->monitoring.tenant_detectors[tenant] = merged;
        return Status::Ok();
      });
}

}  // namespace warden::policy::internal
