// Policy decisions per second with 1,000 rules (target: under 2 microseconds per decision).
// The policy mixes what real ones hold: exact tool names with argument predicates (regex, prefix,
// in, min/max, exists), PREFIX* globs, globs with a leading wildcard that every name must be tried
// against (*__delete_*), tenant- and user-specific rules; and the calls mix first-rule hits,
// fall-throughs past failed predicates, and tools no rule names (which visit every candidate).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <vector>

#include "policy/policy.h"
#include "policy/trifecta.h"

namespace {

using warden::policy::CallContext;
using warden::policy::Policy;
using warden::policy::ToolCall;

constexpr int kServers = 100;

std::string Server(int s) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "s%03d", s);
  return buf;
}

// 10 general rules first, then 99 servers x 10 rules: 1,000 rules.
std::string ThousandRulePolicy() {
  std::string y =
      "version: 1\n"
      "identity:\n  tenants:\n"
      "    acme:\n      users: { alice: {}, bob: { tools: [\"s0*\", \"s1*\"] } }\n"
      "      agents: { alice-coder: { user: alice, profile: coder }, bob-bot: { user: bob } }\n"
      "    globex:\n      users: { carol: {} }\n"
      "agent_profiles: { coder: { never: [private_output] } }\n"
      "scopes: { reading: { tools: [\"*__read_*\", \"*__list_*\"], access: read } }\n"
      "tools:\n";
  const char* general[] = {"*__delete_*",  "*__drop_*", "*_admin_*", "*__sudo",
                           "*__shutdown*", "*__wipe_*", "*__purge*", "*__format_disk",
                           "*__chmod_*",   "*__kill_*"};
  for (const char* g : general)
    y += "  - { match: { tool: \"" + std::string(g) + "\" }, effect: deny }\n";
  for (int s = 1; s < kServers; ++s) {
    std::string n = Server(s);
    y += "  - { match: { tool: \"" + n +
         "__send_email\", args: { \"/to\": { regex: \"[a-z.]+@acme\\\\.com\" } } }, risk: medium, "
         "labels: [external_send] }\n";
    y +=
        "  - { match: { tool: \"" + n + "__send_email\" }, risk: high, labels: [external_send] }\n";
    y += "  - { match: { tool: \"" + n +
         "__write_file\", args: { \"/path\": { prefix: \"/work/\" }, \"/mode\": { in: [create, "
         "overwrite] } } }, risk: medium }\n";
    y += "  - { match: { tool: \"" + n + "__write_file\" }, effect: deny }\n";
    y += "  - { match: { tool: \"" + n +
         "__refund\", args: { \"/amount\": { min: 0, max: 100 }, \"/order/id\": { exists: true } } "
         "}, risk: medium }\n";
    y += "  - { match: { tool: \"" + n + "__refund\", tenant: globex }, effect: deny }\n";
    y += "  - { match: { tool: \"" + n +
         "__read_*\" }, risk: low, access: read, labels: [private_output] }\n";
    y += "  - { match: { tool: \"" + n + "__list_*\", user: alice }, risk: low, access: read }\n";
    y += "  - { match: { tool: \"" + n +
         "__search?\" }, risk: low, access: read, labels: [untrusted_output] }\n";
    y += "  - { match: { tool: \"" + n + "__*\", server: \"" + n + "\" }, risk: medium }\n";
  }
  return y;
}

const Policy& BenchPolicy() {
  static const Policy policy = [] {
    auto loaded = warden::policy::LoadPolicyText(ThousandRulePolicy(), "bench-policy.yaml");
    if (!loaded.ok()) {
      std::fprintf(stderr, "bench policy: %s\n", loaded.status().message().c_str());
      std::abort();
    }
    if (loaded->rules.size() != 1000) std::abort();
    return std::move(loaded).value();
  }();
  return policy;
}

struct Call {
  CallContext context;
  ToolCall call;
};

std::vector<Call> MixedCalls() {
  std::vector<Call> calls;
  CallContext alice{"acme", "alice", "alice-coder", ""};
  CallContext bob{"acme", "bob", "bob-bot", ""};
  CallContext carol{"globex", "carol", "", ""};
  CallContext scoped{"acme", "alice", "", "reading"};
  for (int i = 0; i < 64; ++i) {
    std::string n = Server(1 + (i * 37) % (kServers - 1));
    switch (i % 8) {
      case 0:
        calls.push_back(
            {alice, {n, n + "__send_email", {{"to", "dev.team@acme.com"}, {"body", "hi"}}}});
        break;
      case 1:
        calls.push_back({alice, {n, n + "__send_email", {{"to", "someone@elsewhere.example"}}}});
        break;
      case 2:
        calls.push_back(
            {bob, {n, n + "__write_file", {{"path", "/work/a.txt"}, {"mode", "create"}}}});
        break;
      case 3:
        calls.push_back({carol, {n, n + "__refund", {{"amount", 40}, {"order", {{"id", "o-1"}}}}}});
        break;
      case 4:
        calls.push_back({scoped, {n, n + "__read_inbox", nlohmann::json::object()}});
        break;
      case 5:
        calls.push_back({alice, {n, n + "__delete_repo", {{"name", "x"}}}});
        break;
      case 6:
        calls.push_back({carol, {n, n + "__searchx", {{"q", "policy"}}}});
        break;
      case 7:
        calls.push_back({alice, {"weather", "weather__forecast", {{"city", "Lisbon"}}}});
        break;
    }
  }
  return calls;
}

void BM_Decide_1000Rules(benchmark::State& state) {
  const Policy& policy = BenchPolicy();
  const std::vector<Call> calls = MixedCalls();
  size_t i = 0;
  for (auto _ : state) {
    const Call& c = calls[i++ & 63];
    benchmark::DoNotOptimize(warden::policy::Decide(policy, c.context, c.call));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Decide_1000Rules);

// The same calls with the rule index removed: every rule is tried in order.
void BM_Decide_1000Rules_NoIndex(benchmark::State& state) {
  Policy policy = BenchPolicy();
  policy.index.reset();
  const std::vector<Call> calls = MixedCalls();
  size_t i = 0;
  for (auto _ : state) {
    const Call& c = calls[i++ & 63];
    benchmark::DoNotOptimize(warden::policy::Decide(policy, c.context, c.call));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Decide_1000Rules_NoIndex);

void BM_Visible_1000Rules(benchmark::State& state) {
  const Policy& policy = BenchPolicy();
  const std::vector<Call> calls = MixedCalls();
  const std::vector<std::string> no_hint;
  size_t i = 0;
  for (auto _ : state) {
    const Call& c = calls[i++ & 63];
    benchmark::DoNotOptimize(warden::policy::Visible(policy, c.context, c.call.tool, no_hint));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Visible_1000Rules);

}  // namespace

// The trifecta's per-call work (docs/trifecta.md): absorbing a 20 KB private mail with an
// untrusted body, and checking a 1 KB send against a session that holds 10 of them (the
// fingerprint scan is linear in the send's bytes; the set lookups are O(1)).
std::string Text(size_t bytes, uint64_t seed) {
  static const char* words[] = {"invoice", "payment",  "quarter", "meeting", "contract", "budget",
                                "review",  "schedule", "account", "project", "deadline", "report"};
  std::string out;
  uint64_t x = seed;
  while (out.size() < bytes) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    out += words[(x >> 33) % 12];
    out += (x >> 20) % 7 == 0 ? ", " : " ";
    if ((x >> 40) % 11 == 0) out += std::to_string((x >> 8) % 100000) + " ";
  }
  return out.substr(0, bytes);
}

nlohmann::json Mail(uint64_t seed) {
  return {{"structuredContent",
           {{"from", "sender" + std::to_string(seed) + "@corp.example"},
            {"subject", "Quarterly numbers " + std::to_string(seed)},
            {"body", Text(20000, seed)}}}};
}

warden::policy::FlowSpec MailSpec() {
  warden::policy::FlowSpec f;
  f.untrusted_parts = {*warden::policy::JsonPattern::Parse("/body")};
  f.private_parts = {*warden::policy::JsonPattern::Parse("")};
  return f;
}

void BM_Trifecta_Absorb20KB(benchmark::State& state) {
  using namespace warden::policy;
  const FlowSpec spec = MailSpec();
  const nlohmann::json mail = Mail(1);
  for (auto _ : state) {
    FlowFacts facts =
        Absorb(&spec, kUntrustedOutput | kPrivateOutput, {{"id", "m1"}}, mail, {1, "mail"});
    benchmark::DoNotOptimize(facts);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * 20000);
}
BENCHMARK(BM_Trifecta_Absorb20KB);

void BM_Trifecta_CheckSend1KB(benchmark::State& state) {
  using namespace warden::policy;
  const FlowSpec read = MailSpec();
  FlowSpec send;
  send.destinations = {*JsonPattern::Parse("/to")};
  FlowState session;
  for (uint64_t i = 1; i <= 10; ++i)
    session.Add(
        Absorb(&read, kUntrustedOutput | kPrivateOutput, {{"id", i}}, Mail(i), {i, "mail"}));
  const nlohmann::json args = {{"to", "sender3@corp.example"}, {"body", Text(1000, 999)}};
  const TrifectaSettings settings{warden::policy::Effect::kAsk, true};
  for (auto _ : state) {
    TrifectaCheck c = CheckCall(session, {}, settings, &send, kExternalSend, args);
    benchmark::DoNotOptimize(c);
  }
  state.counters["prints"] = double(session.print_count());
}
BENCHMARK(BM_Trifecta_CheckSend1KB);

BENCHMARK_MAIN();
