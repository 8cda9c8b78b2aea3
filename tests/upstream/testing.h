// Helpers shared by the upstream client tests: the fixture servers (python3, stdlib only, in
// fixtures/) and small readers for replies and for /proc.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <utility>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mcp/jsonrpc.h"
#include "upstream/client.h"

namespace warden::upstream::testing {

std::string FixturesDir();

// What a client reported through Events (states with their reasons, notifications), for assertions.
struct Recorder {
  std::mutex mu;
  std::vector<std::pair<State, std::string>> states;
  std::vector<mcp::Notification> notifications;

  Events Hook() {
    Events e;
    e.on_state = [this](State s, const std::string& why) {
      std::lock_guard<std::mutex> lock(mu);
      states.emplace_back(s, why);
    };
    e.on_notification = [this](const mcp::Notification& n) {
      std::lock_guard<std::mutex> lock(mu);
      notifications.push_back(n);
    };
    return e;
  }
  bool Saw(const std::string& method, const std::string& key = "",
           const nlohmann::json& value = nullptr) {
    std::lock_guard<std::mutex> lock(mu);
    return std::any_of(notifications.begin(), notifications.end(), [&](const mcp::Notification& n) {
      return n.method == method &&
             (key.empty() || (n.params && n.params->value(key, nlohmann::json()) == value));
    });
  }
  int Count(State s) {
    std::lock_guard<std::mutex> lock(mu);
    return static_cast<int>(
        std::count_if(states.begin(), states.end(), [s](auto& p) { return p.first == s; }));
  }
  std::string LastWhy(State s) {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = states.rbegin(); it != states.rend(); ++it)
      if (it->first == s) return it->second;
    return "";
  }
};

// A stdio upstream running fixtures/echo_server.py in a warden sandbox (fixtures bound read-only,
// no cgroup limits so the tests need no cgroup delegation).
Spec EchoSpec(const std::string& name = "echo", std::vector<std::string> extra_args = {});

// A stdio upstream running fixtures/modern_server.py (MCP 2026-07-28 only), sandboxed the same way.
Spec ModernSpec(const std::string& name = "modern");

// Creates and starts a client for `spec`, waiting (8 s) until it is ready; null (and a test
// failure) when it cannot be created, a test failure when it is not ready.
std::unique_ptr<Client> StartClient(Spec spec, Events events, ClientOptions options);

// Options with short backoff so restarts happen quickly in tests.
ClientOptions FastOptions();

// The text of the first content item of a tools/call result, or a description of what came instead.
std::string ToolText(const mcp::Message& reply);
// The result's structuredContent (null when the reply is not a Response).
nlohmann::json Structured(const mcp::Message& reply);
// The error code of an ErrorResponse, or 0.
int ErrorCode(const mcp::Message& reply);
std::string ErrorMessage(const mcp::Message& reply);
nlohmann::json ToolCall(const std::string& name,
                        nlohmann::json arguments = nlohmann::json::object());

// Every process below `root`, from /proc.
std::vector<pid_t> Descendants(pid_t root);
// True when `pid` is gone: no /proc entry (not even a zombie).
bool ProcessGone(pid_t pid);

// Runs fixtures/http_echo_server.py (not sandboxed: it is the remote end) on 127.0.0.1.
class HttpFixture {
 public:
  explicit HttpFixture(std::vector<std::string> extra_args = {},
                       const std::string& script = "http_echo_server.py");
  ~HttpFixture();
  HttpFixture(const HttpFixture&) = delete;
  HttpFixture& operator=(const HttpFixture&) = delete;
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/mcp"; }
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

// Waits until `predicate` holds or `timeout` passes; returns its last value.
template <typename F>
bool Eventually(F predicate, std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) return true;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  return predicate();
}

}  // namespace warden::upstream::testing
