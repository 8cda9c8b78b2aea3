// The escape tests of escape_test.cc, each run against a pre-warmed sandbox: a pool server is
// started for every test and the harness sends every `warden run` to it (WARDEN_TEST_POOL).
// A pooled sandbox must hold exactly as a cold one does.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <memory>

#include "pool_fixture.h"

namespace warden::testing {

// These attacks go through a --ro/--rw bind of a directory made by the test itself: a pool's binds
// are fixed when it starts, so a per-test directory cannot be pooled (the run is refused, exit
// 125). The attacks themselves are the same for a pooled sandbox's binds; they run cold.
constexpr const char* kPerTestBinds =
    "-EscapePooled.ReadRootOnlyHostFileThroughBind:EscapePooled.SymlinkAndDotDotEscapesFromRwBind:"
    "EscapePooled.ProtectedPathsInWorkspaceStayReadOnly:"
    "EscapePooled.ReservedPathsCannotBeReplacedBySpellingThemDifferently:"
    "EscapePooled.PlantedSymlinkRedirectsNestedMountPointOntoHost:"
    "EscapePooled.ReadRootOnlyFileBeneathPrivateDirectoryThroughBind:"
    "EscapePooled.SandboxMountPropagatesToHostThroughSharedBindSource";

class PoolEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    std::printf(
        "[ pooled   ] every `warden run` goes through a pool; skipped (bind a per-test directory): "
        "%s\n",
        kPerTestBinds + 1);
    if (!IsRoot()) GTEST_SKIP() << "pools are tested as root";
    pool_ = std::make_unique<PoolProcess>(std::vector<std::string>{"--size", "2"});
    ASSERT_TRUE(pool_->WaitReady()) << pool_->Log();
    setenv("WARDEN_TEST_POOL", pool_->socket().c_str(), 1);
  }
  void TearDown() override {
    if (!pool_) return;
    unsetenv("WARDEN_TEST_POOL");
    auto s = pool_->Status();
    std::printf("[ pooled   ] pool served %d commands\n",
                s.is_object() ? s["served"].get<int>() : -1);
    EXPECT_EQ(pool_->Stop(), 0) << pool_->Log();
  }

 private:
  std::unique_ptr<PoolProcess> pool_;
};

}  // namespace warden::testing

// Our own main (it takes precedence over gtest_main's): leaves out the per-test-bind tests unless
// a filter was given, and starts the pool around the tests.
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (::testing::GTEST_FLAG(filter) == "*")
    ::testing::GTEST_FLAG(filter) = warden::testing::kPerTestBinds;
  ::testing::AddGlobalTestEnvironment(new warden::testing::PoolEnvironment);
  return RUN_ALL_TESTS();
}

// The same tests under their own suite name (ctest names must be unique across binaries).
#define Escape EscapePooled
#include "escape_test.cc"
#undef Escape
