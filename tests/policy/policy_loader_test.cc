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
  for (const char* name : {"quickstart.yaml", "multi_tenant.yaml"}) {
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
  for (const char* section : {"trifecta", "approvals", "monitoring", "credentials"}) {
    std::string yaml = std::string("version: 1\n") + section + ":\n  x: 1\n";
    EXPECT_LOAD_ERROR(yaml,
                      std::string("test.yaml:2: ") + section + " is not supported yet (issue: ");
  }
  EXPECT_LOAD_ERROR(
      "version: 1\ntools:\n  - match: { tool: x }\n    credentials: { header: {} }\n",
      "test.yaml:4: tools[0].credentials: per-rule credentials are not supported yet (issue: ");
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
      "test.yaml:4: tools[0].labels[1]: expected untrusted_output, private_output or "
      "external_send, got 'secret'");
  EXPECT_LOAD_ERROR("version: 1\nagent_profiles:\n  p: { never: [private] }\n",
                    "test.yaml:3: agent_profiles.p.never[0]: expected untrusted_output, "
                    "private_output or external_send");
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
                    "belongs to agent 'a1'");
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
  EXPECT_LOAD_ERROR("version: 1\nupstreams:\n  a__b: { command: [x] }\n",
                    "test.yaml:3: upstreams.a__b: expected a name");
  EXPECT_LOAD_ERROR("version: 1\nupstreams:\n  a: { command: [] }\n",
                    "upstreams.a.command: expected the program");
  EXPECT_LOAD_ERROR("version: 1\nupstreams:\n  t: { url: \"http://x\", ca_file: ca.pem }\n",
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
}

TEST(PolicyLoaderTest, HttpsUpstreamKeepsItsCaFile) {
  Policy policy = MustLoad(
      "version: 1\nupstreams:\n  t: { url: \"https://tracker.internal/mcp\", ca_file: ./ca.pem }\n");
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
