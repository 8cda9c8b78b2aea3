// What a pooled run may change per command and what it must take from the pool (pool.h
// Effective), and the pool protocol's result record round trip.
#include <gtest/gtest.h>

#include "sandbox/pool.h"
#include "sandbox/pool_protocol.h"
#include "sandbox/profile.h"

namespace warden::sandbox::pool {
namespace {

Options Defaults() {
  Options o;
  o.protect = DefaultProtectedPaths();
  o.argv = {"true"};
  return o;
}

TEST(PoolEffective, PerCommandFieldsComeFromTheRunTheRestFromThePool) {
  Options pool = Defaults();
  pool.memory_bytes = 256 << 20;
  pool.timeout_ms = 30000;
  pool.env = {{"A", "pool"}, {"B", "pool"}};
  pool.binds = NormalizeBinds({{"/usr/share", "/data", false}});
  Options run = Defaults();
  run.argv = {"echo", "hi"};
  run.env = {{"B", "run"}};
  run.workdir = "/data";
  run.output_limit_bytes = 1024;
  run.open_files = 64;
  auto e = Effective(pool, run, true, {});
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->argv, run.argv);
  EXPECT_EQ(e->memory_bytes, pool.memory_bytes);  // inherited: the run left it at its default
  EXPECT_EQ(e->timeout_ms, 30000u);
  EXPECT_EQ(e->env.at("A"), "pool");
  EXPECT_EQ(e->env.at("B"), "run");
  EXPECT_EQ(e->workdir, "/data");
  EXPECT_EQ(e->output_limit_bytes, 1024u);
  EXPECT_EQ(e->open_files, 64u);
  EXPECT_EQ(e->binds.size(), 1u);
}

TEST(PoolEffective, DifferentSetUpAheadOptionsAreRefusedByName) {
  Options pool = Defaults();
  pool.memory_bytes = 256 << 20;
  auto refused = [&](Options run, const std::string& name) {
    run.argv = {"true"};
    auto e = Effective(pool, run, true, {});
    ASSERT_FALSE(e.ok()) << name;
    EXPECT_NE(e.status().message().find(name), std::string::npos) << e.status().message();
  };
  Options r = Defaults();
  r.memory_bytes = 512 << 20;
  refused(r, "--memory");
  r = Defaults();
  r.pids = 10;
  refused(r, "--pids");
  r = Defaults();
  r.binds = {{"/usr", "", true}};
  refused(r, "--rw /usr");
  r = Defaults();
  r.net = NetMode::kProxy;
  refused(r, "--net proxy");
  r = Defaults();
  r.tmpfs_bytes = 1 << 30;
  refused(r, "--tmpfs-size");
  r = Defaults();
  r.protect = {};
  refused(r, "--protect");
  r = Defaults();
  r.backend = "microvm";
  refused(r, "--backend microvm");
  r = Defaults();
  r.cpu_ms = 1000;
  auto e = Effective(pool, r, /*pool_has_cgroup=*/false, {});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--cpu"), std::string::npos);
  EXPECT_TRUE(Effective(pool, r, /*pool_has_cgroup=*/true, {}).ok());
}

TEST(PoolEffective, TheSameValueOrAnotherSpellingOfTheSameBindIsAccepted) {
  Options pool = Defaults();
  pool.memory_bytes = 64 << 20;
  pool.binds = NormalizeBinds({{"/usr/share/../share", "", false}});
  Options run = Defaults();
  run.memory_bytes = 64 << 20;
  run.binds = {{"/usr/share", "/usr/share", false}};
  auto e = Effective(pool, run, true, {});
  EXPECT_TRUE(e.ok()) << e.status().message();
  run.binds = {{"/usr/share", "/usr/share", true}};  // writable is not the same bind
  EXPECT_FALSE(Effective(pool, run, true, {}).ok());
}

TEST(PoolEffective, ADegradedPoolNeedsTheRunToAcceptIt) {
  Options pool = Defaults();
  pool.degrade.allow_no_landlock = true;
  Options run = Defaults();
  auto e = Effective(pool, run, false, {"landlock"});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--accept-missing landlock"), std::string::npos);
  run.degrade.allow_no_landlock = true;
  EXPECT_TRUE(Effective(pool, run, false, {"landlock"}).ok());
}

TEST(PoolProtocol, RequestAndResultRoundTrip) {
  Options o = Defaults();
  o.argv = {"sh", "-c", "echo 'quoted \"x\"'"};
  o.env = {{"K", "V"}};
  o.timeout_ms = 1500;
  o.binds = {{"/usr/share", "/data", false}};
  auto back = OptionsFromRequest(RunRequest(o));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->argv, o.argv);
  EXPECT_EQ(back->env, o.env);
  EXPECT_EQ(back->timeout_ms, 1500u);
  ASSERT_EQ(back->binds.size(), 1u);
  EXPECT_EQ(back->binds[0].inside, "/data");
  EXPECT_FALSE(OptionsFromRequest({{"op", "run"}, {"argv", "not-a-list"}}).ok());
  EXPECT_FALSE(OptionsFromRequest({{"op", "run"}}).ok());

  RunResult r;
  r.exit_code = 137;
  r.signal = 9;
  r.reason = Reason::kMemory;
  r.violations = {{"ptrace", 1, 42}};
  r.notes = {"a note"};
  r.cgroup = "v1";
  r.landlock_abi = 4;
  auto parsed = ResultFromJson(nlohmann::json::parse(ToJson(r)));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(ToJson(*parsed), ToJson(r));
  EXPECT_FALSE(ResultFromJson({{"reason", "exploded"}}).ok());
}

}  // namespace
}  // namespace warden::sandbox::pool
