// `warden run --backend gvisor`: the same contract as native (exit statuses, limits, output caps,
// binds, environment, the JSON record) and the escape attempts of escape_test.cc, run against
// gVisor's runsc for real. Everything skips, with the reason, when runsc is absent or warden is not
// root (runsc needs root).
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <iterator>
#include <thread>

#include "harness.h"
#include "https_credential.h"
#include "loopback_http.h"

namespace warden::testing {
namespace {

bool HaveRunsc() {
  for (const char* p : {"/usr/bin/runsc", "/usr/sbin/runsc", "/usr/local/bin/runsc"}) {
    if (access(p, X_OK) == 0) return true;
  }
  return false;
}

class Gvisor : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveRunsc()) GTEST_SKIP() << "runsc is not installed (Debian package runsc; scripts/install-deps.sh)";
    if (!IsRoot()) GTEST_SKIP() << "--backend gvisor needs root (runsc)";
  }
  static Outcome Sh(const std::string& script, std::vector<std::string> flags = {}) {
    flags.insert(flags.begin(), {"--backend", "gvisor"});
    return RunSh(script, flags);
  }
  static Outcome Run(std::vector<std::string> args, const std::string& stdin_data = "") {
    Invocation inv;
    inv.args = {"run", "--backend", "gvisor"};
    inv.args.insert(inv.args.end(), args.begin(), args.end());
    inv.stdin_data = stdin_data;
    return RunWarden(inv);
  }
};

std::vector<std::string> GvisorRunDirs() {
  std::vector<std::string> names;
  DIR* d = opendir("/run/warden");
  if (d == nullptr) return names;
  while (struct dirent* e = readdir(d)) {
    if (std::string(e->d_name).rfind("gvisor-", 0) == 0 && std::string(e->d_name) != "gvisor-platform") names.push_back(e->d_name);
  }
  closedir(d);
  return names;
}

// --- the contract ---------------------------------------------------------------------------

TEST_F(Gvisor, RecordSaysBackendAndPlatform) {
  auto r = Sh("echo hello");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello\n");
  EXPECT_EQ(r.record["backend"], "gvisor") << r.record.dump();
  EXPECT_EQ(r.record["reason"], "exited");
  ASSERT_TRUE(r.record.contains("platform")) << r.record.dump();
  const std::string platform = r.record["platform"];
  EXPECT_TRUE(platform == "ptrace" || platform == "kvm" || platform == "systrap") << platform;
  bool noted = false;
  for (const auto& n : r.record["notes"]) noted |= n.get<std::string>().rfind("gvisor platform " + platform, 0) == 0;
  EXPECT_TRUE(noted) << r.record.dump();
  EXPECT_GT(r.record["wall_ms"].get<int>(), 0);
}

TEST_F(Gvisor, CommandExitStatusPassesThrough) {
  auto r = Sh("echo out; echo err >&2; exit 3");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.record["exit_code"], 3);
  EXPECT_EQ(r.record["reason"], "exited");
  EXPECT_EQ(r.out, "out\n");
  EXPECT_NE(r.err.find("err\n"), std::string::npos) << r.err;
}

TEST_F(Gvisor, KilledBySignalIs128PlusN) {
  auto r = Sh("kill -TERM $$");
  EXPECT_EQ(r.exit_code, 128 + 15) << r.err;
  EXPECT_EQ(r.record["reason"], "signaled");
  EXPECT_EQ(r.record["signal"], 15);
}

TEST_F(Gvisor, TimeoutIs124AndQuick) {
  auto r = Sh("echo started; sleep 30", {"--timeout", "1"});
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_EQ(r.record["reason"], "timeout");
  EXPECT_EQ(r.out, "started\n");
  EXPECT_LT(r.record["wall_ms"].get<int>(), 5000);
}

TEST_F(Gvisor, MissingCommandIs127AndNotExecutableIs126) {
  auto r = Run({"--", "no-such-command-here"});
  EXPECT_EQ(r.exit_code, 127) << r.err;
  EXPECT_NE(r.record["error"].get<std::string>().find("command not found"), std::string::npos);
  TempDir dir;
  dir.Write("script.sh", "#!/bin/sh\necho hi\n", 0644);
  r = Run({"--ro", dir.path() + ":/data", "--", "/data/script.sh"});
  EXPECT_EQ(r.exit_code, 126) << r.err;
  r = Run({"--", "/usr/bin"});
  EXPECT_EQ(r.exit_code, 126) << r.err;
}

TEST_F(Gvisor, ForkBombIsStoppedByThePidsLimitAndReportedAsPids) {
  // RLIMIT_NPROC inside gVisor's kernel: the bomb's forks fail (EAGAIN) and the command fails
  // (exit 3, or 2 when the shell's own fork for `sleep` is the one refused); the record says why,
  // as native's cgroup does.
  auto r = Sh("bomb() { bomb | bomb & }; bomb; sleep 1; exit 3", {"--pids", "20", "--timeout", "30"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.exit_code, 124) << r.err.substr(0, 2000);
  EXPECT_EQ(r.record["reason"], "pids") << r.record.dump();
  EXPECT_NE(r.err.find("Cannot fork"), std::string::npos) << r.err.substr(0, 2000);
  EXPECT_LT(r.record["wall_ms"].get<int>(), 20000);
}

TEST_F(Gvisor, PidsLimitCountsTheCommandsProcessesNotGvisorsThreads) {
  // gVisor's Sentry alone runs dozens of host threads: a limit of 5 must still let the command
  // run 3 processes at once, and a sixth is refused. Under the limit the reason stays `exited`.
  auto r = Sh("sleep 1 & sleep 1 & wait; echo ran", {"--pids", "5"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "ran\n");
  EXPECT_EQ(r.record["reason"], "exited");
  r = Sh("for i in 1 2 3 4 5 6; do sleep 2 & done 2>&1; wait", {"--pids", "5"});
  EXPECT_NE(r.out.find("Cannot fork"), std::string::npos) << r.out << r.err;
}

TEST_F(Gvisor, EgressGoesThroughWardensProxyOnly) {
  LoopbackHttpServer server;
  const std::string url = "http://allowed.test:" + server.port_text() + "/";
  auto r = Sh("curl -sS " + url + "; echo; curl -sS -w ' %{http_code}\\n' http://evil.test:" + server.port_text() +
                  "/; curl -sS -m 3 --noproxy '*' http://127.0.0.1:" + server.port_text() + "/ 2>&1; echo direct=$?; "
                  "curl -sS -o /dev/null -w 'metadata %{http_code}\\n' http://169.254.169.254/; "
                  "python3 -c \"import socket; print(sorted(n for _, n in socket.if_nameindex()))\"",
              {"--allow", "allowed.test:" + server.port_text(), "--resolve", "allowed.test=127.0.0.1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("from-host\n"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("evil.test is not on the allow-list\n 403"), std::string::npos) << r.out;
  // The command's own loopback is its private namespace's: the host's listener is not there.
  EXPECT_NE(r.out.find("direct=7"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("metadata 403"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("['lo']"), std::string::npos) << "only loopback: " << r.out;
  EXPECT_EQ(server.requests(), 1);
  ASSERT_EQ(r.record["egress"].size(), 3u) << r.record.dump();
  EXPECT_EQ(r.record["egress"][0]["allowed"], true);
  EXPECT_EQ(r.record["egress"][1]["allowed"], false);
  EXPECT_EQ(r.record["egress"][2]["host"], "169.254.169.254");
}

TEST_F(Gvisor, EgressRecordMatchesNatives) {
  LoopbackHttpServer server;
  const std::vector<std::string> flags = {"--allow", "allowed.test:" + server.port_text(), "--resolve", "allowed.test=127.0.0.1"};
  const std::string script = "curl -sS -o /dev/null http://allowed.test:" + server.port_text() + "/; curl -sS -o /dev/null http://evil.test/; "
                             "python3 -c \"import socket\ntry: socket.gethostbyname('evil.test')\nexcept OSError: pass\"";
  auto g = Sh(script, flags);
  auto n = RunSh(script, flags);  // native
  ASSERT_EQ(g.record["egress"].size(), 2u) << g.record.dump();
  ASSERT_EQ(n.record["egress"].size(), 2u) << n.record.dump();
  for (size_t i = 0; i < 2; ++i) {
    auto a = g.record["egress"][i], b = n.record["egress"][i];
    for (auto* rec : {&a, &b}) {
      for (const char* varying : {"time", "duration_ms", "bytes_down", "bytes_up"}) rec->erase(varying);
    }
    EXPECT_EQ(a, b) << "gvisor: " << a.dump() << "\nnative: " << b.dump();
  }
  ASSERT_EQ(g.record["dns"].size(), 1u) << g.record.dump();
  ASSERT_EQ(n.record["dns"].size(), 1u) << n.record.dump();
  g.record["dns"][0].erase("time");
  n.record["dns"][0].erase("time");
  EXPECT_EQ(g.record["dns"], n.record["dns"]);
}

// A credential over HTTPS (docs/egress.md, "Over HTTPS") under gVisor: the trust bundle reaches
// the sandbox through the same read-only bind, the proxy terminates TLS for the one host, and the
// real server gets the value while the code sees only the placeholder.
TEST_F(Gvisor, EgressCredentialOverHttpsWorksAsOnNative) {
  TempDir dir;
  LoopbackHttpsServer server(dir.path(), "allowed.test");
  ASSERT_FALSE(server.port_text().empty()) << "the HTTPS server did not start";
  const std::string secret = "ghp_GvisorTls0123456789abcdefXYZ";
  auto [r, placeholder] = RunWithHttpsCredential(
      server, dir.path(), secret, {"--backend", "gvisor"},
      "curl -sS -H \"Authorization: Bearer $API_TOKEN\" \"$URL/g\"; "
      "( : >> \"$SSL_CERT_FILE\" ) 2>/dev/null && echo bundle-writable; echo done");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("GvisorTls"), std::string::npos) << r.out;
  ASSERT_FALSE(placeholder.empty()) << r.out;
  EXPECT_NE(r.out.find("Authorization: Bearer " + placeholder), std::string::npos) << "the echo comes back masked: " << r.out << r.err;
  EXPECT_EQ(r.out.find("bundle-writable"), std::string::npos) << r.out;
  EXPECT_NE(server.log().find("Authorization: Bearer " + secret), std::string::npos) << server.log();
  int https = 0;
  for (const auto& rec : r.record["egress"]) https += rec["protocol"] == "https" && rec["allowed"] == true;
  EXPECT_EQ(https, 1) << r.record["egress"].dump();
}

// Issue 31's attack on credentials (https_credential.h) under gVisor, plain HTTP and HTTPS.
TEST_F(Gvisor, EgressCredentialAttackCannotPlantTheValueOrReadItBack) {
  TempDir dir;
  ExpectCredentialAttackFailed(RunCredentialAttack(dir.path(), {"--backend", "gvisor"}, /*tls=*/true));
}

TEST_F(Gvisor, EgressSandboxCannotReachTheHostsNetworkWithoutTheProxy) {
  // UDP out and DNS: the private namespace has no route anywhere; the DNS stub answers nothing.
  LoopbackUdpSink sink;  // must receive nothing
  const std::string port = sink.port_text();
  auto r = Run({"--allow", "allowed.test", "--", "python3", "-c",
                "import socket\ns=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                "for dst in [('127.0.0.1', " + port + "), ('8.8.8.8', 53), ('10.0.0.1', 80)]:\n"
                "  try:\n    s.sendto(b'leak', dst); print('sent', dst[0])\n  except OSError as e: print('refused', dst[0], e.errno)\n"
                "for dst in [('1.1.1.1', 443), ('::1', 22)]:\n"
                "  try:\n    socket.create_connection(dst, timeout=2); print('CONNECTED', dst[0])\n  except OSError as e: print('refused', dst[0], e.errno)\n"});
  EXPECT_FALSE(sink.Received(300)) << "a datagram from the sandbox reached the host";
  EXPECT_EQ(r.out.find("CONNECTED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("refused 8.8.8.8 101"), std::string::npos) << r.out << r.err;  // ENETUNREACH
  EXPECT_NE(r.out.find("refused 1.1.1.1 101"), std::string::npos) << r.out << r.err;
}

TEST_F(Gvisor, OutputIsCutAtTheLimit) {
  auto r = Sh("head -c 100000 /dev/zero; sleep 5", {"--output-limit", "1k"});
  EXPECT_EQ(r.out.size(), 1024u);
  EXPECT_EQ(r.record["stdout_truncated"], true);
  EXPECT_EQ(r.record["stdout_bytes"], 1024);
  EXPECT_EQ(r.record["reason"], "output_limit");
  EXPECT_EQ(r.exit_code, 137);
  EXPECT_LT(r.record["wall_ms"].get<int>(), 4000) << "the sandbox should be killed at the cap, not left to sleep";
}

TEST_F(Gvisor, MemoryLimitKillsTheSandbox) {
  auto r = Sh("python3 -c 'b = bytearray(900 << 20); print(\"ALLOCATED\")'", {"--memory", "256M"});
  EXPECT_EQ(r.out.find("ALLOCATED"), std::string::npos) << r.out;
  EXPECT_EQ(r.record["reason"], "memory") << r.record.dump();
  EXPECT_EQ(r.exit_code, 137);
  EXPECT_EQ(r.record["cgroup"], "v1") << "this machine's hierarchy; update if it changes";
}

TEST_F(Gvisor, CpuLimitStopsASpinner) {
  auto r = Sh("while :; do :; done", {"--cpu", "1", "--timeout", "20"});
  EXPECT_EQ(r.record["reason"], "cpu") << r.record.dump();
  EXPECT_EQ(r.exit_code, 137);
  EXPECT_LT(r.record["wall_ms"].get<int>(), 10000);
}

TEST_F(Gvisor, TmpIsPrivateAndSizeLimited) {
  auto r = Sh("head -c 3000000 /dev/zero > /tmp/big; echo rc=$?; wc -c < /tmp/big", {"--tmpfs-size", "1M"});
  EXPECT_NE(r.out.find("rc=1"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("1048576"), std::string::npos) << r.out;
}

TEST_F(Gvisor, StdinPassesThrough) {
  auto r = Run({"--", "sh", "-c", "tr a-z A-Z"}, "hello gvisor\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "HELLO GVISOR\n");
}

TEST_F(Gvisor, EnvWorkdirAndHostnameAreApplied) {
  TempDir ws;
  chown(ws.path().c_str(), 65534, 65534);
  auto r = Sh("echo FOO=$FOO; pwd; hostname; echo HOME=$HOME", {"--env", "FOO=bar", "--rw", ws.path() + ":/work"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "FOO=bar\n/work\nsandbox\nHOME=/tmp\n");
  r = Sh("pwd", {"--rw", ws.path() + ":/work", "--workdir", "/work/sub"});
  EXPECT_EQ(r.out, "/work/sub\n") << r.err;
}

TEST_F(Gvisor, RoBindIsReadOnlyAndRwBindWritesReachTheHostAsTheSandboxUser) {
  TempDir ro, rw;
  ro.Write("in.txt", "INPUT");
  chmod(ro.path().c_str(), 0777);  // only the mount can refuse the write
  chown(rw.path().c_str(), 65534, 65534);
  auto r = Sh("cat /in/in.txt; echo; (echo x > /in/new) 2>&1; echo result > /out/res.txt; echo rw=$?",
              {"--ro", ro.path() + ":/in", "--rw", rw.path() + ":/out"});
  EXPECT_NE(r.out.find("INPUT\n"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("/in/new: Read-only file system"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rw=0"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(access((ro.path() + "/new").c_str(), F_OK), -1);
  std::ifstream f(rw.path() + "/res.txt");
  std::string content((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "result\n");
  struct stat st;
  ASSERT_EQ(stat((rw.path() + "/res.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u) << "files written from the sandbox belong to the unprivileged sandbox user";
}

TEST_F(Gvisor, OpenFilesLimitApplies) {
  auto r = Sh("ulimit -n; python3 -c \"import os\nfds = []\ntry:\n while True: fds.append(os.open('/dev/null', 0))\nexcept OSError as e: print('stopped', e.errno)\"");
  EXPECT_EQ(r.out.rfind("1024\n", 0), 0u) << r.out << r.err;
  EXPECT_NE(r.out.find("stopped 24"), std::string::npos) << r.out << r.err;  // EMFILE
}

TEST_F(Gvisor, FileSizeLimitApplies) {
  auto r = Sh("(head -c 100000 /dev/zero > /tmp/f) 2>/dev/null; wc -c < /tmp/f", {"--file-size", "10k"});
  EXPECT_EQ(r.out, "10240\n") << r.err;
}

// --- nothing left behind ------------------------------------------------------------------

// What a run leaves when it leaks: its bundle directory in /run/warden ("gvisor-XXXXXX") and
// runsc processes naming its container ("warden-gvisor-XXXXXX"), both by the directory's name.
std::vector<std::string> RunTraces() {
  std::vector<std::string> names = GvisorRunDirs();
  if (DIR* d = opendir("/proc")) {
    while (struct dirent* e = readdir(d)) {
      // read(2), not a stream: a process that exits between open and read fails the read with
      // ESRCH, which libstdc++'s stream buffer throws as an exception.
      std::string cmdline;
      int fd = open((std::string("/proc/") + e->d_name + "/cmdline").c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      char buf[4096];
      for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) cmdline.append(buf, static_cast<size_t>(n));
      close(fd);
      if (cmdline.find("runsc") == std::string::npos) continue;
      const size_t at = cmdline.find("warden-gvisor-");
      if (at != std::string::npos) names.push_back(cmdline.substr(at + 7, 13) + " (runsc)");
    }
    closedir(d);
  }
  return names;
}

// The traces present now that were not in `before`, waiting up to 10 s for them to go: ctest
// runs other gvisor tests beside this one, and their runs come and go; a leak stays.
std::vector<std::string> NewTracesThatStay(const std::vector<std::string>& before) {
  std::vector<std::string> added;
  for (int i = 0; i < 100; ++i) {
    added.clear();
    for (const auto& name : RunTraces()) {
      const std::string dir = name.substr(0, name.find(' '));
      if (std::find(before.begin(), before.end(), dir) == before.end()) added.push_back(name);
    }
    if (added.empty()) break;
    usleep(100 * 1000);
  }
  return added;
}

TEST_F(Gvisor, NothingLeftAfterTimeoutOrWardenKill) {
  const auto before = GvisorRunDirs();
  auto r = Sh("s=777; sleep $s.3", {"--timeout", "1"});
  EXPECT_EQ(r.exit_code, 124);
  Invocation inv;
  inv.args = {"run", "--backend", "gvisor", "--memory", "256M", "--", "sh", "-c", "s=777; sleep $s.4"};
  inv.kill_after_ms = 1500;
  auto k = RunWarden(inv);
  EXPECT_EQ(k.exit_code, 128 + 9);
  for (int i = 0; i < 30 && !PidsWithCmdline("777.4").empty(); ++i) usleep(100 * 1000);
  EXPECT_TRUE(PidsWithCmdline("777.3").empty());
  EXPECT_TRUE(PidsWithCmdline("777.4").empty()) << "the sandboxed command outlived a SIGKILLed warden";
  // runsc processes and bundle directories of other tests running beside this one are told
  // apart by name; what stays is the leak to look for.
  const auto left = NewTracesThatStay(before);
  EXPECT_TRUE(left.empty()) << "left behind: " << left[0];
  for (const auto& d : WardenCgroupDirs()) {
    EXPECT_EQ(d.find("/warden-" + std::to_string(k.pid) + "-"), std::string::npos) << d;
  }
}

// --- escape attempts (escape_test.cc, against gvisor) --------------------------------------

TEST_F(Gvisor, ReadRootOnlyHostFileThroughBind) {
  TempDir dir;
  dir.Write("secret.txt", "TOPSECRET", 0600);
  chmod(dir.path().c_str(), 0755);
  auto r = Sh("cat /data/secret.txt; echo rc=$?", {"--ro", dir.path() + ":/data"});
  EXPECT_EQ(r.out.find("TOPSECRET"), std::string::npos);
  EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("rc=1"), std::string::npos) << r.out;
}

TEST_F(Gvisor, HostSecretsAreAbsent) {
  // gVisor 20221219 fails statx with coreutils' flags (ls, stat): the shell's globbing and test(1)
  // look instead.
  auto r = Sh("cat /etc/shadow; test -e /root && echo ROOT; echo /home/*; echo /etc/*");
  EXPECT_NE(r.err.find("/etc/shadow: No such file"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("ROOT"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/home/*\n"), std::string::npos) << r.out;
  for (const char* name : {"shadow", "sudoers", "ssh", "hostname", "machine-id", "environment"}) {
    EXPECT_EQ(r.out.find(std::string("/etc/") + name + " "), std::string::npos) << name << " leaked into /etc:\n" << r.out;
  }
}

TEST_F(Gvisor, RepositoryAndHostTmpAreInvisible) {
  TempDir dir;
  auto r = Sh(std::string("test -e ") + WARDEN_BIN + " && echo BIN; test -e " + dir.path() + " && echo TMP; echo /tmp/*");
  EXPECT_EQ(r.out, "/tmp/*\n") << r.out;
}

TEST_F(Gvisor, WriteToUsrProcSysEtcAndRootFails) {
  auto r = Sh("touch /usr/pwned 2>&1; echo 1 > /proc/sys/kernel/ns_last_pid 2>&1; echo x > /etc/passwd 2>&1; touch /newfile 2>&1; echo done");
  std::string all = r.out + r.err;
  EXPECT_EQ(access("/usr/pwned", F_OK), -1);
  // gVisor checks permissions before the mount's read-only flag: either refusal holds.
  for (const char* target : {"'/usr/pwned'", "/etc/passwd", "'/newfile'", "ns_last_pid"}) {
    EXPECT_TRUE(all.find(std::string(target) + ": Read-only file system") != std::string::npos ||
                all.find(std::string(target) + ": Permission denied") != std::string::npos)
        << target << " was not refused:\n" << all;
  }
  EXPECT_NE(r.out.find("done"), std::string::npos);
  // And as the owner of a directory, the read-only mount is what refuses (bind made 0777).
  TempDir dir;
  chmod(dir.path().c_str(), 0777);
  r = Sh("(touch /ro/x) 2>&1", {"--ro", dir.path() + ":/ro"});
  EXPECT_NE(r.out.find("Read-only file system"), std::string::npos) << r.out;
  EXPECT_EQ(access((dir.path() + "/x").c_str(), F_OK), -1);
}

TEST_F(Gvisor, NetworkIsUnreachable) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(s, 4), 0);
  socklen_t len = sizeof(addr);
  getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  auto r = Sh("python3 -c \"\nimport socket\nfor host in ['127.0.0.1', '1.1.1.1', '10.0.0.1']:\n"
              " s = socket.socket(); s.settimeout(2)\n try:\n  s.connect((host, " + std::to_string(port) + ")); print('CONNECTED', host)\n"
              " except OSError as e: print('refused', host, e.errno)\nprint(sorted(n for _, n in socket.if_nameindex()))\"");
  EXPECT_EQ(r.out.find("CONNECTED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("refused 127.0.0.1"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("refused 1.1.1.1"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("['lo']"), std::string::npos) << "only loopback: " << r.out;
  fcntl(s, F_SETFL, O_NONBLOCK);
  EXPECT_LT(accept(s, nullptr, nullptr), 0) << "the host listener accepted a connection from the sandbox";
  close(s);
}

TEST_F(Gvisor, RawSocketsAreRefused) {
  auto r = Sh("python3 -c \"\nimport socket\ntry:\n socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); print('RAW')\n"
              "except OSError as e: print('raw', e.errno)\ntry:\n socket.socket(socket.AF_PACKET, socket.SOCK_RAW); print('PACKET')\n"
              "except OSError as e: print('packet', e.errno)\"");
  EXPECT_EQ(r.out.find("RAW"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("PACKET"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("raw "), std::string::npos) << r.out << r.err;
}

TEST_F(Gvisor, HostProcessesAreInvisibleAndUnsignalableAndUntraceable) {
  pid_t me = getpid();
  auto r = Sh("echo /proc/[0-9]*; kill -0 " + std::to_string(me) + " 2>&1; echo kill=$?; "
              "python3 -c \"import ctypes; l=ctypes.CDLL(None,use_errno=True); "
              "print('attach', l.ptrace(16, " + std::to_string(me) + ", 0, 0), ctypes.get_errno())\"");
  EXPECT_NE(r.out.find("kill=1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("attach -1 3\n"), std::string::npos) << r.out << r.err;  // ESRCH: no such process
  std::string pids = r.out.substr(0, r.out.find('\n'));
  EXPECT_EQ(pids.find("/proc/" + std::to_string(me) + " "), std::string::npos) << pids;
  EXPECT_LT(std::count(pids.begin(), pids.end(), ' '), 6) << "only the sandbox's own processes: " << pids;
}

TEST_F(Gvisor, MountAndKernelModuleLoadAreRefused) {
  auto r = Sh("mkdir -p /tmp/m; python3 -c \"import ctypes; l=ctypes.CDLL(None,use_errno=True); "
              "print('mount', l.mount(b'none', b'/tmp/m', b'tmpfs', 0, None), ctypes.get_errno()); "
              "print('module', l.syscall(313, 0, b'', 0), ctypes.get_errno())\"");  // finit_module
  EXPECT_NE(r.out.find("mount -1 1\n"), std::string::npos) << r.out << r.err;  // EPERM
  // EPERM (no CAP_SYS_MODULE) or ENOSYS (gVisor's kernel has no modules at all).
  EXPECT_TRUE(r.out.find("module -1 1\n") != std::string::npos || r.out.find("module -1 38\n") != std::string::npos) << r.out;
}

TEST_F(Gvisor, ProcDoesNotLeakTheHost) {
  auto r = Sh("cat /proc/self/mountinfo /proc/1/cmdline /proc/self/cgroup 2>&1; echo; head -c 200 /proc/kallsyms 2>&1; uname -r");
  EXPECT_EQ(r.out.find("/run/warden"), std::string::npos) << "the bundle's host path is visible:\n" << r.out;
  EXPECT_EQ(r.out.find("warden-"), std::string::npos) << r.out;
  std::ifstream host_release("/proc/sys/kernel/osrelease");
  std::string release;
  std::getline(host_release, release);
  EXPECT_EQ(r.out.find(release), std::string::npos) << "the host kernel's release is visible (gVisor reports its own)";
}

TEST_F(Gvisor, NoCapabilitiesNoNewPrivsAndNoRoot) {
  auto r = Sh("id -u; python3 -c \"import os\ntry:\n os.setuid(0); print('ROOT')\nexcept OSError as e: print('setuid', e.errno)\"; "
              "grep -E '^(CapEff|CapBnd|CapPrm|CapAmb):' /proc/self/status; "
              "python3 -c \"import ctypes; print('NoNewPrivs', ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))\"");
  EXPECT_EQ(r.out.rfind("65534\n", 0), 0u) << r.out;
  EXPECT_EQ(r.out.find("ROOT"), std::string::npos);
  EXPECT_NE(r.out.find("setuid 1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CapEff:\t0000000000000000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CapBnd:\t0000000000000000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NoNewPrivs 1"), std::string::npos) << r.out;
}

TEST_F(Gvisor, InheritedFileDescriptorIsClosed) {
  TempDir dir;
  std::string path = dir.Write("leak.txt", "LEAKED-CONTENT");
  int fd = open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 3);
  int high = dup2(fd, 37);
  Invocation inv;
  inv.args = {"run", "--backend", "gvisor", "--", "sh", "-c", "echo /proc/self/fd/*; cat <&37; cat /proc/self/fd/37"};
  inv.inherit_fds = {fd, high};
  auto r = RunWarden(inv);
  close(fd);
  close(high);
  EXPECT_EQ(r.out.find("LEAKED-CONTENT"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("/37"), std::string::npos) << r.out;
}

TEST_F(Gvisor, HostEnvironmentDoesNotLeak) {
  Invocation inv;
  inv.args = {"run", "--backend", "gvisor", "--env", "GIVEN=yes", "--", "env"};
  inv.extra_env = {{"AWS_SECRET_ACCESS_KEY", "hunter2"}, {"OPENAI_API_KEY", "sk-secret"}};
  auto r = RunWarden(inv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("hunter2"), std::string::npos);
  EXPECT_EQ(r.out.find("sk-secret"), std::string::npos);
  EXPECT_NE(r.out.find("GIVEN=yes"), std::string::npos);
}

TEST_F(Gvisor, SymlinkAndDotDotEscapesFromRwBind) {
  TempDir ws;
  chown(ws.path().c_str(), 65534, 65534);
  symlink("/etc/shadow", (ws.path() + "/shadow").c_str());
  auto r = Sh("cat /work/shadow 2>&1; ln -s / /work/root && echo /work/root/*; "
              "cat /work/../../../etc/shadow 2>&1; cd /work/../..; pwd",
              {"--rw", ws.path() + ":/work"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("root:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/work/shadow: No such file"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/etc/shadow: No such file"), std::string::npos) << r.out;
  // The link the command made points into the sandbox's root, never the host's.
  char target[64] = {};
  EXPECT_GT(readlink((ws.path() + "/root").c_str(), target, sizeof(target) - 1), 0);
}

TEST_F(Gvisor, ProtectedPathsInWorkspaceStayReadOnly) {
  TempDir ws;
  ws.Write(".git/hooks/pre-commit.sample", "#!/bin/sh\n");
  ws.Write(".git/config", "[core]\n");
  ws.Write(".bashrc", "# rc\n");
  std::string cmd = "chown -R 65534:65534 " + ws.path();
  ASSERT_EQ(system(cmd.c_str()), 0);
  auto r = Sh("cd /work; echo evil > .git/hooks/pre-commit 2>&1; echo x >> .git/config 2>&1; "
              "echo x >> .bashrc 2>&1; mv .git .git-old 2>&1; rm -rf .git/hooks 2>&1; "
              "mv .bashrc b 2>&1; echo ok > normal.txt && echo WROTE",
              {"--rw", ws.path() + ":/work"});
  EXPECT_NE(r.out.find("WROTE"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(access((ws.path() + "/.git/hooks/pre-commit").c_str(), F_OK), -1);
  EXPECT_EQ(access((ws.path() + "/.git-old").c_str(), F_OK), -1) << r.out;
  EXPECT_EQ(access((ws.path() + "/b").c_str(), F_OK), -1) << r.out;
  EXPECT_EQ(access((ws.path() + "/normal.txt").c_str(), F_OK), 0);
  std::ifstream cfg(ws.path() + "/.git/config");
  std::string content((std::istreambuf_iterator<char>(cfg)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "[core]\n");
}

TEST_F(Gvisor, TwoSandboxesAtOnceCannotSeeEachOther) {
  Outcome a;
  std::thread t([&] { a = Sh("echo mark > /tmp/marker-a; sleep 1.5; echo done"); });
  usleep(700 * 1000);
  auto b = Sh("cat /tmp/marker-a 2>&1; true");
  t.join();
  EXPECT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(b.out.find("No such file"), std::string::npos) << b.out;
  EXPECT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, "done\n");
}

}  // namespace
}  // namespace warden::testing
