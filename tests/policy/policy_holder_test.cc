// PolicyHolder: the gateway's hot reload keeps the old policy when the new file is bad.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "policy/holder.h"

namespace warden::policy {
namespace {

class PolicyHolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/policy-holder-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/policy.yaml";
  }
  void TearDown() override {
    std::remove(path_.c_str());
    rmdir(dir_.c_str());
  }
  void Write(const std::string& text) {
    std::ofstream out(path_, std::ios::trunc);
    out << text;
  }
  Effect EffectOfX(const PolicyHolder& holder) {
    return Decide(*holder.Current(), {}, ToolCall{"", "x", nlohmann::json::object()}).effect;
  }

  std::string dir_, path_;
};

const char* kAllowX = "version: 1\ntools:\n  - { match: { tool: x }, effect: allow }\n";
const char* kDenyX = "version: 1\ntools:\n  - { match: { tool: x }, effect: deny }\n";

TEST_F(PolicyHolderTest, StartsEmptyAndReloadPutsTheFileInForce) {
  PolicyHolder holder;
  EXPECT_EQ(holder.Current(), nullptr);
  Write(kAllowX);
  ASSERT_TRUE(holder.ReloadFrom(path_).ok());
  EXPECT_EQ(EffectOfX(holder), Effect::kAllow);
  Write(kDenyX);
  ASSERT_TRUE(holder.ReloadFrom(path_).ok());
  EXPECT_EQ(EffectOfX(holder), Effect::kDeny);
}

TEST_F(PolicyHolderTest, BadFileKeepsTheOldPolicyAndSaysWhy) {
  PolicyHolder holder;
  Write(kAllowX);
  ASSERT_TRUE(holder.ReloadFrom(path_).ok());
  auto before = holder.Current();

  Write("version: 1\ntools:\n  - { match: { tool: x }, effect: alow }\n");
  Status st = holder.ReloadFrom(path_);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(path_ + ":3: tools[0].effect: expected allow, ask or deny"),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("kept the previous policy"), std::string::npos) << st.message();
  EXPECT_EQ(holder.Current(), before);
  EXPECT_EQ(EffectOfX(holder), Effect::kAllow);

  Write("version: 1\nmonitoring: { volume: {} }\n");
  EXPECT_FALSE(holder.ReloadFrom(path_).ok());
  EXPECT_EQ(holder.Current(), before);

  std::remove(path_.c_str());
  EXPECT_FALSE(holder.ReloadFrom(path_).ok());
  EXPECT_EQ(holder.Current(), before);
}

TEST_F(PolicyHolderTest, ReadersAlwaysSeeAWholePolicyWhileReloading) {
  PolicyHolder holder;
  Write(kAllowX);
  ASSERT_TRUE(holder.ReloadFrom(path_).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> broken{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 2; ++i) {
    readers.emplace_back([&] {
      while (!stop) {
        auto p = holder.Current();
        if (!p || p->rules.size() != 1) ++broken;
        std::this_thread::yield();
      }
    });
  }
  for (int i = 0; i < 100; ++i) {
    Write(i % 2 ? kAllowX : kDenyX);
    ASSERT_TRUE(holder.ReloadFrom(path_).ok());
  }
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(broken.load(), 0);
}

}  // namespace
}  // namespace warden::policy
