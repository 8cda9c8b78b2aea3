#include "cli/gateway_setup.h"

#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "audit/entry.h"
#include "audit/sha256.h"
#include "audit/time_format.h"
#include "cli/credentials_setup.h"
#include "common/guard.h"
#include "gateway/session/session.h"
#include "policy/default_policy.h"
#include "policy/policy.h"
#include "state/pins.h"
#ifdef WARDEN_HAVE_UPSTREAM
#include "upstream/client.h"
#endif

namespace warden::cli {

using nlohmann::json;

void GatewayFlags::AddTo(CLI::App* sub) {
  sub->add_option("--config", config,
                  "Policy file (YAML); default: the embedded safe default policy");
  sub->add_option("--audit-db", audit_db,
                  "Audit log database (SQLite); default: the policy's storage.sqlite, else "
                  "./var/warden/warden.db");
  sub->add_option("--upstream", upstreams,
                  "Front an MCP server: NAME=stdio:'COMMAND ARGS' (run in a sandbox) or "
                  "NAME=http://HOST:PORT/PATH (repeatable)")
      ->type_name("NAME=stdio:CMD|NAME=URL");
  sub->add_flag("--no-prefix", no_prefix,
                "With one --upstream: expose its tool names unchanged (no NAME__ prefix)");
  sub->add_option("--exec-pool", exec_pool,
                  "Sandboxes kept pre-warmed for sandbox__exec (default: the policy's "
                  "sandbox.pool.size, else 2; 0: every call builds its sandbox cold)");
}

Result<std::vector<std::string>> SplitCommand(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quote == '\'') {
      if (c == '\'')
        quote = 0;
      else
        word += c;
    } else if (quote == '"') {
      if (c == '"')
        quote = 0;
      else if (c == '\\' && i + 1 < text.size() && (text[i + 1] == '"' || text[i + 1] == '\\'))
        word += text[++i];
      else
        word += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < text.size()) {
      word += text[++i];
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote) return Status::Error(std::string("unclosed ") + quote + " quote in '" + text + "'");
  if (in_word) words.push_back(std::move(word));
  return words;
}

Result<UpstreamFlag> ParseUpstreamFlag(const std::string& text) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    return Status::Error("--upstream " + text +
                         ": expected NAME=stdio:'COMMAND ARGS' or NAME=http://HOST:PORT/PATH");
  UpstreamFlag flag;
  flag.name = text.substr(0, eq);
  for (char c : flag.name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'))
      return Status::Error("--upstream " + text + ": the name may hold letters, digits, _ and -");
  }
  std::string rest = text.substr(eq + 1);
  if (rest.rfind("stdio:", 0) == 0) {
    auto words = SplitCommand(rest.substr(6));
    if (!words) return words.status().Wrap("--upstream " + flag.name);
    if (words->empty()) return Status::Error("--upstream " + flag.name + ": empty command");
    flag.command = std::move(*words);
  } else if (rest.rfind("http://", 0) == 0 || rest.rfind("https://", 0) == 0) {
    flag.url = rest;
  } else {
    return Status::Error("--upstream " + text +
                         ": expected stdio:'COMMAND ARGS' or an http:// or https:// URL after '='");
  }
  return flag;
}

namespace {

std::string Quoted(const std::string& s) { return json(s).dump(); }  // JSON strings are YAML

}  // namespace

Result<std::shared_ptr<const policy::Policy>> PolicyFromFlags(const GatewayFlags& flags) {
  std::vector<UpstreamFlag> ups;
  for (const std::string& text : flags.upstreams) {
    auto flag = ParseUpstreamFlag(text);
    if (!flag) return flag.status();
    for (const auto& other : ups)
      if (other.name == flag->name)
        return Status::Error("--upstream " + flag->name + " is given twice");
    ups.push_back(std::move(*flag));
  }
  if (flags.no_prefix && ups.size() != 1)
    return Status::Error("--no-prefix needs exactly one --upstream (tool names would collide)");

  if (!flags.config.empty()) {
    auto loaded = policy::LoadPolicyFile(flags.config);
    if (!loaded) return loaded.status();
    for (const auto& up : ups) {
      if (loaded->upstreams.count(up.name))
        return Status::Error("--upstream " + up.name +
                             ": the policy file already has an upstream of that name");
      policy::Upstream u;
      u.command = up.command;
      u.url = up.url;
      u.prefix = flags.no_prefix ? "" : up.name;
      loaded->upstreams[up.name] = std::move(u);
    }
    return std::make_shared<const policy::Policy>(std::move(*loaded));
  }
  if (ups.empty()) {
    auto loaded = policy::LoadDefaultPolicy();
    if (!loaded) return loaded.status();
    return std::make_shared<const policy::Policy>(std::move(*loaded));
  }
  // Quick use: the embedded default plus the upstreams the user named on the command line, whose
  // tools (and resources, prompts...) are allowed at risk medium. Generated as YAML so that the
  // real loader checks it: names, prefixes and collisions get the same errors as in a file.
  std::string yaml = std::string(policy::DefaultPolicyText());
  std::string upstream_yaml = "upstreams:\n";
  std::string rules;
  for (const auto& up : ups) {
    upstream_yaml += "  " + up.name + ":\n";
    if (!up.command.empty()) {
      upstream_yaml += "    command: [";
      for (size_t i = 0; i < up.command.size(); ++i)
        upstream_yaml += (i ? ", " : "") + Quoted(up.command[i]);
      upstream_yaml += "]\n";
    } else {
      upstream_yaml += "    url: " + Quoted(up.url) + "\n";
    }
    if (flags.no_prefix) upstream_yaml += "    prefix: \"\"\n";
    rules +=
        "  - match: { server: " + Quoted(up.name) + " }\n    risk: medium\n    effect: allow\n";
  }
  // The default's tools: list is followed by its defaults: insert the upstream rules after it.
  auto defaults_at = yaml.find("defaults:");
  if (defaults_at == std::string::npos)
    return Status::Error("embedded default policy: no defaults section");
  yaml.insert(defaults_at, rules);
  yaml = upstream_yaml + yaml;
  auto loaded = policy::LoadPolicyText(yaml, "<embedded default policy + --upstream>");
  if (!loaded) return loaded.status();
  return std::make_shared<const policy::Policy>(std::move(*loaded));
}

namespace {

std::string JwksPathOf(const policy::Policy& policy) {
  return policy.identity.jwt ? policy.identity.jwt->jwks_file : std::string();
}

}  // namespace

void Gateway::ReportHiddenTools(const std::string& server, const std::set<std::string>& shown) {
  auto policy = holder_.Current();
  if (!policy || !policy->monitoring.detectors.tool_changed.enabled) return;
  auto listed = pins_->List(server);
  if (!listed) {
    std::fprintf(stderr, "warden: tool_changed: the pins of %s could not be read: %s\n",
                 server.c_str(), listed.status().message().c_str());
    return;
  }
  for (const state::PinnedTool& t : *listed) {
    if (shown.contains(t.upstream_name)) continue;
    if (t.status != state::PinStatus::kChanged && t.status != state::PinStatus::kNew) continue;
    const std::string fingerprint =
        audit::Sha256Hex(audit::CanonicalJson(t.definition));
    core_->alerts().OnToolChanged(policy, server, t.exposed_name, state::ToString(t.status),
                                  fingerprint, t.changed);
  }
}

Result<std::unique_ptr<Gateway>> Gateway::Start(const GatewayFlags& flags, identity::Caller caller,
                                                std::ostream& log,
                                                std::optional<identity::IdentityOptions> identity) {
  // SIGHUP asks for a policy reload: the watcher thread takes it with sigtimedwait, so no other
  // thread may receive it. Blocked before any thread starts (threads inherit the mask).
  sigset_t hup;
  sigemptyset(&hup);
  sigaddset(&hup, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &hup, nullptr);

  std::unique_ptr<Gateway> g(new Gateway(flags, log));
  g->identity_ = std::move(identity);
  auto config_stamp = g->ConfigStamp();
  auto policy = PolicyFromFlags(flags);
  if (!policy) return policy.status();
  {
    std::lock_guard lock(g->reload_mu_);
    g->jwks_path_ = JwksPathOf(**policy);
  }
  // Like the policy file's, the JWKS file's stamp is taken before it is read.
  config_stamp.second = FileStamp(JwksPathOf(**policy));
  if (g->identity_) {
    auto auth = identity::Authenticator::Create(**policy, *g->identity_);
    if (!auth) return auth.status().Wrap("identity");
    g->auth_.store(std::make_shared<const identity::Authenticator>(std::move(*auth)));
  }
  if (flags.audit_db.empty() && !flags.config.empty() && !(*policy)->storage.postgres.empty())
    return Status::Error("storage.postgres is not supported yet; use storage.sqlite or --audit-db");
  audit::AuditOptions audit_options;
  audit_options.path = !flags.audit_db.empty() ? flags.audit_db
                       : flags.config.empty()  ? audit_options.path
                                               : (*policy)->storage.sqlite;
  audit_options.sync =
      (*policy)->storage.sync_full ? audit::SyncLevel::kFull : audit::SyncLevel::kNormal;
  auto log_opened = audit::AuditLog::Open(audit_options);
  if (!log_opened) return log_opened.status().Wrap("audit log " + audit_options.path);
  g->audit_ = std::move(*log_opened);
  g->audit_path_ = audit_options.path;
  g->holder_.Set(*policy);
  // Kill switches and tool pins live in the audit log's database file, so that `warden kill` and
  // `warden tools` run in the same folder act on this gateway (docs/state.md).
  auto switches = gateway::KillSwitches::Open({.path = audit_options.path});
  if (!switches) return switches.status().Wrap("kill switches in " + audit_options.path);
  g->switches_ = std::move(*switches);
  auto pins = state::PinStore::Open({.path = audit_options.path});
  if (!pins) return pins.status().Wrap("tool pins in " + audit_options.path);
  g->pins_ = std::move(*pins);
  // Calls the policy sends to a person wait in the gate, stored in the same file, so that
  // `warden approvals` run in the same folder decides them (docs/approvals.md).
  auto approvals = gateway::ApprovalGate::Open({.path = audit_options.path}, *g->audit_);
  if (!approvals) return approvals.status().Wrap("approvals in " + audit_options.path);
  g->approvals_ = std::move(*approvals);
  g->approvals_->OnCreated([raw = g.get()](const state::ApprovalRecord& record) {
    if (auto current = raw->holder_.Current()) raw->webhook_.Created(*current, record);
  });
  // sandbox__exec's pre-warmed pool (docs/pool.md). Started here, on the main thread, before
  // any worker: it stops when this thread ends. Without it (size 0, or a profile a pool cannot
  // hold) every call builds its sandbox cold.
  g->ApplyExecPool(**policy);
  g->tools_ = gateway::BuiltinTools::Default(&g->pools_);

  // Undo plans of the calls that ran, in the same file, for `warden undo` and the API
  // (docs/approvals.md "Undo").
  auto undo = state::UndoStore::Open({.path = audit_options.path});
  if (!undo) return undo.status().Wrap("undo plans in " + audit_options.path);
  g->undo_ = std::move(*undo);

  // What each session has been exposed to (docs/trifecta.md), in the same file: a restart
  // forgets nothing a session was shown. Rows of keys idle for a week (or the policy's longer
  // window) are dropped here; a task's or a caller's are forgotten when next used past their
  // window (flow_tracker.h).
  auto flows = state::TrifectaStore::Open({.path = audit_options.path},
                                          (*policy)->storage.sync_full);
  if (!flows) return flows.status().Wrap("trifecta state in " + audit_options.path);
  g->flows_ = std::move(*flows);
  const auto keep_for = std::max<std::chrono::milliseconds>(
      {std::chrono::hours(24 * 7), std::chrono::milliseconds((*policy)->trifecta.task_window_ms),
       std::chrono::milliseconds((*policy)->trifecta.caller_window_ms)});
  if (auto purged = g->flows_->PurgeBefore(audit::FormatTime(std::chrono::system_clock::now() - keep_for));
      !purged)
    return purged.status().Wrap("trifecta state in " + audit_options.path);
  g->flow_tracker_ = std::make_unique<gateway::FlowTracker>(g->flows_.get());

  // The secret store and the token minter (docs/credentials.md): a master key that is missing
  // or wrong refuses the start, with the message saying which and what to do.
  if ((*policy)->credentials.set) {
    auto store = OpenSecretStore(**policy, audit_options.path, true);
    if (!store) return store.status();
    g->secrets_ = std::move(*store);
    auto minter = OpenTokenMinter(*g->secrets_);
    if (!minter) return minter.status().Wrap("token signing keys");
    g->minter_ = std::move(*minter);
  }
  g->broker_ = std::make_unique<gateway::CredentialBroker>(g->secrets_.get(), g->minter_.get(),
                                                           g->redactor_);
  g->broker_->Refresh();

  gateway::GatewayOptions options;
  // MCP 2026-07-28 request states are sealed under a key derived from the master key, so that
  // every gateway sharing the key opens the others' (docs/requests.md); without one, a random key.
  if ((*policy)->credentials.set) {
    auto ring = KeyRingOf(**policy);
    if (!ring) return ring.status();
    options.request_state_secret = ring->current().bytes;
  }
  options.services.approvals = g->approvals_.get();
  options.services.undo = g->undo_.get();
  options.services.trifecta = g->flow_tracker_.get();
  options.services.credentials = g->broker_.get();
  state::PinStore* pin_store = g->pins_.get();
  options.pin_review = [pin_store, raw = g.get()](
                           const std::string& server, const std::string& prefix,
                           const json& tools) -> Result<std::vector<std::string>> {
    // The store takes the prefix with its separator ("files__", or "" for none).
    auto shown = pin_store->Review(server, prefix.empty() ? "" : prefix + "__", tools);
    if (!shown) return shown.status();
    if (raw->core_ && shown->size() < tools.size()) raw->ReportHiddenTools(server, *shown);
    return std::vector<std::string>(shown->begin(), shown->end());
  };
  options.pin_generation = [pin_store]() -> int64_t {
    auto generation = pin_store->ApprovalGeneration();
    return generation ? *generation : -1;
  };
#ifdef WARDEN_HAVE_UPSTREAM
  options.make_upstream = [](upstream::Spec spec, upstream::Events events,
                             upstream::ClientOptions client_options) {
    return upstream::Client::Create(std::move(spec), std::move(events), std::move(client_options));
  };
#endif
  // The domains each tenant and agent has used (the first_domain detector), in the same file.
  auto seen = state::SeenDomainStore::Open({.path = audit_options.path});
  if (!seen) return seen.status().Wrap("seen domains in " + audit_options.path);
  g->seen_ = std::move(*seen);
  options.remember_domain = [store = g->seen_.get()](const std::string& tenant,
                                                     const std::string& agent,
                                                     const std::string& domain) {
    if (Status added = store->Add(tenant, agent, domain); !added.ok())
      std::fprintf(stderr, "warden: first_domain: %s\n", added.message().c_str());
  };
  g->core_ = std::make_unique<gateway::GatewayCore>(g->holder_, *g->audit_, *g->switches_,
                                                    g->tools_, std::move(caller), options);
  auto known = g->seen_->Recent(monitor::Detectors::kDefaultMaxKeys);
  if (!known) return known.status().Wrap("seen domains in " + audit_options.path);
  for (const state::SeenDomain& d : *known) g->core_->alerts().SeedDomain(d.tenant, d.agent, d.domain);
  // storage.checkpoints (docs/audit.md): signed by the gateway's own thread, off the call path.
  g->checkpointer_ = std::make_unique<gateway::AuditCheckpointer>(
      *g->audit_, g->holder_, gateway::AuditCheckpointer::Options{.database = audit_options.path});
  // A switch pulled here or by `warden kill` elsewhere ends the calls in flight it covers
  // (their sandboxes and upstream requests), not only the calls that come after it: the core
  // listens to the switches itself (GatewayCore::Register).
  if (!flags.config.empty())
    g->watcher_ = std::thread([raw = g.get(), config_stamp] {
      RunGuarded("policy watcher", "the policy is no longer reloaded",
                 [&] { raw->Watch(config_stamp); });
    });
  return g;
}

Gateway::~Gateway() {
  stop_ = true;
  // Calls waiting for a person end first (cancelled, recorded), while the core can still
  // finish them; then the sessions and workers go.
  if (approvals_) approvals_->StopAll("gateway stopping");
  core_.reset();
  // After the calls: a pool the watcher started stops when the watcher's thread ends.
  if (watcher_.joinable()) watcher_.join();
}

void Gateway::ApplyExecPool(const policy::Policy& policy) {
  std::string changed = pools_.Apply(gateway::PlanExecPool(&policy, flags_.exec_pool));
  if (changed.empty()) return;
  log_ << "warden: " + changed + "\n";  // one write: the pool shares this stderr
  log_.flush();
}

bool Gateway::Reload() {
  std::lock_guard lock(reload_mu_);
  auto failed = [this](const Status& why) {
    log_ << "warden: policy reload failed, the previous policy stays in force (with its keys): " +
                why.message() + "\n";
    log_.flush();
    return false;
  };
  auto loaded = PolicyFromFlags(flags_);
  if (!loaded) return failed(loaded.status());
  if (auto current = holder_.Current();
      current && !SameKeys(current->credentials, (*loaded)->credentials)) {
    // The store was opened with the keys of the start: another key needs a restart (and
    // `warden secrets rotate` to re-encrypt under it), never a silent half-switch.
    return failed(Status::Error(
        "the credentials section names other master keys (or was added or removed): restart "
        "warden to use them"));
  }
  jwks_path_ = JwksPathOf(**loaded);  // watched from now on, so that fixing it is seen
  std::shared_ptr<const identity::Authenticator> auth;
  if (identity_) {
    // Built before anything changes: if the new identity section cannot be used, neither the
    // new policy nor any of its keys is put in force (a new rule must not run with old keys,
    // and a key the new file removed must not keep working under it).
    auto built = identity::Authenticator::Create(**loaded, *identity_);
    if (!built) return failed(built.status().Wrap("identity"));
    auth = std::make_shared<const identity::Authenticator>(std::move(*built));
  }
  // Logged before the policy is in force: whoever sees the new policy sees the line too.
  log_ << "warden: policy reloaded from " + flags_.config + "\n";
  log_.flush();
  // The authenticator first: a request that meets the new keys with the old policy is decided
  // by the old rules, whose caller check still refuses anyone the old policy does not know; the
  // other order would let a removed key in under the new policy.
  if (auth) auth_.store(std::move(auth), std::memory_order_release);
  holder_.Set(*loaded);
  ApplyExecPool(**loaded);
  return true;
}

Gateway::Stamp Gateway::FileStamp(const std::string& path) {
  struct stat st {};
  if (path.empty() || stat(path.c_str(), &st) != 0) return {-1, -1};
  return {static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
          static_cast<int64_t>(st.st_size)};
}

std::pair<Gateway::Stamp, Gateway::Stamp> Gateway::ConfigStamp() {
  std::string jwks;
  {
    std::lock_guard lock(reload_mu_);
    jwks = jwks_path_;
  }
  return {FileStamp(flags_.config), FileStamp(jwks)};
}

void Gateway::Watch(std::pair<Stamp, Stamp> last) {
  // Reload on SIGHUP, and when the policy file's or its JWKS file's modification time or size
  // changes (checked about once a second: editors replace files, so the path is stat'ed, not an
  // inode watched). `last` was taken before the policy was first read: an edit made since is a
  // change. A failed reload is tried again at the next change of either file, or the next
  // SIGHUP.
  sigset_t hup;
  sigemptyset(&hup);
  sigaddset(&hup, SIGHUP);
  int ticks = 0;
  while (!stop_.load()) {
    timespec wait{0, 250 * 1000 * 1000};
    int sig = sigtimedwait(&hup, nullptr, &wait);
    if (stop_.load()) break;
    if (sig == SIGHUP) {
      last = ConfigStamp();
      Reload();
      continue;
    }
    if (++ticks % 4 != 0) continue;
    auto now = ConfigStamp();
    if (now != last && now.first.first != -1) {
      last = now;
      // Stamped before the read, so an edit during it is seen next time. A reload that names
      // another JWKS file reloads once more when the new file's stamp is first compared.
      Reload();
    }
  }
}

}  // namespace warden::cli
