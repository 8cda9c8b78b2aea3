// `warden mcp` as the CLI builds it: options, the embedded default, the audit store it writes.
#include "cli/mcp_command.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <mutex>
#include <streambuf>
#include <thread>
#include <sstream>

#include "audit/audit_log.h"
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
  auto gateway = Gateway::Start(flags, gateway::Caller{"", "tester", "", ""}, log);
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

}  // namespace
}  // namespace warden::cli
