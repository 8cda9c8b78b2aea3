// The `warden run` contract: exit statuses, stdin/stdout pass-through, binds, the JSON record,
// and the errors a user gets for bad input (exit 125, one line naming what was wrong).
#include <gtest/gtest.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "harness.h"

namespace warden::testing {
namespace {

TEST(RunContract, PythonRuns) {
  auto r = RunWarden({{"run", "--", "python3", "-c", "import sys, json; print(json.dumps({'v': sys.version_info[0]}))"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"v\": 3}\n");
}

TEST(RunContract, ExitCodePassesThrough) {
  EXPECT_EQ(RunSh("exit 3").exit_code, 3);
  EXPECT_EQ(RunSh("exit 0").exit_code, 0);
  auto r = RunSh("kill -TERM $$");
  EXPECT_EQ(r.exit_code, 128 + 15);
  EXPECT_EQ(r.record["reason"], "signaled");
  EXPECT_EQ(r.record["signal"], 15);
}

TEST(RunContract, CommandNotFoundIs127AndNotExecutableIs126) {
  auto nf = RunWarden({{"run", "--", "no-such-command-xyz"}});
  EXPECT_EQ(nf.exit_code, 127);
  EXPECT_NE(nf.err.find("command not found: no-such-command-xyz"), std::string::npos) << nf.err;
  auto ne = RunWarden({{"run", "--", "/etc/passwd"}});
  EXPECT_EQ(ne.exit_code, 126);
  EXPECT_NE(ne.err.find("not executable"), std::string::npos) << ne.err;
}

TEST(RunContract, StdinPassesThrough) {
  Invocation inv;
  inv.args = {"run", "--", "sh", "-c", "tr a-z A-Z; echo done"};
  inv.stdin_data = "hello sandbox\n";
  auto r = RunWarden(inv);
  EXPECT_EQ(r.out, "HELLO SANDBOX\ndone\n");
}

// A socket (or a terminal) as warden's stdin is never handed to the command: it is relayed through
// a pipe (host_io's RelayStdin), and the command sees the pipe and the bytes, then EOF.
TEST(RunContract, StdinFromASocketIsRelayedThroughAPipe) {
  int sv[2], out[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(sv[1], 0);
    dup2(out[1], 1);
    execl(WARDEN_BIN, WARDEN_BIN, "run", "--", "/bin/sh", "-c", "stat -L -c %F /proc/self/fd/0; cat",
          nullptr);
    _exit(98);
  }
  close(sv[1]);
  close(out[1]);
  const std::string sent = "relayed through a socket\n";
  ASSERT_EQ(write(sv[0], sent.data(), sent.size()), static_cast<ssize_t>(sent.size()));
  shutdown(sv[0], SHUT_WR);
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  int status = 0;
  waitpid(pid, &status, 0);
  close(sv[0]);
  close(out[0]);
  EXPECT_EQ(got, "fifo\n" + sent);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(RunContract, ShellPipelinesWork) {
  auto r = RunSh("seq 1 1000 | grep 7 | wc -l");
  EXPECT_EQ(r.out, "271\n");
}

TEST(RunContract, TmpIsWritableAndPrivate) {
  auto r = RunSh("echo data > /tmp/f && cat /tmp/f && ls -ld /tmp | cut -c1-10");
  EXPECT_EQ(r.out, "data\ndrwxrwxrwt\n") << r.err;
}

TEST(RunContract, RoAndRwBindsWork) {
  TempDir ro, rw;
  ro.Write("in.txt", "input");
  chmod(ro.path().c_str(), 0755);
  chown(rw.path().c_str(), 65534, 65534);
  auto r = RunSh("cat /in/in.txt > /out/copy.txt && echo x > /in/new 2>&1; ls /out; pwd",
                 {"--ro", ro.path() + ":/in", "--rw", rw.path() + ":/out"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::ifstream copy(rw.path() + "/copy.txt");
  std::string content((std::istreambuf_iterator<char>(copy)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "input");
  EXPECT_NE(r.err.find("Read-only file system"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("/out\n"), std::string::npos) << "workdir defaults to the first --rw: " << r.out;
}

TEST(RunContract, BindWithoutInsidePathUsesHostPath) {
  TempDir ro;
  ro.Write("f", "same-path");
  chmod(ro.path().c_str(), 0755);
  auto r = RunSh("cat " + ro.path() + "/f", {"--ro", ro.path()});
  EXPECT_EQ(r.out, "same-path");
}

TEST(RunContract, JsonRecordHasTheContractFields) {
  auto r = RunSh("echo hi; echo err >&2; exit 4");
  ASSERT_TRUE(r.record.is_object()) << r.err;
  for (const char* k : {"exit_code", "signal", "reason", "wall_ms", "cpu_ms", "peak_memory_bytes", "stdout_truncated",
                        "stderr_truncated", "egress", "violations"}) {
    EXPECT_TRUE(r.record.contains(k)) << k;
  }
  EXPECT_EQ(r.record["exit_code"], 4);
  EXPECT_EQ(r.record["reason"], "exited");
  EXPECT_EQ(r.record["stdout_bytes"], 3);
  EXPECT_EQ(r.record["stderr_bytes"], 4);
  EXPECT_EQ(r.err.find("err\n"), 0u);
  EXPECT_GT(r.record["peak_memory_bytes"].get<uint64_t>(), 0u);
  EXPECT_GE(r.record["landlock_abi"].get<int>(), 1);
}

TEST(RunContract, JsonToStderrWithDash) {
  Invocation inv;
  inv.json = false;
  inv.args = {"run", "--json", "-", "--", "true"};
  auto r = RunWarden(inv);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.err.find("\"reason\":\"exited\""), std::string::npos) << r.err;
}

TEST(RunContract, BadOptionIs125WithOneLine) {
  auto r = RunWarden({{"run", "--memory", "12Q", "--", "true"}});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("--memory"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("12Q"), std::string::npos) << r.err;
  auto u = RunWarden({{"run", "--no-such-flag", "--", "true"}});
  EXPECT_EQ(u.exit_code, 125);
  EXPECT_NE(u.err.find("no-such-flag"), std::string::npos) << u.err;
}

TEST(RunContract, MissingRoSourceIs125NamingThePath) {
  auto r = RunWarden({{"run", "--ro", "/definitely/not/here:/x", "--", "true"}});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("--ro /definitely/not/here"), std::string::npos) << r.err;
  EXPECT_EQ(r.record["reason"], "setup_error");
}

TEST(RunContract, ImpossibleLimitIs125) {
  auto r = RunWarden({{"run", "--memory", "1k", "--", "true"}});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("too small"), std::string::npos) << r.err;
  auto p = RunWarden({{"run", "--pids", "1", "--", "true"}});
  EXPECT_EQ(p.exit_code, 125);
  EXPECT_NE(p.err.find("--pids 1"), std::string::npos) << p.err;
}

TEST(RunContract, ReservedInsidePathIsRefused) {
  auto r = RunWarden({{"run", "--ro", "/usr:/proc", "--", "true"}});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("/proc is managed by warden"), std::string::npos) << r.err;
}

TEST(RunContract, ProfileSetsOptionsAndCommandLineOverrides) {
  TempDir dir;
  std::string profile = dir.Write("p.yaml", "timeout: 1s\nenv: {FROM_PROFILE: 'yes'}\nhostname: profiled\n");
  auto r = RunWarden({{"run", "--profile", profile, "--timeout", "5s", "--", "sh", "-c", "echo $FROM_PROFILE; hostname; sleep 2; echo slept"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "yes\nprofiled\nslept\n");
}

TEST(RunContract, BadProfileIs125NamingFileAndLine) {
  TempDir dir;
  std::string profile = dir.Write("bad.yaml", "timeout: 1s\nmemroy: 1G\n");
  auto r = RunWarden({{"run", "--profile", profile, "--", "true"}});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find(profile + ":2: unknown key 'memroy'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace warden::testing

namespace warden::testing {
namespace {

TEST(RunContract, InterruptingWardenKillsTheSandboxAndReportsTheSignal) {
  // SIGTERM to warden itself (a user's Ctrl-C is SIGINT, the same path): the sandbox dies with it
  // and warden exits as a shell would report the signal.
  Invocation inv;
  inv.args = {"run", "--", "sh", "-c", "s=4242; sleep $s.5"};
  const pid_t me = getpid();
  std::thread killer([me] {
    for (int i = 0; i < 50; ++i) {
      usleep(100 * 1000);
      // Once the command runs (the sleep exists), signal warden: this test's child (its clone,
      // the sandbox's init, has the same command line).
      if (PidsWithCmdline("sleep 4242.5").empty()) continue;
      for (pid_t p : PidsWithCmdline("sleep $s.5")) {
        std::ifstream stat("/proc/" + std::to_string(p) + "/stat");
        std::string pid, comm, state;
        pid_t ppid = 0;
        stat >> pid >> comm >> state >> ppid;
        if (ppid == me) {
          kill(p, SIGTERM);
          return;
        }
      }
    }
  });
  auto r = RunWarden(inv);
  killer.join();
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
  EXPECT_EQ(r.record["reason"], "signaled");
  EXPECT_EQ(r.record["signal"], SIGTERM);
  EXPECT_NE(r.err.find("warden received TERM"), std::string::npos) << r.err;
  EXPECT_TRUE(PidsWithCmdline("sleep 4242.5").empty());
}

}  // namespace
}  // namespace warden::testing
