// Pending approvals (bench/README.md, "Approvals"): what a call waiting for a person costs, with
// 10,000 of them pending at once, and how soon after a person approves it the call reaches the
// upstream (the target: under 10 ms). The whole gateway core as `warden serve` runs it:
// real McpSessions, the standard chain with its approval stage, the real ApprovalGate and
// audit log on SQLite in a temporary directory, the worker pool; the upstream is the in-process
// client of bench_upstream.h. Approvals are decided the way the API does (ApprovalGate::Approve,
// which writes the decision and wakes the call), one at a time; then a sample the way
// `warden approvals approve` does (a second connection to the file, which the gate notices by
// polling, every 50 ms).
//
// Usage: approvals_bench [PENDING] [SESSIONS] [CLI_SAMPLE]   (defaults 10000, 10, 50)
// Prints: heap and RSS per pending approval (the database file's growth apart), and
// approve-to-upstream latency percentiles for both paths.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "bench_upstream.h"
#include "gateway/approvals/approval_gate.h"
#include "gateway/gateway.h"
#include "policy/holder.h"
#include "policy/policy.h"
#include "state/approval_store.h"

namespace {

using namespace warden;
using namespace warden::gateway;
using namespace warden::bench;

// The pending approvals, by the call's argument "n".
std::vector<std::string> PendingById(state::ApprovalStore& store, size_t calls) {
  std::vector<std::string> ids(calls);
  auto pending = store.List(false);
  if (!pending) return ids;
  for (const state::ApprovalRecord& r : *pending) {
    json args = json::parse(r.arguments, nullptr, false);
    const size_t n = args.is_object() ? args.value("n", calls) : calls;
    if (n < calls) ids[n] = r.id;
  }
  return ids;
}

// The database file and its write-ahead log together (a checkpoint moves pages between them).
double DatabaseBytes(const std::string& path) {
  std::error_code ec;
  double bytes = static_cast<double>(std::filesystem::file_size(path, ec));
  const auto wal = std::filesystem::file_size(path + "-wal", ec);
  if (!ec) bytes += static_cast<double>(wal);
  return bytes;
}

void PrintLatency(const char* what, const Timeline& t, size_t from, size_t to) {
  std::vector<double> us;
  for (size_t i = from; i < to; ++i) {
    if (t.reached[i] < t.released[i]) continue;
    us.push_back(std::chrono::duration<double, std::micro>(t.reached[i] - t.released[i]).count());
  }
  std::printf("%s (us): p50 %.0f  p90 %.0f  p99 %.0f  max %.0f  (%zu of %zu reached)\n", what,
              Percentile(us, 0.50), Percentile(us, 0.90), Percentile(us, 0.99), Percentile(us, 1.0),
              us.size(), to - from);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t calls = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 10000;
  const size_t sessions = argc > 2 ? std::max<size_t>(1, std::strtoul(argv[2], nullptr, 10)) : 10;
  const size_t cli_sample = std::min(calls, argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 50);

  auto fixture = MakeCoreFixture("approvals", "  - match: { server: up }\n    risk: high\n    effect: ask\n",
                                 "approvals:\n  timeout: 1h\n");
  if (!fixture) return 1;
  auto gate = ApprovalGate::Open({.path = fixture->db()}, *fixture->audit);
  if (!gate.ok()) {
    std::fprintf(stderr, "approvals: %s\n", gate.status().message().c_str());
    return 1;
  }
  fixture->options.services.approvals = gate->get();
  Timeline timeline;
  timeline.released.resize(calls);
  timeline.reached.resize(calls);
  g_timeline = &timeline;
  int status = 0;
  {
    GatewayCore core(*fixture->holder, *fixture->audit, fixture->kills, fixture->tools,
                     identity::Caller{"", "bench", "", ""}, fixture->options);
    auto open = OpenListedSessions(core, sessions);
    malloc_trim(0);
    const size_t heap_before = HeapInUse(), rss_before = RssBytes();
    const auto file_before = DatabaseBytes(fixture->db());

    std::atomic<size_t> answered{0}, ok{0};
    const auto ask_start = Clock::now();
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
    for (int waited = 0; (*gate)->waiting() < calls && waited < 300000; ++waited)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if ((*gate)->waiting() < calls) {
      std::fprintf(stderr, "only %zu of %zu calls are waiting after 300 s\n", (*gate)->waiting(),
                   calls);
      return 1;
    }
    const double ask_s = std::chrono::duration<double>(Clock::now() - ask_start).count();
    const size_t heap_held = HeapInUse(), rss_held = RssBytes();
    const auto file_held = DatabaseBytes(fixture->db());
    std::vector<std::string> ids = PendingById((*gate)->store(), calls);

    // The API's path, one decision at a time; the last `cli_sample` through another connection.
    const size_t api_calls = calls - cli_sample;
    for (size_t i = 0; i < api_calls; ++i) {
      timeline.released[i] = Clock::now();
      auto decided = (*gate)->Approve(ids[i], state::Person("", "bench"), "");
      if (!decided.ok() || !decided->decided) status = 1;
      // Like a person, one decision after the previous call went out.
      for (int spin = 0; timeline.arrived.load() <= i && spin < 100000; ++spin)
        std::this_thread::yield();
    }
    auto other = state::ApprovalStore::Open({.path = fixture->db()});
    if (!other.ok()) return 1;
    for (size_t i = api_calls; i < calls; ++i) {
      timeline.released[i] = Clock::now();
      auto decided = (*other)->Approve(ids[i], state::Person("", "bench", "bench (cli)"), "");
      if (!decided.ok() || !decided->decided) status = 1;
      for (int waited = 0; timeline.arrived.load() <= i && waited < 5000; ++waited)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    for (int waited = 0; answered.load() < calls && waited < 60000; ++waited)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));

    std::printf("pending approvals: %zu over %zu sessions, asked in %.2f s\n", calls, sessions,
                ask_s);
    std::printf("per pending approval: heap %.0f bytes, RSS %.0f bytes (database: %.0f bytes)\n",
                static_cast<double>(heap_held - heap_before) / static_cast<double>(calls),
                (static_cast<double>(rss_held) - static_cast<double>(rss_before)) /
                    static_cast<double>(calls),
                (file_held - file_before) / static_cast<double>(calls));
    PrintLatency("approve (API path) to upstream", timeline, 0, api_calls);
    PrintLatency("approve (other process) to upstream", timeline, api_calls, calls);
    std::printf("answered %zu, of which results %zu\n", answered.load(), ok.load());
    if (answered.load() != calls || ok.load() != calls) status = 1;
    for (auto& session : open) session->Close();
  }
  g_timeline = nullptr;
  gate->reset();
  return status;
}
