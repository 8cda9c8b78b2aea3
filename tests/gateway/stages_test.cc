// The standard stages with a real policy and a real audit log: every decision is written down
// with its rule, denials included.
#include "gateway/stages/stages.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "policy/default_policy.h"
#include "testing.h"

namespace warden::gateway {
namespace {

using testing::OpenAudit;
using testing::PolicyFromText;
using testing::TempDir;

constexpr const char* kPolicy = R"(version: 1
tools:
  - match: { tool: "sandbox__exec", args: { "/command": { prefix: "rm " } } }
    risk: high
    effect: deny
  - match: { tool: "sandbox__exec", args: { "/command": { prefix: "sudo " } } }
    risk: high
    effect: ask
  - match: { tool: "sandbox__exec" }
    risk: medium
    effect: allow
    labels: [untrusted_output]
defaults:
  unknown_tool: { risk: high, effect: deny }
)";

// Records the calls that reach execution instead of running anything.
class FakeExecute : public Stage {
 public:
  std::string_view name() const override { return "execute"; }
  StageOutcome Run(CallContext& call) override {
    ++runs;
    call.result = CallResult::FromText("ran " + call.tool, false);
    return StageOutcome::Continue();
  }
  int runs = 0;
};

class StagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    holder_.Set(PolicyFromText(kPolicy));
    log_ = OpenAudit(dir_.File("audit.db"));
    ASSERT_NE(log_, nullptr);
    pipeline_.AddStage(std::make_unique<IdentityStage>(identity::Caller{"", "alice", "", ""}));
    pipeline_.AddStage(std::make_unique<KillSwitchStage>(kills_));
    pipeline_.AddStage(std::make_unique<PolicyStage>(holder_));
    // Without a gate the approval stage refuses what the policy sends to a person.
    pipeline_.AddStage(std::make_unique<ApprovalStage>(nullptr, nullptr, nullptr));
    auto exec = std::make_unique<FakeExecute>();
    exec_ = exec.get();
    pipeline_.AddStage(std::move(exec));
    pipeline_.AddFinalStage(std::make_unique<AuditStage>(*log_));
  }

  StageOutcome Call(const std::string& tool, nlohmann::json arguments) {
    CallContext call;
    call.session = "s1";
    call.tool = tool;
    call.arguments = std::move(arguments);
    return pipeline_.Run(call);
  }

  std::vector<audit::AuditEntry> Entries() {
    auto tail = log_->Tail(100);
    EXPECT_TRUE(tail.ok());
    return tail.ok() ? *tail : std::vector<audit::AuditEntry>{};
  }

  TempDir dir_;
  policy::PolicyHolder holder_;
  KillSwitches kills_;
  std::unique_ptr<audit::AuditLog> log_;
  Pipeline pipeline_;
  FakeExecute* exec_ = nullptr;
};

TEST_F(StagesTest, AllowedCallRunsAndIsAuditedAsACallWithItsRule) {
  StageOutcome out = Call("sandbox__exec", {{"command", "ls"}});
  EXPECT_EQ(out.result, StageResult::kContinue);
  EXPECT_EQ(exec_->runs, 1);
  auto entries = Entries();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].decision, "allow");
  EXPECT_EQ(entries[0].kind, audit::EntryKind::kCall);
  EXPECT_EQ(entries[0].user, "alice");
  EXPECT_EQ(entries[0].session, "s1");
  EXPECT_EQ(entries[0].tool, "sandbox__exec");
  EXPECT_EQ(entries[0].rule.rfind("tools[2]", 0), 0u) << entries[0].rule;
  EXPECT_EQ(entries[0].labels, std::vector<std::string>{"untrusted_output"});
  ASSERT_TRUE(entries[0].result.has_value());
  EXPECT_EQ(entries[0].result->excerpt, "ran sandbox__exec");
}

TEST_F(StagesTest, PolicyDenyNeverExecutesAndIsAuditedWithTheRule) {
  StageOutcome out = Call("sandbox__exec", {{"command", "rm -rf /"}});
  EXPECT_EQ(out.result, StageResult::kDeny);
  EXPECT_EQ(out.refusal, Refusal::kDenied);
  EXPECT_EQ(exec_->runs, 0);
  auto entries = Entries();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].decision, "deny");
  EXPECT_EQ(entries[0].kind, audit::EntryKind::kDecision);
  EXPECT_EQ(entries[0].rule.rfind("tools[0]", 0), 0u) << entries[0].rule;
  EXPECT_FALSE(entries[0].result.has_value());
  EXPECT_EQ(entries[0].arguments, (nlohmann::json{{"command", "rm -rf /"}}));
}

TEST_F(StagesTest, AskWithoutAGateIsDeniedWithApprovalRequiredAndAuditedWithTheRule) {
  StageOutcome out = Call("sandbox__exec", {{"command", "sudo reboot"}});
  EXPECT_EQ(out.result, StageResult::kDeny);
  EXPECT_EQ(out.refusal, Refusal::kDenied);
  EXPECT_EQ(out.reason.rfind("approval required", 0), 0u) << out.reason;
  EXPECT_EQ(exec_->runs, 0);
  auto entries = Entries();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].decision, "ask");
  EXPECT_NE(entries[0].reason.find("approval required"), std::string::npos) << entries[0].reason;
  EXPECT_EQ(entries[0].rule.rfind("tools[1]", 0), 0u) << entries[0].rule;
}

TEST_F(StagesTest, UnknownToolIsRefusedAsUnknownAndAudited) {
  StageOutcome out = Call("mail__send", {});
  EXPECT_EQ(out.refusal, Refusal::kUnknownTool);
  EXPECT_EQ(out.reason, "unknown tool: mail__send");
  auto entries = Entries();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].decision, "deny");
  EXPECT_EQ(entries[0].rule, "defaults.unknown_tool");
}

TEST_F(StagesTest, KillSwitchStopsTheCallBeforePolicyAndIsAudited) {
  kills_.Kill(KillScope::kTool, "sandbox__exec", "incident 42");
  StageOutcome out = Call("sandbox__exec", {{"command", "ls"}});
  EXPECT_EQ(out.result, StageResult::kDeny);
  EXPECT_NE(out.reason.find("incident 42"), std::string::npos);
  EXPECT_EQ(exec_->runs, 0);
  auto entries = Entries();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].rule, "kill_switch.tool:sandbox__exec");
  kills_.Unkill(KillScope::kTool, "sandbox__exec");
  EXPECT_EQ(Call("sandbox__exec", {{"command", "ls"}}).result, StageResult::kContinue);
}

TEST_F(StagesTest, GlobalKillSwitchStopsEverything) {
  kills_.Kill(KillScope::kGlobal, "", "");
  EXPECT_EQ(Call("sandbox__exec", {{"command", "ls"}}).result, StageResult::kDeny);
  EXPECT_EQ(exec_->runs, 0);
}

TEST_F(StagesTest, NoPolicyInForceFailsClosed) {
  holder_.Set(nullptr);
  StageOutcome out = Call("sandbox__exec", {{"command", "ls"}});
  EXPECT_EQ(out.refusal, Refusal::kInternal);
  EXPECT_EQ(exec_->runs, 0);
  EXPECT_EQ(Entries().size(), 1u);
}

TEST_F(StagesTest, TheChainVerifiesAfterMixedDecisions) {
  Call("sandbox__exec", {{"command", "ls"}});
  Call("sandbox__exec", {{"command", "rm x"}});
  Call("sandbox__exec", {{"command", "sudo x"}});
  Call("nope", {});
  auto report = log_->Verify();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << report->detail;
  EXPECT_EQ(report->entries, 4u);
}

TEST(StandardPipeline, ChainsTheStagesInTheArchitecturesOrder) {
  TempDir dir;
  policy::PolicyHolder holder(PolicyFromText(std::string(policy::DefaultPolicyText())));
  KillSwitches kills;
  BuiltinTools tools = BuiltinTools::Default();
  auto log = OpenAudit(dir.File("a.db"));
  auto p = BuildPipeline(StageServices{&holder, &kills, &tools, log.get(), {}});
  EXPECT_EQ(p->StageNames(),
            (std::vector<std::string>{"identity", "kill_switches", "policy", "arguments",
                                      "trifecta", "approval", "credentials", "execute", "redact",
                                      "audit", "undo", "trifecta_record", "monitor"}));
}

// sandbox__exec on profile "strict" when the command starts with "echo strict" (rule tools[0]),
// else on the policy's default profile.
constexpr const char* kStrictOrDefaultPolicy = R"(version: 1
sandbox:
  profiles:
    default: { timeout: 20s }
    strict: { timeout: 10s, backend: native }
tools:
  - match: { tool: "sandbox__exec", args: { "/command": { prefix: "echo strict" } } }
    risk: low
    sandbox: strict
  - match: { tool: "sandbox__exec" }
    risk: low
defaults:
  effect_by_risk: { low: allow, medium: allow, high: deny }
)";

// The audit entry of a sandbox__exec says which profile and backend ran it and which rule chose
// them (the real execute stage: the command runs).
// Runs `echo strict` then `echo plain` through the standard pipeline on kStrictOrDefaultPolicy
// with `tools`, checks their output, and returns the reasons of their two audit entries.
std::vector<std::string> StrictThenPlainReasons(const BuiltinTools& tools) {
  TempDir dir;
  policy::PolicyHolder holder(PolicyFromText(kStrictOrDefaultPolicy));
  KillSwitches kills;
  auto log = OpenAudit(dir.File("a.db"));
  auto p = BuildPipeline(StageServices{&holder, &kills, &tools, log.get(), {"", "alice", "", ""}});
  for (const char* command : {"echo strict", "echo plain"}) {
    CallContext call;
    call.tool = "sandbox__exec";
    call.arguments = {{"command", command}};
    EXPECT_EQ(p->Run(call).result, StageResult::kContinue) << call.verdict.reason;
    if (call.result) {
      EXPECT_EQ(call.result->value["structuredContent"]["stdout"],
                std::string(command).substr(5) + "\n");
    }
  }
  std::vector<std::string> reasons;
  auto entries = log->Tail(2);
  EXPECT_TRUE(entries.ok());
  if (entries.ok()) {
    for (const auto& e : *entries) reasons.push_back(e.reason);
  }
  return reasons;
}

TEST(StandardPipeline, AuditEntrySaysWhichSandboxProfileAndBackendRanTheCode) {
  const auto reasons = StrictThenPlainReasons(BuiltinTools::Default());
  ASSERT_EQ(reasons.size(), 2u);
  EXPECT_NE(reasons[0].find("ran in sandbox profile 'strict' from rule tools[0]"),
            std::string::npos)
      << reasons[0];
  EXPECT_NE(reasons[0].find("backend native"), std::string::npos) << reasons[0];
  EXPECT_NE(reasons[1].find("ran in sandbox profile 'default', backend native"), std::string::npos)
      << reasons[1];
}

// With a pre-warmed pool for the default profile (as `warden serve` runs), calls on that profile
// run pooled and say so in the audit entry; a call the policy gives another profile runs cold.
TEST(StandardPipeline, AuditEntrySaysWhenThePreWarmedPoolRanTheCode) {
  if (geteuid() != 0) GTEST_SKIP() << "the default profile's cgroup limits need root";
  ExecPoolSlot pools(testing::StartReadyExecPool(
      PolicyFromText(kStrictOrDefaultPolicy)->sandbox.profiles.at("default"), 1));
  ASSERT_NE(pools.Current(), nullptr);
  const auto reasons = StrictThenPlainReasons(BuiltinTools::Default(&pools));
  ASSERT_EQ(reasons.size(), 2u);
  EXPECT_EQ(reasons[0].find("pre-warmed pool"), std::string::npos) << reasons[0];
  EXPECT_NE(reasons[1].find("ran in sandbox profile 'default', backend native (pre-warmed pool)"),
            std::string::npos)
      << reasons[1];
}

TEST(DefaultPolicy, AllowsSandboxExecAtMediumAndDeniesEverythingElse) {
  auto loaded = policy::LoadDefaultPolicy();
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  auto d = policy::Decide(*loaded, {}, {"sandbox", "sandbox__exec", {{"command", "ls"}}});
  EXPECT_EQ(d.effect, policy::Effect::kAllow);
  EXPECT_EQ(d.risk, policy::Risk::kMedium);
  EXPECT_TRUE(policy::Visible(*loaded, {}, "sandbox__exec", {}));
  EXPECT_FALSE(policy::Visible(*loaded, {}, "fs__write", {}));
  EXPECT_EQ(policy::Decide(*loaded, {}, {"", "fs__write", {}}).effect, policy::Effect::kDeny);
}

TEST(ArgumentsStage, RefusesArgumentsTheUpstreamSchemaRefusesAndPassesTheRest) {
  ArgumentsStage stage;
  CallContext call;
  call.tool = "everything__echo";
  call.tool_definition = nlohmann::json::parse(R"({"name":"echo","inputSchema":{"type":"object",
      "properties":{"message":{"type":"string"}},"required":["message"],
      "additionalProperties":false}})");
  call.arguments = {{"message", 7}};
  StageOutcome bad = stage.Run(call);
  EXPECT_EQ(bad.result, StageResult::kDeny);
  EXPECT_EQ(bad.refusal, Refusal::kInvalidArguments);
  EXPECT_NE(bad.reason.find("/message"), std::string::npos) << bad.reason;
  call.arguments = {{"message", "hi"}, {"extra", true}};
  EXPECT_EQ(stage.Run(call).result, StageResult::kDeny);  // an injected extra member
  call.arguments = {{"message", "hi"}};
  EXPECT_EQ(stage.Run(call).result, StageResult::kContinue);
  CallContext builtin;  // no upstream definition: the built-in checks its own arguments
  builtin.arguments = {{"anything", 1}};
  EXPECT_EQ(stage.Run(builtin).result, StageResult::kContinue);
}

}  // namespace
}  // namespace warden::gateway
