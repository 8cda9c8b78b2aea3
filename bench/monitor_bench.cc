// What monitoring costs a call (docs/monitoring.md, "Cost"; bench/README.md, "Monitoring"): the
// standard pipeline chain with and without its `monitor` stage, in the same run, on a call the
// policy denies (identity, kill switches, policy, then the final stages) and on one it allows to a
// stub built-in (the whole chain, execute included). Two variants of each: with the real audit
// log (SQLite on WARDEN_BENCH_DIR, default /dev/shm, sync normal) and without the audit stage,
// where the monitor's own cost is not lost in the write's variance. The stage bucket counting
// the pipeline does for /metrics is in every variant (it is not optional).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "audit/audit_log.h"
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

struct World {
  std::string dir;
  std::shared_ptr<policy::PolicyHolder> holder;
  std::unique_ptr<audit::AuditLog> audit;
  KillSwitches kills;
  BuiltinTools tools;

  World() {
    const char* base = std::getenv("WARDEN_BENCH_DIR");
    std::string tmpl = std::string(base ? base : "/dev/shm") + "/warden-monitor-bench.XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) std::abort();
    dir = buf.data();
    auto loaded = policy::LoadPolicyText(kPolicy, "bench.yaml");
    if (!loaded.ok()) std::abort();
    holder = std::make_shared<policy::PolicyHolder>(
        std::make_shared<const policy::Policy>(std::move(*loaded)));
    audit::AuditOptions options;
    options.path = dir + "/warden.db";
    auto log = audit::AuditLog::Open(options);
    if (!log.ok()) std::abort();
    audit = std::move(*log);
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

void RunChain(benchmark::State& state, bool monitor, bool audit, const char* tool) {
  World& w = TheWorld();
  StageServices services{w.holder.get(), &w.kills, &w.tools, w.audit.get(), {}};
  services.caller = identity::Caller{"acme", "alice", "bot", ""};
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
