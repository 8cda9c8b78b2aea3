// The monitor stage (stages/monitor_stage.cc) in a real pipeline: with a real policy and a real
// audit log, every call is counted in /metrics by caller, tool and decision, every stage's runs
// land in its histogram, and with `monitoring.logs` each call is one JSON line with the
// OpenTelemetry field names, its audit entry's id, and its arguments only when asked for,
// redacted as the audit log redacts them.
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

constexpr const char* kMonitorPolicy = R"(version: 1
tools:
  - match: { tool: "mail__delete" }
    effect: deny
  - match: { tool: "mail__*" }
    risk: low
monitoring:
  logs: { format: json, arguments: true, results: true }
)";

class Answer : public Stage {
 public:
  std::string_view name() const override { return "execute"; }
  StageOutcome Run(CallContext& call) override {
    call.result = CallResult::FromText("sent to " + call.arguments.value("to", ""), false);
    return StageOutcome::Continue();
  }
};

class MonitorStageTest : public ::testing::Test {
 protected:
  void Build(const std::string& policy_text) {
    holder_.Set(PolicyFromText(policy_text));
    log_ = OpenAudit(dir_.File("audit.db"));
    ASSERT_NE(log_, nullptr);
    pipeline_.AddStage(std::make_unique<IdentityStage>(identity::Caller{"acme", "alice", "bot", ""}));
    pipeline_.AddStage(std::make_unique<PolicyStage>(holder_));
    pipeline_.AddStage(std::make_unique<Answer>());
    pipeline_.AddFinalStage(std::make_unique<AuditStage>(*log_));
    pipeline_.AddFinalStage(std::make_unique<MonitorStage>(
        [this](std::string_view line) { lines_.push_back(nlohmann::json::parse(line)); }));
  }
  StageOutcome Call(const std::string& tool, nlohmann::json args) {
    CallContext call;
    call.tool = tool;
    call.session = "s-1";
    call.request_id = 42;
    call.arguments = std::move(args);
    return pipeline_.Run(call);
  }
  double Calls(const std::string& tool, const std::string& decision) {
    return monitor::Metrics().calls.Value({"acme", "bot", tool, decision});
  }

  TempDir dir_;
  policy::PolicyHolder holder_;
  std::unique_ptr<audit::AuditLog> log_;
  Pipeline pipeline_;
  std::vector<nlohmann::json> lines_;
};

TEST_F(MonitorStageTest, CountsEveryCallByCallerToolAndDecision) {
  Build(kMonitorPolicy);
  const double sent = Calls("mail__send", "allow"), deleted = Calls("mail__delete", "deny");
  EXPECT_EQ(Call("mail__send", {{"to", "bob@example.com"}}).result, StageResult::kContinue);
  EXPECT_EQ(Call("mail__send", {{"to", "carol@example.com"}}).result, StageResult::kContinue);
  EXPECT_EQ(Call("mail__delete", {{"id", 7}}).result, StageResult::kDeny);
  EXPECT_EQ(Calls("mail__send", "allow") - sent, 2);
  EXPECT_EQ(Calls("mail__delete", "deny") - deleted, 1);
  // The stage histograms hold every stage's runs, the final ones included.
  for (const StageStats& s : pipeline_.Stats()) {
    uint64_t in_buckets = 0;
    for (uint64_t b : s.buckets) in_buckets += b;
    EXPECT_EQ(in_buckets, s.continued + s.denied + s.paused) << s.name;
    EXPECT_GT(in_buckets, 0u) << s.name;
  }
}

TEST_F(MonitorStageTest, EachCallIsOneJsonLineWithTheOtelFieldsAndItsAuditId) {
  Build(kMonitorPolicy);
  Call("mail__send", {{"to", "bob@example.com"}, {"password", "hunter2"}});
  Call("mail__delete", {{"id", 7}});
  ASSERT_EQ(lines_.size(), 2u);
  const nlohmann::json& sent = lines_[0];
  EXPECT_EQ(sent["gen_ai.operation.name"], "execute_tool");
  EXPECT_EQ(sent["gen_ai.tool.name"], "mail__send");
  EXPECT_EQ(sent["gen_ai.tool.call.id"], "42");
  EXPECT_EQ(sent["mcp.method.name"], "tools/call");
  EXPECT_EQ(sent["mcp.session.id"], "s-1");
  EXPECT_EQ(sent["gen_ai.agent.name"], "bot");
  EXPECT_EQ(sent["enduser.id"], "alice");
  EXPECT_EQ(sent["warden.tenant"], "acme");
  EXPECT_EQ(sent["warden.decision"], "allow");
  ASSERT_TRUE(sent.contains("warden.audit.id"));
  // The id is the audit entry's: the log holds that entry for this call.
  audit::AuditFilter filter;
  filter.after_id = sent["warden.audit.id"].get<uint64_t>() - 1;
  filter.limit = 1;
  auto entries = log_->Query(filter);
  ASSERT_TRUE(entries.ok()) << entries.status().message();
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].id, sent["warden.audit.id"].get<uint64_t>());
  EXPECT_EQ((*entries)[0].tool, "mail__send");
  // Arguments as the audit log keeps them: the password is not in the line.
  EXPECT_EQ(sent["gen_ai.tool.call.arguments"]["to"], "bob@example.com");
  EXPECT_NE(sent["gen_ai.tool.call.arguments"]["password"], "hunter2");
  EXPECT_EQ(sent.dump().find("hunter2"), std::string::npos);
  EXPECT_EQ(sent["gen_ai.tool.call.result"]["excerpt"], "sent to bob@example.com");
  const nlohmann::json& deleted = lines_[1];
  EXPECT_EQ(deleted["warden.decision"], "deny");
  EXPECT_EQ(deleted["level"], "warn");
  EXPECT_EQ(deleted["warden.rule"], "tools[0] {tool: mail__delete}");
  EXPECT_NE(deleted["warden.reason"].get<std::string>().find("policy: "), std::string::npos)
      << deleted.dump();
  EXPECT_FALSE(deleted.contains("gen_ai.tool.call.result"));
}

TEST_F(MonitorStageTest, NoLinesUnlessThePolicyAsksAndNoArgumentsUnlessItSaysSo) {
  Build("version: 1\ntools:\n  - match: { tool: \"mail__*\" }\n    risk: low\n");
  Call("mail__send", {{"to", "bob@example.com"}});
  EXPECT_TRUE(lines_.empty());
  holder_.Set(PolicyFromText(
      "version: 1\ntools:\n  - match: { tool: \"mail__*\" }\n    risk: low\n"
      "monitoring:\n  logs: { format: json }\n"));
  Call("mail__send", {{"to", "bob@example.com"}});
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_FALSE(lines_[0].contains("gen_ai.tool.call.arguments"));
  EXPECT_FALSE(lines_[0].contains("gen_ai.tool.call.result"));
  EXPECT_EQ(lines_[0].dump().find("bob@example.com"), std::string::npos);
}

TEST_F(MonitorStageTest, AHostileToolNameStaysOneValidLine) {
  Build(kMonitorPolicy);
  std::vector<std::string> raw;
  pipeline_.AddFinalStage(std::make_unique<MonitorStage>(
      [&raw](std::string_view line) { raw.emplace_back(line); }));
  Call(std::string("mail__x\n{\"forged\":1}\xff"), nlohmann::json::object());
  ASSERT_EQ(raw.size(), 1u);
  EXPECT_EQ(raw[0].find('\n'), std::string::npos);
  auto parsed = nlohmann::json::parse(raw[0]);
  EXPECT_FALSE(parsed.contains("forged"));
}

}  // namespace
}  // namespace warden::gateway
