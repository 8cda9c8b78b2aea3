// What monitoring costs a call (docs/monitoring.md, "Cost"; bench/README.md, "Monitoring"): the
// standard pipeline chain with and without its `monitor` stage, in the same run, on a call the
// policy denies (identity, kill switches, policy, then the final stages) and on one it allows to a
// stub built-in (the whole chain, execute included). Two variants of each: with the real audit
// log (SQLite on WARDEN_BENCH_DIR, default /dev/shm, sync normal) and without the audit stage,
// where the monitor's own cost is not lost in the write's variance. The stage bucket counting
// the pipeline does for /metrics is in every variant (it is not optional). And the anomaly
// detectors: the same chain with monitor, under a policy that turns on every detector a call
// feeds (volume, denials, first_domain, sensitive, sandbox_limits) against one that turns none
// on. Alerts the detectors raise are dropped, not handled: handling runs on the control
// executor, off the call path, and is not what a call pays.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "gateway/alerts.h"
#include "gateway/audit_checkpoints.h"
#include "gateway/builtins/builtin_tools.h"
#include "gateway/stages/chain.h"
#include "gateway/stages/kill_switches.h"
#include "gateway/stages/stages.h"
#include "policy/holder.h"
#include "policy/policy.h"

namespace {

using namespace warden;
using namespace warden::gateway;

constexpr const char* kPolicy = R"(version: 1
tools:
  - match: { tool: "denied__*" }
    effect: deny
  - match: { tool: "bench__echo" }
    risk: low
)";

constexpr const char* kDetectorsOn = R"(
monitoring:
  detectors:
    volume: { window: 30m, deviations: 4, min_calls: 20, kill: agent }
    denials: { window: 1m, threshold: 10, kill: agent }
    first_domain: {}
    sensitive: {}
    sandbox_limits: {}
)";

std::shared_ptr<policy::PolicyHolder> Holder(const std::string& text) {
  auto loaded = policy::LoadPolicyText(text, "bench.yaml");
  if (!loaded.ok()) std::abort();
  return std::make_shared<policy::PolicyHolder>(
      std::make_shared<const policy::Policy>(std::move(*loaded)));
}

struct World {
  std::string dir;
  std::shared_ptr<policy::PolicyHolder> holder, detecting;
  std::unique_ptr<audit::AuditLog> audit;
  std::unique_ptr<Alerts> alerts;
  KillSwitches kills;
  BuiltinTools tools;

  World() {
    const char* base = std::getenv("WARDEN_BENCH_DIR");
    std::string tmpl = std::string(base ? base : "/dev/shm") + "/warden-monitor-bench.XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) std::abort();
    dir = buf.data();
    holder = Holder(kPolicy);
    detecting = Holder(std::string(kPolicy) + kDetectorsOn);
    audit::AuditOptions options;
    options.path = dir + "/warden.db";
    auto log = audit::AuditLog::Open(options);
    if (!log.ok()) std::abort();
    audit = std::move(*log);
    alerts = std::make_unique<Alerts>(Alerts::Options{
        .audit = audit.get(), .switches = &kills, .post = [](std::function<void()>) {}});
    tools.Add({.name = "bench__echo",
               .server = "bench",
               .definition = nlohmann::json{{"name", "bench__echo"},
                                            {"inputSchema", {{"type", "object"}}}},
               .run = [](const nlohmann::json& arguments, const ToolEnv&) -> Result<CallResult> {
                 return CallResult::FromText(arguments.dump(), false);
               }});
  }
  ~World() { std::filesystem::remove_all(dir); }
};

World& TheWorld() {
  static World* world = new World();
  return *world;
}

std::vector<ChainLink> Chain(bool monitor, bool audit) {
  std::vector<ChainLink> out;
  for (const ChainLink& link : StandardChain()) {
    if (!monitor && link.name == "monitor") continue;
    if (!audit && link.name == "audit") continue;
    out.push_back(link);
  }
  return out;
}

void RunChain(benchmark::State& state, bool monitor, bool audit, const char* tool,
              bool detectors = false) {
  World& w = TheWorld();
  StageServices services{(detectors ? w.detecting : w.holder).get(), &w.kills, &w.tools,
                         w.audit.get(), {}};
  services.caller = identity::Caller{"acme", "alice", "bot", ""};
  services.alerts = w.alerts.get();
  auto pipeline = BuildPipeline(services, Chain(monitor, audit));
  for (auto _ : state) {
    CallContext call;
    call.tool = tool;
    call.server = "bench";
    call.arguments = {{"text", "hello"}};
    StageOutcome outcome = pipeline->Run(call);
    benchmark::DoNotOptimize(outcome);
  }
}

void BM_DeniedCall(benchmark::State& state) {
  RunChain(state, state.range(0) != 0, state.range(1) != 0, "denied__tool");
}
void BM_AllowedCall(benchmark::State& state) {
  RunChain(state, state.range(0) != 0, state.range(1) != 0, "bench__echo");
}
// Args: {monitor stage, audit stage}. Interleaved so that load falls on both alike.
BENCHMARK(BM_DeniedCall)->ArgNames({"monitor", "audit"})
    ->Args({0, 0})->Args({1, 0})->Args({0, 1})->Args({1, 1});
BENCHMARK(BM_AllowedCall)->ArgNames({"monitor", "audit"})
    ->Args({0, 0})->Args({1, 0})->Args({0, 1})->Args({1, 1});

// Args: {detectors}: the chain with monitor and without audit, detectors off and on.
void BM_DeniedCallDetectors(benchmark::State& state) {
  RunChain(state, true, false, "denied__tool", state.range(0) != 0);
}
void BM_AllowedCallDetectors(benchmark::State& state) {
  RunChain(state, true, false, "bench__echo", state.range(0) != 0);
}
BENCHMARK(BM_DeniedCallDetectors)->ArgNames({"detectors"})->Arg(0)->Arg(1);
BENCHMARK(BM_AllowedCallDetectors)->ArgNames({"detectors"})->Arg(0)->Arg(1);

// What the gateway's own checkpoints (storage.checkpoints) cost a call: single audit appends on a
// fresh log, 20,000 of them, with the checkpointer signing one every 500 entries against none,
// as p50 and p99 latencies. The checkpoints run on their own thread and read snapshot; on two
// cores they still share the CPU with the appends, which is what this shows.
void BM_AuditAppendWithCheckpoints(benchmark::State& state) {
  World& w = TheWorld();
  static int run = 0;
  const std::string db = w.dir + "/checkpoints-" + std::to_string(run++) + ".db";
  audit::AuditOptions options;
  options.path = db;
  auto log = audit::AuditLog::Open(options);
  if (!log.ok()) std::abort();
  auto holder = Holder(state.range(0) != 0
                           ? std::string(kPolicy) + "storage:\n  checkpoints:\n    every_entries: 500\n"
                                                    "    out: " + db + ".note\n"
                           : std::string(kPolicy));
  AuditCheckpointer checkpointer(**log, *holder,
                                 {.database = db, .tick = std::chrono::milliseconds(10)});
  std::vector<double> us;
  us.reserve(static_cast<size_t>(state.max_iterations));
  int64_t i = 0;
  for (auto _ : state) {
    audit::AuditEntry e;
    e.tenant = "acme";
    e.tool = "bench__echo";
    e.decision = "allow";
    e.arguments = {{"i", i++}};
    auto start = std::chrono::steady_clock::now();
    auto receipt = (*log)->Append(std::move(e));
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                     .count());
    if (!receipt.ok()) state.SkipWithError(receipt.status().message().c_str());
  }
  std::sort(us.begin(), us.end());
  auto pct = [&](double p) {
    return us.empty() ? 0 : us[static_cast<size_t>(p * static_cast<double>(us.size() - 1))];
  };
  state.counters["p50_us"] = pct(0.50);
  state.counters["p99_us"] = pct(0.99);
  state.counters["checkpoints"] = static_cast<double>(checkpointer.stats().taken);
}
BENCHMARK(BM_AuditAppendWithCheckpoints)->ArgNames({"checkpoints"})->Arg(0)->Arg(1)
    ->Iterations(20000);

// The monitor stage alone, over 50 tools of one tenant (a map look-up per label, one series each).
void BM_MonitorStage(benchmark::State& state) {
  MonitorStage stage;
  std::vector<CallContext> calls(50);
  for (size_t i = 0; i < calls.size(); ++i) {
    calls[i].tenant = "acme";
    calls[i].agent = "bot";
    calls[i].tool = "mail__tool_" + std::to_string(i);
  }
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(stage.Run(calls[i]));
    i = (i + 1) % calls.size();
  }
}
BENCHMARK(BM_MonitorStage);

}  // namespace

BENCHMARK_MAIN();
