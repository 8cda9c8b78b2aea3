// sandbox__exec's pool as the policy asks for it (gateway/exec_pool.h): the plan a policy and
// --exec-pool make, and a slot that follows it across reloads, on real pools (`warden pool start`).
#include "gateway/builtins/exec_pool.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include "gateway/builtins/builtin_tools.h"
#include "sandbox/launcher.h"
#include "testing.h"

namespace warden::gateway {
namespace {

using testing::PolicyFromText;

constexpr char kPolicyWithPool[] = R"(version: 1
sandbox:
  profiles:
    default: { memory: 256M, pids: 64 }
    small: { memory: 128M, pids: 32 }
  pool: { size: 3, profile: small }
)";

TEST(PlanExecPool, FlagThenPolicyThenDefaults) {
  ExecPoolPlan none = PlanExecPool(nullptr, std::nullopt);
  EXPECT_EQ(none.size, 2u);
  EXPECT_EQ(none.profile_name, "default");
  EXPECT_EQ(sandbox::ProfileArgs(none.profile), sandbox::ProfileArgs(DefaultExecProfile()));

  auto policy = PolicyFromText(kPolicyWithPool);
  ASSERT_NE(policy, nullptr);
  ExecPoolPlan asked = PlanExecPool(policy.get(), std::nullopt);
  EXPECT_EQ(asked.size, 3u);
  EXPECT_EQ(asked.profile_name, "small");
  EXPECT_EQ(asked.profile.memory_bytes, 128ull << 20);
  EXPECT_EQ(PlanExecPool(policy.get(), 0).size, 0u) << "--exec-pool 0 turns it off";
  EXPECT_EQ(PlanExecPool(policy.get(), 5).size, 5u);

  // No pool section: the policy's default profile, two sandboxes.
  auto plain = PolicyFromText("version: 1\nsandbox:\n  profiles:\n    default: { memory: 256M }\n");
  ASSERT_NE(plain, nullptr);
  ExecPoolPlan defaults = PlanExecPool(plain.get(), std::nullopt);
  EXPECT_EQ(defaults.size, 2u);
  EXPECT_EQ(defaults.profile_name, "default");
  EXPECT_EQ(defaults.profile.memory_bytes, 256ull << 20);
}

TEST(ExecPoolSlot, FollowsThePlanAndAReplacedPoolFinishesTheCallsHoldingIt) {
  if (geteuid() != 0) GTEST_SKIP() << "the default profile's cgroup limits need root";
  ExecPoolSlot slot;
  EXPECT_EQ(slot.Current(), nullptr);
  ExecPoolPlan plan = PlanExecPool(nullptr, 1);
  EXPECT_EQ(slot.Apply(plan), "sandbox__exec pre-warms 1 sandbox of profile 'default'");
  std::shared_ptr<const ExecPool> first = slot.Current();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(slot.Apply(plan), "") << "the same plan again changes nothing";
  EXPECT_EQ(slot.Current(), first);
  ASSERT_TRUE(testing::WaitExecPoolReady(*first, 1));

  // A reload tightens the default profile while a call holds the first pool.
  ExecPoolPlan tighter = plan;
  tighter.profile.memory_bytes = 128ull << 20;
  EXPECT_EQ(slot.Apply(tighter), "sandbox__exec pre-warms 1 sandbox of profile 'default'");
  std::shared_ptr<const ExecPool> second = slot.Current();
  ASSERT_NE(second, nullptr);
  EXPECT_NE(second->pid(), first->pid());
  EXPECT_TRUE(second->Serves(tighter.profile));
  EXPECT_FALSE(second->Serves(plan.profile));
  // The held pool still runs its call, pre-warmed, on the profile it was started with.
  ExecRequest request{.argv = {"/bin/sh", "-c", "echo held"}};
  CallResult held = RunSandboxExec(request, plan.profile, nullptr, first.get());
  EXPECT_EQ(held.value["structuredContent"]["stdout"], "held\n") << held.value.dump();
  EXPECT_EQ(held.execution, "pre-warmed pool");
  // Its last holder gone, the old pool is stopped and reaped.
  const pid_t old_pid = first->pid();
  first.reset();
  EXPECT_NE(kill(old_pid, 0), 0) << "the replaced pool still runs";

  // Size 0, and a profile a pool cannot hold: no pool, and why; the same plan is not retried.
  ExecPoolPlan off = tighter;
  off.size = 0;
  EXPECT_EQ(slot.Apply(off), "sandbox__exec runs without a pre-warmed pool (size 0)");
  EXPECT_EQ(slot.Current(), nullptr);
  const pid_t second_pid = second->pid();
  second.reset();
  EXPECT_NE(kill(second_pid, 0), 0);
  ExecPoolPlan networked = plan;
  networked.profile_name = "web";
  networked.profile.net = sandbox::NetMode::kProxy;
  networked.profile.allow = {"example.com"};
  EXPECT_EQ(slot.Apply(networked),
            "sandbox__exec runs without a pre-warmed pool: profile 'web': the profile has a "
            "network (pooled sandboxes have none)");
  EXPECT_EQ(slot.Current(), nullptr);
  EXPECT_EQ(slot.Apply(networked), "");
}

}  // namespace
}  // namespace warden::gateway
