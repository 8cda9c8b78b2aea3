// Audit log append throughput: sync normal, and sync full with 1, 8 and 32 threads appending
// at once. Group commit should make full-sync throughput grow with the threads: they share one
// fsync per commit. The database lives under the current directory (not /tmp, which may be
// tmpfs, where fsync costs nothing); set WARDEN_BENCH_DIR to put it elsewhere.
//
//   cmake --build build --target audit_bench && build/bench/audit_bench
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "audit/merkle.h"

namespace {

using warden::audit::AuditEntry;
using warden::audit::AuditLog;
using warden::audit::AuditOptions;
using warden::audit::EntryKind;
using warden::audit::ResultSummary;
using warden::audit::SyncLevel;
using warden::audit::ConsistencyProof;
using warden::audit::Digest;
using warden::audit::InclusionProof;
using warden::audit::LeafHash;
using warden::audit::MerkleRoot;

std::unique_ptr<AuditLog> g_log;
std::string g_dir;

AuditEntry BenchEntry(int64_t i) {
  AuditEntry e;
  e.tenant = "acme";
  e.user = "alice";
  e.agent = "coder";
  e.session = "session-1";
  e.tool = "fs__read";
  e.arguments = {
      {"path", "/srv/data/report-" + std::to_string(i) + ".csv"}, {"offset", i}, {"length", 4096}};
  e.decision = "allow";
  e.rule = "files-read-only";
  e.reason = "read-only access to /srv/data";
  e.result = ResultSummary{4096, std::string(64, 'a'), "id,name,amount\n1,widget,42\n"};
  e.labels = {"private_output"};
  e.latency_us = 250;
  e.kind = EntryKind::kCall;
  return e;
}

void OpenLog(SyncLevel sync) {
  const char* base = getenv("WARDEN_BENCH_DIR");
  std::string pattern = std::string(base ? base : ".") + "/audit-bench-XXXXXX";
  g_dir = mkdtemp(pattern.data());
  AuditOptions options;
  options.path = g_dir + "/warden.db";
  options.sync = sync;
  auto log = AuditLog::Open(options);
  if (!log) {
    fprintf(stderr, "audit_bench: %s\n", log.status().message().c_str());
    abort();
  }
  g_log = std::move(*log);
}

void CloseLog(benchmark::State& state) {
  auto stats = g_log->stats();
  state.counters["entries_per_commit"] =
      stats.commits ? static_cast<double>(stats.appends) / static_cast<double>(stats.commits) : 0;
  g_log.reset();
  std::filesystem::remove_all(g_dir);
}

void Append(benchmark::State& state, SyncLevel sync) {
  if (state.thread_index() == 0) OpenLog(sync);
  int64_t i = 0;
  for (auto _ : state) {
    auto receipt = g_log->Append(BenchEntry(i++));
    if (!receipt) state.SkipWithError(receipt.status().message().c_str());
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) CloseLog(state);
}

void BM_AppendSyncNormal(benchmark::State& state) { Append(state, SyncLevel::kNormal); }
void BM_AppendSyncFull(benchmark::State& state) { Append(state, SyncLevel::kFull); }

// One caller's view: latency percentiles of single appends (what a gateway call waits for).
void AppendLatency(benchmark::State& state, SyncLevel sync) {
  OpenLog(sync);
  std::vector<double> us;
  int64_t i = 0;
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    auto receipt = g_log->Append(BenchEntry(i++));
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                     .count());
    if (!receipt) state.SkipWithError(receipt.status().message().c_str());
  }
  std::sort(us.begin(), us.end());
  auto pct = [&](double p) {
    return us.empty() ? 0 : us[static_cast<size_t>(p * static_cast<double>(us.size() - 1))];
  };
  state.counters["p50_us"] = pct(0.50);
  state.counters["p99_us"] = pct(0.99);
  state.counters["max_us"] = us.empty() ? 0 : us.back();
  CloseLog(state);
}

void BM_AppendLatencySyncNormal(benchmark::State& state) {
  AppendLatency(state, SyncLevel::kNormal);
}
void BM_AppendLatencySyncFull(benchmark::State& state) { AppendLatency(state, SyncLevel::kFull); }

BENCHMARK(BM_AppendSyncNormal)->Threads(1)->Threads(8)->Threads(32)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_AppendSyncFull)->Threads(1)->Threads(8)->Threads(32)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_AppendLatencySyncNormal)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_AppendLatencySyncFull)->UseRealTime()->MinTime(2.0);

// The Merkle tree over state.range(0) leaves, as `warden audit prove` and `consistency` build it
// per call (after the chain walk, which `warden audit verify` also does).
std::vector<Digest> BenchLeaves(int64_t n) {
  std::vector<Digest> leaves(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) leaves[static_cast<size_t>(i)] = LeafHash(std::to_string(i));
  return leaves;
}

void BM_MerkleRoot(benchmark::State& state) {
  auto leaves = BenchLeaves(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(MerkleRoot(leaves));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_InclusionProof(benchmark::State& state) {
  auto leaves = BenchLeaves(state.range(0));
  uint64_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(InclusionProof(leaves, i));
    i = (i + 7919) % leaves.size();
  }
}

void BM_ConsistencyProof(benchmark::State& state) {
  auto leaves = BenchLeaves(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(ConsistencyProof(leaves, leaves.size() / 3));
}

BENCHMARK(BM_MerkleRoot)->Arg(1 << 20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_InclusionProof)->Arg(1 << 20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ConsistencyProof)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
