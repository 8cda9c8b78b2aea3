// The anomaly detectors in a real pipeline (alerts.h, stages/monitor_stage.cc): a real policy, a
// real audit log and real kill switches (in memory). An alert is an audit entry with decision
// "alert", a count in warden_alerts_total, and, when its detector says so, a kill switch that
// stops the caller's next call. The control executor is left out (Alerts handles inline), so
// the tests need not wait.
#include "gateway/alerts.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "audit/filter.h"
#include "gateway/stages/stages.h"
#include "monitor/families.h"
#include "testing.h"

namespace warden::gateway {
namespace {

using testing::OpenAudit;
using testing::PolicyFromText;
using testing::TempDir;

constexpr const char* kPolicy = R"(version: 1
tools:
  - match: { tool: "mail__delete" }
    effect: deny
  - match: { tool: "hr__salaries" }
    risk: low
    labels: [sensitive]
  - match: { tool: "*" }
    risk: low
monitoring:
  detectors:
    denials: { window: 1m, threshold: 3, kill: agent }
    sensitive: {}
    sandbox_limits: { kill: session }
    first_domain: {}
)";

// Stands in for the execute stage: a result with the facts a built-in would report.
class Answer : public Stage {
 public:
  std::string_view name() const override { return "execute"; }
  StageOutcome Run(CallContext& call) override {
    call.result = CallResult::FromText("done", false);
    call.result->facts.sandbox_end = call.arguments.value("end", "");
    call.result->facts.refused_syscalls = call.arguments.value("refused", 0);
    if (call.arguments.contains("hosts"))
      call.result->facts.hosts = call.arguments["hosts"].get<std::vector<std::string>>();
    return StageOutcome::Continue();
  }
};

class AlertsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    holder_.Set(PolicyFromText(kPolicy));
    log_ = OpenAudit(dir_.File("audit.db"));
    ASSERT_NE(log_, nullptr);
    alerts_ = std::make_unique<Alerts>(Alerts::Options{
        .audit = log_.get(),
        .switches = &switches_,
        .remember_domain = [this](const std::string& t, const std::string& a,
                                  const std::string& d) { remembered_.push_back(t + "/" + a + "/" + d); }});
    pipeline_.AddStage(std::make_unique<KillSwitchStage>(switches_));
    pipeline_.AddStage(std::make_unique<PolicyStage>(holder_));
    pipeline_.AddStage(std::make_unique<Answer>());
    pipeline_.AddFinalStage(std::make_unique<AuditStage>(*log_));
    pipeline_.AddFinalStage(
        std::make_unique<MonitorStage>([](std::string_view) {}, alerts_.get()));
  }
  StageOutcome Call(const std::string& tool, nlohmann::json args = nlohmann::json::object(),
                    const std::string& agent = "bot", const std::string& session = "s-1") {
    CallContext call;
    call.tenant = "acme";
    call.user = "alice";
    call.agent = agent;
    call.session = session;
    call.tool = tool;
    call.arguments = args.is_null() ? nlohmann::json::object() : std::move(args);
    return pipeline_.Run(call);
  }
  std::vector<audit::AuditEntry> Alerted() {
    audit::AuditFilter filter;
    filter.decision = "alert";
    auto entries = log_->Query(filter);
    EXPECT_TRUE(entries.ok()) << entries.status().message();
    return entries.ok() ? *entries : std::vector<audit::AuditEntry>{};
  }

  TempDir dir_;
  policy::PolicyHolder holder_;
  std::unique_ptr<audit::AuditLog> log_;
  KillSwitches switches_;
  std::unique_ptr<Alerts> alerts_;
  Pipeline pipeline_;
  std::vector<std::string> remembered_;
};

TEST_F(AlertsTest, ABurstOfDenialsAlertsAndItsKillSwitchStopsTheNextCall) {
  const double before = monitor::Metrics().alerts.Value({"denials"});
  EXPECT_EQ(Call("mail__send").result, StageResult::kContinue);
  EXPECT_EQ(Call("mail__delete").result, StageResult::kDeny);
  EXPECT_EQ(Call("mail__delete").result, StageResult::kDeny);
  EXPECT_TRUE(Alerted().empty());
  EXPECT_EQ(Call("mail__send").result, StageResult::kContinue);  // not stopped yet
  EXPECT_EQ(Call("mail__delete").result, StageResult::kDeny);     // the third denial

  std::vector<audit::AuditEntry> alerts = Alerted();
  ASSERT_EQ(alerts.size(), 1u);
  const audit::AuditEntry& a = alerts[0];
  EXPECT_EQ(a.tool, "alert:denials");
  EXPECT_EQ(a.rule, "monitor.denials");
  EXPECT_EQ(a.tenant, "acme");
  EXPECT_EQ(a.agent, "bot");
  EXPECT_NE(a.reason.find("agent 'bot' of tenant 'acme' was denied 3 calls within 60 s"),
            std::string::npos)
      << a.reason;
  EXPECT_EQ(a.arguments["kill"]["scope"], "agent");
  EXPECT_EQ(a.arguments["kill"]["name"], "bot");
  EXPECT_EQ(a.arguments["kill"]["pulled"], true);
  EXPECT_EQ(monitor::Metrics().alerts.Value({"denials"}) - before, 1);

  // The switch is in force: the agent's next call, even an allowed one, is refused, naming it.
  CallContext next;
  next.tenant = "acme";
  next.agent = "bot";
  next.tool = "mail__send";
  StageOutcome stopped = pipeline_.Run(next);
  EXPECT_EQ(stopped.result, StageResult::kDeny);
  EXPECT_NE(stopped.reason.find("stopped by kill switch agent:bot: denials alert:"),
            std::string::npos)
      << stopped.reason;
  // Another agent of the same tenant is not stopped.
  EXPECT_EQ(Call("mail__send", {}, "other").result, StageResult::kContinue);
  // The switch is recorded as every switch is, naming the alert.
  audit::AuditFilter kills;
  kills.decision = "kill";
  auto recorded = log_->Query(kills);
  ASSERT_TRUE(recorded.ok());
  ASSERT_EQ(recorded->size(), 1u);
  EXPECT_EQ((*recorded)[0].rule, "kill_switch.agent:bot");
  EXPECT_EQ((*recorded)[0].arguments["by"], "monitor:denials");
  EXPECT_EQ((*recorded)[0].arguments["alert"], a.id);
  // And the chain still verifies with the alerts in it.
  auto verified = log_->Verify();
  ASSERT_TRUE(verified.ok());
  EXPECT_TRUE(verified->ok()) << verified->detail;
}

TEST_F(AlertsTest, OrdinaryTrafficRaisesNothing) {
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(Call("mail__send", {{"n", i}}).result, StageResult::kContinue);
    EXPECT_EQ(Call("sandbox__exec", {{"end", "exited"}}).result, StageResult::kContinue);
  }
  EXPECT_EQ(Call("mail__delete").result, StageResult::kDeny);  // one denial is no burst
  EXPECT_TRUE(Alerted().empty());
  EXPECT_TRUE(switches_.Active().empty());
}

TEST_F(AlertsTest, SensitiveToolsAndSandboxLimitsAndFirstDomainsAlert) {
  EXPECT_EQ(Call("hr__salaries").result, StageResult::kContinue);
  EXPECT_EQ(Call("web__fetch", {{"hosts", {"docs.python.org"}}}).result, StageResult::kContinue);
  EXPECT_EQ(Call("web__fetch", {{"hosts", {"www.python.org"}}}).result, StageResult::kContinue);
  EXPECT_EQ(Call("sandbox__exec", {{"end", "timeout"}}, "bot", "s-9").result,
            StageResult::kContinue);
  std::vector<audit::AuditEntry> alerts = Alerted();
  ASSERT_EQ(alerts.size(), 3u);
  EXPECT_EQ(alerts[0].tool, "alert:sensitive");
  EXPECT_EQ(alerts[0].arguments["tool"], "hr__salaries");
  EXPECT_EQ(alerts[1].tool, "alert:first_domain");
  EXPECT_EQ(alerts[1].arguments["domain"], "python.org");
  EXPECT_EQ(remembered_, (std::vector<std::string>{"acme//python.org", "acme/bot/python.org"}));
  EXPECT_EQ(alerts[2].tool, "alert:sandbox_limits");
  EXPECT_EQ(alerts[2].arguments["kill"]["name"], "s-9");
  // The session switch stops that session, and only it.
  EXPECT_EQ(Call("mail__send", {}, "bot", "s-9").result, StageResult::kDeny);
  EXPECT_EQ(Call("mail__send", {}, "bot", "s-1").result, StageResult::kContinue);
}

TEST_F(AlertsTest, ASessionlessCallerHasNoSessionSwitchToPull) {
  Call("sandbox__exec", {{"end", "memory"}}, "bot", "");
  std::vector<audit::AuditEntry> alerts = Alerted();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].arguments["kill"]["pulled"], false);
  EXPECT_EQ(alerts[0].arguments["kill"]["error"], "the caller has no session");
  EXPECT_TRUE(switches_.Active().empty());
}

TEST_F(AlertsTest, ATenantsOwnSettingsReplaceTheDefaults) {
  holder_.Set(PolicyFromText(R"(version: 1
identity:
  tenants:
    acme: { users: { alice: {} } }
    globex: { users: { bob: {} } }
tools:
  - match: { tool: "*" }
    risk: low
    labels: [sensitive]
monitoring:
  detectors: { sensitive: on }
  tenants:
    acme: { sensitive: off }
)"));
  CallContext first;
  first.tenant = "acme";
  first.user = "alice";
  first.tool = "hr__salaries";
  StageOutcome quiet = pipeline_.Run(first);
  EXPECT_EQ(quiet.result, StageResult::kContinue) << quiet.reason;
  EXPECT_TRUE(Alerted().empty());  // acme: off
  CallContext call;
  call.tenant = "globex";
  call.user = "bob";
  call.tool = "hr__salaries";
  StageOutcome ran = pipeline_.Run(call);
  EXPECT_EQ(ran.result, StageResult::kContinue) << ran.reason;
  ASSERT_EQ(Alerted().size(), 1u);
  EXPECT_EQ(Alerted()[0].tenant, "globex");
}

TEST_F(AlertsTest, ADetectorDoesNotStopAnotherTenantsAgentOfTheSameName) {
  // Switches are by name: a kill of agent "bot" would stop globex's bot too. A person may pull
  // it; the detector only says why it did not.
  holder_.Set(PolicyFromText(R"(version: 1
identity:
  tenants:
    acme: { users: { alice: {} }, agents: { bot: { user: alice } } }
    globex: { users: { bob: {} }, agents: { bot: { user: bob } } }
tools:
  - match: { tool: "mail__delete" }
    effect: deny
  - match: { tool: "*" }
    risk: low
monitoring:
  detectors:
    denials: { threshold: 2, kill: agent }
)"));
  Call("mail__delete");
  Call("mail__delete");
  std::vector<audit::AuditEntry> alerts = Alerted();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].arguments["kill"]["pulled"], false);
  EXPECT_NE(alerts[0].arguments["kill"]["error"].get<std::string>().find(
                "agent 'bot' is also one of tenant 'globex'"),
            std::string::npos)
      << alerts[0].arguments.dump();
  EXPECT_TRUE(switches_.Active().empty());
}

TEST_F(AlertsTest, AToolDefinitionThatChangedAlertsOnceWithoutAKill) {
  holder_.Set(PolicyFromText("version: 1\nmonitoring:\n  detectors: { tool_changed: on }\n"));
  alerts_->OnToolChanged(holder_.Current(), "files", "files__read", "changed", "abc",
                         {"description"});
  alerts_->OnToolChanged(holder_.Current(), "files", "files__read", "changed", "abc",
                         {"description"});
  std::vector<audit::AuditEntry> alerts = Alerted();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].tool, "alert:tool_changed");
  EXPECT_EQ(alerts[0].arguments["server"], "files");
  EXPECT_FALSE(alerts[0].arguments.contains("kill"));
  EXPECT_TRUE(switches_.Active().empty());
}

}  // namespace
}  // namespace warden::gateway
