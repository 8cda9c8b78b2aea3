// Decide() and Visible(): rule order, defaults, identities, scopes, agent profiles. Each test is
// one behaviour of docs/policy.md; the security ones are named after what an agent would try.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "policy/policy.h"
#include "testing.h"

namespace warden::policy {
namespace {

using nlohmann::json;

using testing::MustLoad;

const char* kTeam = R"(version: 1
identity:
  tenants:
    acme:
      users:
        alice: {}
        bob: { tools: ["mail__*", "tracker__*"] }
      agents:
        alice-coder: { user: alice, profile: coder }
        alice-browser: { user: alice, profile: browsing }
        bob-bot: { user: bob, tools: ["mail__read_*", "sandbox__exec"] }
    globex:
      users: { carol: {} }
      agents: { carol-bot: { user: carol } }
sandbox:
  profiles: { coder: { memory: 1G } }
agent_profiles:
  coder: { never: [] }
  browsing: { never: [private_output] }
scopes:
  inbox: { tools: ["mail__read_*"], access: read }
  triage: { tools: ["tracker__*", "sandbox__exec"] }
  reading: { access: read }
tools:
  - match: { tool: "*__delete_*" }
    effect: deny
  - match: { tool: "mail__read_*" }
    risk: low
    access: read
    labels: [untrusted_output, private_output]
  - match: { tool: "mail__send_email", args: { "/to": { suffix: "@acme.com" } } }
    risk: medium
    labels: [external_send]
  - match: { tool: "mail__send_email" }
    risk: high
    labels: [external_send]
  - match: { tool: "tracker__*", tenant: globex }
    effect: deny
  - match: { tool: "tracker__*" }
    risk: low
    access: read
  - match: { tool: "sandbox__exec" }
    risk: medium
    sandbox: coder
    labels: [external_send]
  - match: { tool: "files__*", server: files }
    risk: low
    access: read
  - match: { tool: "files__*" }
    effect: deny
defaults:
  effect_by_risk: { low: allow, medium: ask, high: deny }
  unknown_tool: { risk: medium, labels: [untrusted_output] }
)";

const CallContext kAliceCoder{"acme", "alice", "alice-coder", ""};
const CallContext kAliceBrowser{"acme", "alice", "alice-browser", ""};
const CallContext kBobBot{"acme", "bob", "bob-bot", ""};
const CallContext kCarolBot{"globex", "carol", "carol-bot", ""};

ToolCall Call(const std::string& tool, json args = json::object(), const std::string& server = "") {
  return ToolCall{server, tool, std::move(args)};
}

CallContext InScope(CallContext ctx, const std::string& scope) {
  ctx.scope = scope;
  return ctx;
}

class DecideTest : public ::testing::Test {
 protected:
  Policy policy_ = MustLoad(kTeam);
};

TEST_F(DecideTest, FirstMatchingRuleDecidesInFileOrder) {
  // tools[0] (*__delete_*) comes before tools[5] (tracker__*): the deny wins though both match.
  Decision d = Decide(policy_, kAliceCoder, Call("tracker__delete_issue"));
  EXPECT_EQ(d.effect, Effect::kDeny);
  EXPECT_EQ(d.rule.rfind("tools[0] ", 0), 0u) << d.rule;
  // An argument predicate that fails lets the call fall to the next rule.
  d = Decide(policy_, kAliceCoder, Call("mail__send_email", {{"to", "bob@acme.com"}}));
  EXPECT_EQ(d.rule.rfind("tools[2] ", 0), 0u) << d.rule;
  d = Decide(policy_, kAliceCoder, Call("mail__send_email", {{"to", "eve@evil.example"}}));
  EXPECT_EQ(d.rule.rfind("tools[3] ", 0), 0u) << d.rule;
}

TEST(DecideOrderTest, ReorderingRulesChangesTheDecision) {
  const std::string rules_a =
      "  - { match: { tool: \"x__*\" }, effect: allow }\n  - { match: { tool: x__y }, effect: deny "
      "}\n";
  const std::string rules_b =
      "  - { match: { tool: x__y }, effect: deny }\n  - { match: { tool: \"x__*\" }, effect: allow "
      "}\n";
  Policy a = MustLoad("version: 1\ntools:\n" + rules_a);
  Policy b = MustLoad("version: 1\ntools:\n" + rules_b);
  EXPECT_EQ(Decide(a, {}, Call("x__y")).effect, Effect::kAllow);
  EXPECT_EQ(Decide(b, {}, Call("x__y")).effect, Effect::kDeny);
}

TEST_F(DecideTest, EffectComesFromDefaultsByRiskWhenTheRuleGivesNone) {
  Decision low = Decide(policy_, kAliceCoder, Call("mail__read_inbox"));
  EXPECT_EQ(low.risk, Risk::kLow);
  EXPECT_EQ(low.effect, Effect::kAllow);
  EXPECT_NE(low.reason.find("defaults.effect_by_risk.low"), std::string::npos) << low.reason;
  Decision medium =
      Decide(policy_, kAliceCoder, Call("mail__send_email", {{"to", "bob@acme.com"}}));
  EXPECT_EQ(medium.risk, Risk::kMedium);
  EXPECT_EQ(medium.effect, Effect::kAsk)
      << "ask is returned as ask; the gateway says approval required";
  Decision high =
      Decide(policy_, kAliceCoder, Call("mail__send_email", {{"to", "eve@evil.example"}}));
  EXPECT_EQ(high.risk, Risk::kHigh);
  EXPECT_EQ(high.effect, Effect::kDeny);
}

TEST_F(DecideTest, RuleEffectOverridesTheRiskDefault) {
  Decision d = Decide(policy_, kAliceCoder, Call("mail__delete_all"));
  EXPECT_EQ(d.effect, Effect::kDeny);
  EXPECT_NE(d.reason.find("the rule's effect"), std::string::npos) << d.reason;
}

TEST_F(DecideTest, UnknownToolGetsTheUnknownToolDefault) {
  Decision d = Decide(policy_, kAliceCoder, Call("weather__forecast", {{"city", "Lisbon"}}));
  EXPECT_EQ(d.rule, "defaults.unknown_tool");
  EXPECT_EQ(d.risk, Risk::kMedium);
  EXPECT_EQ(d.effect, Effect::kAsk);
  EXPECT_EQ(d.labels, std::vector<std::string>{"untrusted_output"});
  EXPECT_NE(d.reason.find("no rule matches 'weather__forecast'"), std::string::npos) << d.reason;
}

TEST_F(DecideTest, DecisionCarriesTheRulesLabelsAccessAndSandbox) {
  Decision d = Decide(policy_, kAliceCoder, Call("sandbox__exec", {{"command", "ls"}}));
  // The rule's label, and what sandbox__exec always carries (its output is untrusted).
  EXPECT_EQ(d.labels, (std::vector<std::string>{"untrusted_output", "external_send"}));
  EXPECT_EQ(d.access, Access::kWrite) << "access defaults to write";
  EXPECT_EQ(d.sandbox_profile, "coder");
  EXPECT_TRUE(d.visible);
  Decision read = Decide(policy_, kAliceCoder, Call("mail__read_inbox"));
  EXPECT_EQ(read.access, Access::kRead);
  EXPECT_EQ(read.labels, (std::vector<std::string>{"untrusted_output", "private_output"}));
}

TEST_F(DecideTest, ServerGlobMatchesTheCallsServer) {
  EXPECT_EQ(Decide(policy_, kAliceCoder, Call("files__read", {}, "files")).effect, Effect::kAllow);
  EXPECT_EQ(Decide(policy_, kAliceCoder, Call("files__read", {}, "impostor")).effect,
            Effect::kDeny);
  EXPECT_EQ(Decide(policy_, kAliceCoder, Call("files__read", {}, "")).effect, Effect::kDeny);
}

TEST_F(DecideTest, TenantConditionsApplyOnlyToThatTenant) {
  EXPECT_EQ(Decide(policy_, kCarolBot, Call("tracker__list")).effect, Effect::kDeny);
  EXPECT_EQ(Decide(policy_, kAliceCoder, Call("tracker__list")).effect, Effect::kAllow);
}

TEST_F(DecideTest, UnknownCallerIsDeniedAndSeesNothing) {
  for (const CallContext& ctx :
       {CallContext{"initech", "alice", "", ""}, CallContext{"acme", "mallory", "", ""},
        CallContext{"acme", "alice", "ghost", ""}, CallContext{"", "", "", ""}}) {
    Decision d = Decide(policy_, ctx, Call("mail__read_inbox"));
    EXPECT_EQ(d.effect, Effect::kDeny) << ctx.tenant << "/" << ctx.user << "/" << ctx.agent;
    EXPECT_EQ(d.rule, "identity");
    EXPECT_FALSE(d.visible);
    EXPECT_FALSE(Visible(policy_, ctx, "mail__read_inbox", {}));
  }
}

TEST_F(DecideTest, AgentCannotActForAnotherUser) {
  // alice-coder presenting itself as bob's agent (or bob-bot as alice's) is refused.
  Decision d =
      Decide(policy_, CallContext{"acme", "bob", "alice-coder", ""}, Call("mail__read_inbox"));
  EXPECT_EQ(d.effect, Effect::kDeny);
  EXPECT_NE(d.reason.find("acts for user 'alice', not 'bob'"), std::string::npos) << d.reason;
}

TEST_F(DecideTest, AgentOfAnotherTenantIsUnknownHere) {
  Decision d =
      Decide(policy_, CallContext{"acme", "alice", "carol-bot", ""}, Call("mail__read_inbox"));
  EXPECT_EQ(d.effect, Effect::kDeny);
  EXPECT_EQ(d.rule, "identity");
}

TEST_F(DecideTest, AgentIsLimitedToWhatItsUserMayUse) {
  // bob-bot lists sandbox__exec, but bob may not use it: the user's limit wins.
  Decision d = Decide(policy_, kBobBot, Call("sandbox__exec"));
  EXPECT_EQ(d.effect, Effect::kDeny);
  EXPECT_EQ(d.rule, "identity.tenants.acme.users.bob.tools");
  EXPECT_FALSE(d.visible);
  EXPECT_FALSE(Visible(policy_, kBobBot, "sandbox__exec", {}));
  // bob himself may use tracker__*, but his bot's own list leaves it out.
  d = Decide(policy_, kBobBot, Call("tracker__list"));
  EXPECT_EQ(d.effect, Effect::kDeny);
  EXPECT_EQ(d.rule, "identity.tenants.acme.agents.bob-bot.tools");
  EXPECT_EQ(Decide(policy_, CallContext{"acme", "bob", "", ""}, Call("tracker__list")).effect,
            Effect::kAllow);
  // Inside both lists: the rules decide.
  EXPECT_EQ(Decide(policy_, kBobBot, Call("mail__read_inbox")).effect, Effect::kAllow);
}

TEST_F(DecideTest, ScopeDeniesToolsOutsideItNamingTheScope) {
  Decision d = Decide(policy_, InScope(kAliceCoder, "inbox"), Call("tracker__list"));
  EXPECT_EQ(d.effect, Effect::kDeny);
  EXPECT_EQ(d.rule, "scopes.inbox");
  EXPECT_NE(d.reason.find("outside the session's scope 'inbox'"), std::string::npos) << d.reason;
  EXPECT_FALSE(Visible(policy_, InScope(kAliceCoder, "inbox"), "tracker__list", {}));
  EXPECT_EQ(Decide(policy_, InScope(kAliceCoder, "inbox"), Call("mail__read_inbox")).effect,
            Effect::kAllow);
}

TEST_F(DecideTest, ReadScopeDeniesWriteTools) {
  // `reading` names no tools: only its access narrows. sandbox__exec is a write tool.
  Decision d = Decide(policy_, InScope(kAliceCoder, "reading"), Call("sandbox__exec"));
  EXPECT_EQ(d.effect, Effect::kDeny);
  EXPECT_EQ(d.rule, "scopes.reading");
  EXPECT_NE(d.reason.find("read-only"), std::string::npos) << d.reason;
  EXPECT_FALSE(Visible(policy_, InScope(kAliceCoder, "reading"), "sandbox__exec", {}));
  EXPECT_EQ(Decide(policy_, InScope(kAliceCoder, "reading"), Call("tracker__list")).effect,
            Effect::kAllow);
  // A tool no rule names counts as write (defaults.unknown_tool.access).
  EXPECT_EQ(Decide(policy_, InScope(kAliceCoder, "reading"), Call("weather__forecast")).effect,
            Effect::kDeny);
}

TEST_F(DecideTest, ScopeNamingAToolTheUserCannotUseDoesNotGrantIt) {
  // triage lists sandbox__exec; bob may not use it; choosing the scope must not widen anything.
  Decision d = Decide(policy_, CallContext{"acme", "bob", "", "triage"}, Call("sandbox__exec"));
  EXPECT_EQ(d.effect, Effect::kDeny);
  EXPECT_EQ(d.rule, "identity.tenants.acme.users.bob.tools");
  EXPECT_FALSE(Visible(policy_, CallContext{"acme", "bob", "", "triage"}, "sandbox__exec", {}));
}

TEST_F(DecideTest, ScopeNeverWidensADenyingRule) {
  // triage includes tracker__*, but globex's rule still denies it.
  EXPECT_EQ(Decide(policy_, InScope(kCarolBot, "triage"), Call("tracker__list")).effect,
            Effect::kDeny);
}

TEST_F(DecideTest, UnknownScopeIsDenied) {
  Decision d = Decide(policy_, InScope(kAliceCoder, "everything"), Call("mail__read_inbox"));
  EXPECT_EQ(d.effect, Effect::kDeny);
  EXPECT_EQ(d.rule, "scopes");
  EXPECT_FALSE(Visible(policy_, InScope(kAliceCoder, "everything"), "mail__read_inbox", {}));
}

TEST_F(DecideTest, AgentProfileNeverDeniesAndHidesLabelledTools) {
  Decision d = Decide(policy_, kAliceBrowser, Call("mail__read_inbox"));
  EXPECT_EQ(d.effect, Effect::kDeny);
  EXPECT_EQ(d.rule, "agent_profiles.browsing");
  EXPECT_NE(d.reason.find("private_output"), std::string::npos) << d.reason;
  EXPECT_FALSE(d.visible);
  EXPECT_FALSE(Visible(policy_, kAliceBrowser, "mail__read_inbox", {}));
  // The same tool for the same user through an agent without that profile.
  EXPECT_TRUE(Visible(policy_, kAliceCoder, "mail__read_inbox", {}));
  // Tools without the label stay.
  EXPECT_TRUE(Visible(policy_, kAliceBrowser, "tracker__list", {}));
  EXPECT_EQ(Decide(policy_, kAliceBrowser, Call("tracker__list")).effect, Effect::kAllow);
}

TEST_F(DecideTest, LabelHintsCanOnlyHide) {
  EXPECT_FALSE(Visible(policy_, kAliceBrowser, "tracker__list", {"private_output"}));
  EXPECT_TRUE(Visible(policy_, kAliceBrowser, "tracker__list", {"external_send", "made_up"}));
  EXPECT_FALSE(Visible(policy_, kAliceBrowser, "mail__read_inbox", {}));
}

TEST(VisibleTest, ProfileHidesAToolIfAnyRuleForItsNameCarriesTheLabel) {
  // Which rule applies depends on the arguments, unknown at tools/list: hide when any may carry it.
  Policy p = MustLoad(R"(version: 1
identity:
  tenants:
    t:
      users: { u: {} }
      agents: { a: { user: u, profile: p } }
agent_profiles: { p: { never: [external_send] } }
tools:
  - { match: { tool: x__send, args: { /to: { suffix: "@t.example" } } }, risk: low }
  - { match: { tool: x__send }, risk: low, labels: [external_send] }
)");
  CallContext a{"t", "u", "a", ""};
  EXPECT_FALSE(Visible(p, a, "x__send", {}));
  // The call that takes the label-free rule is still allowed if made.
  EXPECT_EQ(Decide(p, a, Call("x__send", {{"to", "b@t.example"}})).effect, Effect::kAllow);
  EXPECT_EQ(Decide(p, a, Call("x__send", {{"to", "b@else.example"}})).effect, Effect::kDeny);
}

TEST_F(DecideTest, ToolsThatAreAlwaysDeniedAreHidden) {
  EXPECT_FALSE(Visible(policy_, kAliceCoder, "tracker__delete_issue", {}));
  EXPECT_FALSE(Visible(policy_, kCarolBot, "tracker__list", {}));
  // Allowed on one server only: the name stays visible (the call is checked when made).
  EXPECT_TRUE(Visible(policy_, kAliceCoder, "files__read", {}));
  // Asked, not denied: visible.
  EXPECT_TRUE(Visible(policy_, kAliceCoder, "mail__send_email", {}));
  EXPECT_TRUE(Visible(policy_, kAliceCoder, "weather__forecast", {}));
}

TEST(SingleUserTest, WithoutTenantsCallersAreNotToldApart) {
  Policy p = MustLoad("version: 1\ntools:\n  - { match: { tool: a }, risk: low }\n");
  EXPECT_EQ(Decide(p, {}, Call("a")).effect, Effect::kAllow);
  EXPECT_EQ(Decide(p, CallContext{"x", "y", "z", ""}, Call("a")).effect, Effect::kAllow);
  EXPECT_TRUE(Visible(p, {}, "a", {}));
}

TEST(IdentityConditionTest, UserAndAgentConditionsMatchTheCaller) {
  Policy p = MustLoad(R"(version: 1
identity:
  tenants:
    t:
      users: { u: {}, v: {} }
      agents: { a: { user: u }, b: { user: u } }
tools:
  - { match: { tool: x, agent: a }, effect: allow }
  - { match: { tool: x, user: v }, effect: ask }
  - { match: { tool: x }, effect: deny }
)");
  EXPECT_EQ(Decide(p, CallContext{"t", "u", "a", ""}, Call("x")).effect, Effect::kAllow);
  EXPECT_EQ(Decide(p, CallContext{"t", "u", "b", ""}, Call("x")).effect, Effect::kDeny);
  EXPECT_EQ(Decide(p, CallContext{"t", "v", "", ""}, Call("x")).effect, Effect::kAsk);
}

TEST(RuleIndexTest, IndexedDecisionsEqualALinearScan) {
  // Random policies of exact names, prefixes, inner and leading wildcards; random names.
  std::mt19937 rng(7);
  const std::vector<std::string> parts = {"a", "b", "ab", "__", "x_", "read", "_"};
  auto word = [&](int max) {
    std::string w;
    int n = 1 + rng() % max;
    for (int i = 0; i < n; ++i) w += parts[rng() % parts.size()];
    return w;
  };
  for (int round = 0; round < 20; ++round) {
    std::string yaml = "version: 1\ntools:\n";
    for (int r = 0; r < 60; ++r) {
      std::string pattern = word(3);
      switch (rng() % 5) {
        case 0:
          pattern += "*";
          break;
        case 1:
          pattern = "*" + pattern;
          break;
        case 2:
          pattern.insert(rng() % pattern.size(), "*");
          break;
        case 3:
          pattern.insert(rng() % pattern.size(), "?");
          break;
        default:
          break;
      }
      const char* effects[] = {"allow", "ask", "deny"};
      yaml += "  - { match: { tool: \"" + pattern + "\" }, effect: " + effects[rng() % 3] + " }\n";
    }
    Policy indexed = MustLoad(yaml);
    Policy linear = indexed;
    linear.index.reset();
    for (int c = 0; c < 300; ++c) {
      std::string name = word(4);
      Decision a = Decide(indexed, {}, Call(name));
      Decision b = Decide(linear, {}, Call(name));
      ASSERT_EQ(a.rule, b.rule) << name << "\n" << yaml;
      ASSERT_EQ(a.visible, b.visible) << name;
    }
  }
}

TEST(DecideConcurrencyTest, ManyThreadsDecideOnOnePolicy) {
  Policy p = MustLoad(kTeam);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        if (Decide(p, kAliceCoder, Call("mail__read_inbox")).effect != Effect::kAllow) ++wrong;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace warden::policy

namespace warden::policy {
namespace {

TEST(QuickstartExampleTest, WritesIntoGitDirectoriesAreDeniedHoweverSpelled) {
  auto p = LoadPolicyFile(std::string(WARDEN_POLICY_EXAMPLES) + "/quickstart.yaml");
  ASSERT_TRUE(p.ok()) << p.status().message();
  auto write = [&](const std::string& path) {
    return Decide(*p, {},
                  ToolCall{"files", "files__write_file", {{"path", path}, {"content", "x"}}})
        .effect;
  };
  EXPECT_EQ(write("/work/.git/hooks/pre-commit"), Effect::kDeny);
  EXPECT_EQ(write("/work/./.git/config"), Effect::kDeny);
  EXPECT_EQ(write(".git/config"), Effect::kDeny);
  EXPECT_EQ(write("/work/sub/.git"), Effect::kDeny);
  EXPECT_EQ(write("/work/.gitignore"), Effect::kAllow);
  EXPECT_EQ(write("/work/src/main.py"), Effect::kAllow);
}

}  // namespace
}  // namespace warden::policy
