// MCP 2026-07-28's multi-round trips (bench/README.md, "Parked calls"): what a call costs while it
// waits, parked on this node, for its client's retry (session/session_modern.cc), and what warden's
// requestState costs to seal and to open. The whole gateway core runs as `warden serve` runs it:
// task contexts (McpSession in modern mode), the standard chain with one stage added before
// execute that asks the client a question for every call (as the approval stage asks in-band), the
// real audit log (SQLite, in a temporary directory), the worker pool, an in-process upstream.
// Each call is answered input_required; the benchmark then sends every retry with the answer and
// the state, and each call runs.
//
// Usage: parked_calls_bench [CALLS] [TASKS]   (defaults 10000 and 10)
// Prints: heap and RSS per parked call, retry-to-result latency percentiles, and the seal, open
// and digest costs of one request state.
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "audit/audit_log.h"
#include "bench_upstream.h"
#include "gateway/gateway.h"
#include "gateway/session/request_state.h"
#include "gateway/session/session.h"
#include "gateway/stages/chain.h"
#include "policy/holder.h"
#include "policy/policy.h"
#include "upstream/client.h"

namespace {

using namespace warden;
using namespace warden::gateway;
using namespace warden::bench;

// Asks the client one question per call and continues once it is answered.
class AskStage : public Stage {
 public:
  std::string_view name() const override { return "ask"; }
  StageOutcome Run(CallContext& call) override {
    if (!call.ask_client) return StageOutcome::Deny(Refusal::kInternal, "no client to ask");
    call.park = [&call](std::function<void(StageOutcome)> resume) {
      call.ask_client("elicitation/create",
                      json{{"message", "go on?"}, {"requestedSchema", {{"type", "object"}}}},
                      [resume](mcp::Message) { resume(StageOutcome::Continue()); });
    };
    return StageOutcome{StageResult::kPause, Refusal::kNone, "asking the client", ""};
  }
};

json Meta() {
  return {{"io.modelcontextprotocol/protocolVersion", "2026-07-28"},
          {"io.modelcontextprotocol/clientCapabilities", {{"elicitation", json::object()}}}};
}

// Seal, open and digest, each timed over many rounds on this thread.
void StateCosts() {
  RequestStateSealer sealer;
  RequestState s{"0123456789abcdef0123456789abcdef", "acme/alice/bot", "board-prep-42",
                 "tools/call", std::string(64, 'a'), RequestStateSealer::NowMs() + 300000,
                 "parked", "pk_local_0123456789abcdef0123456789abcdef"};
  mcp::Request request{mcp::Id(int64_t{1}), "tools/call",
                       json{{"name", "mail__send_email"},
                            {"arguments", {{"to", "ceo@brightlane.example"}, {"body", std::string(200, 'x')}}},
                            {"_meta", Meta()}}};
  constexpr int kRounds = 100000;
  std::string sealed;
  auto t0 = Clock::now();
  for (int i = 0; i < kRounds; ++i) sealed = sealer.Seal(s);
  auto t1 = Clock::now();
  size_t opened = 0;
  for (int i = 0; i < kRounds; ++i) opened += sealer.Open(sealed).ok();
  auto t2 = Clock::now();
  size_t digests = 0;
  for (int i = 0; i < kRounds; ++i) digests += CallDigest(request).size();
  auto t3 = Clock::now();
  auto us = [](auto a, auto b) { return std::chrono::duration<double, std::micro>(b - a).count() / kRounds; };
  std::printf("request state (%zu bytes sealed): seal %.2f us, open %.2f us, call digest %.2f us"
              " (%zu opened, %zu digest bytes)\n",
              sealed.size(), us(t0, t1), us(t1, t2), us(t2, t3), opened, digests / kRounds);
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const size_t calls = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 10000;
  const size_t tasks = argc > 2 ? std::max<size_t>(1, std::strtoul(argv[2], nullptr, 10)) : 10;
  StateCosts();

  auto fixture = MakeCoreFixture("parked", "  - match: { server: up }\n    risk: low\n    effect: allow\n",
                                 "", ChainLink{"ask", [](const StageServices&) -> std::unique_ptr<Stage> {
                                   return std::make_unique<AskStage>();
                                 }});
  if (!fixture) return 1;
  int status = 0;
  {
    GatewayCore core(*fixture->holder, *fixture->audit, fixture->kills, fixture->tools,
                     identity::Caller{"", "bench", "", ""}, fixture->options);
    std::vector<std::shared_ptr<McpSession>> contexts;
    for (size_t t = 0; t < tasks; ++t) {
      auto context = std::make_shared<McpSession>(
          core, identity::Caller{"", "bench", "", ""},
          SessionOptions{.transport = "http", .modern = true, .task = "task-" + std::to_string(t)});
      core.Register(context);
      // Listed first, as a client does, so that no call waits for the upstream.
      std::promise<void> listed;
      context->HandleModern(mcp::Request{mcp::Id(int64_t{1}), "tools/list", json{{"_meta", Meta()}}},
                            Exchange{.related = nullptr, .reply = [&listed](mcp::Message) { listed.set_value(); }});
      listed.get_future().wait();
      contexts.push_back(std::move(context));
    }
    auto params = [&](size_t i) {
      json meta = Meta();
      meta["warden/task"] = "task-" + std::to_string(i % tasks);
      return json{{"name", "up__echo"}, {"arguments", {{"n", i}}}, {"_meta", meta}};
    };
    malloc_trim(0);
    const size_t heap_before = HeapInUse(), rss_before = RssBytes();

    std::mutex mu;
    std::vector<json> first(calls);
    std::string first_error;
    std::atomic<size_t> answered{0};
    const auto park_start = Clock::now();
    for (size_t i = 0; i < calls; ++i) {
      contexts[i % tasks]->HandleModern(
          mcp::Request{mcp::Id(static_cast<int64_t>(i + 10)), "tools/call", params(i)},
          Exchange{.related = nullptr, .reply = [&, i](mcp::Message m) {
                     std::lock_guard lock(mu);
                     if (const auto* r = std::get_if<mcp::Response>(&m)) {
                       first[i] = r->result;
                     } else if (first_error.empty()) {
                       first_error = mcp::Serialize(m);
                     }
                     answered.fetch_add(1);
                   }});
    }
    for (int waited = 0; answered.load() < calls && waited < 120000; ++waited)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const double park_s = std::chrono::duration<double>(Clock::now() - park_start).count();
    size_t parked = 0;
    for (auto& c : contexts) parked += c->parked_count();
    const size_t heap_held = HeapInUse(), rss_held = RssBytes();

    std::vector<Clock::time_point> sent(calls), done(calls);
    std::atomic<size_t> finished{0}, ran{0};
    const auto retry_start = Clock::now();
    for (size_t i = 0; i < calls; ++i) {
      json retry = params(i);
      const json& r = first[i];
      if (!r.is_object() || r.value("resultType", "") != "input_required") continue;
      retry["requestState"] = r["requestState"];
      retry["inputResponses"] = {{r["inputRequests"].begin().key(), {{"action", "accept"}}}};
      sent[i] = Clock::now();
      contexts[i % tasks]->HandleModern(
          mcp::Request{mcp::Id(static_cast<int64_t>(calls + i + 10)), "tools/call", std::move(retry)},
          Exchange{.related = nullptr, .reply = [&, i](mcp::Message m) {
                     done[i] = Clock::now();
                     if (const auto* r = std::get_if<mcp::Response>(&m);
                         r && !r->result.value("isError", false))
                       ran.fetch_add(1);
                     finished.fetch_add(1);
                   }});
    }
    for (int waited = 0; finished.load() < parked && waited < 120000; ++waited)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const double retry_s = std::chrono::duration<double>(Clock::now() - retry_start).count();
    std::vector<double> latency_us;
    for (size_t i = 0; i < calls; ++i)
      if (done[i] > sent[i])
        latency_us.push_back(std::chrono::duration<double, std::micro>(done[i] - sent[i]).count());
    std::printf("parked calls: %zu over %zu task contexts, %zu parked in %.2f s, retried in %.2f s\n",
                calls, tasks, parked, park_s, retry_s);
    std::printf("per parked call: heap %.0f bytes, RSS %.0f bytes\n",
                static_cast<double>(heap_held - heap_before) / static_cast<double>(calls),
                (static_cast<double>(rss_held) - static_cast<double>(rss_before)) /
                    static_cast<double>(calls));
    std::printf("retry to result (us): p50 %.1f  p90 %.1f  p99 %.1f  max %.1f  (%zu ran)\n",
                Percentile(latency_us, 0.50), Percentile(latency_us, 0.90),
                Percentile(latency_us, 0.99), Percentile(latency_us, 1.0), ran.load());
    if (!first_error.empty()) std::printf("first error: %s\n", first_error.c_str());
    if (parked != calls || ran.load() != calls) status = 1;
    for (auto& c : contexts) c->Close();
  }
  return status;
}
