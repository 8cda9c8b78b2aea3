// `warden mcp` as the CLI builds it: options, the embedded default, the audit store it writes.
#include "cli/mcp_command.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <streambuf>
#include <thread>
#include <sstream>

#include "audit/audit_log.h"
#include "identity/identity.h"
#include "policy/policy.h"
#include "testing.h"

namespace warden::cli {
namespace {

using gateway::testing::TempDir;
using gateway::testing::WriteFile;

// Runs `warden mcp ARGS` with `input` as its stdin; returns {exit status, stdout}.
std::pair<int, std::string> RunMcp(const std::vector<std::string>& args, const std::string& input,
                                   std::ostream& err, const std::string& dir) {
  CLI::App app;
  McpCommand mcp(app, err);
  std::vector<std::string> argv = {"warden", "mcp"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<const char*> cargv;
  for (const auto& a : argv) cargv.push_back(a.c_str());
  app.parse(static_cast<int>(cargv.size()), cargv.data());
  EXPECT_TRUE(mcp.parsed());

  std::string in_path = dir + "/in.jsonl", out_path = dir + "/out.jsonl";
  WriteFile(in_path, input);
  int in = open(in_path.c_str(), O_RDONLY | O_CLOEXEC);
  int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int status = mcp.Serve(in, out);
  close(in);
  close(out);
  std::ifstream f(out_path);
  std::stringstream ss;
  ss << f.rdbuf();
  return {status, ss.str()};
}

constexpr const char* kSession =
    R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sandbox__exec","arguments":{"argv":["echo","hi"]}}}
)";

TEST(McpCommand, ServesWithTheEmbeddedDefaultAndWritesTheAuditDbGiven) {
  TempDir dir;
  std::ostringstream err;
  std::string db = dir.File("sub/audit.db");
  auto [status, out] = RunMcp({"--audit-db", db}, kSession, err, dir.path());
  EXPECT_EQ(status, 0) << err.str();
  std::istringstream lines(out);
  std::string first, second;
  std::getline(lines, first);
  std::getline(lines, second);
  auto reply = nlohmann::json::parse(second);
  EXPECT_EQ(reply["result"]["structuredContent"]["stdout"], "hi\n") << out;
  EXPECT_NE(err.str().find("embedded default"), std::string::npos);

  audit::AuditOptions options;
  options.path = db;
  options.create = false;
  auto log = audit::AuditLog::Open(options);
  ASSERT_TRUE(log.ok()) << log.status().message();
  auto report = (*log)->Verify();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok());
  EXPECT_EQ(report->entries, 1u);
}

TEST(McpCommand, ConfigFileDecides) {
  TempDir dir;
  WriteFile(dir.File("policy.yaml"),
            "version: 1\ntools:\n  - match: { tool: \"sandbox__exec\" }\n    effect: deny\n");
  std::ostringstream err;
  auto [status, out] = RunMcp({"--config", dir.File("policy.yaml"), "--audit-db", dir.File("a.db")},
                              kSession, err, dir.path());
  EXPECT_EQ(status, 0) << err.str();
  EXPECT_NE(out.find("unknown tool: sandbox__exec"), std::string::npos) << out;
}

TEST(McpCommand, BadConfigExitsTwoNamingTheFileAndLine) {
  TempDir dir;
  WriteFile(dir.File("bad.yaml"), "version: 1\ntools:\n  - match: { tool: x }\n    risk: hgh\n");
  std::ostringstream err;
  auto [status, out] = RunMcp({"--config", dir.File("bad.yaml"), "--audit-db", dir.File("a.db")},
                              "", err, dir.path());
  EXPECT_EQ(status, 2);
  EXPECT_TRUE(out.empty());
  EXPECT_NE(err.str().find("bad.yaml:4"), std::string::npos) << err.str();
}

// A log the gateway's watcher thread writes while the test reads it.
class SyncLog : public std::streambuf {
 public:
  std::string Text() {
    std::lock_guard lock(mu_);
    return text_;
  }
  // Waits up to 10 s for `needle` to appear `times` times.
  bool WaitFor(const std::string& needle, int times = 1) {
    for (int i = 0; i < 200; ++i) {
      std::string t = Text();
      int n = 0;
      for (size_t at = t.find(needle); at != std::string::npos; at = t.find(needle, at + 1)) ++n;
      if (n >= times) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

 protected:
  int overflow(int c) override {
    std::lock_guard lock(mu_);
    if (c != EOF) text_.push_back(static_cast<char>(c));
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::lock_guard lock(mu_);
    text_.append(s, static_cast<size_t>(n));
    return n;
  }

 private:
  std::mutex mu_;
  std::string text_;
};

// The policy file decides sandbox__exec's pool, and a reload that changes it replaces the pool;
// a bad file changes nothing.
TEST(Gateway, ExecPoolFollowsThePolicyAcrossReloads) {
  if (geteuid() != 0) GTEST_SKIP() << "the default profile's cgroup limits need root";
  TempDir dir;
  const std::string config = dir.File("policy.yaml");
  WriteFile(config, "version: 1\nsandbox:\n  pool: { size: 1 }\n");
  SyncLog buf;
  std::ostream log(&buf);
  GatewayFlags flags;
  flags.config = config;
  flags.audit_db = dir.File("a.db");
  auto gateway = Gateway::Start(flags, identity::Caller{"", "tester", "", ""}, log);
  ASSERT_TRUE(gateway.ok()) << gateway.status().message();
  EXPECT_TRUE(buf.WaitFor("warden: sandbox__exec pre-warms 1 sandbox of profile 'default'\n"))
      << buf.Text();

  // The watcher sees the file change and reloads it.
  WriteFile(config, "version: 1\nsandbox:\n  profiles:\n    tight: { memory: 64M }\n"
                    "  pool: { size: 2, profile: tight }\n");
  EXPECT_TRUE(buf.WaitFor("warden: sandbox__exec pre-warms 2 sandboxes of profile 'tight'\n"))
      << buf.Text();
  // A reload that leaves the pool's plan alone leaves the pool alone.
  WriteFile(config, "version: 1\nsandbox:\n  profiles:\n    tight: { memory: 64M }\n"
                    "  pool: { size: 2, profile: tight }\n# a comment\n");
  EXPECT_TRUE(buf.WaitFor("policy reloaded from", 2)) << buf.Text();
  WriteFile(config, "version: 1\nsandbox:\n  pool: { size: lots }\n");
  EXPECT_TRUE(buf.WaitFor("policy reload failed, the previous policy stays in force")) << buf.Text();
  gateway->reset();
  const std::string text = buf.Text();
  EXPECT_EQ(text.find("pre-warms", text.find("profile 'tight'")), std::string::npos) << text;
  EXPECT_EQ(text.find("without a pre-warmed pool"), std::string::npos) << text;
}

// Issue 10 item 8: a reload is one unit. The new file changes a rule and swaps an agent's key,
// but its JWKS file has become unreadable: nothing of it may take effect (not the rule, not the
// key change; before, the new policy ran with the old authenticator, so the removed key kept
// working under the new rules), the error is logged, and once the JWKS file is fixed (the policy
// file untouched) the watcher tries again and the whole new policy is in force.
TEST(Gateway, ReloadWithAnUnreadableJwksKeepsTheOldPolicyAndItsKeys) {
  TempDir dir;
  const std::string config = dir.File("policy.yaml");
  const std::string jwks = dir.File("jwks.json");
  const std::string jwks_text =
      R"({"keys":[{"kty":"oct","kid":"k1","k":"YWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWE"}]})";
  WriteFile(jwks, jwks_text);
  const std::string key1 = "wk_reload_test_key_one", key2 = "wk_reload_test_key_two";
  auto policy_text = [&](const std::string& key, const char* effect) {
    return "version: 1\n"
           "identity:\n"
           "  tenants:\n"
           "    acme:\n"
           "      users: { alice: {} }\n"
           "      agents:\n"
           "        bot: { user: alice, keys: [\"" + identity::HashApiKey(key) + "\"] }\n"
           "  jwt: { issuer: https://idp.example, jwks_file: \"" + jwks + "\" }\n"
           "tools:\n"
           "  - match: { tool: \"web__fetch\" }\n"
           "    risk: low\n"
           "    effect: " + effect + "\n";
  };
  WriteFile(config, policy_text(key1, "allow"));
  SyncLog buf;
  std::ostream log(&buf);
  GatewayFlags flags;
  flags.config = config;
  flags.audit_db = dir.File("a.db");
  flags.exec_pool = 0;
  auto started = Gateway::Start(flags, identity::Caller{"", "tester", "", ""}, log,
                                identity::IdentityOptions{});
  ASSERT_TRUE(started.ok()) << started.status().message();
  Gateway& g = **started;
  const auto first = g.policy().Current();
  auto web_fetch = [&g] {
    const policy::CallContext who{"acme", "alice", "bot", ""};
    return policy::Decide(*g.policy().Current(), who, {"web", "web__fetch", nlohmann::json::object()})
        .effect;
  };
  auto accepts = [&g](const std::string& key) {
    return g.authenticator()->Authenticate("Bearer " + key).ok();
  };
  ASSERT_EQ(web_fetch(), policy::Effect::kAllow);
  ASSERT_TRUE(accepts(key1));
  ASSERT_FALSE(accepts(key2));

  // The JWKS file goes away, and the policy file changes: key1 is replaced by key2, the rule
  // denies.
  std::filesystem::remove(jwks);
  WriteFile(config, policy_text(key2, "deny"));
  ASSERT_TRUE(buf.WaitFor("policy reload failed, the previous policy stays in force")) << buf.Text();
  EXPECT_NE(buf.Text().find(jwks + ": cannot open"), std::string::npos) << buf.Text();
  EXPECT_EQ(g.policy().Current(), first);
  EXPECT_EQ(web_fetch(), policy::Effect::kAllow) << "the new file's rule must not be in force";
  EXPECT_TRUE(accepts(key1)) << "the old policy's keys stay with it";
  EXPECT_FALSE(accepts(key2)) << "the new policy's keys must not be in force";
  // SIGHUP (Reload) tries again, and fails the same way.
  EXPECT_FALSE(g.Reload());
  EXPECT_EQ(g.policy().Current(), first);

  // Fixing the JWKS file, without touching the policy file, brings the whole new policy.
  WriteFile(jwks, jwks_text);
  ASSERT_TRUE(buf.WaitFor("policy reloaded from")) << buf.Text();
  EXPECT_NE(g.policy().Current(), first);
  EXPECT_EQ(web_fetch(), policy::Effect::kDeny);
  EXPECT_FALSE(accepts(key1)) << "a key the new file removed must stop working";
  EXPECT_TRUE(accepts(key2));
}

}  // namespace
}  // namespace warden::cli
