// The anomaly detectors (src/monitor/detectors.h): for each, traffic that must alert and traffic
// that must not. The clock is passed in, so minutes pass without waiting.
#include "monitor/detectors.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace warden::monitor {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;
using Clock = std::chrono::system_clock;

const Clock::time_point kStart = Clock::time_point(std::chrono::hours(24 * 365 * 56));

CallEvent Call(std::string_view agent = "bot", std::string_view tool = "files__read",
               std::string_view decision = "allow") {
  CallEvent e;
  e.tenant = "acme";
  e.user = "alice";
  e.agent = agent;
  e.session = "s1";
  e.tool = tool;
  e.decision = decision;
  return e;
}

std::vector<Alert> Many(Detectors& d, const DetectorConfig& c, const CallEvent& e, int n,
                        Clock::time_point t) {
  std::vector<Alert> out;
  for (int i = 0; i < n; ++i)
    for (Alert& a : d.Observe(c, e, t + std::chrono::milliseconds(i))) out.push_back(std::move(a));
  return out;
}

DetectorConfig VolumeOn() {
  DetectorConfig c;
  c.volume.enabled = true;
  c.volume.window = minutes(10);
  c.volume.deviations = 4;
  c.volume.min_calls = 20;
  return c;
}

TEST(Detectors, NothingIsOnByDefault) {
  Detectors d;
  DetectorConfig c;
  CallEvent e = Call("bot", "files__read", "deny");
  e.sensitive = true;
  e.hosts = {"example.com"};
  e.sandbox_end = "timeout";
  EXPECT_TRUE(Many(d, c, e, 100, kStart).empty());
}

TEST(Detectors, VolumeAlertsOnAMinuteFarAboveTheAgentsBaseline) {
  Detectors d;
  const DetectorConfig c = VolumeOn();
  // Twelve minutes of 10 calls a minute: the baseline (past the 10-minute warm-up).
  for (int m = 0; m < 12; ++m) EXPECT_TRUE(Many(d, c, Call(), 10, kStart + minutes(m)).empty());
  // Then a minute of 60: an alert for the agent and one for the tool, once each.
  std::vector<Alert> alerts = Many(d, c, Call(), 60, kStart + minutes(12));
  ASSERT_EQ(alerts.size(), 2u);
  EXPECT_EQ(alerts[0].detector, "volume");
  EXPECT_EQ(alerts[0].details["key"], "agent");
  EXPECT_EQ(alerts[1].details["key"], "tool");
  EXPECT_EQ(alerts[0].agent, "bot");
  EXPECT_EQ(alerts[0].tenant, "acme");
  EXPECT_NE(alerts[0].message.find("agent 'bot' of tenant 'acme' made"), std::string::npos)
      << alerts[0].message;
  EXPECT_NE(alerts[0].message.find("baseline is 10.0"), std::string::npos) << alerts[0].message;
}

TEST(Detectors, VolumeStaysQuietForSteadyOrNoisyOrdinaryTraffic) {
  Detectors d;
  const DetectorConfig c = VolumeOn();
  // Between 15 and 35 calls a minute, for an hour: within the agent's own variation.
  for (int m = 0; m < 60; ++m) {
    const int n = 15 + (m * 7) % 21;
    EXPECT_TRUE(Many(d, c, Call(), n, kStart + minutes(m)).empty()) << "minute " << m;
  }
}

TEST(Detectors, VolumeWaitsForItsWarmUpAndItsMinimum) {
  Detectors d;
  const DetectorConfig c = VolumeOn();
  // A burst in the agent's first minutes: no baseline yet, no alert.
  EXPECT_TRUE(Many(d, c, Call(), 200, kStart).empty());
  for (int m = 1; m < 11; ++m) Many(d, c, Call("quiet", "t"), 1, kStart + minutes(m));
  // One call a minute, then 15: far above the baseline but under min_calls.
  EXPECT_TRUE(Many(d, c, Call("quiet", "t"), 15, kStart + minutes(11)).empty());
  EXPECT_EQ(Many(d, c, Call("quiet", "t"), 10, kStart + minutes(11)).size(), 2u);
}

TEST(Detectors, VolumeKeysAreBoundedAndForgetTheLeastRecent) {
  Detectors d(/*max_keys=*/4);
  const DetectorConfig c = VolumeOn();
  for (int m = 0; m < 12; ++m) Many(d, c, Call("a", "t"), 5, kStart + minutes(m));
  // Many other agents push "a" out: it warms up again, so its burst does not alert.
  for (int i = 0; i < 10; ++i)
    Many(d, c, Call("other" + std::to_string(i), "t" + std::to_string(i)), 1,
         kStart + minutes(12));
  EXPECT_TRUE(Many(d, c, Call("a", "t"), 100, kStart + minutes(12)).empty());
}

TEST(Detectors, DenialsAlertOncePerBurstWithinTheWindow) {
  Detectors d;
  DetectorConfig c;
  c.denials.enabled = true;
  c.denials.window = minutes(1);
  c.denials.threshold = 5;
  c.denials.kill = KillAction::kAgent;
  // Four denials and any number of allowed calls: quiet.
  EXPECT_TRUE(Many(d, c, Call("bot", "x", "deny"), 4, kStart).empty());
  EXPECT_TRUE(Many(d, c, Call("bot", "x", "allow"), 50, kStart).empty());
  // The fifth within the minute: one alert, with the kill the settings ask for.
  std::vector<Alert> alerts = d.Observe(c, Call("bot", "x", "deny"), kStart + seconds(10));
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].detector, "denials");
  EXPECT_EQ(alerts[0].kill, KillAction::kAgent);
  EXPECT_EQ(alerts[0].details["denials"], 5);
  // More denials in the same window: no second alert.
  EXPECT_TRUE(Many(d, c, Call("bot", "x", "deny"), 20, kStart + seconds(20)).empty());
  // Another agent has its own count.
  EXPECT_TRUE(Many(d, c, Call("other", "x", "deny"), 4, kStart + seconds(20)).empty());
}

TEST(Detectors, DenialsSpreadBeyondTheWindowDoNotAlert) {
  Detectors d;
  DetectorConfig c;
  c.denials.enabled = true;
  c.denials.window = minutes(1);
  c.denials.threshold = 5;
  for (int i = 0; i < 30; ++i)
    EXPECT_TRUE(d.Observe(c, Call("bot", "x", "deny"), kStart + seconds(20 * i)).empty());
}

TEST(Detectors, FirstDomainAlertsOncePerTenantAndOncePerAgent) {
  Detectors d;
  DetectorConfig c;
  c.first_domain.enabled = true;
  CallEvent e = Call("bot", "web__fetch");
  e.hosts = {"api.github.com", "raw.github.com"};
  std::vector<Alert> alerts = d.Observe(c, e, kStart);
  ASSERT_EQ(alerts.size(), 1u);  // both hosts are github.com: one alert
  EXPECT_EQ(alerts[0].details["domain"], "github.com");
  EXPECT_EQ(alerts[0].details["scope"], "tenant");
  EXPECT_TRUE(d.Observe(c, e, kStart + seconds(1)).empty());
  // Another agent of the same tenant: an alert of agent scope.
  CallEvent other = Call("crawler", "web__fetch");
  other.hosts = {"GITHUB.com."};
  alerts = d.Observe(c, other, kStart);
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].details["scope"], "agent");
  // A domain seeded from the store does not alert again after a restart.
  Detectors restarted;
  restarted.SeedDomain("acme", "", "github.com");
  restarted.SeedDomain("acme", "bot", "github.com");
  EXPECT_TRUE(restarted.Observe(c, e, kStart).empty());
}

TEST(Detectors, RegistrableDomainsFollowThePublicSuffixList) {
  EXPECT_EQ(RegistrableDomain("api.github.com"), "github.com");
  EXPECT_EQ(RegistrableDomain("a.b.example.co.uk"), "example.co.uk");
  EXPECT_EQ(RegistrableDomain("Evil.GitHub.IO."), "evil.github.io");  // github.io is a suffix
  EXPECT_EQ(RegistrableDomain("10.0.0.7"), "10.0.0.7");
  EXPECT_EQ(RegistrableDomain("[::1]"), "::1");
  EXPECT_EQ(RegistrableDomain("localhost"), "localhost");
  EXPECT_EQ(RegistrableDomain("co.uk"), "co.uk");
}

TEST(Detectors, SensitiveAlertsOnEveryCallOfASensitiveRuleOnly) {
  Detectors d;
  DetectorConfig c;
  c.sensitive.enabled = true;
  EXPECT_TRUE(Many(d, c, Call(), 10, kStart).empty());
  CallEvent e = Call("bot", "hr__salaries", "deny");
  e.sensitive = true;
  EXPECT_EQ(Many(d, c, e, 3, kStart).size(), 3u);
  std::vector<Alert> a = d.Observe(c, e, kStart);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].tool, "hr__salaries");
  EXPECT_EQ(a[0].details["decision"], "deny");
}

TEST(Detectors, SandboxLimitsAlertOnALimitOrARefusedSyscall) {
  Detectors d;
  DetectorConfig c;
  c.sandbox_limits.enabled = true;
  c.sandbox_limits.kill = KillAction::kSession;
  CallEvent e = Call("bot", "sandbox__exec");
  e.sandbox_end = "exited";
  EXPECT_TRUE(d.Observe(c, e, kStart).empty());
  e.sandbox_end = "signaled";
  EXPECT_TRUE(d.Observe(c, e, kStart).empty());
  e.sandbox_end = "memory";
  auto a = d.Observe(c, e, kStart);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kill, KillAction::kSession);
  EXPECT_EQ(a[0].session, "s1");
  EXPECT_NE(a[0].message.find("hit its memory limit"), std::string::npos) << a[0].message;
  e.sandbox_end = "exited";
  e.refused_syscalls = 3;
  a = d.Observe(c, e, kStart);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_NE(a[0].message.find("3 syscalls refused"), std::string::npos) << a[0].message;
}

TEST(Detectors, ToolChangedAlertsOncePerDefinitionSeen) {
  Detectors d;
  DetectorConfig c;
  EXPECT_TRUE(d.ToolChanged(c, "files", "files__read", "changed", "h1", {"description"}).empty());
  c.tool_changed.enabled = true;
  auto a = d.ToolChanged(c, "files", "files__read", "changed", "h1", {"description"});
  ASSERT_EQ(a.size(), 1u);
  EXPECT_NE(a[0].message.find("files__read on upstream 'files' changed (description)"),
            std::string::npos)
      << a[0].message;
  // Every session reviews the same manifest: no second alert for it...
  EXPECT_TRUE(d.ToolChanged(c, "files", "files__read", "changed", "h1", {"description"}).empty());
  // ...but a definition changed again is news.
  EXPECT_EQ(d.ToolChanged(c, "files", "files__read", "changed", "h2", {}).size(), 1u);
  EXPECT_EQ(d.ToolChanged(c, "files", "files__drop", "new", "h3", {}).size(), 1u);
}

TEST(Detectors, KillActionsParseAndName) {
  for (KillAction k : {KillAction::kAgent, KillAction::kUser, KillAction::kTenant,
                       KillAction::kSession}) {
    auto parsed = ParseKillAction(KillActionName(k));
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(*parsed, k);
  }
  EXPECT_FALSE(ParseKillAction("all").has_value());
}

}  // namespace
}  // namespace warden::monitor
