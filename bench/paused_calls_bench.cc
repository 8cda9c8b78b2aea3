// Paused calls (bench/README.md, "Paused calls"): how much a call costs while a stage holds it
// parked (as the approval stage will, for minutes), and how soon after its release it reaches the
// upstream. The whole gateway core runs as `warden serve` runs it: real McpSessions, the standard
// chain with one stage added before execute that parks every call until the benchmark releases it,
// the real audit log (SQLite, in a temporary directory), the worker pool. The upstream is a client
// in this process (upstream::Client is the boundary: what happens past Send is the transport's),
// which notes when each call reaches it and answers from a thread of its own, as a real client's
// reader thread does.
//
// Usage: paused_calls_bench [CALLS] [SESSIONS]   (defaults 10000 and 10)
// Prints: heap and RSS per paused call, and release-to-upstream latency percentiles.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "audit/audit_log.h"
#include "bench_upstream.h"
#include "gateway/gateway.h"
#include "gateway/session/session.h"
#include "gateway/stages/chain.h"
#include "policy/holder.h"
#include "policy/policy.h"
#include "upstream/client.h"

namespace {

using namespace warden;
using namespace warden::gateway;
using namespace warden::bench;

// The parking stage: holds every call until the benchmark calls Release(i).
class HoldStage : public Stage {
 public:
  std::string_view name() const override { return "hold"; }
  StageOutcome Run(CallContext& call) override {
    const size_t n = call.arguments.value("n", size_t{0});
    call.park = [n](std::function<void(StageOutcome)> resume) { Held().Put(n, std::move(resume)); };
    return StageOutcome{StageResult::kPause, Refusal::kNone, "held by the benchmark", ""};
  }

  struct Parked {
    std::mutex mu;
    std::condition_variable changed;
    std::vector<std::function<void(StageOutcome)>> resumes;
    size_t count = 0;
    void Put(size_t n, std::function<void(StageOutcome)> resume) {
      std::lock_guard lock(mu);
      if (resumes.size() <= n) resumes.resize(n + 1);
      resumes[n] = std::move(resume);
      ++count;
      changed.notify_all();
    }
    bool WaitFor(size_t want, std::chrono::seconds timeout) {
      std::unique_lock lock(mu);
      return changed.wait_for(lock, timeout, [&] { return count >= want; });
    }
    std::function<void(StageOutcome)> Take(size_t n) {
      std::lock_guard lock(mu);
      return std::move(resumes[n]);
    }
  };
  static Parked& Held() {
    static Parked parked;
    return parked;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const size_t calls = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 10000;
  const size_t sessions = argc > 2 ? std::max<size_t>(1, std::strtoul(argv[2], nullptr, 10)) : 10;

  // Where the approval stage will sit: after the policy decided, before anything runs.
  auto fixture = MakeCoreFixture("paused", "  - match: { server: up }\n    risk: low\n    effect: allow\n",
                                 "", ChainLink{"hold", [](const StageServices&) -> std::unique_ptr<Stage> {
                                   return std::make_unique<HoldStage>();
                                 }});
  if (!fixture) return 1;
  Timeline timeline;
  timeline.released.resize(calls);
  timeline.reached.resize(calls);
  g_timeline = &timeline;
  int status = 0;
  {
    GatewayCore core(*fixture->holder, *fixture->audit, fixture->kills, fixture->tools,
                     identity::Caller{"", "bench", "", ""}, fixture->options);
    std::vector<std::shared_ptr<McpSession>> open = OpenListedSessions(core, sessions);
    // The baseline: every session open and listed, freed memory given back.
    malloc_trim(0);
    const size_t heap_before = HeapInUse(), rss_before = RssBytes();

    std::atomic<size_t> answered{0}, ok{0};
    const auto park_start = Clock::now();
    for (size_t i = 0; i < calls; ++i) {
      Exchange exchange;
      exchange.reply = [&answered, &ok](mcp::Message m) {
        if (const auto* r = std::get_if<mcp::Response>(&m); r && !r->result.value("isError", false))
          ok.fetch_add(1);
        answered.fetch_add(1);
      };
      open[i % sessions]->Handle(
          mcp::Request{mcp::Id(static_cast<int64_t>(i + 10)), "tools/call",
                       json{{"name", "up__echo"}, {"arguments", {{"n", i}}}}},
          std::move(exchange));
    }
    if (!HoldStage::Held().WaitFor(calls, std::chrono::seconds(120))) {
      std::fprintf(stderr, "only %zu of %zu calls parked in 120 s\n", HoldStage::Held().count,
                   calls);
      return 1;
    }
    const double park_s = std::chrono::duration<double>(Clock::now() - park_start).count();
    const size_t heap_held = HeapInUse(), rss_held = RssBytes();

    // Released one at a time from this thread, as a person's decision would come.
    const auto release_start = Clock::now();
    for (size_t i = 0; i < calls; ++i) {
      auto resume = HoldStage::Held().Take(i);
      timeline.released[i] = Clock::now();
      resume(StageOutcome::Continue());
    }
    const double release_s = std::chrono::duration<double>(Clock::now() - release_start).count();
    for (int waited = 0; answered.load() < calls && waited < 60000; ++waited)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));

    std::vector<double> latency_us;
    for (size_t i = 0; i < calls; ++i) {
      if (timeline.reached[i] < timeline.released[i]) continue;  // never reached
      latency_us.push_back(
          std::chrono::duration<double, std::micro>(timeline.reached[i] - timeline.released[i])
              .count());
    }
    std::printf("paused calls: %zu over %zu sessions, parked in %.2f s, released in %.2f s\n",
                calls, sessions, park_s, release_s);
    std::printf("per paused call: heap %.0f bytes, RSS %.0f bytes\n",
                static_cast<double>(heap_held - heap_before) / static_cast<double>(calls),
                (static_cast<double>(rss_held) - static_cast<double>(rss_before)) /
                    static_cast<double>(calls));
    std::printf("release to upstream (us): p50 %.1f  p90 %.1f  p99 %.1f  max %.1f  (%zu reached)\n",
                Percentile(latency_us, 0.50), Percentile(latency_us, 0.90),
                Percentile(latency_us, 0.99), Percentile(latency_us, 1.0), latency_us.size());
    std::printf("answered %zu, of which results %zu\n", answered.load(), ok.load());
    if (answered.load() != calls || ok.load() != calls || latency_us.size() != calls) status = 1;
    for (auto& session : open) session->Close();
  }
  g_timeline = nullptr;
  return status;
}
