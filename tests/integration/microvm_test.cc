// `warden run --backend microvm`: the command runs in a QEMU microvm with its own kernel. These
// tests boot real VMs (under TCG on machines without a usable KVM, about 2 s each) and check the
// same contract as the native backend: exit statuses, streams, limits, and what the guest cannot
// see or change on the host. They skip, saying why, when QEMU or the guest kernel is missing.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "harness.h"
#include "https_credential.h"
#include "loopback_http.h"

namespace warden::testing {
namespace {

std::string MicrovmDir() {
  const char* dir = getenv("WARDEN_MICROVM_DIR");
  return dir && *dir ? dir : "/var/lib/warden/microvm";
}

class Microvm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access("/usr/bin/qemu-system-x86_64", X_OK) != 0) {
      GTEST_SKIP() << "qemu-system-x86_64 is not installed (scripts/install-deps.sh installs qemu-system-x86)";
    }
    if (access((MicrovmDir() + "/vmlinux").c_str(), R_OK) != 0) {
      GTEST_SKIP() << "no guest kernel in " << MicrovmDir() << " (scripts/install-microvm.sh installs it)";
    }
  }

  static Outcome Sh(const std::string& script, std::vector<std::string> flags = {}, const std::string& in = "") {
    Invocation inv;
    inv.args = {"run", "--backend", "microvm"};
    if (std::find(flags.begin(), flags.end(), "--timeout") == flags.end()) flags.insert(flags.end(), {"--timeout", "60"});
    inv.args.insert(inv.args.end(), flags.begin(), flags.end());
    inv.args.insert(inv.args.end(), {"--", "sh", "-c", script});
    inv.stdin_data = in;
    return RunWarden(inv);
  }
};

TEST_F(Microvm, ExitStatusAndStreamsPassThrough) {
  auto r = Sh("echo out; echo err >&2; exit 7");
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_EQ(r.out, "out\n");
  EXPECT_NE(r.err.find("err\n"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("out"), std::string::npos) << "stdout leaked into stderr: " << r.err;
  ASSERT_TRUE(r.record.is_object());
  EXPECT_EQ(r.record["backend"], "microvm");
  EXPECT_EQ(r.record["reason"], "exited");
  EXPECT_EQ(r.record["exit_code"], 7);
  std::string notes = r.record["notes"].dump();
  EXPECT_TRUE(notes.find("microvm: tcg") != std::string::npos || notes.find("microvm: kvm") != std::string::npos) << notes;
}

TEST_F(Microvm, StdinReachesTheCommandAndEnds) {
  auto r = Sh("wc -c; tr a-z A-Z < /dev/null", {}, std::string(100000, 'x'));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "100000\n");
}

TEST_F(Microvm, SignalAndNotFoundStatuses) {
  auto r = Sh("kill -TERM $$");
  EXPECT_EQ(r.exit_code, 128 + 15) << r.err;
  EXPECT_EQ(r.record["reason"], "signaled");
  Invocation inv;
  inv.args = {"run", "--backend", "microvm", "--", "/no/such/program"};
  auto nf = RunWarden(inv);
  EXPECT_EQ(nf.exit_code, 127) << nf.err;
}

TEST_F(Microvm, WallClockLimitKillsTheVm) {
  auto r = Sh("sleep 60", {"--timeout", "6"});
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_EQ(r.record["reason"], "timeout");
  EXPECT_LT(r.record["wall_ms"].get<uint64_t>(), 20000u);
}

TEST_F(Microvm, OutputIsCutAtTheLimit) {
  auto r = Sh("head -c 1000000 /dev/zero; sleep 30", {"--output-limit", "64k"});
  EXPECT_EQ(r.exit_code, 137) << r.err;
  EXPECT_EQ(r.record["reason"], "output_limit");
  EXPECT_EQ(r.out.size(), 65536u);
  EXPECT_TRUE(r.record["stdout_truncated"].get<bool>());
}

TEST_F(Microvm, MemoryBombIsKilledInsideTheGuest) {
  // The guest's cgroup holds the command to --memory; its OOM killer ends it (SIGKILL).
  auto r = Sh("python3 -c 'b = []\nwhile True: b.append(bytearray(8 << 20))'", {"--memory", "64M"});
  EXPECT_EQ(r.exit_code, 137) << r.err;
  EXPECT_EQ(r.record["reason"], "memory");
}

TEST_F(Microvm, HostSecretsAreAbsentAndTmpStaysInTheGuest) {
  const std::string marker = "/tmp/warden-microvm-marker-" + std::to_string(getpid());
  auto r = Sh("cat /etc/shadow; ls /root; ls -A /home; echo hi > " + marker + " && echo wrote");
  EXPECT_NE(r.err.find("/etc/shadow: No such file"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/root"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("wrote"), std::string::npos) << r.out << r.err;
  EXPECT_NE(access(marker.c_str(), F_OK), 0) << "a file written in the guest's /tmp reached the host";
}

TEST_F(Microvm, SystemDirectoriesAndRootAreReadOnly) {
  auto r = Sh("touch /usr/pwned 2>&1; touch /newfile 2>&1; echo done");
  EXPECT_EQ(access("/usr/pwned", F_OK), -1);
  EXPECT_NE(r.out.find("/usr/pwned"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("'/newfile': Read-only file system"), std::string::npos) << r.out;
}

TEST_F(Microvm, RoBindIsReadOnlyAndRwBindIsWritable) {
  TempDir ro, rw;
  ro.Write("in.txt", "from-host");
  chmod(ro.path().c_str(), 0755);
  chmod(rw.path().c_str(), 0777);
  auto r = Sh("cat /data/in.txt; echo; echo x > /data/new 2>&1 || echo ro-refused; echo result > /work/out.txt && echo rw-ok",
              {"--ro", ro.path() + ":/data", "--rw", rw.path() + ":/work"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("from-host"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ro-refused"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rw-ok"), std::string::npos) << r.out << r.err;
  EXPECT_NE(access((ro.path() + "/new").c_str(), F_OK), 0);
  std::ifstream out(rw.path() + "/out.txt");
  std::string line;
  std::getline(out, line);
  EXPECT_EQ(line, "result");
  // QEMU serves the share as nobody when warden is root: the guest never writes as host root.
  struct stat st{};
  if (IsRoot() && stat((rw.path() + "/out.txt").c_str(), &st) == 0) {
    EXPECT_EQ(st.st_uid, 65534u);
  }
}

TEST_F(Microvm, CommandCannotForgeTheReportOnTheControlPort) {
  // The command is uid 1000 in the guest; the ports' device nodes are root's. A forged report
  // ("exited 0") must not replace the command's real status.
  auto r = Sh("for p in /dev/vport*; do echo 'status=0 exec_errno=0' > $p && echo forged $p; done 2>/dev/null; "
              "id -u; exit 3");
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_EQ(r.out.find("forged"), std::string::npos) << r.out;
  // The command has the ids QEMU has on the host (nobody when warden is root), as with gvisor.
  EXPECT_NE(r.out.find(IsRoot() ? "65534\n" : std::to_string(getuid()) + "\n"), std::string::npos) << r.out;
}

TEST_F(Microvm, NoNetworkDeviceAndItsOwnKernel) {
  auto r = Sh("ls /sys/class/net; echo kernel=$(uname -r)");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // Only loopback, if anything: no virtio-net, no host interface.
  EXPECT_EQ(r.out.find("eth"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("ens"), std::string::npos) << r.out;
  utsname host{};
  uname(&host);
  EXPECT_NE(r.out.find("kernel="), std::string::npos);
  EXPECT_EQ(r.out.find(std::string("kernel=") + host.release + "\n"), std::string::npos)
      << "the guest runs the host's kernel: " << r.out;
}

TEST_F(Microvm, KilledWardenTakesItsVmDown) {
  Invocation inv;
  inv.args = {"run", "--backend", "microvm", "--", "sleep", "60"};
  inv.kill_after_ms = 2500;
  auto r = RunWarden(inv);
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  const std::string name = "warden-microvm-" + std::to_string(r.pid) + " ";
  std::vector<pid_t> left;
  for (int i = 0; i < 50; ++i) {  // the kernel delivers the parent-death signal asynchronously
    left = PidsWithCmdline(name);
    if (left.empty()) break;
    usleep(100000);
  }
  EXPECT_TRUE(left.empty()) << "QEMU outlived the warden that started it";
}

TEST_F(Microvm, TerminatedWardenStopsTheVmAndSaysWhy) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int null_fd = open("/dev/null", O_RDWR);
    dup2(null_fd, 0);
    dup2(null_fd, 1);
    dup2(null_fd, 2);
    execl(WARDEN_BIN, WARDEN_BIN, "run", "--backend", "microvm", "--", "sleep", "60", nullptr);
    _exit(127);
  }
  usleep(2500 * 1000);
  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "warden died of the signal instead of stopping the VM";
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  EXPECT_TRUE(PidsWithCmdline("warden-microvm-" + std::to_string(pid) + " ").empty());
}

TEST_F(Microvm, EgressReachesAnAllowedHostThroughWardensProxyOnly) {
  LoopbackHttpServer server("hello-from-host");
  const std::string url = "http://allowed.test:" + server.port_text() + "/";
  auto r = Sh("echo proxy=$HTTP_PROXY; curl -sS " + url + "; echo; curl -sS -p " + url + "; echo; " +
                  "python3 -c \"import urllib.request; print(urllib.request.urlopen('" + url + "').read().decode())\"; " +
                  "curl -s -o /dev/null -w 'denied=%{http_code}\\n' http://denied.test:" + server.port_text() + "/; " +
                  "curl -s -o /dev/null -w 'literal=%{http_code}\\n' http://127.0.0.1:" + server.port_text() + "/; " +
                  "curl -s -o /dev/null -w 'loopback=%{http_code}\\n' http://localhost:" + server.port_text() + "/; " +
                  "curl -s -o /dev/null -w 'metadata=%{http_code}\\n' http://169.254.169.254/; " +
                  // Around the proxy: the host's loopback and an outside address, directly.
                  "curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:" + server.port_text() +
                  "/ >/dev/null 2>&1 || echo direct-loopback-failed; " +
                  "curl -sS --noproxy '*' --max-time 5 http://192.0.2.1/ >/dev/null 2>&1 || echo direct-outside-failed; " +
                  "echo interfaces: $(ls /sys/class/net)",
              {"--allow", "allowed.test:" + server.port_text(), "--resolve", "allowed.test=127.0.0.1", "--allow",
               "localhost:" + server.port_text()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("proxy=http://127.0.0.1:3128\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hello-from-host\nhello-from-host\nhello-from-host\n"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("denied=403\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("literal=403\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("loopback=403\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("metadata=403\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("direct-loopback-failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("direct-outside-failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("interfaces: lo\n"), std::string::npos) << r.out;
  EXPECT_EQ(server.requests(), 3);
  // The record's egress fields are native's: one entry per attempt, allowed or not, with why.
  ASSERT_EQ(r.record["egress"].size(), 7u) << r.record.dump();
  const auto& first = r.record["egress"][0];
  EXPECT_EQ(first["allowed"], true);
  EXPECT_EQ(first["host"], "allowed.test");
  EXPECT_EQ(first["protocol"], "http");
  EXPECT_EQ(first["resolved_address"], "127.0.0.1");
  EXPECT_GT(first["bytes_down"].get<int>(), 0);
  EXPECT_EQ(r.record["egress"][1]["protocol"], "connect");
  std::string all = r.record["egress"].dump();
  EXPECT_NE(all.find("denied.test is not on the allow-list"), std::string::npos) << all;
  EXPECT_NE(all.find("address 127.0.0.1 is not on the allow-list"), std::string::npos) << all;
  EXPECT_NE(all.find("is loopback"), std::string::npos) << "the address guard did not refuse localhost: " << all;
  EXPECT_NE(all.find("address 169.254.169.254 is not on the allow-list"), std::string::npos) << all;
  EXPECT_TRUE(r.record["dns"].is_array()) << r.record.dump();
}

// A credential over HTTPS (docs/egress.md, "Over HTTPS") in the guest: the trust bundle is a
// single-file bind (which needs root here), the proxy on the host terminates TLS for the one host.
TEST_F(Microvm, EgressCredentialOverHttpsWorksAsOnNative) {
  TempDir dir;
  LoopbackHttpsServer server(dir.path(), "allowed.test");
  ASSERT_FALSE(server.port_text().empty()) << "the HTTPS server did not start";
  const std::string secret = "ghp_MicrovmTls0123456789abcdefXYZ";
  auto [r, placeholder] = RunWithHttpsCredential(server, dir.path(), secret,
                                                 {"--backend", "microvm", "--timeout", "60"},
                                                 "curl -sS -H \"Authorization: Bearer $API_TOKEN\" \"$URL/m\"; echo done");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("MicrovmTls"), std::string::npos) << r.out;
  ASSERT_FALSE(placeholder.empty()) << r.out;
  EXPECT_NE(r.out.find("Authorization: Bearer " + placeholder), std::string::npos) << "the echo comes back masked: " << r.out << r.err;
  EXPECT_NE(server.log().find("Authorization: Bearer " + secret), std::string::npos) << server.log();
}

// Issue 31's attack on credentials (https_credential.h) in the guest: plain HTTP, and HTTPS where
// the trust bundle's single-file bind is possible (root).
TEST_F(Microvm, EgressCredentialAttackCannotPlantTheValueOrReadItBack) {
  TempDir dir;
  ExpectCredentialAttackFailed(
      RunCredentialAttack(dir.path(), {"--backend", "microvm", "--timeout", "90"}, /*tls=*/IsRoot() && TestUid() == 0));
}

TEST_F(Microvm, EgressCarriesMoreConnectionsThanPortsOneAfterAnother) {
  LoopbackHttpServer server("x");
  const std::string url = "http://allowed.test:" + server.port_text() + "/";
  // 12 at once over 8 ports: the rest wait for a free port; every port is used more than once.
  auto r = Sh("for i in $(seq 12); do curl -sS --max-time 30 " + url + " & done; wait; echo",
              {"--allow", "allowed.test:" + server.port_text(), "--resolve", "allowed.test=127.0.0.1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "xxxxxxxxxxxx\n") << r.err;
  EXPECT_EQ(server.requests(), 12);
  EXPECT_EQ(r.record["egress"].size(), 12u);
}

TEST_F(Microvm, SingleFileBindsAreReadOnlyOrWritableAsAsked) {
  if (!IsRoot()) GTEST_SKIP() << "single-file binds with microvm need root";
  TempDir dir;
  dir.Write("config.json", "{\"a\":1}");
  dir.Write("log.txt", "start\n", 0666);
  dir.Write("neighbour.txt", "NEIGHBOUR");
  chmod(dir.path().c_str(), 0755);
  auto r = Sh("cat /etc/app/config.json; echo; echo x >> /etc/app/config.json 2>&1 || echo ro-refused; "
              "echo appended >> /work/log.txt && echo rw-ok; ls -A /etc/app /work; ls /warden/files 2>&1; "
              "grep -h NEIGHBOUR -r /etc/app /work /warden 2>/dev/null; pwd",
              {"--ro", dir.path() + "/config.json:/etc/app/config.json", "--rw", dir.path() + "/log.txt:/work/log.txt"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("{\"a\":1}\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ro-refused"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rw-ok"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("NEIGHBOUR"), std::string::npos) << "the file's directory was shared: " << r.out;
  EXPECT_NE(r.out.find("/tmp\n"), std::string::npos) << "a file is no working directory: " << r.out;
  std::ifstream log(dir.path() + "/log.txt"), config(dir.path() + "/config.json");
  std::string log_text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  std::string config_text((std::istreambuf_iterator<char>(config)), std::istreambuf_iterator<char>());
  EXPECT_EQ(log_text, "start\nappended\n");
  EXPECT_EQ(config_text, "{\"a\":1}");
  EXPECT_NE(access("/run/warden/f0", F_OK), 0) << "the staging directory leaked into the host's mounts";
}

TEST_F(Microvm, CommandHasNoCapabilitiesUserNamespacesOrMounts) {
  auto r = Sh("unshare -Ur sh -c 'mount -t tmpfs none /tmp && echo MOUNTED' 2>&1; echo unshare=$?; "
              "mount -t tmpfs none /tmp 2>&1; echo mount=$?; echo 1 > /proc/sys/kernel/ns_last_pid 2>&1; "
              "grep -E '^(CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status");
  EXPECT_EQ(r.out.find("MOUNTED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unshare=1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mount=32"), std::string::npos) << r.out;
  // A failed redirection is reported by the shell on its own stderr.
  EXPECT_NE((r.out + r.err).find("ns_last_pid: Read-only file system"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("CapEff:\t0000000000000000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CapBnd:\t0000000000000000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NoNewPrivs:\t1"), std::string::npos) << r.out;
}

TEST_F(Microvm, MissingKernelIsASetupErrorNamingTheScript) {
  Invocation inv;
  inv.args = {"run", "--backend", "microvm", "--", "true"};
  inv.extra_env = {{"WARDEN_MICROVM_DIR", "/nonexistent/microvm"}};
  auto r = RunWarden(inv);
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("install-microvm.sh"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace warden::testing
