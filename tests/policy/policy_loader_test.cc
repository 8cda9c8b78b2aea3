// The policy file loader: every kind of mistake is refused with FILE:LINE, where, and what was
// expected; what loads is what the file says.
#include <gtest/gtest.h>

#include <string>

#include "policy/policy.h"
#include "testing.h"

namespace warden::policy {
namespace {

const std::string kExamples = WARDEN_POLICY_EXAMPLES;

// The error loading `yaml` as "test.yaml", or "" when it loads.
std::string LoadError(const std::string& yaml) {
  auto p = LoadPolicyText(yaml, "test.yaml");
  return p.ok() ? "" : p.status().message();
}

using testing::MustLoad;

#define EXPECT_LOAD_ERROR(yaml, fragment)                                         \
  do {                                                                            \
    std::string error = LoadError(yaml);                                          \
    EXPECT_NE(error.find(fragment), std::string::npos)                            \
        << "expected an error containing: " << (fragment) << "\n got: " << error; \
  } while (0)

TEST(PolicyLoaderTest, ExamplesLoad) {
  for (const char* name : {"quickstart.yaml", "multi_tenant.yaml", "../gateway/quickstart.yaml",
                           "../gateway/multi-tenant.yaml", "../gateway/reference-servers.yaml",
                           "../gateway/approvals-local.yaml",
                           "../gateway/credentials.yaml"}) {
    auto p = LoadPolicyFile(kExamples + "/" + name);
    EXPECT_TRUE(p.ok()) << name << ": " << p.status().message();
  }
}

TEST(PolicyLoaderTest, MissingFileNamesThePath) {
  auto p = LoadPolicyFile("/nonexistent/policy.yaml");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("/nonexistent/policy.yaml"), std::string::npos);
}

TEST(PolicyLoaderTest, MinimalPolicyTakesDocumentedDefaults) {
  Policy p = MustLoad("version: 1\n");
  EXPECT_EQ(p.listen, "127.0.0.1:8787");
  EXPECT_EQ(p.storage.sqlite, "./var/warden/warden.db");
  EXPECT_FALSE(p.storage.sync_full);
  EXPECT_EQ(p.defaults.effect_by_risk[0], Effect::kAllow);
  EXPECT_EQ(p.defaults.effect_by_risk[1], Effect::kAllow);
  EXPECT_EQ(p.defaults.effect_by_risk[2], Effect::kAsk);
  EXPECT_EQ(p.defaults.unknown_tool.risk, Risk::kMedium);
  EXPECT_EQ(p.defaults.unknown_tool.labels, kUntrustedOutput | kExternalSend);
  EXPECT_TRUE(p.rules.empty());
}

TEST(PolicyLoaderTest, InvalidYamlNamesTheLine) {
  EXPECT_LOAD_ERROR("version: 1\ntools:\n  - match: { tool: \"x\"\n", "test.yaml:");
  EXPECT_LOAD_ERROR("version: 1\ntools:\n  - match: { tool: \"x\"\n", "invalid YAML");
}

TEST(PolicyLoaderTest, VersionIsRequiredAndMustBeOne) {
  EXPECT_LOAD_ERROR("listen: 127.0.0.1:1\n", "version: missing");
  EXPECT_LOAD_ERROR("version: 2\n", "test.yaml:1: version: expected 1");
  EXPECT_LOAD_ERROR("", "expected a mapping");
}

TEST(PolicyLoaderTest, UnknownTopLevelKeyIsAnErrorWithItsLine) {
  EXPECT_LOAD_ERROR("version: 1\n\ntoolz: []\n",
                    "test.yaml:3: unknown key 'toolz' (expected one of: version,");
}

TEST(PolicyLoaderTest, UnknownKeysAnywhereAreErrors) {
  EXPECT_LOAD_ERROR("version: 1\ntools:\n  - match: { tol: \"x\" }\n",
                    "test.yaml:3: tools[0].match: unknown key 'tol'");
  EXPECT_LOAD_ERROR("version: 1\ntools:\n  - match: { tool: x }\n    risc: low\n",
                    "test.yaml:4: tools[0]: unknown key 'risc'");
  EXPECT_LOAD_ERROR(
      "version: 1\nidentity:\n  tenants:\n    acme:\n      users:\n        alice: { aprover: true "
      "}\n",
      "test.yaml:6: identity.tenants.acme.users.alice: unknown key 'aprover'");
  EXPECT_LOAD_ERROR("version: 1\nupstreams:\n  mail:\n    command: [node]\n    prefx: m\n",
                    "test.yaml:5: upstreams.mail: unknown key 'prefx'");
  EXPECT_LOAD_ERROR("version: 1\ndefaults:\n  effect_by_risk: { low: allow, critical: deny }\n",
                    "test.yaml:3: defaults.effect_by_risk: unknown key 'critical'");
  EXPECT_LOAD_ERROR(
      "version: 1\ntools:\n  - match: { tool: x, args: { /to: { matches: \"a\" } } }\n",
      "tools[0].match.args./to: unknown key 'matches'");
  EXPECT_LOAD_ERROR("version: 1\nsandbox:\n  profiles:\n    p:\n      memroy: 1G\n",
                    "test.yaml:5: sandbox.profiles.p: unknown key 'memroy'");
}

TEST(PolicyLoaderTest, DeferredSectionsAreRefusedNotIgnored) {
  EXPECT_LOAD_ERROR(
      "version: 1\ntools:\n  - match: { tool: x }\n    credentials: { header: {} }\n",
      "test.yaml:4: tools[0].credentials: per-rule credentials are not supported yet (issue: ");
}

TEST(PolicyLoaderTest, MonitoringDetectorsTheirTenantsAndTheAlertWebhook) {
  Policy p = MustLoad(
      "version: 1\n"
      "identity:\n  tenants:\n    acme: { users: { alice: {} } }\n    globex: { users: { bob: {} } }\n"
      "tools:\n  - match: { tool: files__read }\n    labels: [sensitive]\n"
      "monitoring:\n"
      "  tenants:\n    acme: { denials: { threshold: 3 }, volume: off }\n"
      "  detectors:\n"
      "    volume: { window: 10m, deviations: 2.5, min_calls: 7 }\n"
      "    denials: { window: 30s, kill: agent }\n"
      "    first_domain: {}\n    sensitive: on\n    sandbox_limits:\n"
      "  alerts:\n    webhook: { url: \"https://ops.example.com/w\", secret: env:ALERT_KEY }\n");
  const monitor::DetectorConfig& d = p.monitoring.detectors;
  EXPECT_TRUE(d.volume.enabled);
  EXPECT_EQ(d.volume.window, std::chrono::minutes(10));
  EXPECT_DOUBLE_EQ(d.volume.deviations, 2.5);
  EXPECT_EQ(d.volume.min_calls, 7u);
  EXPECT_TRUE(d.denials.enabled);
  EXPECT_EQ(d.denials.window, std::chrono::seconds(30));
  EXPECT_EQ(d.denials.threshold, 10u);  // the default
  EXPECT_EQ(d.denials.kill, monitor::KillAction::kAgent);
  EXPECT_TRUE(d.first_domain.enabled && d.sensitive.enabled && d.sandbox_limits.enabled);
  EXPECT_FALSE(d.tool_changed.enabled);
  // A tenant's entry is merged over the defaults, whatever their order in the file.
  const monitor::DetectorConfig& acme = p.monitoring.DetectorsFor("acme");
  EXPECT_EQ(acme.denials.threshold, 3u);
  EXPECT_EQ(acme.denials.window, std::chrono::seconds(30));
  EXPECT_EQ(acme.denials.kill, monitor::KillAction::kAgent);
  EXPECT_FALSE(acme.volume.enabled);
  EXPECT_TRUE(acme.first_domain.enabled);
  EXPECT_TRUE(p.monitoring.DetectorsFor("globex").volume.enabled);
  ASSERT_TRUE(p.monitoring.alert_webhook.has_value());
  EXPECT_EQ(p.monitoring.alert_webhook->url, "https://ops.example.com/w");
  EXPECT_EQ(p.monitoring.alert_webhook->secret, "env:ALERT_KEY");
  ASSERT_EQ(p.rules.size(), 1u);
  EXPECT_EQ(p.rules[0].labels, kSensitive);
  EXPECT_FALSE(MustLoad("version: 1\n").monitoring.detectors.any());
}

TEST(PolicyLoaderTest, BadDetectorSettingsAreErrorsNamingThem) {
  EXPECT_LOAD_ERROR("version: 1\nmonitoring:\n  detectors: { volum: {} }\n",
                    "test.yaml:3: monitoring.detectors: unknown key 'volum'");
  EXPECT_LOAD_ERROR("version: 1\nmonitoring:\n  detectors: { denials: { window: 0s } }\n",
                    "monitoring.detectors.denials.window: expected a duration from 1s to 168h");
  EXPECT_LOAD_ERROR("version: 1\nmonitoring:\n  detectors: { volume: { window: 30s } }\n",
                    "monitoring.detectors.volume.window: expected a duration from 1m to 168h");
  EXPECT_LOAD_ERROR("version: 1\nmonitoring:\n  detectors: { volume: { deviations: -1 } }\n",
                    "monitoring.detectors.volume.deviations: expected a number");
  EXPECT_LOAD_ERROR("version: 1\nmonitoring:\n  detectors: { volume: { deviations: x } }\n",
                    "monitoring.detectors.volume.deviations: expected a number");
  EXPECT_LOAD_ERROR("version: 1\nmonitoring:\n  detectors: { denials: { threshold: 0 } }\n",
                    "monitoring.detectors.denials.threshold: expected a count from 1");
  EXPECT_LOAD_ERROR("version: 1\nmonitoring:\n  detectors: { denials: { min_calls: 3 } }\n",
                    "monitoring.detectors.denials: unknown key 'min_calls'");
  EXPECT_LOAD_ERROR("version: 1\nmonitoring:\n  detectors: { denials: { kill: everyone } }\n",
                    "monitoring.detectors.denials.kill: expected agent, user, tenant, session or "
                    "none, got 'everyone'");
  EXPECT_LOAD_ERROR("version: 1\nmonitoring:\n  detectors: { tool_changed: { kill: agent } }\n",
                    "monitoring.detectors.tool_changed.kill: tool_changed has no caller");
  EXPECT_LOAD_ERROR("version: 1\nmonitoring:\n  detectors: { sensitive: maybe }\n",
                    "monitoring.detectors.sensitive: expected on, off or a mapping");
  EXPECT_LOAD_ERROR("version: 1\nmonitoring:\n  tenants: { acme: { volume: on } }\n",
                    "monitoring.tenants.acme: names a tenant, but identity.tenants declares none");
  EXPECT_LOAD_ERROR(
      "version: 1\nidentity:\n  tenants:\n    acme: { users: { a: {} } }\nmonitoring:\n"
      "  tenants: { acm: { volume: on } }\n",
      "monitoring.tenants.acm: no such tenant in identity.tenants");
  EXPECT_LOAD_ERROR("version: 1\nmonitoring:\n  alerts: { webhook: { url: ftp://x, secret: s } }\n",
                    "monitoring.alerts.webhook.url: expected an http:// or https:// URL");
  EXPECT_LOAD_ERROR("version: 1\nmonitoring:\n  alerts: { webhook: { secret: s } }\n",
                    "monitoring.alerts.webhook: missing 'url': expected the http:// or https:// "
                    "URL to POST alerts to");
}

TEST(PolicyLoaderTest, StorageCheckpointsSayWhenAndWhere) {
  Policy p = MustLoad(
      "version: 1\nstorage:\n  checkpoints:\n    every_entries: 50\n    every: 30s\n"
      "    out: ./cp.note\n    post: https://witness.example.com/w\n    origin: acme-audit\n");
  ASSERT_TRUE(p.storage.checkpoints.has_value());
  EXPECT_EQ(p.storage.checkpoints->every_entries, 50u);
  EXPECT_EQ(p.storage.checkpoints->every_ms, 30000u);
  EXPECT_EQ(p.storage.checkpoints->out, "./cp.note");
  EXPECT_EQ(p.storage.checkpoints->post, "https://witness.example.com/w");
  EXPECT_EQ(p.storage.checkpoints->origin, "acme-audit");
  Policy d = MustLoad("version: 1\nstorage:\n  checkpoints: { out: cp.note }\n");
  EXPECT_EQ(d.storage.checkpoints->every_entries, 1000u);
  EXPECT_EQ(d.storage.checkpoints->every_ms, 300000u);
  EXPECT_EQ(d.storage.checkpoints->origin, "warden-audit");
  EXPECT_FALSE(MustLoad("version: 1\n").storage.checkpoints.has_value());
  EXPECT_LOAD_ERROR("version: 1\nstorage:\n  checkpoints: { every: 5m }\n",
                    "storage.checkpoints: expected out (a file to write each checkpoint to) or "
                    "post");
  EXPECT_LOAD_ERROR("version: 1\nstorage:\n  checkpoints: { out: x, every: 100ms }\n",
                    "storage.checkpoints.every: expected a duration from 1s to 24h");
  EXPECT_LOAD_ERROR("version: 1\nstorage:\n  checkpoints: { out: x, every_entries: 0 }\n",
                    "storage.checkpoints.every_entries: expected a count from 1");
  EXPECT_LOAD_ERROR("version: 1\nstorage:\n  checkpoints: { post: ftp://x }\n",
                    "storage.checkpoints.post: expected an http:// or https:// URL");
  EXPECT_LOAD_ERROR("version: 1\nstorage:\n  checkpoints: { out: x, origin: \"a b\" }\n",
                    "storage.checkpoints.origin: expected 1 to 128 printable ASCII");
  EXPECT_LOAD_ERROR("version: 1\nstorage:\n  checkpoints: { out: x, evry: 5m }\n",
                    "storage.checkpoints: unknown key 'evry'");
}

TEST(PolicyLoaderTest, MonitoringMetricsKeysAreHashesOfTheirOwn) {
  const std::string a = "sha256:" + std::string(64, 'a'), b = "sha256:" + std::string(64, 'b');
  Policy p = MustLoad("version: 1\nmonitoring:\n  metrics:\n    keys: [\"" + a + "\", \"" + b +
                      "\"]\n");
  EXPECT_EQ(p.monitoring.metrics_keys, (std::vector<std::string>{a, b}));
  EXPECT_TRUE(MustLoad("version: 1\n").monitoring.metrics_keys.empty());
  // The key itself, not its hash: refused (a policy file must never hold the secret).
  EXPECT_LOAD_ERROR("version: 1\nmonitoring:\n  metrics:\n    keys: [wk_secret]\n",
                    "test.yaml:4: monitoring.metrics.keys[0]: expected 'sha256:' and 64");
  EXPECT_LOAD_ERROR("version: 1\nmonitoring:\n  metrics:\n    keys: [\"" + a + "\", \"" + a +
                        "\"]\n",
                    "monitoring.metrics.keys[1]: the same key twice");
  // An agent's key must not also read the metrics (nor a metrics key make calls).
  EXPECT_LOAD_ERROR("version: 1\nidentity:\n  tenants:\n    acme:\n      users: { al: {} }\n"
                    "      agents:\n        bot: { user: al, keys: [\"" + a +
                        "\"] }\nmonitoring:\n  metrics:\n    keys: [\"" + a + "\"]\n",
                    "monitoring.metrics.keys[0]: this key already belongs to agent 'bot'");
  EXPECT_LOAD_ERROR("version: 1\nmonitoring:\n  metrics:\n    key: []\n",
                    "monitoring.metrics: unknown key 'key'");
}

TEST(PolicyLoaderTest, MonitoringLogsAreOptInAndSayWhatTheyHold) {
  Policy off = MustLoad("version: 1\n");
  EXPECT_FALSE(off.monitoring.call_logs);
  Policy on = MustLoad("version: 1\nmonitoring:\n  logs: { format: json, arguments: true }\n");
  EXPECT_TRUE(on.monitoring.call_logs);
  EXPECT_TRUE(on.monitoring.log_arguments);
  EXPECT_FALSE(on.monitoring.log_results);
  EXPECT_FALSE(MustLoad("version: 1\nmonitoring:\n  logs: { format: off, results: true }\n")
                   .monitoring.call_logs);
  EXPECT_LOAD_ERROR("version: 1\nmonitoring:\n  logs: { format: yaml }\n",
                    "monitoring.logs.format: expected json (one JSON line per call on stderr) or "
                    "off, got 'yaml'");
  EXPECT_LOAD_ERROR("version: 1\nmonitoring:\n  logs: { arguments: true }\n",
                    "monitoring.logs: missing format");
  EXPECT_LOAD_ERROR("version: 1\nmonitoring:\n  logs: { format: json, arguments: yes please }\n",
                    "monitoring.logs.arguments");
}

TEST(PolicyLoaderTest, DuplicateKeysAreErrors) {
  EXPECT_LOAD_ERROR("version: 1\nlisten: 127.0.0.1:1\nlisten: 127.0.0.1:2\n",
                    "test.yaml:3: listen: given twice");
  EXPECT_LOAD_ERROR("version: 1\nscopes:\n  a: {}\n  a: {}\n",
                    "test.yaml:4: scopes.a: given twice");
}

TEST(PolicyLoaderTest, WrongValuesSayWhatWasExpected) {
  EXPECT_LOAD_ERROR("version: 1\ntools:\n  - match: { tool: x }\n    risk: hgh\n",
                    "test.yaml:4: tools[0].risk: expected low, medium or high, got 'hgh'");
  EXPECT_LOAD_ERROR("version: 1\ntools:\n  - match: { tool: x }\n    effect: permit\n",
                    "test.yaml:4: tools[0].effect: expected allow, ask or deny, got 'permit'");
  EXPECT_LOAD_ERROR("version: 1\ntools:\n  - match: { tool: x }\n    access: rw\n",
                    "test.yaml:4: tools[0].access: expected read or write, got 'rw'");
  EXPECT_LOAD_ERROR("version: 1\ntools:\n  - risk: low\n",
                    "test.yaml:3: tools[0]: missing 'match:'");
  EXPECT_LOAD_ERROR("version: 1\ntools:\n  match: { tool: x }\n",
                    "test.yaml:3: tools: expected a list of rules");
  EXPECT_LOAD_ERROR("version: 1\ntools:\n  - match: { tool: [a, b] }\n",
                    "test.yaml:3: tools[0].match.tool: expected a single value, got a list");
  EXPECT_LOAD_ERROR("version: 1\nlisten: localhost\n", "test.yaml:2: listen: expected HOST:PORT");
  EXPECT_LOAD_ERROR("version: 1\nlisten: 127.0.0.1:99999\n",
                    "test.yaml:2: listen: expected HOST:PORT");
  EXPECT_LOAD_ERROR("version: 1\nstorage: { sync: sometimes }\n",
                    "test.yaml:2: storage.sync: expected normal or full");
  EXPECT_LOAD_ERROR("version: 1\nstorage: { sqlite: a.db, postgres: \"postgresql://db/w\" }\n",
                    "storage: expected either sqlite or postgres, not both");
  EXPECT_LOAD_ERROR("version: 1\negress:\n  allow: [\"a.example\", \"\"]\n",
                    "test.yaml:3: egress.allow[1]: expected a non-empty value");
  EXPECT_LOAD_ERROR("version: 1\nscopes:\n  s: { access: everything }\n",
                    "test.yaml:3: scopes.s.access: expected read or write");
}

TEST(PolicyLoaderTest, UnknownLabelsAreErrors) {
  EXPECT_LOAD_ERROR(
      "version: 1\ntools:\n  - match: { tool: x }\n    labels: [untrusted_output, secret]\n",
      "test.yaml:4: tools[0].labels[1]: expected untrusted_output, private_output, "
      "external_send or sensitive, got 'secret'");
  EXPECT_LOAD_ERROR("version: 1\nagent_profiles:\n  p: { never: [private] }\n",
                    "test.yaml:3: agent_profiles.p.never[0]: expected untrusted_output, "
                    "private_output, external_send or sensitive");
  EXPECT_LOAD_ERROR("version: 1\ndefaults:\n  unknown_tool: { labels: [sends] }\n",
                    "defaults.unknown_tool.labels[0]: expected untrusted_output");
}

TEST(PolicyLoaderTest, PredicateMistakesAreLoadErrors) {
  const std::string head = "version: 1\ntools:\n  - match: { tool: x, args: ";
  EXPECT_LOAD_ERROR(head + "{ /to: { regex: \"(unclosed\" } } }\n",
                    "test.yaml:3: tools[0].match.args./to.regex: invalid RE2 regex '(unclosed'");
  // Backreferences and lookaround do not exist in RE2: refused, never silently backtracking.
  EXPECT_LOAD_ERROR(head + "{ /to: { regex: \"(a)\\\\1\" } } }\n", "invalid RE2 regex");
  EXPECT_LOAD_ERROR(head + "{ to: { equals: a } } }\n",
                    "test.yaml:3: tools[0].match.args.to: expected a JSON pointer");
  EXPECT_LOAD_ERROR(head + "{ /a~2b: { exists: true } } }\n", "'~' must be followed by 0 or 1");
  EXPECT_LOAD_ERROR(head + "{ /n: { min: ten } } }\n",
                    "tools[0].match.args./n.min: expected a number, got 'ten'");
  EXPECT_LOAD_ERROR(head + "{ /n: { max: \"5\" } } }\n",
                    "tools[0].match.args./n.max: expected a number");
  EXPECT_LOAD_ERROR(head + "{ /n: { min: 5, max: 1 } } }\n", "min is greater than max");
  EXPECT_LOAD_ERROR(head + "{ /n: { in: [] } } }\n",
                    "tools[0].match.args./n.in: expected a non-empty list");
  EXPECT_LOAD_ERROR(head + "{ /n: { exists: maybe } } }\n",
                    "tools[0].match.args./n.exists: expected true or false");
  EXPECT_LOAD_ERROR(head + "{ /n: { equals: [1, 2] } } }\n",
                    "tools[0].match.args./n.equals: expected a single value");
  EXPECT_LOAD_ERROR(head + "{ /n: {} } }\n", "tools[0].match.args./n: expected at least one of");
}

const char* kIdentityHead =
    "version: 1\n"
    "agent_profiles: { coder: { never: [] } }\n"
    "scopes: { read_mail: { tools: [\"mail__read_*\"], access: read } }\n"
    "sandbox: { profiles: { default: {} } }\n"
    "identity:\n"
    "  tenants:\n"
    "    acme:\n"
    "      users: { alice: {} }\n"
    "      agents:\n";  // line 9

TEST(PolicyLoaderTest, IdentityReferencesMustExist) {
  const std::string head = kIdentityHead;
  EXPECT_LOAD_ERROR(head + "        bot: { user: mallory }\n",
                    "test.yaml:10: identity.tenants.acme.agents.bot.user: expected a user of "
                    "tenant 'acme', got 'mallory'");
  EXPECT_LOAD_ERROR(head + "        bot: { user: alice, profile: browsing }\n",
                    "test.yaml:10: identity.tenants.acme.agents.bot.profile: expected the name of "
                    "an entry under agent_profiles");
  EXPECT_LOAD_ERROR(head + "        bot: { profile: coder }\n",
                    "test.yaml:10: identity.tenants.acme.agents.bot: missing 'user'");
  EXPECT_LOAD_ERROR(head + "        bot: { user: alice, keys: [\"9f2c\"] }\n",
                    "test.yaml:10: identity.tenants.acme.agents.bot.keys[0]: expected 'sha256:' "
                    "and 64 lower-case hex digits");
  const std::string key = "\"sha256:" + std::string(64, 'a') + "\"";
  EXPECT_LOAD_ERROR(head + "        a1: { user: alice, keys: [" + key +
                        "] }\n        a2: { user: alice, keys: [" + key + "] }\n",
                    "test.yaml:11: identity.tenants.acme.agents.a2.keys[0]: this key already "
                    "belongs to agent 'a1' of tenant 'acme' and cannot also belong to agent 'a2' "
                    "of tenant 'acme'");
}

std::string KeyHash(char digit) { return "\"sha256:" + std::string(64, digit) + "\""; }

// Two tenants; alice and bob have keys of their own, bot (alice's agent) has one.
std::string PersonKeysPolicy(const std::string& extra_acme_users = "",
                             const std::string& globex_agents = "") {
  return "version: 1\n"
         "identity:\n"
         "  tenants:\n"
         "    acme:\n"
         "      users:\n"
         "        alice: { approver: true, keys: [" +
         KeyHash('a') + ", " + KeyHash('b') +
         "] }\n"  // line 6
         "        bob: { keys: [" +
         KeyHash('c') + "] }\n" + extra_acme_users +
         "      agents:\n"
         "        bot: { keys: [" +
         KeyHash('d') +
         "], user: alice }\n"
         "    globex:\n"
         "      users: { gina: {} }\n"
         "      agents:\n" +
         (globex_agents.empty() ? "        gbot: { user: gina }\n" : globex_agents);
}

TEST(PolicyLoaderTest, UserKeysIdentifyThePersonAndAgentKeysTheirUser) {
  Policy p = MustLoad(PersonKeysPolicy());
  const Tenant& acme = p.identity.tenants.at("acme");
  EXPECT_EQ(acme.users.at("alice").keys.size(), 2u);
  EXPECT_EQ(acme.users.at("bob").keys.size(), 1u);
  ASSERT_EQ(p.identity.keys.size(), 4u);
  for (char digit : {'a', 'b'}) {
    const KeyOwner& owner = p.identity.keys.at("sha256:" + std::string(64, digit));
    EXPECT_EQ(owner.tenant, "acme");
    EXPECT_EQ(owner.user, "alice");
    EXPECT_EQ(owner.agent, "") << "a user's key is a person's: no agent";
  }
  EXPECT_EQ(p.identity.keys.at("sha256:" + std::string(64, 'c')).user, "bob");
  // An agent's entry names the agent and the user it acts for, wherever `user:` is written.
  const KeyOwner& bot = p.identity.keys.at("sha256:" + std::string(64, 'd'));
  EXPECT_EQ(bot.tenant, "acme");
  EXPECT_EQ(bot.agent, "bot");
  EXPECT_EQ(bot.user, "alice");
}

TEST(PolicyLoaderTest, AKeyListedTwiceAnywhereIsAnErrorNamingBothOwners) {
  // user/user in one tenant
  EXPECT_LOAD_ERROR(PersonKeysPolicy("        carl: { keys: [" + KeyHash('a') + "] }\n"),
                    "test.yaml:8: identity.tenants.acme.users.carl.keys[0]: this key already "
                    "belongs to user 'alice' of tenant 'acme' and cannot also belong to user "
                    "'carl' of tenant 'acme'");
  // user/agent
  EXPECT_LOAD_ERROR(
      PersonKeysPolicy("", "        gbot: { user: gina, keys: [" + KeyHash('c') + "] }\n"),
      "identity.tenants.globex.agents.gbot.keys[0]: this key already belongs to "
      "user 'bob' of tenant 'acme' and cannot also belong to agent 'gbot' of tenant "
      "'globex'");
  // agent/agent across tenants
  EXPECT_LOAD_ERROR(
      PersonKeysPolicy("", "        gbot: { user: gina, keys: [" + KeyHash('d') + "] }\n"),
      "this key already belongs to agent 'bot' of tenant 'acme' and cannot also "
      "belong to agent 'gbot' of tenant 'globex'");
  // agent/user: the agent came first in the file
  EXPECT_LOAD_ERROR(
      "version: 1\nidentity:\n  tenants:\n"
      "    a:\n      users: { u: {} }\n      agents: { x: { user: u, keys: [" +
          KeyHash('e') +
          "] } }\n"
          "    b:\n      users: { v: { keys: [" +
          KeyHash('e') + "] } }\n",
      "test.yaml:8: identity.tenants.b.users.v.keys[0]: this key already belongs to "
      "agent 'x' of tenant 'a' and cannot also belong to user 'v' of tenant 'b'");
  // the same key twice in one user's list
  EXPECT_LOAD_ERROR(
      "version: 1\nidentity:\n  tenants:\n    a:\n      users:\n"
      "        u: { keys: [" +
          KeyHash('f') + ", " + KeyHash('f') + "] }\n",
      "test.yaml:6: identity.tenants.a.users.u.keys[1]: this key already belongs to "
      "user 'u' of tenant 'a'");
  // A user's key in the wrong form, or the key itself instead of its hash.
  EXPECT_LOAD_ERROR(
      "version: 1\nidentity:\n  tenants:\n    a:\n      users:\n"
      "        u: { keys: [\"wk_secret\"] }\n",
      "test.yaml:6: identity.tenants.a.users.u.keys[0]: expected 'sha256:' and 64 "
      "lower-case hex digits");
  EXPECT_LOAD_ERROR(
      "version: 1\nidentity:\n  tenants:\n    a:\n      users:\n"
      "        u: { keys: \"sha256:x\" }\n",
      "test.yaml:6: identity.tenants.a.users.u.keys: expected a list");
}

// ---- approvals ----

const char* kApprovalsHead =
    "version: 1\n"
    "identity:\n"
    "  tenants:\n"
    "    acme:\n"
    "      users: { alice: { approver: true }, bob: {} }\n"
    "    globex:\n"
    "      users: { gina: { approver: true } }\n"
    "approvals:\n";  // keys from line 9

TEST(PolicyLoaderTest, ApprovalsTakeTheDocumentedDefaults) {
  Policy p = MustLoad("version: 1\n");
  EXPECT_EQ(p.approvals.timeout_ms, 600000u) << "10m";
  EXPECT_FALSE(p.approvals.self_approve);
  EXPECT_TRUE(p.approvals.two_person.empty());
  EXPECT_TRUE(p.approvals.approvers.empty());
  EXPECT_FALSE(p.approvals.webhook.has_value());
  // An empty section is the defaults too.
  Policy empty = MustLoad(std::string(kApprovalsHead));
  EXPECT_EQ(empty.approvals.timeout_ms, 600000u);
  EXPECT_FALSE(empty.approvals.webhook.has_value());
}

TEST(PolicyLoaderTest, ApprovalsSectionSaysWhatItMeans) {
  Policy p = MustLoad(std::string(kApprovalsHead) +
                      "  timeout: 90s\n"
                      "  self_approve: true\n"
                      "  two_person: [high, medium]\n"
                      "  approvers:\n"
                      "    - users: [alice, gina]\n"
                      "      tools: [\"mail__*\", \"tracker__close\"]\n"
                      "      risks: [high]\n"
                      "    - users: [bob]\n"
                      "  webhook:\n"
                      "    url: https://hooks.example.com/warden\n"
                      "    secret: env:WARDEN_WEBHOOK_SECRET\n");
  const Approvals& a = p.approvals;
  EXPECT_EQ(a.timeout_ms, 90000u);
  EXPECT_TRUE(a.self_approve);
  EXPECT_EQ(a.two_person, (std::vector<Risk>{Risk::kHigh, Risk::kMedium}));
  ASSERT_EQ(a.approvers.size(), 2u);
  EXPECT_EQ(a.approvers[0].users, (std::vector<std::string>{"alice", "gina"}));
  ASSERT_EQ(a.approvers[0].tools.size(), 2u);
  EXPECT_EQ(a.approvers[0].tools[0].pattern(), "mail__*");
  EXPECT_TRUE(a.approvers[0].tools[0].Matches("mail__send_email"));
  EXPECT_EQ(a.approvers[0].risks, (std::vector<Risk>{Risk::kHigh}));
  EXPECT_EQ(a.approvers[1].users, (std::vector<std::string>{"bob"}));
  EXPECT_TRUE(a.approvers[1].tools.empty()) << "absent: every tool";
  EXPECT_TRUE(a.approvers[1].risks.empty()) << "absent: every risk";
  ASSERT_TRUE(a.webhook.has_value());
  EXPECT_EQ(a.webhook->url, "https://hooks.example.com/warden");
  EXPECT_EQ(a.webhook->secret, "env:WARDEN_WEBHOOK_SECRET") << "kept as written";

  // Durations as elsewhere in the file, at both ends of the range; a literal secret.
  const std::string head = kApprovalsHead;
  EXPECT_EQ(MustLoad(head + "  timeout: 1s\n").approvals.timeout_ms, 1000u);
  EXPECT_EQ(MustLoad(head + "  timeout: 168h\n").approvals.timeout_ms, 168ull * 3600 * 1000);
  EXPECT_EQ(MustLoad(head + "  timeout: 2h\n").approvals.timeout_ms, 7200000u);
  Policy literal =
      MustLoad(head + "  webhook: { url: \"http://127.0.0.1:9000/hook\", secret: s3cret }\n");
  ASSERT_TRUE(literal.approvals.webhook.has_value());
  EXPECT_EQ(literal.approvals.webhook->url, "http://127.0.0.1:9000/hook");
  EXPECT_EQ(literal.approvals.webhook->secret, "s3cret");
  EXPECT_FALSE(MustLoad(head + "  self_approve: false\n").approvals.self_approve);
  EXPECT_FALSE(MustLoad(head + "  self_approve: true\n").approvals.client_decline_denies)
      << "a client's decline leaves the call to a person unless the policy says";
  EXPECT_TRUE(MustLoad(head + "  client_decline: deny\n").approvals.client_decline_denies);
  EXPECT_FALSE(MustLoad(head + "  client_decline: pending\n").approvals.client_decline_denies);
}

TEST(PolicyLoaderTest, ApprovalsMistakesSayWhereAndWhatWasExpected) {
  const std::string head = kApprovalsHead;
  EXPECT_LOAD_ERROR(head + "  timeuot: 5m\n",
                    "test.yaml:9: approvals: unknown key 'timeuot' (expected one of: timeout, "
                    "self_approve, client_decline, two_person, approvers, webhook)");
  EXPECT_LOAD_ERROR(head + "  timeout: 5m\n  timeout: 6m\n",
                    "test.yaml:10: approvals.timeout: given twice");
  EXPECT_LOAD_ERROR("version: 1\napprovals: [timeout]\n",
                    "test.yaml:2: approvals: expected a mapping");
  // timeout
  EXPECT_LOAD_ERROR(head + "  timeout: soon\n",
                    "test.yaml:9: approvals.timeout: invalid duration 'soon'");
  EXPECT_LOAD_ERROR(head + "  timeout: 500ms\n",
                    "test.yaml:9: approvals.timeout: expected a duration from 1s to 168h, got "
                    "'500ms'");
  EXPECT_LOAD_ERROR(head + "  timeout: 0\n", "approvals.timeout: expected a duration from 1s");
  EXPECT_LOAD_ERROR(head + "  timeout: 169h\n",
                    "test.yaml:9: approvals.timeout: expected a duration from 1s to 168h, got "
                    "'169h'");
  EXPECT_LOAD_ERROR(head + "  timeout: \"\"\n",
                    "test.yaml:9: approvals.timeout: expected a non-empty value");
  // self_approve
  EXPECT_LOAD_ERROR(head + "  self_approve: yes\n",
                    "test.yaml:9: approvals.self_approve: expected true or false, got 'yes'");
  // client_decline
  EXPECT_LOAD_ERROR(head + "  client_decline: ignore\n",
                    "test.yaml:9: approvals.client_decline: expected pending or deny, got 'ignore'");
  // two_person
  EXPECT_LOAD_ERROR(head + "  two_person: high\n",
                    "test.yaml:9: approvals.two_person: expected a list");
  EXPECT_LOAD_ERROR(head + "  two_person: [high, critical]\n",
                    "test.yaml:9: approvals.two_person[1]: expected low, medium or high, got "
                    "'critical'");
  EXPECT_LOAD_ERROR(head + "  two_person: [high, high]\n",
                    "test.yaml:9: approvals.two_person[1]: given twice");
  // approvers
  EXPECT_LOAD_ERROR(head + "  approvers: { users: [alice] }\n",
                    "test.yaml:9: approvals.approvers: expected a list of {users, tools, risks}");
  EXPECT_LOAD_ERROR(head + "  approvers:\n    - alice\n",
                    "test.yaml:10: approvals.approvers[0]: expected a mapping");
  EXPECT_LOAD_ERROR(head + "  approvers:\n    - { users: [alice], tenants: [acme] }\n",
                    "test.yaml:10: approvals.approvers[0]: unknown key 'tenants' (expected one "
                    "of: users, tools, risks)");
  EXPECT_LOAD_ERROR(head + "  approvers:\n    - { tools: [\"mail__*\"] }\n",
                    "test.yaml:10: approvals.approvers[0]: missing 'users'");
  EXPECT_LOAD_ERROR(head + "  approvers:\n    - { users: [] }\n",
                    "test.yaml:10: approvals.approvers[0].users: expected at least one user name");
  EXPECT_LOAD_ERROR(head +
                        "  approvers:\n    - { users: [alice] }\n    - { users: [alice, "
                        "mallory] }\n",
                    "test.yaml:11: approvals.approvers[1].users[1]: expected a user under "
                    "identity.tenants, got 'mallory'");
  EXPECT_LOAD_ERROR(head + "  approvers:\n    - { users: [alice], risks: [severe] }\n",
                    "test.yaml:10: approvals.approvers[0].risks[0]: expected low, medium or high, "
                    "got 'severe'");
  EXPECT_LOAD_ERROR(head + "  approvers:\n    - { users: [alice], tools: \"mail__*\" }\n",
                    "test.yaml:10: approvals.approvers[0].tools: expected a list");
  // Without tenants there is nobody to name.
  EXPECT_LOAD_ERROR("version: 1\napprovals:\n  approvers:\n    - { users: [me] }\n",
                    "test.yaml:4: approvals.approvers[0].users[0]: expected a user under "
                    "identity.tenants, got 'me'");
  // webhook
  EXPECT_LOAD_ERROR(head + "  webhook: { url: \"https://h.example\" }\n",
                    "test.yaml:9: approvals.webhook: missing 'secret'");
  EXPECT_LOAD_ERROR(head + "  webhook: { secret: s }\n",
                    "test.yaml:9: approvals.webhook: missing 'url'");
  EXPECT_LOAD_ERROR(head + "  webhook: { url: \"https://h.example\", secret: \"\" }\n",
                    "test.yaml:9: approvals.webhook.secret: expected a non-empty value");
  EXPECT_LOAD_ERROR(head + "  webhook: { url: \"https://h.example\", secret: s, retries: 3 }\n",
                    "test.yaml:9: approvals.webhook: unknown key 'retries' (expected one of: url, "
                    "secret)");
  for (const char* url : {"ftp://h.example/x", "h.example/hook", "https://", "https:///path",
                          "http://:8080/x", "https://user@/x", "https://h .example/"}) {
    EXPECT_LOAD_ERROR(head + "  webhook: { url: \"" + url + "\", secret: s }\n",
                      std::string("test.yaml:9: approvals.webhook.url: expected an http:// or "
                                  "https:// URL with a host, got '") +
                          url + "'");
  }
  EXPECT_LOAD_ERROR(head + "  webhook: { url: \"https://h.example\", secret: \"env:\" }\n",
                    "test.yaml:9: approvals.webhook.secret: expected env:VAR with an environment "
                    "variable's name");
  EXPECT_LOAD_ERROR(head + "  webhook: { url: \"https://h.example\", secret: \"env:A-B\" }\n",
                    "approvals.webhook.secret: expected env:VAR");
  // A refused secret is never quoted back.
  EXPECT_EQ(LoadError(head + "  webhook: { url: \"https://h.example\", secret: \"env:9x\" }\n")
                .find("9x"),
            std::string::npos);
}

TEST(PolicyLoaderTest, RuleApproversMustBeUsersOfTheRulesTenant) {
  const std::string head = std::string(kApprovalsHead) + "tools:\n";  // rules from line 10
  Policy p = MustLoad(head +
                      "  - match: { tool: \"mail__send_*\" }\n"
                      "    approvers: [alice, gina]\n"
                      "  - approvers: [bob]\n"  // before match: checked against its tenant
                      "    match: { tool: \"tracker__*\", tenant: acme }\n"
                      "  - match: { tool: \"x\" }\n");
  ASSERT_EQ(p.rules.size(), 3u);
  EXPECT_EQ(p.rules[0].approvers, (std::vector<std::string>{"alice", "gina"}));
  EXPECT_EQ(p.rules[1].approvers, (std::vector<std::string>{"bob"}));
  EXPECT_TRUE(p.rules[2].approvers.empty());

  EXPECT_LOAD_ERROR(head + "  - match: { tool: x }\n    approvers: [alice, mallory]\n",
                    "test.yaml:11: tools[0].approvers[1]: expected a user under "
                    "identity.tenants, got 'mallory'");
  EXPECT_LOAD_ERROR(head + "  - match: { tool: x, tenant: acme }\n    approvers: [gina]\n",
                    "test.yaml:11: tools[0].approvers[0]: expected a user of tenant 'acme' (the "
                    "rule's match.tenant), got 'gina'");
  EXPECT_LOAD_ERROR(head + "  - approvers: [gina]\n    match: { tool: x, tenant: acme }\n",
                    "test.yaml:10: tools[0].approvers[0]: expected a user of tenant 'acme'");
  EXPECT_LOAD_ERROR(head + "  - match: { tool: x }\n    approvers: []\n",
                    "test.yaml:11: tools[0].approvers: expected at least one user name");
  EXPECT_LOAD_ERROR(head + "  - match: { tool: x }\n    approvers: alice\n",
                    "test.yaml:11: tools[0].approvers: expected a list");
  EXPECT_LOAD_ERROR("version: 1\ntools:\n  - match: { tool: x }\n    approvers: [me]\n",
                    "test.yaml:4: tools[0].approvers[0]: expected a user under identity.tenants");
}

TEST(PolicyLoaderTest, ExplainShowsApprovalsUserKeysAndRuleApprovers) {
  Policy p = MustLoad(PersonKeysPolicy() +
                      "approvals:\n"
                      "  timeout: 2h\n"
                      "  two_person: [high]\n"
                      "  approvers:\n"
                      "    - { users: [alice], tools: [\"mail__*\"], risks: [high] }\n"
                      "  webhook: { url: \"https://hooks.example.com/w\", secret: env:HOOK_KEY }\n"
                      "tools:\n"
                      "  - match: { tool: \"mail__send_*\" }\n"
                      "    approvers: [alice, bob]\n");
  const std::string text = Explain(p);
  EXPECT_NE(text.find("user alice (approver): tools any, 2 keys"), std::string::npos) << text;
  EXPECT_NE(text.find("user bob: tools any, 1 key"), std::string::npos) << text;
  EXPECT_NE(text.find("user gina: tools any, no keys"), std::string::npos) << text;
  EXPECT_NE(text.find("approvals: time out after 2h, self-approval not allowed, two approvers for "
                      "risk high"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("    alice: tools mail__*, risks high"), std::string::npos) << text;
  EXPECT_NE(text.find("webhook: https://hooks.example.com/w, signed with the secret in $HOOK_KEY"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(", approvers alice, bob"), std::string::npos) << text;

  // A secret written in the file is never printed.
  Policy literal =
      MustLoad(std::string(kApprovalsHead) +
               "  webhook: { url: \"https://h.example/w\", secret: hunter2hunter2 }\n");
  const std::string literal_text = Explain(literal);
  EXPECT_EQ(literal_text.find("hunter2"), std::string::npos) << literal_text;
  EXPECT_NE(literal_text.find("a secret written in the policy"), std::string::npos);
  // The defaults are shown too.
  EXPECT_NE(Explain(MustLoad("version: 1\n"))
                .find("approvals: time out after 10m, self-approval not allowed, two approvers "
                      "for no risk"),
            std::string::npos);
}

TEST(PolicyLoaderTest, RuleReferencesMustExist) {
  const std::string head =
      std::string(kIdentityHead) + "        bot: { user: alice }\ntools:\n";  // rules from line 12
  EXPECT_LOAD_ERROR(head + "  - match: { tool: x, tenant: initech }\n",
                    "test.yaml:12: tools[0].match.tenant: expected a tenant under "
                    "identity.tenants, got 'initech'");
  EXPECT_LOAD_ERROR(
      head + "  - match: { tool: x, user: bob }\n",
      "test.yaml:12: tools[0].match.user: expected a user under identity.tenants, got 'bob'");
  EXPECT_LOAD_ERROR(
      head + "  - match: { tool: x, agent: robot }\n",
      "test.yaml:12: tools[0].match.agent: expected an agent under identity.tenants, got 'robot'");
  EXPECT_LOAD_ERROR(
      head + "  - match: { tool: x, scope: write_mail }\n",
      "test.yaml:12: tools[0].match.scope: expected a scope under scopes, got 'write_mail'");
  EXPECT_LOAD_ERROR(head + "  - match: { tool: x }\n    sandbox: coder\n",
                    "test.yaml:13: tools[0].sandbox: expected the name of a profile under "
                    "sandbox.profiles, got 'coder'");
  EXPECT_LOAD_ERROR(head + "  - match: { tool: x }\n    undo: { args: { id: 1 } }\n",
                    "tools[0].undo: missing 'tool'");
  EXPECT_EQ(
      LoadError(
          head +
          "  - match: { tool: x, tenant: acme, user: alice, agent: bot, scope: read_mail }\n"),
      "");
}

// JSON values (undo args) must be UTF-8: yaml-cpp passes any bytes, and a value that is not UTF-8
// made Explain (warden policy check) throw from json::dump. Found by policy_fuzz.
TEST(PolicyLoaderTest, UndoArgsMustBeUtf8) {
  const std::string head = "version: 1\ntools:\n  - match: { tool: a__b }\n";
  EXPECT_LOAD_ERROR(head + "    undo: { tool: a__c, args: { id: \"x\xffy\" } }\n",
                    "test.yaml:4: tools[0].undo.args.id: not valid UTF-8");
  EXPECT_LOAD_ERROR(head + "    undo: { tool: a__c, args: { \"k\xc0\xaf\": 1 } }\n",
                    "tools[0].undo.args: a key name is not valid UTF-8");
  EXPECT_LOAD_ERROR(head + "    undo: { tool: a__c, args: { id: [ \"\xed\xa0\x80\" ] } }\n",
                    "tools[0].undo.args.id[0]: not valid UTF-8");
  auto policy = LoadPolicyText(
      head + "    undo: { tool: a__c, args: { id: \"h\u00e9 \xf0\x9f\x99\x82\" } }\n", "test.yaml");
  ASSERT_TRUE(policy.ok()) << policy.status().message();
  EXPECT_NE(Explain(*policy).find("undo a__c"), std::string::npos);
}

TEST(PolicyLoaderTest, UpstreamMistakes) {
  EXPECT_LOAD_ERROR(
      "version: 1\nupstreams:\n  mail: { prefix: m }\n",
      "test.yaml:3: upstreams.mail: expected exactly one of 'command' (stdio) or 'url'");
  EXPECT_LOAD_ERROR("version: 1\nupstreams:\n  mail: { command: [node], url: \"https://x\" }\n",
                    "expected exactly one of 'command'");
  EXPECT_LOAD_ERROR("version: 1\nupstreams:\n  t: { url: \"ftp://x\" }\n",
                    "test.yaml:3: upstreams.t.url: expected an http:// or https:// URL");
  EXPECT_LOAD_ERROR(
      "version: 1\nupstreams:\n  t: { url: \"https://x\", sandbox: { allow: [a] } }\n",
      "upstreams.t.sandbox: only a 'command' upstream runs in a sandbox");
  EXPECT_LOAD_ERROR("version: 1\nupstreams:\n  t: { command: [x], sandbox: { profile: nope } }\n",
                    "test.yaml:3: upstreams.t.sandbox.profile: expected the name of a profile "
                    "under sandbox.profiles");
  EXPECT_LOAD_ERROR(
      "version: 1\nupstreams:\n  a: { command: [x], prefix: mail }\n  b: { command: [y], prefix: "
      "mail }\n",
      "prefix 'mail' is already used by upstream 'a'");
  EXPECT_LOAD_ERROR("version: 1\nupstreams:\n  mine: { command: [x], prefix: sandbox }\n",
                    "prefix 'sandbox' is already used by the built-in sandbox__exec");
  EXPECT_LOAD_ERROR("version: 1\nupstreams:\n  web: { command: [x], prefix: w }\n",
                    "the name 'web' belongs to a built-in");
  EXPECT_LOAD_ERROR("version: 1\nupstreams:\n  task: { command: [x], prefix: t }\n",
                    "the name 'task' belongs to a built-in");
  EXPECT_LOAD_ERROR("version: 1\nupstreams:\n  mine: { command: [x], prefix: task }\n",
                    "prefix 'task' is already used by the built-in task__end");
  EXPECT_LOAD_ERROR("version: 1\nupstreams:\n  a__b: { command: [x] }\n",
                    "test.yaml:3: upstreams.a__b: expected a name");
  EXPECT_LOAD_ERROR("version: 1\nupstreams:\n  a: { command: [] }\n",
                    "upstreams.a.command: expected the program");
  EXPECT_LOAD_ERROR(
      "version: 1\nupstreams:\n  t: { url: \"http://x\", ca_file: ca.pem }\n",
      "test.yaml:3: upstreams.t.ca_file: a CA file only applies to an https:// 'url'");
}

TEST(PolicyLoaderTest, UpstreamInstanceModel) {
  const std::string head = "version: 1\nupstreams:\n  t:\n    command: [node, s.mjs]\n";
  Policy defaults = MustLoad(head);
  const Upstream& d = defaults.upstreams.at("t");
  EXPECT_EQ(d.instances, Instances::kPerUser);
  EXPECT_EQ(d.max_instances, 64u);
  EXPECT_EQ(d.idle_ms, 300000u);
  Policy set = MustLoad(head + "    instances: shared\n    max_instances: 3\n    idle: 90s\n");
  const Upstream& s = set.upstreams.at("t");
  EXPECT_EQ(s.instances, Instances::kShared);
  EXPECT_EQ(s.max_instances, 3u);
  EXPECT_EQ(s.idle_ms, 90000u);
  EXPECT_EQ(MustLoad(head + "    instances: per_session\n").upstreams.at("t").instances,
            Instances::kPerSession);
  EXPECT_EQ(MustLoad(head + "    idle: 0\n").upstreams.at("t").idle_ms, 0u);
  EXPECT_LOAD_ERROR(head + "    instances: per_tenant\n",
                    "test.yaml:5: upstreams.t.instances: expected shared, per_user or per_session, "
                    "got 'per_tenant'");
  EXPECT_LOAD_ERROR(head + "    max_instances: 0\n",
                    "test.yaml:5: upstreams.t.max_instances: expected a number of live instances "
                    "from 1 to 100000, got 0");
  EXPECT_LOAD_ERROR(head + "    max_instances: many\n", "test.yaml:5: upstreams.t.max_instances:");
  EXPECT_LOAD_ERROR(head + "    idle: soon\n", "test.yaml:5: upstreams.t.idle:");
  EXPECT_LOAD_ERROR(head + "    idle: 400h\n",
                    "test.yaml:5: upstreams.t.idle: expected at most 168h, got '400h'");
  // Which MCP revision warden speaks to it: probed unless pinned.
  EXPECT_EQ(d.protocol, "auto");
  EXPECT_EQ(MustLoad(head + "    protocol: 2026-07-28\n").upstreams.at("t").protocol, "2026-07-28");
  EXPECT_EQ(MustLoad(head + "    protocol: \"2025-11-25\"\n").upstreams.at("t").protocol, "2025-11-25");
  EXPECT_LOAD_ERROR(head + "    protocol: 2024-11-05\n",
                    "test.yaml:5: upstreams.t.protocol: expected auto, 2025-11-25 or 2026-07-28, "
                    "got '2024-11-05'");
}

TEST(PolicyLoaderTest, HttpsUpstreamKeepsItsCaFile) {
  Policy policy = MustLoad(
      "version: 1\nupstreams:\n  t: { url: \"https://tracker.internal/mcp\", ca_file: ./ca.pem "
      "}\n");
  ASSERT_EQ(policy.upstreams.count("t"), 1u);
  EXPECT_EQ(policy.upstreams.at("t").ca_file, "./ca.pem");
}

TEST(PolicyLoaderTest, SandboxProfilesUseTheSandboxSchemaWithPolicyLines) {
  const std::string head = "version: 1\nsandbox:\n  profiles:\n    coder:\n";
  EXPECT_LOAD_ERROR(head + "      pids: 10\n      memory: lots\n",
                    "test.yaml:6: sandbox.profiles.coder: memory");
  EXPECT_LOAD_ERROR(
      head + "      backend: docker\n",
      "test.yaml:5: sandbox.profiles.coder: 'backend' must be native, gvisor or microvm");
  EXPECT_LOAD_ERROR(
      head + "      rw: [\"./ws:work\"]\n",
      "test.yaml:4: sandbox.profiles.coder: --rw ./ws:work: the path inside must be absolute");
  EXPECT_LOAD_ERROR(head + "      memory: 1G\n  pool: { size: 2, profile: default }\n",
                    "test.yaml:6: sandbox.pool.profile: expected the name of a profile under "
                    "sandbox.profiles, got 'default'");
  EXPECT_LOAD_ERROR(head + "      memory: 1G\n  pool: { size: many }\n",
                    "sandbox.pool.size: expected a whole number");

  Policy p = MustLoad(
      head +
      "      memory: 512M\n      timeout: 10m\n      pids: 64\n      rw: [\"./workspace:/work\"]\n"
      "      allow: [\"pypi.org\"]\n      backend: gvisor\n  pool: { size: 4, profile: coder }\n");
  const sandbox::Options& o = p.sandbox.profiles.at("coder");
  EXPECT_EQ(o.memory_bytes, 512ull << 20);
  EXPECT_EQ(o.timeout_ms, 600000u);
  EXPECT_EQ(o.pids, 64u);
  ASSERT_EQ(o.binds.size(), 1u);
  EXPECT_TRUE(o.binds[0].writable);
  EXPECT_EQ(o.binds[0].inside, "/work");
  EXPECT_EQ(o.net, sandbox::NetMode::kProxy);
  EXPECT_EQ(o.backend, "gvisor");
  EXPECT_FALSE(o.protect.empty()) << "profiles start from the default protected paths";
  EXPECT_TRUE(p.sandbox.pool.set);
  EXPECT_EQ(p.sandbox.pool.size, 4u);
  EXPECT_EQ(p.sandbox.pool.profile, "coder");

  // Without a pool section the gateway's defaults apply; a section without keys takes them too.
  EXPECT_FALSE(MustLoad(head + "      memory: 1G\n").sandbox.pool.set);
  Policy bare = MustLoad(head + "      memory: 1G\n  pool: {}\n");
  EXPECT_TRUE(bare.sandbox.pool.set);
  EXPECT_EQ(bare.sandbox.pool.size, 2u);
  EXPECT_EQ(bare.sandbox.pool.profile, "") << "the default profile";
  EXPECT_EQ(MustLoad(head + "      memory: 1G\n  pool: { size: 0 }\n").sandbox.pool.size, 0u);
}

TEST(PolicyLoaderTest, JwtIsValidated) {
  EXPECT_LOAD_ERROR("version: 1\nidentity:\n  jwt: { jwks_file: k.json }\n",
                    "test.yaml:3: identity.jwt: missing 'issuer'");
  EXPECT_LOAD_ERROR("version: 1\nidentity:\n  jwt: { issuer: i }\n",
                    "identity.jwt: missing 'jwks_file'");
  EXPECT_LOAD_ERROR(
      "version: 1\nidentity:\n  jwt: { issuer: i, jwks_file: k, claims: { role: r } }\n",
      "test.yaml:3: identity.jwt.claims: unknown key 'role'");
  EXPECT_LOAD_ERROR(
      "version: 1\nidentity:\n  jwt: { issuer: i, jwks_file: k, claims: { user: \"\" } }\n",
      "identity.jwt.claims.user: expected a non-empty value");
}

TEST(PolicyLoaderTest, MultiTenantExampleSaysWhatItMeans) {
  auto loaded = LoadPolicyFile(kExamples + "/multi_tenant.yaml");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const Policy& p = *loaded;
  EXPECT_TRUE(p.storage.sync_full);
  const Tenant& acme = p.identity.tenants.at("acme");
  EXPECT_TRUE(acme.users.at("bob").approver);
  EXPECT_FALSE(acme.users.at("alice").approver);
  ASSERT_TRUE(acme.users.at("bob").tools.has_value());
  EXPECT_EQ(acme.agents.at("alice-coder").user, "alice");
  EXPECT_EQ(acme.agents.at("alice-coder").profile, "coder");
  const std::string key = "sha256:8c8980bffc871a9d4fcae95983309b06805880cddbc2f51cc977ca84f46098ef";
  ASSERT_TRUE(p.identity.keys.contains(key));
  EXPECT_EQ(p.identity.keys.at(key).agent, "alice-coder");
  EXPECT_EQ(p.identity.keys.at(key).tenant, "acme");
  // bob's own key is a person's: no agent.
  const std::string bob_key =
      "sha256:ae0445790879ee85942aca25d4a970395dea9e4a1e4ad6a18c133590f339851b";
  ASSERT_TRUE(p.identity.keys.contains(bob_key));
  EXPECT_EQ(p.identity.keys.at(bob_key).user, "bob");
  EXPECT_EQ(p.identity.keys.at(bob_key).agent, "");
  EXPECT_EQ(p.approvals.timeout_ms, 15u * 60 * 1000);
  ASSERT_TRUE(p.identity.jwt.has_value());
  EXPECT_EQ(p.identity.jwt->tenant_claim, "org");
  EXPECT_EQ(p.identity.jwt->agent_claim, "azp");

  const Upstream& mail = p.upstreams.at("mail");
  EXPECT_EQ(mail.command, (std::vector<std::string>{"node", "mail-server.mjs"}));
  EXPECT_EQ(mail.prefix, "mail");
  EXPECT_EQ(mail.sandbox_profile, "upstream");
  EXPECT_EQ(mail.sandbox_allow, (std::vector<std::string>{"imap.example.com:993"}));
  EXPECT_EQ(mail.credentials.env.at("MAIL_TOKEN"), "secret:mail_token");
  EXPECT_EQ(p.upstreams.at("tracker").url, "https://tracker.example.com/mcp");
  EXPECT_EQ(p.upstreams.at("tracker").credentials.header.at("Authorization"),
            "Bearer {token:tracker}");
  EXPECT_EQ(p.upstreams.at("tracker").prefix, "tracker");

  const Rule& send = p.rules[2];
  EXPECT_EQ(send.id, "tools[2]");
  EXPECT_EQ(send.risk, Risk::kMedium);
  EXPECT_FALSE(send.effect.has_value());
  EXPECT_EQ(send.labels, kExternalSend);
  ASSERT_TRUE(send.undo.has_value());
  EXPECT_EQ(send.undo->tool, "mail__recall_email");
  EXPECT_EQ(send.undo->args, nlohmann::json({{"id", "$result/id"}}));
  EXPECT_EQ(p.agent_profiles.at("browsing").never, kPrivateOutput);
  EXPECT_EQ(p.scopes.at("summarise_inbox").access, Access::kRead);
  EXPECT_EQ(p.egress_allow,
            (std::vector<std::string>{"api.example.com", "*.githubusercontent.com:443"}));
}

TEST(PolicyLoaderTest, RuleTextIsTheMatchOnOneLine) {
  Policy p = MustLoad(
      "version: 1\ntools:\n  - match: { tool: \"mail__*\", args: { /to: { suffix: \"@acme.com\" } "
      "} }\n");
  ASSERT_EQ(p.rules.size(), 1u);
  EXPECT_EQ(p.rules[0].line, 3);
  EXPECT_EQ(p.rules[0].text.rfind("tools[0] {", 0), 0u) << p.rules[0].text;
  EXPECT_NE(p.rules[0].text.find("mail__*"), std::string::npos);
  EXPECT_NE(p.rules[0].text.find("@acme.com"), std::string::npos);
}

}  // namespace
}  // namespace warden::policy
