// What a policy file says, after the loader has checked it (schema: docs/policy.md). Plain data:
// the loader fills it, the decision functions read it, nothing changes it afterwards.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "monitor/detectors.h"
#include "policy/arg_predicate.h"
#include "policy/glob.h"
#include "policy/json_pattern.h"
#include "sandbox/options.h"

namespace warden::policy {

enum class Effect { kAllow, kAsk, kDeny };
enum class Risk { kLow, kMedium, kHigh };
enum class Access { kRead, kWrite };

// Labels as a bit set: what a tool's result or action may carry into a session.
enum Label : uint8_t {
  kUntrustedOutput = 1 << 0,  // its result may hold text an attacker wrote
  kPrivateOutput = 1 << 1,    // its result may hold the user's private data
  kExternalSend = 1 << 2,     // it can move data out (mail, HTTP, sandbox egress)
  kSensitive = 1 << 3,        // it reaches what the operator watches: each call is an alert
                              // when monitoring.detectors.sensitive is on (no trifecta leg)
};
using LabelSet = uint8_t;

const char* EffectName(Effect effect);  // "allow", "ask", "deny"
const char* RiskName(Risk risk);        // "low", "medium", "high"
const char* AccessName(Access access);  // "read", "write"
std::optional<Effect> ParseEffect(std::string_view text);
std::optional<Risk> ParseRisk(std::string_view text);
std::optional<Access> ParseAccess(std::string_view text);
std::optional<Label> ParseLabel(std::string_view text);
// The names of the labels in `labels`, in a fixed order (untrusted, private, external_send,
// sensitive).
std::vector<std::string> LabelNames(LabelSet labels);
// The inverse: the set of the names given (unknown names are ignored).
LabelSet LabelSetOf(const std::vector<std::string>& names);

// ---- identity ----
struct User {
  bool approver = false;  // may approve calls, for this tenant only
  // "sha256:<64 hex>" hashes of the person's own API keys: a person's credential (approvals,
  // console, admin API), never an agent's. A key belongs to exactly one user or one agent.
  std::vector<std::string> keys;
  std::optional<std::vector<Glob>>
      tools;  // when set, the only tools the user (and their agents) may use
};

struct Agent {
  std::string user;                        // acts as this user: never more than the user may do
  std::vector<std::string> keys;           // "sha256:<64 hex>" hashes of API keys
  std::string profile;                     // agent_profiles entry, or empty
  std::optional<std::vector<Glob>> tools;  // narrows the user's tools further when set
};

struct Tenant {
  std::map<std::string, User, std::less<>> users;
  std::map<std::string, Agent, std::less<>> agents;
};

struct JwtConfig {
  std::string issuer;     // expected `iss`
  std::string jwks_file;  // the signing keys, as given (relative to the working directory)
  std::string audience;   // when set, `aud` must hold it; empty: `aud` is not checked
  std::string tenant_claim = "tenant";
  std::string user_claim = "sub";
  std::string agent_claim = "azp";
};

// Who a key hash belongs to: an agent (agent set, user = the agent's user) or a person (agent
// empty, user set).
struct KeyOwner {
  std::string tenant, agent, user;
};

struct Identity {
  std::map<std::string, Tenant, std::less<>>
      tenants;  // empty: single-user mode (no identity checks)
  std::optional<JwtConfig> jwt;
  std::map<std::string, KeyOwner, std::less<>>
      keys;  // "sha256:<hex>" -> its agent; built by the loader
};

// ---- upstreams ----
// What an upstream is given at call time (docs/credentials.md). Values are templates
// (credential_template.h): "secret:NAME", "{secret:NAME}", "{token:UPSTREAM}" and literal text,
// checked by the loader.
struct CredentialSet {
  std::map<std::string, std::string> env;     // variable -> template (stdio: set at spawn)
  std::map<std::string, std::string> header;  // header -> template (HTTP: sent on each request)
  bool empty() const { return env.empty() && header.empty(); }
};

struct UpstreamCredentials {
  std::map<std::string, std::string> env;     // variable -> template
  std::map<std::string, std::string> header;  // header -> template
  // HTTP only: headers for read calls and for write calls (a tool's access), on top of `header`
  // (which every request gets, listing included). A read call never gets `write`'s.
  CredentialSet read, write;
  // The `aud` of tokens minted for this upstream ({token:NAME}); "": its URL, else its name.
  std::string audience;
  bool uses_secrets = false;  // some value names a secret (set by the loader)
  bool uses_tokens = false;   // some value names a token (set by the loader)
};

// How many live connections (for stdio: processes) an upstream has, and who shares each
// (docs/gateway.md, "Upstream instances").
enum class Instances {
  kShared,      // one for everybody
  kPerUser,     // one per tenant and user (the default; what per-user credentials need)
  kPerSession,  // one per MCP session, stopped with it
};
const char* InstancesName(Instances instances);  // "shared", "per_user", "per_session"

struct Upstream {
  std::vector<std::string> command;        // stdio: argv, spawned in a sandbox
  std::string url;                         // or Streamable HTTP
  std::string ca_file;                     // https: CA certificates to trust (PEM); "": system
  std::string prefix;                      // tools appear as PREFIX__TOOL; "" for none
  std::string sandbox_profile;             // sandbox.profiles entry; empty: the gateway's default
  std::vector<std::string> sandbox_allow;  // egress allow entries for this upstream's sandbox
  UpstreamCredentials credentials;
  Instances instances = Instances::kPerUser;
  uint32_t max_instances = 64;  // live instances at once; a new one past it is refused
  uint64_t idle_ms = 300000;    // an instance no session holds stops after this
  // Which MCP revision to speak to it: "auto" (probe with server/discover; 2026-07-28 when it
  // answers as a modern server, else 2025-11-25), "2025-11-25" or "2026-07-28" (docs/upstream.md).
  std::string protocol = "auto";
};

// ---- sandbox ----
// sandbox__exec's pre-warmed pool in `warden serve` / `warden mcp` (docs/pool.md). Absent: the
// gateway's defaults (its --exec-pool size, the default profile).
struct SandboxPool {
  bool set = false;     // the policy has a sandbox.pool section
  uint32_t size = 2;    // sandboxes kept ready; 0: none
  std::string profile;  // sandbox.profiles entry; empty: the default profile
};

struct SandboxSection {
  std::map<std::string, sandbox::Options, std::less<>> profiles;
  SandboxPool pool;
};

// ---- rules ----
struct RuleMatch {
  Glob tool;                               // full exposed name (mail__send_email)
  Glob server;                             // upstream name (or built-in: sandbox, web)
  std::string tenant, user, agent, scope;  // exact names; empty matches any
  std::vector<ArgCondition> args;          // all must hold
};

struct Undo {
  std::string tool;
  nlohmann::json args;  // as written; "$result/..." references are the gateway's
};

// Where data flows through a tool (docs/trifecta.md, "Field-level labels"): parts of its result
// that are untrusted or private (when listed, only those parts carry the label), and the
// arguments of a send that say where it goes and which stored objects it hands over by id.
struct FlowSpec {
  std::vector<JsonPattern> untrusted_parts;  // untrusted_output: [POINTER, ...]
  std::vector<JsonPattern> private_parts;    // private_output: [POINTER, ...]
  std::vector<JsonPattern> destinations;     // destinations: [POINTER, ...]
  std::vector<JsonPattern> hands_over;       // hands_over: [POINTER, ...]
  bool empty() const {
    return untrusted_parts.empty() && private_parts.empty() && destinations.empty() &&
           hands_over.empty();
  }
};

struct Rule {
  RuleMatch match;
  Risk risk = Risk::kHigh;       // when not given
  std::optional<Effect> effect;  // when not given: defaults.effect_by_risk[risk]
  Access access =
      Access::kWrite;  // when not given: write (a read scope admits only declared reads)
  LabelSet labels = 0;
  FlowSpec flow;
  std::string sandbox_profile;  // sandbox.profiles entry, or empty
  std::optional<Undo> undo;
  // When set, only these users of the call's tenant may approve calls this rule sends to a
  // person (on top of approver: true and approvals.approvers).
  std::vector<std::string> approvers;

  std::string id;          // "tools[3]" (0-based position in the file)
  std::string match_text;  // the match, as one line of YAML
  std::string text;        // id + " " + match_text: what Decision::rule says
  int line = 0;            // where the rule starts in the file
};

struct UnknownToolDefault {
  Risk risk = Risk::kMedium;
  std::optional<Effect> effect;
  Access access = Access::kWrite;
  LabelSet labels = kUntrustedOutput | kExternalSend;
};

struct Defaults {
  // Indexed by Risk.
  std::array<Effect, 3> effect_by_risk = {Effect::kAllow, Effect::kAllow, Effect::kAsk};
  UnknownToolDefault unknown_tool;
};

struct AgentProfile {
  LabelSet never = 0;  // tools that may carry any of these are hidden
};

struct Scope {
  std::optional<std::vector<Glob>> tools;  // when set, only these tools
  Access access = Access::kWrite;          // read: only tools whose rule says access: read
};

// storage.checkpoints (docs/audit.md, "Checkpoints the gateway takes"): the gateway signs a
// checkpoint of the audit tree by itself, off the call path, after `every_entries` new entries or
// `every_ms` after the last one when entries came since, whichever is first; and writes it to
// `out` (replaced whole) and/or POSTs it to `post`.
struct CheckpointSchedule {
  uint64_t every_entries = 1000;
  uint64_t every_ms = 300000;
  std::string out;      // a file path ("": none)
  std::string post;     // an http:// or https:// URL ("": none)
  std::string ca_file;  // https post: the CAs to trust (PEM; "": the system's)
  std::string origin = "warden-audit";
  std::string key;  // the Ed25519 key file ("": audit-checkpoint.key beside the database)
};

struct Storage {
  std::string sqlite = "./var/warden/warden.db";
  std::string postgres;    // set instead of sqlite for a fleet
  bool sync_full = false;  // storage.sync: full
  std::optional<CheckpointSchedule> checkpoints;
};

// ---- approvals (docs/approvals.md) ----
// One entry of approvals.approvers: these users may approve calls to these tools at these risks.
// When the list has entries, an approver must be named by one that matches the call.
struct ApproverGrant {
  std::vector<std::string> users;  // user names (of the call's tenant)
  std::vector<Glob> tools;         // empty: every tool
  std::vector<Risk> risks;         // empty: every risk
};

struct ApprovalWebhook {
  std::string url;     // http:// or https://
  std::string secret;  // HMAC-SHA256 key as written: "env:VAR" names an environment variable
};

// ---- credentials (docs/credentials.md) ----
// Where a master key is: exactly one of env and file.
struct KeySourceSpec {
  std::string env, file;
};

// credentials.token_exchange (RFC 8693): the identity provider's token endpoint that turns the
// user's token (the subject) and the agent's (the actor) into one for an upstream,
// {exchange:UPSTREAM} in a template.
struct TokenExchange {
  std::string endpoint;       // http(s)://host[:port]/path
  std::string client_id;      // warden's client at the provider
  std::string client_secret;  // "secret:NAME": the store's (HTTP Basic, RFC 6749 2.3.1)
  std::string ca_file;        // https: CA certificates to trust (PEM); "": the system's
  // The subject token: "minted" (a token warden signs for the user, which the provider trusts
  // through warden's JWKS) or "secret:NAME" (the user's own token, kept in the store).
  std::string subject = "minted";
  uint64_t timeout_ms = 10000;
};

struct CredentialsSection {
  bool set = false;  // the policy has a credentials section
  KeySourceSpec master_key;
  std::vector<KeySourceSpec> previous_keys;  // still decrypt; never encrypt
  std::string token_issuer = "warden";       // credentials.tokens.issuer
  uint64_t token_lifetime_ms = 300000;       // credentials.tokens.lifetime (default 5m, max 1h)
  std::optional<TokenExchange> token_exchange;
};

struct Approvals {
  uint64_t timeout_ms = 600000;  // approvals.timeout (default 10m): then denied as expired
  std::vector<ApproverGrant> approvers;
  std::vector<Risk> two_person;  // risks whose calls need two distinct approvers
  bool self_approve = false;     // the requesting user may approve their own agent's calls
  // approvals.client_decline: what the agent's client declining the in-band question does.
  // false (`pending`, the default): nothing, a person still decides (clients such as Codex
  // decline every elicitation by themselves); true (`deny`): the call is denied.
  bool client_decline_denies = false;
  std::optional<ApprovalWebhook> webhook;
};

// ---- the lethal trifecta (docs/trifecta.md) ----
// One of trifecta.overrides: the calls it applies to (empty: any) and what it changes.
struct TrifectaOverride {
  std::string tenant, agent;
  std::optional<Glob> tool;
  std::optional<Effect> effect;  // ask or deny
  std::optional<bool> fingerprints;
  int line = 0;
};

struct TrifectaSection {
  Effect effect = Effect::kAsk;  // what a call that would complete the trifecta gets
  bool fingerprints = true;      // also look for private data in outbound arguments
  // A caller with neither an MCP session nor a task id (_meta["warden/task"]) is tracked per
  // identity; its legs are forgotten after this long without a new one.
  uint64_t caller_window_ms = 3600000;
  // A named task's legs (_meta["warden/task"]) are forgotten after this long without a new one
  // (docs/requests.md, "How a task ends"); task__end forgets them at once.
  uint64_t task_window_ms = 7ull * 24 * 3600 * 1000;
  std::vector<TrifectaOverride> overrides;  // every match applies, in file order
};

class RuleIndex;

// The `monitoring:` section (docs/monitoring.md).
struct MonitoringSection {
  // Hashes ("sha256:<64 hex>", as identity keys) of the bearer keys a scraper that is not on
  // this host presents at GET /metrics. A loopback peer needs none. Empty: /metrics answers
  // loopback peers only.
  std::vector<std::string> metrics_keys;
  // monitoring.logs (docs/monitoring.md, "Call logs"): `format: json` writes one JSON line per
  // call to stderr; its arguments and a summary of its result only when these say so, redacted
  // as the audit log redacts them.
  bool call_logs = false;
  bool log_arguments = false;
  bool log_results = false;
  // monitoring.detectors (docs/monitoring.md, "Detectors and alerts"): every tenant's settings
  // unless monitoring.tenants gives the tenant its own (those, already merged over these).
  monitor::DetectorConfig detectors;
  std::map<std::string, monitor::DetectorConfig, std::less<>> tenant_detectors;
  // monitoring.alerts.webhook: where each alert is POSTed, signed (none: not posted).
  std::optional<ApprovalWebhook> alert_webhook;

  bool DetectorsOn() const {
    if (detectors.any()) return true;
    for (const auto& [tenant, config] : tenant_detectors)
      if (config.any()) return true;
    return false;
  }
  const monitor::DetectorConfig& DetectorsFor(std::string_view tenant) const {
    auto it = tenant_detectors.find(tenant);
    return it != tenant_detectors.end() ? it->second : detectors;
  }
};

struct Policy {
  std::string origin;  // the file (or name) it was loaded from
  int version = 1;
  std::string listen = "127.0.0.1:8787";
  Storage storage;
  Identity identity;
  std::map<std::string, Upstream, std::less<>> upstreams;
  SandboxSection sandbox;
  std::vector<Rule> rules;  // in file order: the first match decides
  Defaults defaults;
  std::map<std::string, AgentProfile, std::less<>> agent_profiles;
  std::map<std::string, Scope, std::less<>> scopes;
  std::vector<std::string> egress_allow;
  Approvals approvals;
  CredentialsSection credentials;
  TrifectaSection trifecta;
  MonitoringSection monitoring;

  // Built by the loader from `rules` (reset it after editing `rules`); when null, decisions
  // scan every rule in order.
  std::shared_ptr<const RuleIndex> index;
};

// A tenant other than `tenant` that declares a user (`user` true) or an agent called `name`, or
// "" when none does. Kill switches are by name, so a switch for that name would stop that
// tenant's too: the admin API and the anomaly detectors refuse to pull it on their own.
std::string OtherTenantNaming(const Policy& policy, std::string_view tenant, bool user,
                              std::string_view name);

}  // namespace warden::policy
