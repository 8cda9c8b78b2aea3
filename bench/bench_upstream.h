// What the gateway benches that park calls share (paused_calls_bench, approvals_bench): an
// upstream in this process (upstream::Client is the boundary: what happens past Send is the
// transport's) that notes when each call reaches it and answers from a thread of its own, as a
// real client's reader thread does; memory readings; percentiles.
#pragma once

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "audit/audit_log.h"
#include "gateway/gateway.h"
#include "gateway/session/session.h"
#include "gateway/stages/chain.h"
#include "policy/holder.h"
#include "policy/policy.h"
#include "upstream/client.h"

namespace warden::bench {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Every call's release time and when it reached the upstream, by the call's argument "n".
struct Timeline {
  std::vector<Clock::time_point> released, reached;
  std::atomic<size_t> arrived{0};
};
inline Timeline* g_timeline = nullptr;

// The upstream, in process: one tool, answered from the client's own thread.
class InProcessUpstream : public upstream::Client {
 public:
  InProcessUpstream(upstream::Spec spec, upstream::Events events)
      : spec_(std::move(spec)), events_(std::move(events)) {
    replier_ = std::thread([this] { Reply(); });
  }
  ~InProcessUpstream() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    replier_.join();
  }
  void Start() override {
    state_ = upstream::State::kReady;
    if (events_.on_state) events_.on_state(upstream::State::kReady, "");
  }
  bool WaitReady(std::chrono::milliseconds) override { return state_ == upstream::State::kReady; }
  uint64_t Send(const std::string& method, json params, Done done,
                std::chrono::milliseconds) override {
    json result;
    if (method == "tools/list") {
      result = {
          {"tools", json::array({{{"name", "echo"}, {"inputSchema", {{"type", "object"}}}}})}};
    } else if (method == "tools/call") {
      const size_t n = params["arguments"].value("n", size_t{0});
      if (g_timeline && n < g_timeline->reached.size()) {
        g_timeline->reached[n] = Clock::now();
        g_timeline->arrived.fetch_add(1);
      }
      result = {{"content", json::array({{{"type", "text"}, {"text", "ok"}}})}};
    } else {
      result = json::object();
    }
    const uint64_t handle = ++next_;
    {
      std::lock_guard lock(mu_);
      queue_.emplace_back(std::move(done),
                          mcp::Response{mcp::Id(static_cast<int64_t>(handle)), std::move(result)});
    }
    wake_.notify_one();
    return handle;
  }
  void Cancel(uint64_t, const std::string&) override {}
  void Notify(const std::string&, json) override {}
  void Stop() override { state_ = upstream::State::kStopped; }
  upstream::State state() const override { return state_; }
  upstream::ServerInfo info() const override {
    upstream::ServerInfo info;
    info.protocol_version = "2025-11-25";
    info.capabilities = {{"tools", json::object()}};
    info.server_info = {{"name", "in-process"}, {"version", "1"}};
    return info;
  }
  const upstream::Spec& spec() const override { return spec_; }
  int pid() const override { return 0; }

 private:
  void Reply() {
    std::unique_lock lock(mu_);
    while (true) {
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      auto [done, message] = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      done(std::move(message));
      lock.lock();
    }
  }

  upstream::Spec spec_;
  upstream::Events events_;
  std::atomic<upstream::State> state_{upstream::State::kStarting};
  std::atomic<uint64_t> next_{0};
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::pair<Done, mcp::Message>> queue_;
  bool stop_ = false;
  std::thread replier_;
};

// Bytes of heap in use (glibc's count: what the calls themselves hold, without fragmentation).
inline size_t HeapInUse() { return mallinfo2().uordblks; }

inline size_t RssBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

inline double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t at = static_cast<size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(at, values.size() - 1)];
}

// `count` sessions of one caller on `core`, each initialized and past its first tools/list (so
// that their upstreams are up), registered with the core.
inline std::vector<std::shared_ptr<gateway::McpSession>> OpenListedSessions(
    gateway::GatewayCore& core, size_t count) {
  std::vector<std::shared_ptr<gateway::McpSession>> open;
  for (size_t s = 0; s < count; ++s) {
    auto session =
        std::make_shared<gateway::McpSession>(core, identity::Caller{"", "bench", "", ""});
    core.Register(session);
    std::promise<void> ready;
    gateway::Exchange init;
    init.reply = [&ready](mcp::Message) { ready.set_value(); };
    session->Handle(mcp::Request{mcp::Id(int64_t{0}), "initialize",
                                 json{{"protocolVersion", "2025-11-25"},
                                      {"capabilities", json::object()},
                                      {"clientInfo", {{"name", "bench"}, {"version", "1"}}}}},
                    std::move(init));
    ready.get_future().wait();
    session->Handle(mcp::Notification{"notifications/initialized", std::nullopt}, {});
    std::promise<void> listed;
    gateway::Exchange list;
    list.reply = [&listed](mcp::Message) { listed.set_value(); };
    session->Handle(mcp::Request{mcp::Id(int64_t{1}), "tools/list", json::object()},
                    std::move(list));
    listed.get_future().wait();
    open.push_back(std::move(session));
  }
  return open;
}

// What each in-process core benchmark sets up (paused, parked and approvals): a temporary
// directory (removed with the fixture), a policy of one upstream `up` served by InProcessUpstream
// with `rules` under `tools:` (and `extra` after them), its audit log in DIR/warden.db, and gateway
// options whose chain is the standard one with `before_execute`, when given, just before execute.
// Declare it before the GatewayCore that borrows its members.
struct CoreFixture {
  std::string dir;
  std::unique_ptr<policy::PolicyHolder> holder;
  std::unique_ptr<audit::AuditLog> audit;
  gateway::KillSwitches kills;
  gateway::BuiltinTools tools = gateway::BuiltinTools::Default();
  gateway::GatewayOptions options;
  std::string db() const { return dir + "/warden.db"; }
  ~CoreFixture() {
    if (!dir.empty()) std::filesystem::remove_all(dir);
  }
};

// nullptr (the reason printed) when the directory, the policy or the audit log cannot be made.
inline std::unique_ptr<CoreFixture> MakeCoreFixture(
    const std::string& name, const std::string& rules, const std::string& extra = "",
    std::optional<gateway::ChainLink> before_execute = std::nullopt) {
  auto f = std::make_unique<CoreFixture>();
  std::string dir_template = "/tmp/warden-" + name + "-bench-XXXXXX";
  if (mkdtemp(dir_template.data()) == nullptr) {
    std::perror("mkdtemp");
    return nullptr;
  }
  f->dir = dir_template;
  auto loaded = policy::LoadPolicyText(
      "version: 1\nupstreams:\n  up:\n    command: [/bin/true]\n    instances: shared\n"
      "tools:\n" + rules + extra,
      "bench.yaml");
  if (!loaded.ok()) {
    std::fprintf(stderr, "policy: %s\n", loaded.status().message().c_str());
    return nullptr;
  }
  f->holder = std::make_unique<policy::PolicyHolder>(
      std::make_shared<const policy::Policy>(std::move(*loaded)));
  audit::AuditOptions audit_options;
  audit_options.path = f->db();
  auto audit = audit::AuditLog::Open(audit_options);
  if (!audit.ok()) {
    std::fprintf(stderr, "audit: %s\n", audit.status().message().c_str());
    return nullptr;
  }
  f->audit = std::move(*audit);
  if (before_execute) {
    for (const gateway::ChainLink& link : gateway::StandardChain()) {
      if (link.name == "execute") f->options.chain.push_back(*before_execute);
      f->options.chain.push_back(link);
    }
  }
  f->options.make_upstream = [](upstream::Spec spec, upstream::Events events,
                                upstream::ClientOptions) -> Result<std::unique_ptr<upstream::Client>> {
    return std::unique_ptr<upstream::Client>(
        new InProcessUpstream(std::move(spec), std::move(events)));
  };
  return f;
}

}  // namespace warden::bench
