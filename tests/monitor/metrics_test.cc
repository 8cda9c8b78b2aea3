// The metrics registry (src/monitor/metrics.h): the exposition format line by line, label
// escaping of hostile values, the cardinality limits a caller inventing names runs into, and the
// collector handles that must not let a scrape read a component that is gone.
#include "monitor/metrics.h"

#include <gtest/gtest.h>

#include <atomic>
#include <sstream>
#include <thread>

#include "monitor/families.h"

namespace warden::monitor {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool Has(const std::string& text, const std::string& line) {
  for (const std::string& l : Lines(text))
    if (l == line) return true;
  return false;
}

TEST(MetricsFamily, CounterRendersHelpTypeAndSeriesInAStableOrder) {
  Family f("warden_x_total", "Things\\done\nwell", Type::kCounter,
           {{"tenant", 10}, {"decision", 0}}, 100);
  f.Add({"b", "deny"});
  f.Add({"a", "allow"}, 2);
  f.Add({"b", "deny"});
  std::string out;
  f.Render(out);
  EXPECT_EQ(out,
            "# HELP warden_x_total Things\\\\done\\nwell\n"
            "# TYPE warden_x_total counter\n"
            "warden_x_total{tenant=\"a\",decision=\"allow\"} 2\n"
            "warden_x_total{tenant=\"b\",decision=\"deny\"} 2\n");
  EXPECT_EQ(f.Value({"b", "deny"}), 2);
  EXPECT_EQ(f.Value({"c", "deny"}), 0);
}

TEST(MetricsFamily, HistogramBucketsAreCumulativeWithSumAndCount) {
  Family f("warden_t_seconds", "T", Type::kHistogram, {{"stage", 0}}, 100);
  f.Observe({"policy"}, 0.000004);  // first bucket (5e-06)
  f.Observe({"policy"}, 0.003);     // 0.005
  f.Observe({"policy"}, 100);       // past 60 s: +Inf only
  std::string out;
  f.Render(out);
  EXPECT_TRUE(Has(out, "# TYPE warden_t_seconds histogram")) << out;
  EXPECT_TRUE(Has(out, "warden_t_seconds_bucket{stage=\"policy\",le=\"5e-06\"} 1")) << out;
  EXPECT_TRUE(Has(out, "warden_t_seconds_bucket{stage=\"policy\",le=\"0.0025\"} 1")) << out;
  EXPECT_TRUE(Has(out, "warden_t_seconds_bucket{stage=\"policy\",le=\"0.005\"} 2")) << out;
  EXPECT_TRUE(Has(out, "warden_t_seconds_bucket{stage=\"policy\",le=\"60\"} 2")) << out;
  EXPECT_TRUE(Has(out, "warden_t_seconds_bucket{stage=\"policy\",le=\"+Inf\"} 3")) << out;
  EXPECT_TRUE(Has(out, "warden_t_seconds_count{stage=\"policy\"} 3")) << out;
  const std::string sum = "warden_t_seconds_sum{stage=\"policy\"} ";
  auto at = out.find(sum);
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_NEAR(std::stod(out.substr(at + sum.size())), 100.003004, 1e-9);
}

TEST(MetricsFamily, UnlabelledSeriesHasNoBraces) {
  Family f("warden_w_seconds", "W", Type::kHistogram, {}, 10);
  f.Observe({}, 0.5);
  std::string out;
  f.Render(out);
  EXPECT_TRUE(Has(out, "warden_w_seconds_bucket{le=\"0.5\"} 1")) << out;
  EXPECT_TRUE(Has(out, "warden_w_seconds_count 1")) << out;
}

TEST(MetricsFamily, HostileLabelValuesAreEscapedNotInjected) {
  Family f("warden_y_total", "Y", Type::kCounter, {{"tool", 100}}, 100);
  // A tool name that tries to close the label and add a line of its own.
  f.Add({"evil\"} 1\nwarden_fake_total 99\n\\"});
  f.Add({std::string_view("bad\xff\x01utf8 caf\xc3\xa9", 15)});
  std::string out;
  f.Render(out);
  EXPECT_TRUE(Has(out, "warden_y_total{tool=\"evil\\\"} 1\\nwarden_fake_total 99\\n\\\\\"} 1"))
      << out;
  EXPECT_FALSE(Has(out, "warden_fake_total 99")) << out;
  EXPECT_TRUE(Has(out, "warden_y_total{tool=\"bad??utf8 caf\xc3\xa9\"} 1")) << out;
  for (const std::string& line : Lines(out)) {
    if (line.starts_with("#")) continue;
    EXPECT_TRUE(line.starts_with("warden_y_total{")) << line;
  }
}

TEST(MetricsFamily, ValuesPastALabelsLimitAreOtherPerFirstLabel) {
  Family f("warden_z_total", "Z", Type::kCounter, {{"tenant", 2}, {"tool", 3}, {"decision", 0}},
           1000);
  for (int i = 0; i < 10; ++i) f.Add({"acme", "tool" + std::to_string(i), "deny"});
  // Another tenant has limits of its own.
  f.Add({"globex", "tool9", "allow"});
  // A third tenant is past the tenant limit.
  f.Add({"initech", "tool0", "allow"});
  EXPECT_EQ(f.Value({"acme", "tool0", "deny"}), 1);
  EXPECT_EQ(f.Value({"acme", "tool2", "deny"}), 1);
  EXPECT_EQ(f.Value({"acme", "tool3", "deny"}), 0);
  EXPECT_EQ(f.Value({"acme", "other", "deny"}), 7);
  EXPECT_EQ(f.Value({"globex", "tool9", "allow"}), 1);
  EXPECT_EQ(f.Value({"other", "tool0", "allow"}), 1);
  // Kept values stay kept: the first three tools keep their own series.
  f.Add({"acme", "tool1", "deny"});
  EXPECT_EQ(f.Value({"acme", "tool1", "deny"}), 2);
  // A caller cannot claim a kept slot with the literal "other".
  Family g("warden_o_total", "O", Type::kCounter, {{"tool", 1}}, 10);
  g.Add({"other"});
  g.Add({"real"});
  EXPECT_EQ(g.Value({"real"}), 1);
  EXPECT_EQ(g.Value({"other"}), 1);
}

TEST(MetricsFamily, ASeriesCapFoldsEveryLimitedLabel) {
  Family f("warden_c_total", "C", Type::kCounter, {{"tenant", 1000}, {"decision", 0}}, 5);
  for (int i = 0; i < 50; ++i) f.Add({"t" + std::to_string(i), i % 2 ? "allow" : "deny"});
  EXPECT_LE(f.series(), 7u);  // five, then "other" once per decision
  EXPECT_EQ(f.Value({"other", "allow"}) + f.Value({"other", "deny"}), 45);
}

TEST(MetricsFamily, ConcurrentCountsAreAllKept) {
  Family f("warden_p_total", "P", Type::kCounter, {{"tool", 8}}, 100);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&f, t] {
      for (int i = 0; i < 10000; ++i) f.Add({"tool" + std::to_string((i + t) % 4)});
    });
  for (auto& t : threads) t.join();
  double sum = 0;
  for (int i = 0; i < 4; ++i) sum += f.Value({"tool" + std::to_string(i)});
  EXPECT_EQ(sum, 40000);
}

TEST(MetricsRegistry, RendersFamiliesThenCollectorsAndDropsAGoneCollector) {
  Registry r;
  r.Add("warden_a_total", "A", Type::kCounter, {}).Add({});
  EXPECT_EQ(&r.Add("warden_a_total", "A", Type::kCounter, {}),
            &r.Add("warden_a_total", "A", Type::kCounter, {}));
  Registry::Handle h = r.AddCollector([](Exposition& e) {
    e.Header("warden_g", "G", Type::kGauge);
    e.Sample("warden_g", {{"scope", "to\"ol"}}, 3);
  });
  std::string out = r.Render();
  EXPECT_TRUE(Has(out, "warden_a_total 1")) << out;
  EXPECT_TRUE(Has(out, "# TYPE warden_g gauge")) << out;
  EXPECT_TRUE(Has(out, "warden_g{scope=\"to\\\"ol\"} 3")) << out;
  EXPECT_LT(out.find("warden_a_total"), out.find("warden_g"));
  h.Reset();
  EXPECT_EQ(r.Render().find("warden_g"), std::string::npos);
}

TEST(MetricsRegistry, ResettingAHandleWaitsForTheScrapeThatRunsIt) {
  Registry r;
  std::atomic<bool> in_collect{false}, release{false};
  auto owned = std::make_unique<int>(7);
  Registry::Handle h = r.AddCollector([&](Exposition& e) {
    in_collect = true;
    while (!release) std::this_thread::yield();
    e.Sample("warden_v", {}, *owned);  // reads what the owner destroys after Reset
  });
  std::thread scrape([&] { (void)r.Render(); });
  while (!in_collect) std::this_thread::yield();
  std::atomic<bool> reset_done{false};
  std::thread owner([&] {
    h.Reset();
    reset_done = true;
    owned.reset();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(reset_done) << "Reset returned while the collector was still running";
  release = true;
  scrape.join();
  owner.join();
  EXPECT_TRUE(reset_done);
}

TEST(MetricsRegistry, AHandleMayOutliveItsRegistry) {
  Registry::Handle h;
  {
    Registry r;
    h = r.AddCollector([](Exposition&) {});
  }
  h.Reset();  // nothing to reach: must not crash (ASan would see a use after free)
  SUCCEED();
}

TEST(MetricsFamilies, TheGatewaysFamiliesAreDeclaredOnceInTheDefaultRegistry) {
  const Families& a = Metrics();
  const Families& b = Metrics();
  EXPECT_EQ(&a.calls, &b.calls);
  a.calls.Add({"acme", "bot", "mail__send", "allow"});
  std::string out = DefaultRegistry().Render();
  EXPECT_TRUE(Has(out, "# TYPE warden_tool_calls_total counter")) << out;
  EXPECT_TRUE(Has(out,
                  "warden_tool_calls_total{tenant=\"acme\",agent=\"bot\",tool=\"mail__send\","
                  "decision=\"allow\"} 1"))
      << out;
  for (const char* name :
       {"warden_tool_call_duration_seconds", "warden_audit_write_seconds",
        "warden_sandbox_starts_total", "warden_sandbox_runs_total", "warden_egress_requests_total",
        "warden_upstream_restarts_total", "warden_http_refusals_total"})
    EXPECT_NE(out.find(std::string("# TYPE ") + name + " "), std::string::npos) << name;
}

TEST(MetricsBuckets, BoundsAreIncreasingAndTheIndexIsTheFirstBoundNotBelow) {
  for (std::size_t i = 1; i < kLatencyBuckets.size(); ++i)
    EXPECT_LT(kLatencyBuckets[i - 1], kLatencyBuckets[i]);
  EXPECT_EQ(LatencyBucket(0), 0u);
  EXPECT_EQ(LatencyBucket(0.000005), 0u);  // le is inclusive
  EXPECT_EQ(LatencyBucket(0.0000051), 1u);
  EXPECT_EQ(LatencyBucket(1e9), kLatencyBuckets.size());
}

}  // namespace
}  // namespace warden::monitor
