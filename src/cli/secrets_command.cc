#include "cli/secrets_command.h"

#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <iterator>
#include <nlohmann/json.hpp>

#include "audit/options.h"
#include "audit/time_format.h"
#include "cli/credentials_setup.h"
#include "cli/state_exit_codes.h"
#include "policy/credential_template.h"
#include "policy/policy.h"
#include "state/admin_audit.h"

namespace warden::cli {
namespace {

using nlohmann::json;

constexpr int kExitMissing = 3;

std::string TimeOf(int64_t ms) {
  return audit::FormatTime(std::chrono::system_clock::time_point(std::chrono::milliseconds(ms)));
}

struct Target {
  std::shared_ptr<const policy::Policy> policy;
  std::string db;
};

// The policy (--config, else the embedded default, which has no credentials) and the database.
Result<Target> Load(const std::string& config, const std::string& db) {
  Target t;
  if (config.empty()) {
    return Status::Error(
        "the secret store's master key is named by a policy's credentials section: pass "
        "--config FILE (the file `warden serve --config` uses)");
  }
  auto policy = policy::LoadPolicyFile(config);
  if (!policy) return policy.status();
  t.policy = std::make_shared<const policy::Policy>(std::move(*policy));
  if (!db.empty()) {
    t.db = db;
  } else if (!t.policy->storage.postgres.empty()) {
    return Status::Error(config + ": storage.postgres is not supported yet; use --db");
  } else {
    t.db = t.policy->storage.sqlite;
  }
  return t;
}

// The scope the flags name, checked against the policy: a typo must not store a secret nobody
// will ever read.
Result<credentials::SecretScope> ScopeOf(const policy::Policy& policy, const std::string& tenant,
                                         const std::string& user, const std::string& upstream) {
  credentials::SecretScope scope{tenant, user, upstream};
  const auto& tenants = policy.identity.tenants;
  if (tenants.empty()) {
    if (!tenant.empty() || !user.empty()) {
      return Status::Error(
          "the policy declares no tenants (single-user mode): leave out --tenant "
          "and --user");
    }
  } else {
    if (tenant.empty()) {
      return Status::Error("the policy declares tenants: name the secret's with --tenant");
    }
    auto t = tenants.find(tenant);
    if (t == tenants.end())
      return Status::Error("--tenant " + tenant + ": no such tenant in the policy");
    if (!user.empty() && !t->second.users.count(user)) {
      return Status::Error("--user " + user + ": no such user in tenant " + tenant);
    }
  }
  // "sandbox": the scope sandbox__exec's egress credentials look in (docs/credentials.md).
  if (!upstream.empty() && upstream != "sandbox" && !policy.upstreams.count(upstream)) {
    return Status::Error("--upstream " + upstream +
                         ": no such upstream in the policy (or 'sandbox', for sandbox__exec)");
  }
  return scope;
}

std::string Describe(const credentials::SecretScope& s) {
  std::string out;
  if (!s.tenant.empty()) out += "tenant " + s.tenant;
  out += s.user.empty() ? (s.tenant.empty() ? "" : ", every user") : ", user " + s.user;
  if (!s.upstream.empty()) out += (out.empty() ? "" : ", ") + std::string("upstream ") + s.upstream;
  return out.empty() ? "single-user" : out;
}

// Reads the value: a line with echo off from a terminal, else all of stdin. One trailing newline
// (what `echo` and editors add) is dropped; nothing else is changed.
Result<std::string> ReadValue(std::istream& in, std::ostream& err, bool from_terminal) {
  std::string value;
  if (from_terminal) {
    termios old{};
    const bool have = tcgetattr(STDIN_FILENO, &old) == 0;
    termios quiet = old;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    if (have) tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
    err << "value (not echoed): " << std::flush;
    std::getline(in, value);
    if (have) tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
    err << "\n";
  } else {
    value.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (value.size() > credentials::SecretStore::kMaxValueBytes + 2) {
      return Status::Error("the value on stdin is over " +
                           std::to_string(credentials::SecretStore::kMaxValueBytes) + " bytes");
    }
    if (value.ends_with("\r\n")) {
      value.resize(value.size() - 2);
    } else if (value.ends_with("\n")) {
      value.pop_back();
    }
  }
  if (value.empty()) return Status::Error("the value on stdin is empty");
  return value;
}

// Records an operator's change as an admin audit entry (never a value); on failure says so on
// `err` and returns kExitUnaudited, else 0.
int Audited(std::ostream& err, const std::string& command, const std::string& db,
            const std::string& what, const std::string& tenant, const std::string& rule,
            nlohmann::json arguments) {
  state::AdminAction action;
  action.who = state::OperatorName();
  action.action = what;
  action.tenant = tenant;
  action.rule = rule;
  action.arguments = std::move(arguments);
  if (Status s = state::RecordAdminAction(db, action); !s.ok()) {
    err << "warden secrets " << command
        << ": done, but the audit entry could not be written: " << s.message() << "\n";
    return kExitUnaudited;
  }
  return 0;
}

}  // namespace

SecretsCommand::SecretsCommand(CLI::App& app, std::istream& in, std::ostream& out,
                               std::ostream& err)
    : in_(in), out_(out), err_(err) {
  sub_ = app.add_subcommand("secrets",
                            "The secret store: credentials warden injects into upstream calls");
  sub_->require_subcommand(1);
  auto common = [this](CLI::App* c) {
    c->add_option("--config", config_, "Policy file (its credentials and storage sections)");
    c->add_option("--db", db_, "The state database (default: the policy's storage.sqlite)");
  };
  auto scoped = [this](CLI::App* c) {
    c->add_option("--tenant", tenant_, "The tenant the secret belongs to");
    c->add_option("--user", user_, "The user it belongs to (absent: the whole tenant)");
    c->add_option("--upstream", upstream_, "Only this upstream's credentials may use it");
  };
  set_ = sub_->add_subcommand("set", "Set a secret; the value is read from stdin, never argv");
  set_->add_option("NAME", name_, "The secret's name")->required();
  scoped(set_);
  common(set_);
  list_ = sub_->add_subcommand("list", "Names and metadata of the secrets (never values)");
  list_->add_option("--tenant", tenant_, "Only this tenant's");
  list_->add_flag("--json", json_, "One JSON array");
  common(list_);
  rm_ = sub_->add_subcommand("rm", "Remove a secret");
  rm_->add_option("NAME", name_, "The secret's name")->required();
  scoped(rm_);
  common(rm_);
  rotate_ = sub_->add_subcommand(
      "rotate", "Re-encrypt every secret under credentials.master_key (after a key change)");
  rotate_->add_flag("--signing-key", signing_key_,
                    "Also start a new token signing key (the old one stays published until its "
                    "tokens expire)");
  common(rotate_);
  jwks_ = sub_->add_subcommand(
      "jwks", "The public keys of warden's tokens (what /.well-known/jwks.json serves)");
  common(jwks_);
}

int SecretsCommand::Execute() {
  if (set_->parsed()) return Set();
  if (list_->parsed()) return List();
  if (rm_->parsed()) return Remove();
  if (jwks_->parsed()) return Jwks();
  return Rotate();
}

int SecretsCommand::Set() {
  auto fail = [this](const Status& s) {
    err_ << "warden secrets set: " << s.message() << "\n";
    return kExitError;
  };
  if (!policy::ValidSecretName(name_)) {
    return fail(Status::Error("'" + name_ +
                              "' is not a secret name: 1 to 64 of letters, digits, '_', '.' and "
                              "'-', starting with a letter or digit"));
  }
  auto target = Load(config_, db_);
  if (!target) return fail(target.status());
  auto scope = ScopeOf(*target->policy, tenant_, user_, upstream_);
  if (!scope) return fail(scope.status());
  auto value = ReadValue(in_, err_, &in_ == &std::cin && isatty(STDIN_FILENO));
  if (!value) return fail(value.status());
  auto store = OpenSecretStore(*target->policy, target->db, true);
  if (!store) return fail(store.status());
  if (Status s = (*store)->Set(*scope, name_, *value); !s.ok()) return fail(s);
  std::fill(value->begin(), value->end(), '\0');
  out_ << "secret " << name_ << " set (" << Describe(*scope) << ")\n";
  return Audited(err_, "set", target->db, "secret_set", scope->tenant, "secret." + name_,
                 {{"name", name_}, {"user", scope->user}, {"upstream", scope->upstream}});
}

int SecretsCommand::List() {
  auto fail = [this](const Status& s) {
    err_ << "warden secrets list: " << s.message() << "\n";
    return kExitError;
  };
  auto target = Load(config_, db_);
  if (!target) return fail(target.status());
  auto store = OpenSecretStore(*target->policy, target->db, false);
  if (!store) return fail(store.status());
  auto infos = (*store)->List(tenant_.empty() ? nullptr : &tenant_);
  if (!infos) return fail(infos.status());
  if (json_) {
    json array = json::array();
    for (const credentials::SecretInfo& i : *infos) {
      array.push_back({{"name", i.name},
                       {"tenant", i.scope.tenant},
                       {"user", i.scope.user},
                       {"upstream", i.scope.upstream},
                       {"key_id", i.key_id},
                       {"bytes", i.size},
                       {"created", TimeOf(i.created_ms)},
                       {"updated", TimeOf(i.updated_ms)}});
    }
    out_ << array.dump() << "\n";
    return 0;
  }
  if (infos->empty()) {
    out_ << "no secrets\n";
    return 0;
  }
  for (const credentials::SecretInfo& i : *infos) {
    out_ << i.name << "  " << Describe(i.scope) << "  " << i.size << " bytes  key " << i.key_id
         << "  updated " << TimeOf(i.updated_ms) << "\n";
  }
  return 0;
}

int SecretsCommand::Remove() {
  auto fail = [this](const Status& s) {
    err_ << "warden secrets rm: " << s.message() << "\n";
    return kExitError;
  };
  auto target = Load(config_, db_);
  if (!target) return fail(target.status());
  auto scope = ScopeOf(*target->policy, tenant_, user_, upstream_);
  if (!scope) return fail(scope.status());
  auto store = OpenSecretStore(*target->policy, target->db, true);
  if (!store) return fail(store.status());
  auto removed = (*store)->Remove(*scope, name_);
  if (!removed) return fail(removed.status());
  if (!*removed) {
    err_ << "warden secrets rm: no secret " << name_ << " (" << Describe(*scope) << ")\n";
    return kExitMissing;
  }
  out_ << "secret " << name_ << " removed (" << Describe(*scope) << ")\n";
  return Audited(err_, "rm", target->db, "secret_rm", scope->tenant, "secret." + name_,
                 {{"name", name_}, {"user", scope->user}, {"upstream", scope->upstream}});
}

int SecretsCommand::Rotate() {
  auto fail = [this](const Status& s) {
    err_ << "warden secrets rotate: " << s.message() << "\n";
    return kExitError;
  };
  auto target = Load(config_, db_);
  if (!target) return fail(target.status());
  auto store = OpenSecretStore(*target->policy, target->db, true);
  if (!store) return fail(store.status());
  auto rewrapped = (*store)->Rewrap();
  if (!rewrapped) return fail(rewrapped.status());
  out_ << *rewrapped << " secret(s) and signing key(s) re-encrypted under master key "
       << KeyRingOf(*target->policy)->current().id << "\n";
  json details = {{"rewrapped", *rewrapped}};
  if (signing_key_) {
    auto key = credentials::SigningKey::Generate();
    if (!key) return fail(key.status());
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    if (Status s = (*store)->AddSigningKey(key->kid(), key->PrivateDer(), now); !s.ok())
      return fail(s);
    out_ << "new token signing key " << key->kid()
         << " (the previous one stays published until its tokens expire)\n";
    details["signing_key"] = key->kid();
  }
  return Audited(err_, "rotate", target->db, "secrets_rotate", "", "secret_store", details);
}

int SecretsCommand::Jwks() {
  auto fail = [this](const Status& s) {
    err_ << "warden secrets jwks: " << s.message() << "\n";
    return kExitError;
  };
  auto target = Load(config_, db_);
  if (!target) return fail(target.status());
  auto store = OpenSecretStore(*target->policy, target->db, false);
  if (!store) return fail(store.status());
  auto entries = credentials::SigningKeyEntries(**store);
  if (!entries) return fail(entries.status());
  if (entries->empty()) {
    return fail(
        Status::Error("no signing key yet: `warden serve` or `warden mcp` with this "
                      "policy makes one at its first start"));
  }
  auto minter = credentials::TokenMinter::Create(std::move(*entries), std::chrono::seconds(3600));
  if (!minter) return fail(minter.status());
  out_ << (*minter)->Jwks().dump(2) << "\n";
  return 0;
}

}  // namespace warden::cli
