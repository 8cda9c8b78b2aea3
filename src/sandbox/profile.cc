#include "sandbox/profile.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <functional>
#include <sstream>

namespace warden::sandbox {
namespace {

std::string Where(const std::string& origin, const YAML::Node& node) {
  return origin + ":" + std::to_string(node.Mark().line + 1);
}

Result<std::string> Scalar(const std::string& origin, const std::string& key, const YAML::Node& node) {
  if (!node.IsScalar()) return Status::Error(Where(origin, node) + ": '" + key + "' must be a single value");
  return node.Scalar();
}

Result<std::vector<std::string>> StringList(const std::string& origin, const std::string& key,
                                            const YAML::Node& node) {
  if (!node.IsSequence()) return Status::Error(Where(origin, node) + ": '" + key + "' must be a list");
  std::vector<std::string> out;
  for (const auto& item : node) {
    if (!item.IsScalar()) return Status::Error(Where(origin, item) + ": '" + key + "' items must be strings");
    out.push_back(item.Scalar());
  }
  return out;
}

Result<std::map<std::string, std::string>> StringMap(const std::string& origin, const std::string& key,
                                                     const YAML::Node& node) {
  if (!node.IsMap()) return Status::Error(Where(origin, node) + ": '" + key + "' must be a mapping");
  std::map<std::string, std::string> out;
  for (const auto& kv : node) {
    if (!kv.second.IsScalar()) return Status::Error(Where(origin, kv.second) + ": '" + key + "." + kv.first.Scalar() + "' must be a string");
    out[kv.first.Scalar()] = kv.second.Scalar();
  }
  return out;
}

Result<uint64_t> Unsigned(const std::string& text, const std::string& key) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 9) {
    return Status::Error("'" + key + "' must be a whole number, got '" + text + "'");
  }
  return std::stoull(text);
}

using Setter = std::function<Status(const YAML::Node&, Options*)>;

// One table drives the profile schema; each entry parses one key into Options.
const std::map<std::string, Setter>& Schema(const std::string& origin) {
  static thread_local std::map<std::string, Setter> table;
  table.clear();
  auto size_key = [&origin](const char* key, uint64_t Options::*field) {
    return [key, field, origin](const YAML::Node& n, Options* o) -> Status {
      auto s = Scalar(origin, key, n);
      if (!s) return s.status();
      auto v = ParseSize(*s);
      if (!v) return v.status().Wrap(Where(origin, n) + ": " + key);
      o->*field = *v;
      return Status::Ok();
    };
  };
  auto duration_key = [&origin](const char* key, uint64_t Options::*field) {
    return [key, field, origin](const YAML::Node& n, Options* o) -> Status {
      auto s = Scalar(origin, key, n);
      if (!s) return s.status();
      auto v = ParseDuration(*s);
      if (!v) return v.status().Wrap(Where(origin, n) + ": " + key);
      o->*field = *v;
      return Status::Ok();
    };
  };
  auto count_key = [&origin](const char* key, uint32_t Options::*field) {
    return [key, field, origin](const YAML::Node& n, Options* o) -> Status {
      auto s = Scalar(origin, key, n);
      if (!s) return s.status();
      auto v = Unsigned(*s, key);
      if (!v) return v.status().Wrap(Where(origin, n));
      o->*field = static_cast<uint32_t>(*v);
      return Status::Ok();
    };
  };
  auto binds_key = [&origin](const char* key, bool writable) {
    return [key, writable, origin](const YAML::Node& n, Options* o) -> Status {
      auto l = StringList(origin, key, n);
      if (!l) return l.status();
      for (const auto& spec : *l) o->binds.push_back(ParseBindSpec(spec, writable));
      return Status::Ok();
    };
  };
  table["timeout"] = duration_key("timeout", &Options::timeout_ms);
  table["cpu"] = duration_key("cpu", &Options::cpu_ms);
  table["memory"] = size_key("memory", &Options::memory_bytes);
  table["output_limit"] = size_key("output_limit", &Options::output_limit_bytes);
  table["tmpfs_size"] = size_key("tmpfs_size", &Options::tmpfs_bytes);
  table["file_size"] = size_key("file_size", &Options::file_size_bytes);
  table["pids"] = count_key("pids", &Options::pids);
  table["open_files"] = count_key("open_files", &Options::open_files);
  table["ro"] = binds_key("ro", false);
  table["rw"] = binds_key("rw", true);
  table["protect"] = [origin](const YAML::Node& n, Options* o) -> Status {
    auto l = StringList(origin, "protect", n);
    if (!l) return l.status();
    o->protect = *l;
    return Status::Ok();
  };
  table["allow"] = [origin](const YAML::Node& n, Options* o) -> Status {
    auto l = StringList(origin, "allow", n);
    if (!l) return l.status();
    o->allow.insert(o->allow.end(), l->begin(), l->end());
    if (!o->allow.empty()) o->net = NetMode::kProxy;
    return Status::Ok();
  };
  // credentials: [{env: NAME, host: HOST, port: 80, tls: false, secret: NAME, header: Authorization,
  // template: "Bearer {}"}] (docs/egress.md)
  table["credentials"] = [origin](const YAML::Node& n, Options* o) -> Status {
    if (!n.IsSequence()) return Status::Error(Where(origin, n) + ": 'credentials' must be a list of {env, host, port, tls, secret, header, template}");
    for (const auto& item : n) {
      if (!item.IsMap()) return Status::Error(Where(origin, item) + ": 'credentials' items must be mappings {env, host, port, tls, secret, header, template}");
      EgressCredentialSpec c;
      bool port_given = false;
      for (const auto& kv : item) {
        const std::string key = kv.first.Scalar();
        auto v = Scalar(origin, "credentials." + key, kv.second);
        if (!v) return v.status();
        if (key == "env") c.env = *v;
        else if (key == "host") c.host = *v;
        else if (key == "secret") c.secret = *v;
        else if (key == "header") c.header = *v;
        else if (key == "template") c.value_template = *v;
        else if (key == "port") {
          auto p = Unsigned(*v, "credentials.port");
          if (!p || *p == 0 || *p > 65535) return Status::Error(Where(origin, kv.second) + ": 'credentials.port' must be 1 to 65535");
          c.port = static_cast<uint16_t>(*p);
          port_given = true;
        } else if (key == "tls") {
          if (*v != "true" && *v != "false") return Status::Error(Where(origin, kv.second) + ": 'credentials.tls' must be true or false");
          c.tls = *v == "true";
        } else {
          return Status::Error(Where(origin, kv.first) + ": unknown key 'credentials." + key + "' (known: env, host, port, tls, secret, header, template)");
        }
      }
      if (!ValidEnvName(c.env)) return Status::Error(Where(origin, item) + ": 'credentials' items need 'env', a variable name");
      if (c.host.empty()) return Status::Error(Where(origin, item) + ": credential " + c.env + " needs 'host'");
      if (c.tls && !port_given) c.port = 443;
      o->egress_credentials.push_back(std::move(c));
    }
    return Status::Ok();
  };
  table["env"] = [origin](const YAML::Node& n, Options* o) -> Status {
    auto m = StringMap(origin, "env", n);
    if (!m) return m.status();
    for (auto& [k, v] : *m) o->env[k] = v;
    return Status::Ok();
  };
  table["resolve"] = [origin](const YAML::Node& n, Options* o) -> Status {
    auto m = StringMap(origin, "resolve", n);
    if (!m) return m.status();
    for (auto& [k, v] : *m) o->resolve[k] = v;
    return Status::Ok();
  };
  table["workdir"] = [origin](const YAML::Node& n, Options* o) -> Status {
    auto s = Scalar(origin, "workdir", n);
    if (!s) return s.status();
    o->workdir = *s;
    return Status::Ok();
  };
  table["hostname"] = [origin](const YAML::Node& n, Options* o) -> Status {
    auto s = Scalar(origin, "hostname", n);
    if (!s) return s.status();
    o->hostname = *s;
    return Status::Ok();
  };
  table["backend"] = [origin](const YAML::Node& n, Options* o) -> Status {
    auto s = Scalar(origin, "backend", n);
    if (!s) return s.status();
    if (*s != "native" && *s != "gvisor" && *s != "microvm") {
      return Status::Error(Where(origin, n) + ": 'backend' must be native, gvisor or microvm, got '" + *s + "'");
    }
    o->backend = *s;
    return Status::Ok();
  };
  table["net"] = [origin](const YAML::Node& n, Options* o) -> Status {
    auto s = Scalar(origin, "net", n);
    if (!s) return s.status();
    if (*s == "none") o->net = NetMode::kNone;
    else if (*s == "proxy") o->net = NetMode::kProxy;
    else return Status::Error(Where(origin, n) + ": 'net' must be none or proxy, got '" + *s + "'");
    return Status::Ok();
  };
  table["accept_missing"] = [origin](const YAML::Node& n, Options* o) -> Status {
    auto l = StringList(origin, "accept_missing", n);
    if (!l) return l.status();
    for (const auto& f : *l) {
      if (f == "landlock") o->degrade.allow_no_landlock = true;
      else if (f == "cgroups") o->degrade.allow_no_cgroups = true;
      else return Status::Error(Where(origin, n) + ": 'accept_missing' items must be landlock or cgroups, got '" + f + "'");
    }
    return Status::Ok();
  };
  return table;
}

}  // namespace

const std::vector<std::string>& DefaultProtectedPaths() {
  static const std::vector<std::string> paths = {
      ".git/hooks", ".git/config", ".gitmodules", ".bashrc", ".bash_profile", ".bash_login",
      ".profile",   ".zshrc",      ".zprofile",   ".zshenv", ".envrc",        ".vscode",
      ".idea",      ".claude",     ".cursor",     ".mcp.json"};
  return paths;
}

Bind ParseBindSpec(const std::string& spec, bool writable) {
  Bind b;
  b.writable = writable;
  auto colon = spec.find(':');
  if (colon == std::string::npos) {
    b.host = spec;
  } else {
    b.host = spec.substr(0, colon);
    b.inside = NormalInsidePath(spec.substr(colon + 1));
  }
  return b;
}

Status LoadProfileText(const std::string& text, const std::string& origin, Options* options) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::Error(origin + ":" + std::to_string(e.mark.line + 1) + ": invalid YAML: " + e.msg);
  }
  if (root.IsNull()) return Status::Ok();
  if (!root.IsMap()) return Status::Error(origin + ": a profile must be a mapping of option names to values");
  Options updated = *options;
  const auto& schema = Schema(origin);
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    auto it = schema.find(key);
    if (it == schema.end()) {
      std::string known;
      for (const auto& [k, unused] : schema) known += (known.empty() ? "" : ", ") + k;
      return Status::Error(Where(origin, kv.first) + ": unknown key '" + key + "' (known: " + known + ")");
    }
    WARDEN_RETURN_IF_ERROR(it->second(kv.second, &updated));
  }
  *options = std::move(updated);
  return Status::Ok();
}

Status LoadProfile(const std::string& path, Options* options) {
  std::ifstream in(path);
  if (!in) return Status::FromErrno("--profile " + path, errno);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return LoadProfileText(buffer.str(), path, options);
}

}  // namespace warden::sandbox
