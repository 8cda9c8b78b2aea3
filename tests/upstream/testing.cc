#include "testing.h"

#include "upstream/process_tree.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

extern char** environ;

namespace warden::upstream::testing {
namespace {
// stdio upstreams are launched as `warden run` (sandbox/launcher.h): use the warden built with
// these tests unless the environment already names one.
const bool kLauncherSet = (setenv("WARDEN_BIN", WARDEN_BIN_PATH, /*overwrite=*/0), true);
}  // namespace

std::string FixturesDir() { return UPSTREAM_FIXTURES_DIR; }

Spec EchoSpec(const std::string& name, std::vector<std::string> extra_args) {
  Spec spec;
  spec.name = name;
  spec.command = {"python3", FixturesDir() + "/echo_server.py"};
  spec.command.insert(spec.command.end(), extra_args.begin(), extra_args.end());
  spec.sandbox.binds.push_back({FixturesDir(), "", false});
  spec.sandbox.memory_bytes = 0;
  spec.sandbox.pids = 0;
  return spec;
}

Spec ModernSpec(const std::string& name) {
  Spec spec = EchoSpec(name);
  spec.command = {"python3", FixturesDir() + "/modern_server.py"};
  return spec;
}

std::unique_ptr<Client> StartClient(Spec spec, Events events, ClientOptions options) {
  auto made = Client::Create(std::move(spec), std::move(events), options);
  EXPECT_TRUE(made.ok()) << made.status().message();
  if (!made.ok()) return nullptr;
  auto client = std::move(*made);
  client->Start();
  EXPECT_TRUE(client->WaitReady(std::chrono::seconds(8))) << "state " << StateName(client->state());
  return client;
}

ClientOptions FastOptions() {
  ClientOptions o;
  o.connect_timeout = std::chrono::milliseconds(8000);
  o.request_timeout = std::chrono::milliseconds(8000);
  o.backoff_initial = std::chrono::milliseconds(50);
  o.backoff_max = std::chrono::milliseconds(200);
  return o;
}

std::string ToolText(const mcp::Message& reply) {
  if (const auto* e = std::get_if<mcp::ErrorResponse>(&reply))
    return "<error " + std::to_string(e->code) + ": " + e->message + ">";
  const auto* r = std::get_if<mcp::Response>(&reply);
  if (!r) return "<not a response>";
  const auto& content = r->result.value("content", nlohmann::json::array());
  if (!content.is_array() || content.empty()) return "<no content: " + r->result.dump() + ">";
  return content[0].value("text", "<no text>");
}

nlohmann::json Structured(const mcp::Message& reply) {
  const auto* r = std::get_if<mcp::Response>(&reply);
  if (!r) return nullptr;
  return r->result.value("structuredContent", nlohmann::json());
}

int ErrorCode(const mcp::Message& reply) {
  const auto* e = std::get_if<mcp::ErrorResponse>(&reply);
  return e ? e->code : 0;
}

std::string ErrorMessage(const mcp::Message& reply) {
  const auto* e = std::get_if<mcp::ErrorResponse>(&reply);
  return e ? e->message : "";
}

nlohmann::json ToolCall(const std::string& name, nlohmann::json arguments) {
  return {{"name", name}, {"arguments", std::move(arguments)}};
}

std::vector<pid_t> Descendants(pid_t root) {
  // The gateway's own /proc scan (never throws: processes come and go while it reads).
  const std::multimap<pid_t, pid_t> children = upstream::ProcChildren();
  std::vector<pid_t> out;
  std::vector<pid_t> todo = {root};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    auto [first, last] = children.equal_range(p);
    for (auto it = first; it != last; ++it) {
      out.push_back(it->second);
      todo.push_back(it->second);
    }
  }
  return out;
}

bool ProcessGone(pid_t pid) { return !std::filesystem::exists("/proc/" + std::to_string(pid)); }

HttpFixture::HttpFixture(std::vector<std::string> extra_args, const std::string& script) {
  int out[2];
  EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
  std::vector<std::string> args = {"python3", FixturesDir() + "/" + script};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawnp(&pid_, "python3", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  std::string line;
  char c;
  while (read(out[0], &c, 1) == 1 && c != '\n') line.push_back(c);
  close(out[0]);
  port_ = line.empty() ? 0 : std::stoi(line);
  EXPECT_GT(port_, 0) << "the HTTP fixture did not print its port";
}

HttpFixture::~HttpFixture() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
  }
}

}  // namespace warden::upstream::testing
