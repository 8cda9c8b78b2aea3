// `kill -9` of a real `warden serve` while 16 clients make tool calls (issue 10, "Always"): after
// the crash, `warden audit verify` passes and every call whose result reached its client has its
// audit entry (the log is durable before a reply is sent, docs/audit.md).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "identity/identity.h"
#include "http_client.h"
#include "testing.h"

extern char** environ;

namespace warden::gateway {
namespace {

using http_test::Connection;
using http_test::HttpReply;
using http_test::InitializeRequest;
using http_test::Req;
using http_test::Rpc;
using nlohmann::json;
using testing::TempDir;
using testing::WriteFile;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Spawns the warden binary with `args`, stdout and stderr to the files given; returns the pid.
pid_t SpawnWarden(const std::vector<std::string>& args, const std::string& out,
                  const std::string& err) {
  const char* bin = std::getenv("WARDEN_BIN");
  EXPECT_NE(bin, nullptr);
  std::vector<std::string> all = {bin};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, bin, &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

int WaitExit(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

constexpr char kKey[] = "wk_crash_test_0123456789";

TEST(ServeCrash, KillNineWhileSixteenClientsCallLeavesAVerifiableLogWithEveryAnsweredCall) {
  TempDir dir;
  const std::string db = dir.File("warden.db");
  // Calls whose second argument starts with "call-" are denied by a rule: decided and audited
  // at full speed, without a sandbox per call. The tool stays visible (not every call is denied).
  WriteFile(dir.File("policy.yaml"),
            "version: 1\n"
            "identity:\n"
            "  tenants:\n"
            "    acme:\n"
            "      users: { alice: {} }\n"
            "      agents:\n"
            "        bot: { user: alice, keys: [\"" + identity::HashApiKey(kKey) + "\"] }\n"
            "tools:\n"
            "  - match: { tool: sandbox__exec, args: { \"/argv/1\": { prefix: \"call-\" } } }\n"
            "    risk: low\n"
            "    effect: deny\n");
  const pid_t serve = SpawnWarden({"serve", "--config", dir.File("policy.yaml"), "--audit-db", db,
                                   "--listen", "127.0.0.1:0", "--exec-pool", "0"},
                                  dir.File("serve.out"), dir.File("serve.err"));
  ASSERT_GT(serve, 0);
  uint16_t port = 0;
  for (int i = 0; i < 300 && port == 0; ++i) {
    const std::string err = ReadAll(dir.File("serve.err"));
    const std::string marker = "warden: MCP endpoint http://127.0.0.1:";
    if (auto at = err.find(marker); at != std::string::npos && err.find("/mcp", at) != std::string::npos) {
      port = static_cast<uint16_t>(std::stoi(err.substr(at + marker.size())));
    }
    if (port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_NE(port, 0) << ReadAll(dir.File("serve.err"));

  std::mutex mu;
  std::set<std::string> answered;  // markers of the calls whose result came back
  std::atomic<int> results{0};
  std::atomic<bool> stop{false};
  std::atomic<bool> killing{false};  // set just before the kill: refusals from then on are expected
  auto post = [port, &killing](const json& body, const std::string& session) {
    Req req;
    req.body = body.dump();
    req.headers = {{"Content-Type", "application/json"},
                   {"Accept", "application/json, text/event-stream"},
                   {"Authorization", std::string("Bearer ") + kKey}};
    if (!session.empty()) req.headers.emplace_back("Mcp-Session-Id", session);
    // A call made after the kill finds nothing listening: that ends its client, like a reply
    // that never came.
    Connection c(port, /*may_be_gone=*/true);
    if (!c.connected()) {
      EXPECT_TRUE(killing.load()) << "the server refused a connection before it was killed";
      return HttpReply{0, {}, "connection refused"};
    }
    return c.Send(req);
  };
  std::vector<std::thread> clients;
  for (int t = 0; t < 16; ++t) {
    clients.emplace_back([&, t] {
      HttpReply init = post(InitializeRequest("2025-06-18"), "");
      const std::string session = init.Header("mcp-session-id");
      if (init.status != 200 || session.empty()) return;
      post(json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}, session);
      for (int n = 0; !stop.load(); ++n) {
        const std::string marker = "call-" + std::to_string(t) + "-" + std::to_string(n);
        HttpReply reply = post(
            Rpc(n + 2, "tools/call",
                {{"name", "sandbox__exec"}, {"arguments", {{"argv", {"echo", marker}}}}}),
            session);
        if (reply.status != 200) return;  // the server is gone
        json body = reply.Json();
        if (!body.is_object() || !body.contains("result")) return;
        std::lock_guard lock(mu);
        answered.insert(marker);
        ++results;
      }
    });
  }
  // Kill mid-way: once calls are flowing, while all 16 clients are still calling.
  for (int i = 0; i < 400 && results.load() < 300; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  killing = true;
  ASSERT_EQ(kill(serve, SIGKILL), 0);
  const int status = WaitExit(serve);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  stop = true;
  for (auto& c : clients) c.join();
  ASSERT_GT(results.load(), 0) << ReadAll(dir.File("serve.err"));

  const pid_t verify = SpawnWarden({"audit", "verify", "--db", db}, dir.File("verify.out"),
                                   dir.File("verify.err"));
  const int verified = WaitExit(verify);
  EXPECT_TRUE(WIFEXITED(verified) && WEXITSTATUS(verified) == 0)
      << ReadAll(dir.File("verify.out")) << ReadAll(dir.File("verify.err"));

  const pid_t exported = SpawnWarden({"audit", "export", "--db", db, "--format", "jsonl"},
                                     dir.File("export.jsonl"), dir.File("export.err"));
  const int export_status = WaitExit(exported);
  ASSERT_TRUE(WIFEXITED(export_status) && WEXITSTATUS(export_status) == 0)
      << ReadAll(dir.File("export.err"));
  std::set<std::string> audited;
  std::istringstream lines(ReadAll(dir.File("export.jsonl")));
  for (std::string line; std::getline(lines, line);) {
    json entry = json::parse(line, nullptr, false);
    if (!entry.is_object() || entry.value("tool", "") != "sandbox__exec") continue;
    const json& argv = entry["arguments"]["argv"];
    if (argv.is_array() && argv.size() == 2 && argv[1].is_string()) audited.insert(argv[1]);
  }
  std::vector<std::string> missing;
  for (const std::string& marker : answered) {
    if (!audited.contains(marker)) missing.push_back(marker);
  }
  EXPECT_TRUE(missing.empty()) << missing.size() << " of " << answered.size()
                               << " answered calls have no audit entry, e.g. " << missing.front();
  std::cerr << answered.size() << " calls answered before the kill, " << audited.size()
            << " audited\n";
}

}  // namespace
}  // namespace warden::gateway
