// A pool's per-sandbox workspace (`warden pool start --workspace`, docs/pool.md), the way the
// gateway's sandbox__exec uses it: the in-process client (sandbox::pool::RunPooled) asks for the
// workspace, fills it before the command starts, reads it after the result; the pool removes it
// when the client hangs up, without following anything the command planted there.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "pool_fixture.h"
#include "sandbox/pool.h"
#include "sandbox/profile.h"

namespace warden::testing {
namespace {

namespace fs = std::filesystem;
using sandbox::pool::PooledRun;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool WaitGone(const std::string& path, int timeout_ms = 5000) {
  for (int waited = 0; waited < timeout_ms; waited += 20) {
    if (!fs::exists(fs::symlink_status(path))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

struct Captured {
  sandbox::RunResult result;
  std::string out, err;
};

// Runs `sh -c script` in the pool with `x`, capturing stdout and stderr through temporary files.
Captured RunIn(const PoolProcess& pool, const std::string& script, PooledRun& x) {
  char out_tmpl[] = "/tmp/warden-test-out-XXXXXX";
  char err_tmpl[] = "/tmp/warden-test-err-XXXXXX";
  int out = mkstemp(out_tmpl), err = mkstemp(err_tmpl);
  sandbox::Options o;
  o.argv = {"/bin/sh", "-c", script};
  o.protect = sandbox::DefaultProtectedPaths();  // as `warden run` starts from
  Captured c;
  c.result = sandbox::pool::RunPooled(pool.socket(), o, {-1, out, err}, false, &x);
  close(out);
  close(err);
  c.out = ReadFile(out_tmpl);
  c.err = ReadFile(err_tmpl);
  unlink(out_tmpl);
  unlink(err_tmpl);
  return c;
}

// The pool's workspaces go under $TMPDIR: each test gives the pool a directory of its own, so
// that what is left behind can be checked without other tests' pools in the way.
class PoolWorkspace : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!IsRoot()) GTEST_SKIP() << "pool tests run as root (cgroups, uid maps to 65534)";
    char tmpl[] = "/tmp/warden-test-wsbase-XXXXXX";
    base_ = mkdtemp(tmpl);
    chmod(base_.c_str(), 0711);  // searchable by the sandbox's host user
    setenv("TMPDIR", base_.c_str(), 1);
    pool_ = std::make_unique<PoolProcess>(std::vector<std::string>{"--size", "2", "--workspace"});
    unsetenv("TMPDIR");
    ASSERT_TRUE(pool_->WaitReady()) << pool_->Log();
  }
  void TearDown() override {
    if (pool_) {
      EXPECT_EQ(pool_->Stop(), 0) << pool_->Log();
    }
    if (!base_.empty()) {
      // A stopped pool leaves nothing in its base: no workspace, no private parent.
      EXPECT_TRUE(fs::is_empty(base_)) << "left in " << base_;
      fs::remove_all(base_);
    }
  }
  std::string base_;
  std::unique_ptr<PoolProcess> pool_;
};

TEST_F(PoolWorkspace, FilesGoInBeforeTheCommandAndOutputsComeOutAfter) {
  std::string seen_path, collected;
  PooledRun x;
  x.workspace = true;
  x.prepare = [&](const std::string& path) {
    seen_path = path;
    std::ofstream(path + "/in.txt") << "from the host\n";
    return Status::Ok();
  };
  x.finish = [&] { collected = ReadFile(seen_path + "/out.txt"); };
  Captured c = RunIn(*pool_, "pwd; cat in.txt; echo written > /work/out.txt", x);
  EXPECT_FALSE(x.not_served);
  EXPECT_EQ(c.result.reason, sandbox::Reason::kExited) << c.result.error << c.err;
  EXPECT_EQ(c.result.exit_code, 0);
  EXPECT_EQ(c.out, "/work\nfrom the host\n");
  EXPECT_EQ(collected, "written\n");
  ASSERT_FALSE(seen_path.empty());
  EXPECT_TRUE(seen_path.starts_with(base_ + "/warden-pool-")) << seen_path;
  EXPECT_TRUE(WaitGone(seen_path)) << seen_path << " outlived the run";
}

TEST_F(PoolWorkspace, EachClaimGetsAFreshEmptyWorkspace) {
  std::vector<std::string> paths;
  for (int i = 0; i < 3; ++i) {
    PooledRun x;
    x.workspace = true;
    x.prepare = [&](const std::string& path) {
      paths.push_back(path);
      return Status::Ok();
    };
    Captured c = RunIn(*pool_, "ls -A /work; echo secret-" + std::to_string(i) + " > /work/left", x);
    EXPECT_EQ(c.result.exit_code, 0) << c.err;
    EXPECT_EQ(c.out, "") << "claim " << i << " saw another claim's files";
  }
  ASSERT_EQ(paths.size(), 3u);
  EXPECT_NE(paths[0], paths[1]);
  EXPECT_NE(paths[1], paths[2]);
}

TEST_F(PoolWorkspace, APlantedLinkIsRemovedNotFollowed) {
  // The command points links at a host directory (the path means nothing inside, but the pool
  // removes the workspace on the host, as root) and locks its own directories.
  char tmpl[] = "/tmp/warden-test-victim-XXXXXX";
  std::string victim = mkdtemp(tmpl);
  std::ofstream(victim + "/keep") << "must survive";
  std::string seen;
  PooledRun x;
  x.workspace = true;
  x.prepare = [&](const std::string& path) {
    seen = path;
    return Status::Ok();
  };
  Captured c = RunIn(*pool_,
                   "ln -s " + victim + " /work/link; ln -s " + victim +
                       "/keep /work/file; mkdir -p /work/a/b; ln -s " + victim +
                       " /work/a/b/deep; chmod 000 /work/a/b /work/a",
                   x);
  EXPECT_EQ(c.result.exit_code, 0) << c.err;
  EXPECT_TRUE(WaitGone(seen)) << seen << " outlived the run";
  EXPECT_EQ(ReadFile(victim + "/keep"), "must survive");
  fs::remove_all(victim);
}

TEST_F(PoolWorkspace, APrepareErrorEndsTheRunBeforeTheCommandAndThePoolGoesOn) {
  std::string seen;
  PooledRun x;
  x.workspace = true;
  x.prepare = [&](const std::string& path) {
    seen = path;
    return Status::Error("files: no room");
  };
  Captured c = RunIn(*pool_, "echo ran > /tmp/ran; echo ran", x);
  EXPECT_EQ(c.result.exit_code, 125);
  EXPECT_EQ(c.result.reason, sandbox::Reason::kSetupError);
  EXPECT_NE(c.result.error.find("no room"), std::string::npos) << c.result.error;
  EXPECT_EQ(c.out, "");
  EXPECT_FALSE(x.not_served);  // it was served: the failure is the caller's own
  EXPECT_TRUE(WaitGone(seen)) << seen << " outlived the run";
  // The held sandbox was destroyed, not handed out again, and not counted as lost; the pool
  // still serves.
  PooledRun next;
  Captured d = RunIn(*pool_, "echo ok", next);
  EXPECT_EQ(d.out, "ok\n");
  EXPECT_EQ(pool_->Status()["failed"], 0) << pool_->Log();
  EXPECT_EQ(pool_->Log().find("was lost"), std::string::npos) << pool_->Log();
}

// The result comes as soon as the command ends (before the sandbox's namespaces are torn down),
// but never before everything the command started is dead: a background writer left behind
// must not write into the workspace after the result.
TEST_F(PoolWorkspace, NothingTheCommandStartedOutlivesTheResult) {
  std::string seen;
  bool late_write = true;
  PooledRun x;
  x.workspace = true;
  x.prepare = [&](const std::string& path) {
    seen = path;
    return Status::Ok();
  };
  x.finish = [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    late_write = fs::exists(seen + "/late") || fs::exists(seen + "/early");
  };
  Captured c = RunIn(*pool_,
                     "(sleep 0.5; echo late > /work/late) & (trap '' TERM HUP; sleep 0.6; "
                     "echo early > /work/early) & echo started",
                     x);
  EXPECT_EQ(c.out, "started\n");
  EXPECT_EQ(c.result.exit_code, 0) << c.err;
  EXPECT_FALSE(late_write) << "a process the command started wrote after the result";
}

TEST_F(PoolWorkspace, KillFromAnotherThreadEndsTheRun) {
  std::function<void()> kill;
  PooledRun x;
  x.workspace = true;
  x.on_accepted = [&](std::function<void()> k) { kill = std::move(k); };
  x.prepare = [&](const std::string&) {
    // The command is about to start: ask for the kill a little later, from another thread.
    std::thread([k = kill] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      k();
    }).detach();
    return Status::Ok();
  };
  auto start = std::chrono::steady_clock::now();
  Captured c = RunIn(*pool_, "sleep 30", x);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(c.result.reason, sandbox::Reason::kSignaled) << c.result.error;
  EXPECT_EQ(c.result.exit_code, 128 + SIGKILL);
  ASSERT_TRUE(kill);
  kill();  // after the run: harmless
}

TEST(PoolWorkspaceRefused, APoolWithoutWorkspacesSaysSoAndNothingRuns) {
  if (!IsRoot()) GTEST_SKIP() << "pool tests run as root";
  PoolProcess pool({"--size", "1"});
  ASSERT_TRUE(pool.WaitReady()) << pool.Log();
  PooledRun x;
  x.workspace = true;
  bool prepared = false;
  x.prepare = [&](const std::string&) {
    prepared = true;
    return Status::Ok();
  };
  Captured c = RunIn(pool, "echo ran", x);
  EXPECT_TRUE(x.not_served);
  EXPECT_FALSE(prepared);
  EXPECT_EQ(c.result.exit_code, 125);
  EXPECT_NE(c.result.error.find("--workspace"), std::string::npos) << c.result.error;
  EXPECT_EQ(c.out, "");
  // An unreachable pool is "not served" too: the gateway then runs the call cold.
  PooledRun y;
  sandbox::Options o;
  o.argv = {"/bin/true"};
  sandbox::RunResult r = sandbox::pool::RunPooled("/nonexistent/pool.sock", o, {-1, -1, -1}, false, &y);
  EXPECT_TRUE(y.not_served);
  EXPECT_EQ(r.exit_code, 125);
}

TEST(PoolWorkspaceRefused, AProfileThatBindsWorkCannotHaveAWorkspace) {
  if (!IsRoot()) GTEST_SKIP() << "pool tests run as root";
  PoolProcess pool({"--size", "1", "--workspace", "--ro", "/usr/share:/work"});
  EXPECT_FALSE(pool.WaitReady(1, 5000));
  EXPECT_EQ(pool.Stop(), 125);
  EXPECT_NE(pool.Log().find("--workspace: the profile already binds /work"), std::string::npos)
      << pool.Log();
}

}  // namespace
}  // namespace warden::testing
