// Loads the policy file: the top level, and every section but the rules (rules_loader.cc).
// Sections are read in dependency order (profiles and scopes before the identities and rules that
// name them) so that every reference is checked where it is written.
#include "policy/loader.h"

#include <algorithm>
#include <optional>
#include <set>
#include <sstream>

#include "common/read_file.h"
#include "policy/credential_template.h"
#include "policy/policy.h"
#include "policy/rule_index.h"
#include "sandbox/profile.h"

namespace warden::policy {
namespace {

using internal::IsKeyHash;
using internal::OneOf;
using internal::OwnerName;
using internal::YamlReader;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

// Upstream names and prefixes become part of tool names (PREFIX__TOOL): keep them unambiguous.
bool IsToolPrefix(const std::string& s) {
  for (char c : s) {
    if (!IsNameChar(c)) return false;
  }
  return s.find("__") == std::string::npos && !s.ends_with("_") && !s.starts_with("_");
}

// A webhook URL: http:// or https:// and a host (after any user info, before any port).
bool IsWebhookUrl(const std::string& url) {
  std::string_view rest = url;
  if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
  } else if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else {
    return false;
  }
  if (url.find_first_of(" \t\r\n") != std::string::npos) return false;
  std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  if (size_t at = authority.rfind('@'); at != std::string_view::npos)
    authority.remove_prefix(at + 1);
  return !authority.empty() && authority.front() != ':';
}

// The VAR of an "env:VAR" secret: a shell variable name.
bool IsEnvName(std::string_view name) {
  if (name.empty() || (name.front() >= '0' && name.front() <= '9')) return false;
  for (char c : name) {
    if (!IsNameChar(c) || c == '-') return false;
  }
  return true;
}

// An HTTP field name: an RFC 9110 token.
bool IsHeaderName(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!IsNameChar(c) && std::string_view("!#$%&'*+.^`|~").find(c) == std::string_view::npos)
      return false;
  }
  return true;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

class Loader {
 public:
  explicit Loader(const std::string& origin) : r_(origin) { policy_.origin = origin; }

  Result<Policy> Load(const std::string& text);

 private:
  Status Listen(const YAML::Node& node);
  Status StorageSection(const YAML::Node& node);
  Status CheckpointsEntry(const YAML::Node& node);
  Status AgentProfiles(const YAML::Node& node);
  Status SandboxSection(const YAML::Node& node);
  Status SandboxProfile(const std::string& name, const YAML::Node& key_node,
                        const YAML::Node& node);
  Status Scopes(const YAML::Node& node);
  Status IdentitySection(const YAML::Node& node);
  Status TenantSection(const std::string& name, const YAML::Node& node);
  Status AgentEntry(const std::string& tenant, const std::string& name, const YAML::Node& key_node,
                    const YAML::Node& node, Tenant* t);
  Status UserEntry(const std::string& tenant, const std::string& name, const YAML::Node& node,
                   Tenant* t);
  // Checks the key hashes in `node` and files them under `owner` in policy_.identity.keys.
  Result<std::vector<std::string>> Keys(const YAML::Node& node, const std::string& path,
                                        const KeyOwner& owner);
  Status Jwt(const YAML::Node& node);
  Status ApprovalsSection(const YAML::Node& node);
  Status ApproverEntry(const YAML::Node& node, const std::string& path, ApproverGrant* grant);
  Status ApprovalWebhookEntry(const YAML::Node& node);
  // Whether `user` is a user of some tenant.
  bool UserExists(const std::string& user) const;
  Result<std::vector<Risk>> Risks(const YAML::Node& node, const std::string& path) const;
  Status CredentialsSection(const YAML::Node& node);
  Result<KeySourceSpec> KeySource(const YAML::Node& node, const std::string& path);
  Status TokenExchangeEntry(const YAML::Node& node);
  Status CredentialMap(const YAML::Node& node, const std::string& path, bool env,
                       std::map<std::string, std::string>* out, UpstreamCredentials* creds);
  Status UpstreamCredentialsEntry(const std::string& name, const YAML::Node& node,
                                  const std::string& path, Upstream* up);
  // After every upstream is read: {token:NAME} names a declared upstream.
  Status CheckTokenTargets(const YAML::Node& node);
  Status Upstreams(const YAML::Node& node);
  Status UpstreamEntry(const std::string& name, const YAML::Node& key_node, const YAML::Node& node);
  Status Egress(const YAML::Node& node);
  Status ProfileExists(const YAML::Node& at, const std::string& path,
                       const std::string& name) const;

  YamlReader r_;
  Policy policy_;
};

Result<Policy> Loader::Load(const std::string& text) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return r_.ErrorAtLine(e.mark.line + 1, "", "invalid YAML: " + e.msg);
  }
  if (!root.IsMap()) {
    return r_.Error(root, "", "expected a mapping of sections starting with 'version: 1'");
  }

  // Every key known and none twice; sections are read afterwards, in dependency order.
  std::map<std::string, YAML::Node> sections;
  WARDEN_RETURN_IF_ERROR(
      r_.Fields(root, "",
                {"version", "listen", "storage", "identity", "upstreams", "sandbox", "tools",
                 "defaults", "agent_profiles", "scopes", "egress", "approvals", "credentials",
                 "trifecta", "monitoring"},
                [&](const std::string& key, const YAML::Node&, const YAML::Node& value) {
                  sections.emplace(key, value);
                  return Status::Ok();
                }));

  auto version = sections.find("version");
  if (version == sections.end())
    return r_.Error(root, "version", "missing: expected 'version: 1' at the top");
  if (!version->second.IsScalar() || version->second.Scalar() != "1") {
    return r_.Error(version->second, "version", "expected 1 (the only version so far)");
  }

  using SectionLoader = Status (Loader::*)(const YAML::Node&);
  const std::pair<const char*, SectionLoader> ordered[] = {
      {"listen", &Loader::Listen},
      {"storage", &Loader::StorageSection},
      {"credentials", &Loader::CredentialsSection},
      {"agent_profiles", &Loader::AgentProfiles},
      {"sandbox", &Loader::SandboxSection},
      {"scopes", &Loader::Scopes},
      {"identity", &Loader::IdentitySection},
      {"approvals", &Loader::ApprovalsSection},
      {"upstreams", &Loader::Upstreams},
      {"egress", &Loader::Egress},
  };
  for (const auto& [key, load] : ordered) {
    auto it = sections.find(key);
    if (it != sections.end()) WARDEN_RETURN_IF_ERROR((this->*load)(it->second));
  }
  if (auto it = sections.find("defaults"); it != sections.end()) {
    WARDEN_RETURN_IF_ERROR(internal::LoadDefaults(r_, it->second, &policy_));
  }
  if (auto it = sections.find("tools"); it != sections.end()) {
    WARDEN_RETURN_IF_ERROR(internal::LoadRules(r_, it->second, &policy_));
  }
  if (auto it = sections.find("trifecta"); it != sections.end()) {
    WARDEN_RETURN_IF_ERROR(internal::LoadTrifecta(r_, it->second, &policy_));
  }
  if (auto it = sections.find("monitoring"); it != sections.end()) {
    WARDEN_RETURN_IF_ERROR(internal::LoadMonitoring(r_, it->second, &policy_));
  }
  policy_.index = std::make_shared<const RuleIndex>(policy_.rules);
  return std::move(policy_);
}

Status Loader::Listen(const YAML::Node& node) {
  auto s = r_.NonEmptyString(node, "listen");
  if (!s) return s.status();
  const std::string expected =
      "expected HOST:PORT (like 127.0.0.1:8787 or [::1]:8787), got '" + *s + "'";
  size_t colon = s->rfind(':');
  if (colon == std::string::npos || colon == 0) return r_.Error(node, "listen", expected);
  std::string host = s->substr(0, colon), port = s->substr(colon + 1);
  if (host.front() == '[' ? host.back() != ']' : host.find(':') != std::string::npos) {
    return r_.Error(node, "listen", expected);
  }
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) < 1 ||
      std::stoi(port) > 65535) {
    return r_.Error(node, "listen", expected);
  }
  policy_.listen = *s;
  return Status::Ok();
}

Status Loader::StorageSection(const YAML::Node& node) {
  bool has_sqlite = false, has_postgres = false;
  Status st = r_.Fields(
      node, "storage", {"sqlite", "sync", "postgres", "checkpoints"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        if (key == "checkpoints") return CheckpointsEntry(value);
        auto s = r_.NonEmptyString(value, "storage." + key);
        if (!s) return s.status();
        if (key == "sqlite") {
          policy_.storage.sqlite = *s;
          has_sqlite = true;
        } else if (key == "postgres") {
          if (!s->starts_with("postgresql://") && !s->starts_with("postgres://")) {
            return r_.Error(value, "storage.postgres", "expected a postgresql:// URL");
          }
          policy_.storage.postgres = *s;
          has_postgres = true;
        } else if (*s == "normal" || *s == "full") {
          policy_.storage.sync_full = *s == "full";
        } else {
          return r_.Error(value, "storage.sync", "expected normal or full, got '" + *s + "'");
        }
        return Status::Ok();
      });
  WARDEN_RETURN_IF_ERROR(st);
  if (has_sqlite && has_postgres)
    return r_.Error(node, "storage", "expected either sqlite or postgres, not both");
  if (has_postgres) policy_.storage.sqlite.clear();
  return Status::Ok();
}

// storage.checkpoints: { every_entries, every, out, post, ca_file, origin, key }.
Status Loader::CheckpointsEntry(const YAML::Node& node) {
  CheckpointSchedule c;
  WARDEN_RETURN_IF_ERROR(r_.Fields(
      node, "storage.checkpoints", {"every_entries", "every", "out", "post", "ca_file", "origin", "key"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        const std::string path = "storage.checkpoints." + key;
        if (key == "every_entries") {
          auto n = r_.Count(value, path);
          if (!n) return n.status();
          if (*n < 1 || *n > 1000000000)
            return r_.Error(value, path, "expected a count from 1 to 1000000000");
          c.every_entries = *n;
          return Status::Ok();
        }
        auto text = r_.NonEmptyString(value, path);
        if (!text) return text.status();
        if (key == "every") {
          auto ms = sandbox::ParseDuration(*text);
          if (!ms) return r_.Error(value, path, ms.status().message());
          if (*ms < 1000 || *ms > 24ull * 3600 * 1000)
            return r_.Error(value, path, "expected a duration from 1s to 24h, got '" + *text + "'");
          c.every_ms = *ms;
        } else if (key == "post") {
          if (!IsWebhookUrl(*text))
            return r_.Error(value, path,
                            "expected an http:// or https:// URL with a host, got '" + *text + "'");
          c.post = *text;
        } else if (key == "origin") {
          // As audit::ValidOrigin: it names the log and the key in every checkpoint.
          if (text->size() > 128 ||
              std::any_of(text->begin(), text->end(), [](char ch) { return ch <= ' ' || ch > '~'; }))
            return r_.Error(value, path,
                            "expected 1 to 128 printable ASCII characters without spaces");
          c.origin = *text;
        } else {
          (key == "out" ? c.out : key == "ca_file" ? c.ca_file : c.key) = *text;
        }
        return Status::Ok();
      }));
  if (c.out.empty() && c.post.empty())
    return r_.Error(node, "storage.checkpoints",
                    "expected out (a file to write each checkpoint to) or post (a URL to POST it "
                    "to), or both: a checkpoint kept nowhere protects nothing");
  policy_.storage.checkpoints = std::move(c);
  return Status::Ok();
}

Status Loader::AgentProfiles(const YAML::Node& node) {
  return r_.Entries(
      node, "agent_profiles",
      [&](const std::string& name, const YAML::Node&, const YAML::Node& value) {
        const std::string path = "agent_profiles." + name;
        AgentProfile profile;
        WARDEN_RETURN_IF_ERROR(
            r_.Fields(value, path, {"never"},
                      [&](const std::string&, const YAML::Node&, const YAML::Node& v) -> Status {
                        auto labels = internal::LoadLabels(r_, v, path + ".never");
                        if (!labels) return labels.status();
                        profile.never = *labels;
                        return Status::Ok();
                      }));
        policy_.agent_profiles[name] = profile;
        return Status::Ok();
      });
}

Status Loader::SandboxSection(const YAML::Node& node) {
  std::optional<YAML::Node> pool;  // read after the profiles it names
  WARDEN_RETURN_IF_ERROR(r_.Fields(
      node, "sandbox", {"profiles", "pool"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) {
        if (key == "pool") {
          pool = value;
          return Status::Ok();
        }
        return r_.Entries(
            value, "sandbox.profiles",
            [&](const std::string& name, const YAML::Node& key_node, const YAML::Node& profile) {
              return SandboxProfile(name, key_node, profile);
            });
      }));
  if (!pool) return Status::Ok();
  policy_.sandbox.pool.set = true;
  return r_.Fields(
      *pool, "sandbox.pool", {"size", "profile"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        if (key == "size") {
          auto n = r_.Count(value, "sandbox.pool.size");
          if (!n) return n.status();
          policy_.sandbox.pool.size = static_cast<uint32_t>(*n);
          return Status::Ok();
        }
        auto name = r_.NonEmptyString(value, "sandbox.pool.profile");
        if (!name) return name.status();
        WARDEN_RETURN_IF_ERROR(ProfileExists(value, "sandbox.pool.profile", *name));
        policy_.sandbox.pool.profile = *name;
        return Status::Ok();
      });
}

// A profile is parsed by the sandbox's own profile schema (sandbox/profile.h), one key at a time,
// each re-emitted on its original line so that the sandbox's errors point into this file.
Status Loader::SandboxProfile(const std::string& name, const YAML::Node& key_node,
                              const YAML::Node& node) {
  const std::string path = "sandbox.profiles." + name;
  if (!node.IsMap() && !node.IsNull())
    return r_.Error(node, path, "expected a mapping of sandbox options");
  sandbox::Options options;
  options.protect = sandbox::DefaultProtectedPaths();
  std::set<std::string> seen;
  if (node.IsMap()) {
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) return r_.Error(kv.first, path, "expected an option name");
      if (!seen.insert(kv.first.Scalar()).second)
        return r_.Error(kv.first, path + "." + kv.first.Scalar(), "given twice");
      YAML::Emitter one;
      one << YAML::Flow << YAML::BeginMap << YAML::Key << kv.first << YAML::Value << kv.second
          << YAML::EndMap;
      int line = YamlReader::Line(kv.first);
      std::string text(line > 1 ? line - 1 : 0, '\n');
      text += one.c_str();
      Status st = sandbox::LoadProfileText(text, r_.origin(), &options);
      if (!st.ok()) {
        // "FILE:LINE: message" -> "FILE:LINE: sandbox.profiles.NAME: message"
        std::string message = st.message();
        size_t after = message.find(": ", r_.origin().size());
        if (message.starts_with(r_.origin() + ":") && after != std::string::npos) {
          message.insert(after + 2, path + ": ");
        }
        return Status::Error(message);
      }
    }
  }
  // The sandbox's own checks, as `warden run` makes them; the backend's availability is
  // checked when a sandbox starts (it depends on the build and the machine).
  sandbox::Options check = options;
  check.argv = {"/bin/true"};
  check.backend = "native";
  Status valid = sandbox::Validate(check);
  if (!valid.ok()) return r_.Error(key_node, path, valid.message());
  // In the gateway a credential's value is the calling user's stored secret (docs/egress.md).
  for (const sandbox::EgressCredentialSpec& c : options.egress_credentials) {
    const std::string cpath = path + ".credentials";
    if (c.secret.empty() || !ValidSecretName(c.secret))
      return r_.Error(key_node, cpath,
                      "credential " + c.env + " needs 'secret: NAME', the stored secret the gateway "
                      "fills it from (letters, digits, '_', '-', '.')");
    if (!policy_.credentials.set)
      return r_.Error(key_node, cpath,
                      "credential " + c.env + " names a secret, but the policy has no 'credentials' "
                      "section: add credentials: { master_key: { env: VAR } } (the secret store's key)");
  }
  policy_.sandbox.profiles[name] = std::move(options);
  return Status::Ok();
}

Status Loader::ProfileExists(const YAML::Node& at, const std::string& path,
                             const std::string& name) const {
  if (policy_.sandbox.profiles.contains(name)) return Status::Ok();
  return r_.Error(at, path,
                  "expected the name of a profile under sandbox.profiles, got '" + name + "'");
}

Status Loader::Scopes(const YAML::Node& node) {
  return r_.Entries(
      node, "scopes", [&](const std::string& name, const YAML::Node&, const YAML::Node& value) {
        const std::string path = "scopes." + name;
        Scope scope;
        WARDEN_RETURN_IF_ERROR(r_.Fields(
            value, path, {"tools", "access"},
            [&](const std::string& key, const YAML::Node&, const YAML::Node& v) -> Status {
              if (key == "tools") {
                auto globs = r_.Globs(v, path + ".tools");
                if (!globs) return globs.status();
                scope.tools = std::move(*globs);
                return Status::Ok();
              }
              auto s = r_.String(v, path + ".access");
              if (!s) return s.status();
              auto access = ParseAccess(*s);
              if (!access) {
                return r_.Error(v, path + ".access", "expected read or write, got '" + *s + "'");
              }
              scope.access = *access;
              return Status::Ok();
            }));
        policy_.scopes[name] = std::move(scope);
        return Status::Ok();
      });
}

Status Loader::IdentitySection(const YAML::Node& node) {
  return r_.Fields(
      node, "identity", {"tenants", "jwt"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        if (key == "jwt") return Jwt(value);
        return r_.Entries(value, "identity.tenants",
                          [&](const std::string& name, const YAML::Node&,
                              const YAML::Node& tenant) { return TenantSection(name, tenant); });
      });
}

Status Loader::TenantSection(const std::string& name, const YAML::Node& node) {
  const std::string path = "identity.tenants." + name;
  Tenant tenant;
  std::optional<YAML::Node> agents;
  WARDEN_RETURN_IF_ERROR(r_.Fields(
      node, path, {"users", "agents"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) {
        if (key == "agents") {  // after the users they name
          agents = value;
          return Status::Ok();
        }
        return r_.Entries(value, path + ".users",
                          [&](const std::string& user, const YAML::Node&, const YAML::Node& v) {
                            return UserEntry(name, user, v, &tenant);
                          });
      }));
  if (agents) {
    WARDEN_RETURN_IF_ERROR(
        r_.Entries(*agents, path + ".agents",
                   [&](const std::string& agent, const YAML::Node& key_node, const YAML::Node& v) {
                     return AgentEntry(name, agent, key_node, v, &tenant);
                   }));
  }
  policy_.identity.tenants[name] = std::move(tenant);
  return Status::Ok();
}

Status Loader::UserEntry(const std::string& tenant, const std::string& name, const YAML::Node& node,
                         Tenant* t) {
  const std::string path = "identity.tenants." + tenant + ".users." + name;
  User user;
  WARDEN_RETURN_IF_ERROR(
      r_.Fields(node, path, {"approver", "keys", "tools"},
                [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
                  const std::string kpath = path + "." + key;
                  if (key == "approver") {
                    auto b = r_.Bool(value, kpath);
                    if (!b) return b.status();
                    user.approver = *b;
                  } else if (key == "keys") {
                    auto keys = Keys(value, kpath, KeyOwner{tenant, "", name});
                    if (!keys) return keys.status();
                    user.keys = std::move(*keys);
                  } else {
                    auto globs = r_.Globs(value, kpath);
                    if (!globs) return globs.status();
                    user.tools = std::move(*globs);
                  }
                  return Status::Ok();
                }));
  t->users[name] = std::move(user);
  return Status::Ok();
}

Result<std::vector<std::string>> Loader::Keys(const YAML::Node& node, const std::string& path,
                                              const KeyOwner& owner) {
  auto keys = r_.NonEmptyStrings(node, path);
  if (!keys) return keys.status();
  for (size_t i = 0; i < keys->size(); ++i) {
    const std::string& k = (*keys)[i];
    const std::string ipath = path + "[" + std::to_string(i) + "]";
    if (!IsKeyHash(k)) {
      return r_.Error(node[i], ipath,
                      "expected 'sha256:' and 64 lower-case hex digits (the key's hash, never the "
                      "key)");
    }
    auto [it, inserted] = policy_.identity.keys.emplace(k, owner);
    if (!inserted) {
      return r_.Error(node[i], ipath,
                      "this key already belongs to " + OwnerName(it->second) +
                          " and cannot also belong to " + OwnerName(owner) +
                          ": a key identifies exactly one user or one agent");
    }
  }
  return keys;
}

Status Loader::AgentEntry(const std::string& tenant, const std::string& name,
                          const YAML::Node& key_node, const YAML::Node& node, Tenant* t) {
  const std::string path = "identity.tenants." + tenant + ".agents." + name;
  Agent agent;
  std::optional<YAML::Node> keys_node;
  WARDEN_RETURN_IF_ERROR(r_.Fields(
      node, path, {"user", "keys", "profile", "tools"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        const std::string kpath = path + "." + key;
        if (key == "user") {
          auto user = r_.NonEmptyString(value, kpath);
          if (!user) return user.status();
          if (!t->users.contains(*user)) {
            return r_.Error(value, kpath,
                            "expected a user of tenant '" + tenant + "', got '" + *user + "'");
          }
          agent.user = *user;
        } else if (key == "keys") {
          keys_node = value;  // filed once the agent's user is known
        } else if (key == "profile") {
          auto profile = r_.NonEmptyString(value, kpath);
          if (!profile) return profile.status();
          if (!policy_.agent_profiles.contains(*profile)) {
            return r_.Error(
                value, kpath,
                "expected the name of an entry under agent_profiles, got '" + *profile + "'");
          }
          agent.profile = *profile;
        } else {
          auto globs = r_.Globs(value, kpath);
          if (!globs) return globs.status();
          agent.tools = std::move(*globs);
        }
        return Status::Ok();
      }));
  if (agent.user.empty())
    return r_.Error(key_node, path, "missing 'user': expected the user this agent acts for");
  if (keys_node) {
    auto keys = Keys(*keys_node, path + ".keys", KeyOwner{tenant, name, agent.user});
    if (!keys) return keys.status();
    agent.keys = std::move(*keys);
  }
  t->agents[name] = std::move(agent);
  return Status::Ok();
}

Status Loader::Jwt(const YAML::Node& node) {
  JwtConfig jwt;
  WARDEN_RETURN_IF_ERROR(r_.Fields(
      node, "identity.jwt", {"issuer", "jwks_file", "audience", "claims"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        const std::string path = "identity.jwt." + key;
        if (key == "claims") {
          return r_.Fields(
              value, path, {"tenant", "user", "agent"},
              [&](const std::string& claim, const YAML::Node&, const YAML::Node& v) -> Status {
                auto s = r_.NonEmptyString(v, path + "." + claim);
                if (!s) return s.status();
                (claim == "tenant" ? jwt.tenant_claim
                 : claim == "user" ? jwt.user_claim
                                   : jwt.agent_claim) = *s;
                return Status::Ok();
              });
        }
        auto s = r_.NonEmptyString(value, path);
        if (!s) return s.status();
        if (key == "issuer") {
          jwt.issuer = *s;
        } else if (key == "audience") {
          jwt.audience = *s;
        } else {
          jwt.jwks_file = *s;
        }
        return Status::Ok();
      }));
  if (jwt.issuer.empty())
    return r_.Error(node, "identity.jwt", "missing 'issuer': expected the tokens' iss value");
  if (jwt.jwks_file.empty()) {
    return r_.Error(node, "identity.jwt",
                    "missing 'jwks_file': expected the file holding the signing keys");
  }
  policy_.identity.jwt = std::move(jwt);
  return Status::Ok();
}

bool Loader::UserExists(const std::string& user) const {
  for (const auto& [name, tenant] : policy_.identity.tenants) {
    if (tenant.users.contains(user)) return true;
  }
  return false;
}

// A list of risk names, each once.
Result<std::vector<Risk>> Loader::Risks(const YAML::Node& node, const std::string& path) const {
  auto names = r_.NonEmptyStrings(node, path);
  if (!names) return names.status();
  std::vector<Risk> risks;
  for (size_t i = 0; i < names->size(); ++i) {
    const std::string ipath = path + "[" + std::to_string(i) + "]";
    auto risk = ParseRisk((*names)[i]);
    if (!risk) {
      return r_.Error(node[i], ipath, "expected low, medium or high, got '" + (*names)[i] + "'");
    }
    if (std::find(risks.begin(), risks.end(), *risk) != risks.end())
      return r_.Error(node[i], ipath, "given twice");
    risks.push_back(*risk);
  }
  return risks;
}

// After identity: approvers must be users the policy declares.
Status Loader::ApprovalsSection(const YAML::Node& node) {
  Approvals& a = policy_.approvals;
  return r_.Fields(
      node, "approvals",
      {"timeout", "self_approve", "client_decline", "two_person", "approvers", "webhook"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        const std::string path = "approvals." + key;
        if (key == "timeout") {
          auto text = r_.NonEmptyString(value, path);
          if (!text) return text.status();
          auto ms = sandbox::ParseDuration(*text);
          if (!ms) return r_.Error(value, path, ms.status().message());
          if (*ms < 1000 || *ms > 7ull * 24 * 3600 * 1000) {
            return r_.Error(value, path,
                            "expected a duration from 1s to 168h, got '" + *text + "'");
          }
          a.timeout_ms = *ms;
        } else if (key == "self_approve") {
          auto b = r_.Bool(value, path);
          if (!b) return b.status();
          a.self_approve = *b;
        } else if (key == "client_decline") {
          auto text = r_.NonEmptyString(value, path);
          if (!text) return text.status();
          if (*text != "pending" && *text != "deny")
            return r_.Error(value, path, "expected pending or deny, got '" + *text + "'");
          a.client_decline_denies = *text == "deny";
        } else if (key == "two_person") {
          auto risks = Risks(value, path);
          if (!risks) return risks.status();
          a.two_person = std::move(*risks);
        } else if (key == "approvers") {
          if (!value.IsSequence()) {
            return r_.Error(value, path, "expected a list of {users, tools, risks} entries");
          }
          for (size_t i = 0; i < value.size(); ++i) {
            ApproverGrant grant;
            WARDEN_RETURN_IF_ERROR(
                ApproverEntry(value[i], path + "[" + std::to_string(i) + "]", &grant));
            a.approvers.push_back(std::move(grant));
          }
        } else {
          return ApprovalWebhookEntry(value);
        }
        return Status::Ok();
      });
}

Status Loader::ApproverEntry(const YAML::Node& node, const std::string& path,
                             ApproverGrant* grant) {
  if (!node.IsMap()) {
    return r_.Error(node, path, "expected a mapping {users: [...], tools: [...], risks: [...]}");
  }
  WARDEN_RETURN_IF_ERROR(r_.Fields(
      node, path, {"users", "tools", "risks"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        const std::string kpath = path + "." + key;
        if (key == "users") {
          auto users = r_.NonEmptyStrings(value, kpath);
          if (!users) return users.status();
          if (users->empty()) return r_.Error(value, kpath, "expected at least one user name");
          for (size_t i = 0; i < users->size(); ++i) {
            if (!UserExists((*users)[i])) {
              return r_.Error(value[i], kpath + "[" + std::to_string(i) + "]",
                              "expected a user under identity.tenants, got '" + (*users)[i] + "'");
            }
          }
          grant->users = std::move(*users);
        } else if (key == "tools") {
          auto globs = r_.Globs(value, kpath);
          if (!globs) return globs.status();
          grant->tools = std::move(*globs);
        } else {
          auto risks = Risks(value, kpath);
          if (!risks) return risks.status();
          grant->risks = std::move(*risks);
        }
        return Status::Ok();
      }));
  if (grant->users.empty()) {
    return r_.Error(node, path, "missing 'users': expected the users this entry lets approve");
  }
  return Status::Ok();
}

Status Loader::ApprovalWebhookEntry(const YAML::Node& node) {
  auto webhook = internal::LoadWebhook(r_, node, "approvals.webhook", "approvals");
  if (!webhook) return webhook.status();
  policy_.approvals.webhook = std::move(*webhook);
  return Status::Ok();
}

Status Loader::Upstreams(const YAML::Node& node) {
  WARDEN_RETURN_IF_ERROR(
      r_.Entries(node, "upstreams",
                 [&](const std::string& name, const YAML::Node& key_node, const YAML::Node& value) {
                   return UpstreamEntry(name, key_node, value);
                 }));
  WARDEN_RETURN_IF_ERROR(CheckTokenTargets(node));
  // Prefixes must not collide with each other or shadow the built-in tools.
  std::map<std::string, std::string> owner = {{"sandbox", "the built-in sandbox__exec"},
                                              {"web", "the built-in web__fetch"},
                                              {"task", "the built-in task__end"}};
  if (!node.IsMap()) return Status::Ok();
  for (const auto& kv : node) {
    const std::string& name = kv.first.Scalar();
    const std::string& prefix = policy_.upstreams[name].prefix;
    if (prefix.empty()) continue;
    auto [it, inserted] = owner.emplace(prefix, "upstream '" + name + "'");
    if (!inserted) {
      return r_.Error(kv.first, "upstreams." + name + ".prefix",
                      "prefix '" + prefix + "' is already used by " + it->second +
                          ": expected a prefix of its own");
    }
  }
  return Status::Ok();
}

Status Loader::UpstreamEntry(const std::string& name, const YAML::Node& key_node,
                             const YAML::Node& node) {
  const std::string path = "upstreams." + name;
  if (!IsToolPrefix(name)) {
    return r_.Error(
        key_node, path,
        "expected a name of letters, digits, '-' and single '_' (it becomes NAME__TOOL)");
  }
  if (name == "sandbox" || name == "web" || name == "task")
    return r_.Error(key_node, path, "the name '" + name + "' belongs to a built-in");
  Upstream up;
  up.prefix = name;
  std::optional<YAML::Node> sandbox_node;
  std::optional<YAML::Node> ca_node;
  std::optional<YAML::Node> creds_node;
  WARDEN_RETURN_IF_ERROR(r_.Fields(
      node, path,
      {"command", "url", "ca_file", "prefix", "sandbox", "credentials", "instances",
       "max_instances", "idle", "protocol"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        const std::string kpath = path + "." + key;
        if (key == "command") {
          auto argv = r_.NonEmptyStrings(value, kpath);
          if (!argv) return argv.status();
          if (argv->empty())
            return r_.Error(value, kpath,
                            "expected the program and its arguments, got an empty list");
          up.command = std::move(*argv);
        } else if (key == "url") {
          auto url = r_.NonEmptyString(value, kpath);
          if (!url) return url.status();
          if (!url->starts_with("http://") && !url->starts_with("https://")) {
            return r_.Error(value, kpath,
                            "expected an http:// or https:// URL, got '" + *url + "'");
          }
          up.url = *url;
        } else if (key == "ca_file") {
          auto file = r_.NonEmptyString(value, kpath);
          if (!file) return file.status();
          up.ca_file = *file;
          ca_node = value;
        } else if (key == "prefix") {
          auto prefix = r_.String(value, kpath);
          if (!prefix) return prefix.status();
          if (!prefix->empty() && !IsToolPrefix(*prefix)) {
            return r_.Error(
                value, kpath,
                "expected \"\" or letters, digits, '-' and single '_', got '" + *prefix + "'");
          }
          up.prefix = *prefix;
        } else if (key == "instances") {
          auto text = r_.NonEmptyString(value, kpath);
          if (!text) return text.status();
          if (*text == "shared")
            up.instances = Instances::kShared;
          else if (*text == "per_user")
            up.instances = Instances::kPerUser;
          else if (*text == "per_session")
            up.instances = Instances::kPerSession;
          else
            return r_.Error(value, kpath,
                            "expected shared, per_user or per_session, got '" + *text + "'");
        } else if (key == "protocol") {
          auto text = r_.NonEmptyString(value, kpath);
          if (!text) return text.status();
          if (*text != "auto" && *text != "2025-11-25" && *text != "2026-07-28")
            return r_.Error(value, kpath,
                            "expected auto, 2025-11-25 or 2026-07-28, got '" + *text + "'");
          up.protocol = *text;
        } else if (key == "max_instances") {
          auto n = r_.Count(value, kpath);
          if (!n) return n.status();
          if (*n < 1 || *n > 100000)
            return r_.Error(
                value, kpath,
                "expected a number of live instances from 1 to 100000, got " + std::to_string(*n));
          up.max_instances = static_cast<uint32_t>(*n);
        } else if (key == "idle") {
          auto text = r_.NonEmptyString(value, kpath);
          if (!text) return text.status();
          auto ms = sandbox::ParseDuration(*text);
          if (!ms) return r_.Error(value, kpath, ms.status().message());
          if (*ms > 7ull * 24 * 3600 * 1000)
            return r_.Error(value, kpath, "expected at most 168h, got '" + *text + "'");
          up.idle_ms = *ms;
        } else if (key == "sandbox") {
          sandbox_node = value;
          return r_.Fields(
              value, kpath, {"profile", "allow"},
              [&](const std::string& k, const YAML::Node&, const YAML::Node& v) -> Status {
                if (k == "allow") {
                  auto allow = r_.NonEmptyStrings(v, kpath + ".allow");
                  if (!allow) return allow.status();
                  up.sandbox_allow = std::move(*allow);
                  return Status::Ok();
                }
                auto profile = r_.NonEmptyString(v, kpath + ".profile");
                if (!profile) return profile.status();
                WARDEN_RETURN_IF_ERROR(ProfileExists(v, kpath + ".profile", *profile));
                up.sandbox_profile = *profile;
                return Status::Ok();
              });
        } else {
          creds_node = value;
          return UpstreamCredentialsEntry(name, value, kpath, &up);
        }
        return Status::Ok();
      }));
  if (up.command.empty() == up.url.empty()) {
    return r_.Error(key_node, path,
                    "expected exactly one of 'command' (stdio) or 'url' (Streamable HTTP)");
  }
  if (ca_node && !up.url.starts_with("https://")) {
    return r_.Error(*ca_node, path + ".ca_file",
                    "a CA file only applies to an https:// 'url': remove it or use https://");
  }
  if (!up.url.empty() && sandbox_node) {
    return r_.Error(*sandbox_node, path + ".sandbox",
                    "only a 'command' upstream runs in a sandbox: remove it or use 'command'");
  }
  if (creds_node) {
    const std::string cpath = path + ".credentials";
    const UpstreamCredentials& c = up.credentials;
    if (!up.url.empty() && !c.env.empty()) {
      return r_.Error(*creds_node, cpath + ".env",
                      "environment variables are for a 'command' upstream; an HTTP upstream "
                      "gets 'header'");
    }
    if (!up.command.empty() && (!c.header.empty() || !c.read.empty() || !c.write.empty())) {
      return r_.Error(*creds_node, cpath,
                      "a 'command' upstream gets its credentials as 'env' at spawn; 'header', "
                      "'read' and 'write' are for an HTTP upstream (for separate read and write "
                      "credentials, declare two upstreams)");
    }
    if ((c.uses_secrets || c.uses_tokens) && up.instances == Instances::kShared) {
      return r_.Error(*creds_node, cpath,
                      "an upstream with per-user credentials cannot be 'instances: shared' (one "
                      "connection would carry every user's credentials): use per_user or "
                      "per_session");
    }
  }
  policy_.upstreams[name] = std::move(up);
  return Status::Ok();
}

// credentials: { master_key: {env|file}, previous_keys: [...], tokens: {issuer, lifetime} }.
// The key itself is never in the policy: only where to find it.
Status Loader::CredentialsSection(const YAML::Node& node) {
  policy::CredentialsSection& c = policy_.credentials;
  c.set = true;
  bool have_key = false;
  WARDEN_RETURN_IF_ERROR(r_.Fields(
      node, "credentials", {"master_key", "previous_keys", "tokens", "token_exchange"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        const std::string path = "credentials." + key;
        if (key == "master_key") {
          auto source = KeySource(value, path);
          if (!source) return source.status();
          c.master_key = std::move(*source);
          have_key = true;
        } else if (key == "previous_keys") {
          if (!value.IsSequence()) {
            return r_.Error(value, path, "expected a list of {env: VAR} or {file: PATH}");
          }
          for (size_t i = 0; i < value.size(); ++i) {
            auto source = KeySource(value[i], path + "[" + std::to_string(i) + "]");
            if (!source) return source.status();
            c.previous_keys.push_back(std::move(*source));
          }
        } else if (key == "token_exchange") {
          return TokenExchangeEntry(value);
        } else {
          return r_.Fields(
              value, path, {"issuer", "lifetime"},
              [&](const std::string& k, const YAML::Node&, const YAML::Node& v) -> Status {
                const std::string kpath = path + "." + k;
                auto text = r_.NonEmptyString(v, kpath);
                if (!text) return text.status();
                if (k == "issuer") {
                  for (unsigned char ch : *text) {
                    if (ch < 0x20 || ch == 0x7f)
                      return r_.Error(v, kpath, "expected text without control characters");
                  }
                  c.token_issuer = *text;
                  return Status::Ok();
                }
                auto ms = sandbox::ParseDuration(*text);
                if (!ms) return r_.Error(v, kpath, ms.status().message());
                if (*ms < 10000 || *ms > 3600000) {
                  return r_.Error(v, kpath,
                                  "expected a duration from 10s to 1h (tokens are short-lived), "
                                  "got '" +
                                      *text + "'");
                }
                c.token_lifetime_ms = *ms;
                return Status::Ok();
              });
        }
        return Status::Ok();
      }));
  if (!have_key) {
    return r_.Error(node, "credentials",
                    "missing 'master_key': expected {env: VAR} or {file: PATH} naming where the "
                    "key is (never the key itself)");
  }
  return Status::Ok();
}

// credentials.token_exchange: { endpoint, client_id, client_secret: "secret:NAME", ca_file,
// subject: minted | "secret:NAME", timeout }.
Status Loader::TokenExchangeEntry(const YAML::Node& node) {
  const std::string path = "credentials.token_exchange";
  TokenExchange x;
  WARDEN_RETURN_IF_ERROR(r_.Fields(
      node, path, {"endpoint", "client_id", "client_secret", "ca_file", "subject", "timeout"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        const std::string kpath = path + "." + key;
        auto text = r_.NonEmptyString(value, kpath);
        if (!text) return text.status();
        if (key == "endpoint") {
          if (!IsWebhookUrl(*text)) {
            return r_.Error(
                value, kpath,
                "expected the token endpoint's http:// or https:// URL, got '" + *text + "'");
          }
          x.endpoint = *text;
        } else if (key == "client_id") {
          x.client_id = *text;
        } else if (key == "client_secret") {
          // Never echoed: it may be the secret itself, written here by mistake.
          if (!text->starts_with("secret:") || !ValidSecretName(text->substr(7))) {
            return r_.Error(value, kpath,
                            "expected secret:NAME (the client secret lives in the secret store, "
                            "never in the policy)");
          }
          x.client_secret = *text;
        } else if (key == "ca_file") {
          x.ca_file = *text;
        } else if (key == "subject") {
          if (*text != "minted" &&
              (!text->starts_with("secret:") || !ValidSecretName(text->substr(7)))) {
            return r_.Error(value, kpath,
                            "expected minted (a token warden signs for the user) or secret:NAME "
                            "(the user's own token in the store)");
          }
          x.subject = *text;
        } else {
          auto ms = sandbox::ParseDuration(*text);
          if (!ms) return r_.Error(value, kpath, ms.status().message());
          if (*ms < 100 || *ms > 60000)
            return r_.Error(value, kpath, "expected a duration from 100ms to 1m");
          x.timeout_ms = *ms;
        }
        return Status::Ok();
      }));
  for (const auto& [field, value] :
       {std::pair<const char*, const std::string*>{"endpoint", &x.endpoint},
        {"client_id", &x.client_id}}) {
    if (value->empty()) return r_.Error(node, path, std::string("missing '") + field + "'");
  }
  if (!x.ca_file.empty() && !x.endpoint.starts_with("https://")) {
    return r_.Error(node, path + ".ca_file", "a CA file only applies to an https:// endpoint");
  }
  policy_.credentials.token_exchange = std::move(x);
  return Status::Ok();
}

Result<KeySourceSpec> Loader::KeySource(const YAML::Node& node, const std::string& path) {
  KeySourceSpec spec;
  if (!node.IsMap() || node.size() != 1) {
    return r_.Error(node, path,
                    "expected {env: VAR} or {file: PATH}: where the key is, never the key itself");
  }
  WARDEN_RETURN_IF_ERROR(r_.Fields(
      node, path, {"env", "file"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        auto text = r_.NonEmptyString(value, path + "." + key);
        if (!text) return text.status();
        if (key == "env") {
          if (!IsEnvName(*text)) {
            return r_.Error(value, path + ".env",
                            "expected an environment variable's name (letters, digits and '_')");
          }
          spec.env = *text;
        } else {
          spec.file = *text;
        }
        return Status::Ok();
      }));
  return spec;
}

// One map of credentials: names to templates. `env`: names are environment variables; else
// header names (RFC 9110 tokens).
Status Loader::CredentialMap(const YAML::Node& node, const std::string& path, bool env,
                             std::map<std::string, std::string>* out, UpstreamCredentials* creds) {
  return r_.Entries(
      node, path,
      [&](const std::string& name, const YAML::Node& key_node, const YAML::Node& ref) -> Status {
        const std::string vpath = path + "." + name;
        if (env ? !IsEnvName(name) : !IsHeaderName(name)) {
          return r_.Error(key_node, vpath,
                          env ? "expected an environment variable's name (letters, digits, '_')"
                              : "expected a header name (letters, digits and !#$%&'*+-.^_`|~)");
        }
        if (!env && (EqualsIgnoreCase(name, "host") || EqualsIgnoreCase(name, "content-length") ||
                     EqualsIgnoreCase(name, "transfer-encoding") ||
                     EqualsIgnoreCase(name, "mcp-session-id") ||
                     EqualsIgnoreCase(name, "mcp-protocol-version"))) {
          return r_.Error(key_node, vpath, "warden sets this header itself");
        }
        auto s = r_.NonEmptyString(ref, vpath);
        if (!s) return s.status();
        // Never echoed: a literal value may be a credential written in the file by mistake.
        auto t = ParseTemplate(*s);
        if (!t) return r_.Error(ref, vpath, t.status().message());
        for (const TemplatePart& part : t->parts) {
          if (part.kind == TemplatePart::kLiteral &&
              part.text.find_first_of("\r\n") != std::string::npos) {
            return r_.Error(ref, vpath, "a line break cannot be part of a header or variable");
          }
        }
        if (env && t->uses_token()) {
          return r_.Error(ref, vpath,
                          "a token lives minutes and an environment is set once, at spawn: use "
                          "{token:...} in an HTTP upstream's header");
        }
        if (t->uses_secret() && !policy_.credentials.set) {
          return r_.Error(ref, vpath,
                          "names a secret, but the policy has no 'credentials' section: add "
                          "credentials: { master_key: { env: VAR } } (the secret store's key)");
        }
        if (t->uses_exchange() && !policy_.credentials.token_exchange) {
          return r_.Error(ref, vpath,
                          "names {exchange:...}, but the policy has no "
                          "credentials.token_exchange (the identity provider's token endpoint)");
        }
        if (t->uses_token() && !policy_.credentials.set) {
          return r_.Error(ref, vpath,
                          "names a token, but the policy has no 'credentials' section: tokens "
                          "are signed with keys kept in the secret store (add credentials: { "
                          "master_key: { env: VAR } })");
        }
        creds->uses_secrets = creds->uses_secrets || t->uses_secret();
        creds->uses_tokens = creds->uses_tokens || t->uses_token();
        (*out)[name] = *s;
        return Status::Ok();
      });
}

Status Loader::UpstreamCredentialsEntry(const std::string& name, const YAML::Node& node,
                                        const std::string& path, Upstream* up) {
  (void)name;
  UpstreamCredentials& c = up->credentials;
  return r_.Fields(
      node, path, {"env", "header", "read", "write", "audience"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        const std::string kpath = path + "." + key;
        if (key == "env") return CredentialMap(value, kpath, true, &c.env, &c);
        if (key == "header") return CredentialMap(value, kpath, false, &c.header, &c);
        if (key == "audience") {
          auto s = r_.NonEmptyString(value, kpath);
          if (!s) return s.status();
          c.audience = *s;
          return Status::Ok();
        }
        CredentialSet& set = key == "read" ? c.read : c.write;
        return r_.Fields(value, kpath, {"header"},
                         [&](const std::string&, const YAML::Node&, const YAML::Node& v) {
                           return CredentialMap(v, kpath + ".header", false, &set.header, &c);
                         });
      });
}

Status Loader::CheckTokenTargets(const YAML::Node& node) {
  if (!node.IsMap()) return Status::Ok();
  for (const auto& entry : policy_.upstreams) {
    // Named copies: a lambda may not capture structured bindings (clang before 16).
    const std::string& name = entry.first;
    const Upstream& up = entry.second;
    auto check = [&](const std::map<std::string, std::string>& m,
                     const std::string& where) -> Status {
      for (const auto& [header, text] : m) {
        auto t = ParseTemplate(text);
        if (!t) continue;  // checked when read
        for (const std::string& target : t->tokens()) {
          if (policy_.upstreams.count(target) == 0) {
            return r_.Error(node[name],
                            "upstreams." + name + ".credentials." + where + "." + header,
                            "{token:" + target + "} names no upstream of this policy");
          }
        }
      }
      return Status::Ok();
    };
    WARDEN_RETURN_IF_ERROR(check(up.credentials.header, "header"));
    WARDEN_RETURN_IF_ERROR(check(up.credentials.read.header, "read.header"));
    WARDEN_RETURN_IF_ERROR(check(up.credentials.write.header, "write.header"));
  }
  return Status::Ok();
}

// Entries are checked as non-empty strings only here; the egress library validates their form.
Status Loader::Egress(const YAML::Node& node) {
  return r_.Fields(node, "egress", {"allow"},
                   [&](const std::string&, const YAML::Node&, const YAML::Node& value) -> Status {
                     auto allow = r_.NonEmptyStrings(value, "egress.allow");
                     if (!allow) return allow.status();
                     policy_.egress_allow = std::move(*allow);
                     return Status::Ok();
                   });
}

}  // namespace

Result<Policy> LoadPolicyText(const std::string& yaml, const std::string& origin) {
  try {
    return Loader(origin).Load(yaml);
  } catch (const YAML::Exception& e) {  // yaml-cpp throws on some malformed accesses
    return Status::Error(origin + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  } catch (const std::exception& e) {  // never let a throw escape: the policy is refused
    return Status::Error(origin + ": cannot load the policy: " + e.what());
  }
}

Result<Policy> LoadPolicyFile(const std::string& path) {
  // open/read: the gateway reloads on its watcher thread, where a stream's exception would end
  // the process (common/read_file.h). A policy file is small; 16 MiB is far past any real one.
  constexpr size_t kMaxPolicyBytes = 16u << 20;
  auto text = ReadFileUpTo(path, kMaxPolicyBytes + 1);
  if (!text) return Status::FromErrno("cannot read policy file " + path, text.status().err());
  if (text->size() > kMaxPolicyBytes)
    return Status::Error("policy file " + path + " is larger than 16 MiB");
  return LoadPolicyText(*text, path);
}


namespace internal {

std::string OwnerName(const KeyOwner& owner) {
  return owner.agent.empty() ? "user '" + owner.user + "' of tenant '" + owner.tenant + "'"
                             : "agent '" + owner.agent + "' of tenant '" + owner.tenant + "'";
}

bool IsKeyHash(const std::string& s) {
  constexpr std::string_view kPrefix = "sha256:";
  if (!s.starts_with(kPrefix) || s.size() != kPrefix.size() + 64) return false;
  return s.find_first_not_of("0123456789abcdef", kPrefix.size()) == std::string::npos;
}

Result<ApprovalWebhook> LoadWebhook(const YamlReader& r, const YAML::Node& node,
                                    const std::string& where, const std::string& what) {
  ApprovalWebhook webhook;
  WARDEN_RETURN_IF_ERROR(r.Fields(
      node, where, {"url", "secret"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        const std::string path = where + "." + key;
        auto s = r.NonEmptyString(value, path);
        if (!s) return s.status();
        if (key == "url") {
          if (!IsWebhookUrl(*s)) {
            return r.Error(value, path,
                           "expected an http:// or https:// URL with a host, got '" + *s + "'");
          }
          webhook.url = *s;
        } else {
          // Never echoed: it may be the secret itself.
          if (s->starts_with("env:") && !IsEnvName(std::string_view(*s).substr(4))) {
            return r.Error(value, path,
                           "expected env:VAR with an environment variable's name (letters, "
                           "digits and '_') after 'env:'");
          }
          webhook.secret = *s;
        }
        return Status::Ok();
      }));
  if (webhook.url.empty()) {
    return r.Error(node, where,
                   "missing 'url': expected the http:// or https:// URL to POST " + what + " to");
  }
  if (webhook.secret.empty()) {
    return r.Error(node, where,
                   "missing 'secret': expected the HMAC key (env:VAR or the text itself)");
  }
  return webhook;
}

}  // namespace internal

}  // namespace warden::policy
