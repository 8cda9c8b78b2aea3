// Escape attempts: each test is an attack a hostile command would try from inside the sandbox,
// and asserts the sandbox held. Run with the real warden binary, real programs inside.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "harness.h"

namespace warden::testing {
namespace {

TEST(Escape, ReadRootOnlyHostFileThroughBind) {
  if (!IsRoot()) GTEST_SKIP() << "needs root to create a root-only file";
  TempDir dir;
  dir.Write("secret.txt", "TOPSECRET", 0600);
  chmod(dir.path().c_str(), 0755);
  auto r = RunSh("cat /data/secret.txt; echo rc=$?", {"--ro", dir.path() + ":/data"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("TOPSECRET"), std::string::npos);
  EXPECT_NE(r.err.find("secret.txt: Permission denied"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("rc=1"), std::string::npos) << r.out;
}

TEST(Escape, HostSecretsAreAbsent) {
  auto r = RunSh("cat /etc/shadow; ls /root; ls -A /home; ls /etc");
  EXPECT_NE(r.err.find("/etc/shadow: No such file"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/root"), std::string::npos) << r.err;
  // /etc holds only what warden generates or binds.
  for (const char* name : {"shadow", "sudoers", "ssh", "hostname", "machine-id", "environment"}) {
    EXPECT_EQ(r.out.find(std::string(name) + "\n"), std::string::npos) << name << " leaked into /etc:\n" << r.out;
  }
}

TEST(Escape, RepositoryAndHostTmpAreInvisible) {
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  TempDir dir;  // lives in the host's /tmp
  auto r = RunSh(std::string("ls ") + WARDEN_BIN + " " + dir.path() + " 2>&1; ls -A /tmp | wc -l");
  EXPECT_NE(r.out.find("No such file"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n0\n"), std::string::npos) << "sandbox /tmp should start empty:\n" << r.out;
}

TEST(Escape, WriteToUsrAndProcSysFails) {
  auto r = RunSh("touch /usr/pwned 2>&1; echo 1 > /proc/sys/kernel/ns_last_pid 2>&1; echo x > /etc/passwd 2>&1; touch /newfile 2>&1; echo done");
  // A failed redirection is reported by the shell on its own stderr.
  std::string all = r.out + r.err;
  EXPECT_EQ(access("/usr/pwned", F_OK), -1);
  EXPECT_NE(all.find("'/usr/pwned': Read-only file system"), std::string::npos) << all;
  EXPECT_NE(all.find("ns_last_pid: Read-only file system"), std::string::npos) << all;
  EXPECT_NE(all.find("/etc/passwd: Read-only file system"), std::string::npos) << all;
  EXPECT_NE(all.find("'/newfile': Read-only file system"), std::string::npos) << all;
  EXPECT_NE(r.out.find("done"), std::string::npos);
}

TEST(Escape, ConnectToHostLoopbackListenerFails) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(s, 4), 0);
  socklen_t len = sizeof(addr);
  getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  auto r = RunSh("python3 -c \"import socket; s=socket.socket(); s.settimeout(2); s.connect(('127.0.0.1', " +
                 std::to_string(port) + ")); print('CONNECTED')\"");
  EXPECT_EQ(r.out.find("CONNECTED"), std::string::npos);
  EXPECT_NE(r.err.find("Connection refused"), std::string::npos) << r.err;
  fcntl(s, F_SETFL, O_NONBLOCK);
  EXPECT_LT(accept(s, nullptr, nullptr), 0) << "the host listener accepted a connection from the sandbox";
  close(s);
}

TEST(Escape, HostProcessesAreInvisibleAndUnsignalable) {
  pid_t me = getpid();
  auto r = RunSh("ls /proc | grep -E '^[0-9]+$' | tr '\\n' ' '; echo; kill -0 " + std::to_string(me) + " 2>&1; echo kill=$?");
  EXPECT_NE(r.out.find("kill=1"), std::string::npos) << r.out;
  // Only the sandbox's own processes: init (1), sh, ls/grep/tr.
  std::string pids = r.out.substr(0, r.out.find('\n'));
  EXPECT_EQ(pids.rfind("1 ", 0), 0u) << pids;
  EXPECT_EQ(pids.find(" " + std::to_string(me) + " "), std::string::npos);
}

TEST(Escape, PtraceIsRefused) {
  auto r = RunSh("python3 -c \"import ctypes,os; l=ctypes.CDLL(None,use_errno=True); "
                 "print('attach', l.ptrace(16, 1, 0, 0), ctypes.get_errno()); "
                 "print('traceme', l.ptrace(0, 0, 0, 0), ctypes.get_errno())\"");
  EXPECT_NE(r.out.find("attach -1 1\n"), std::string::npos) << r.out << r.err;  // EPERM
  EXPECT_NE(r.out.find("traceme -1 1\n"), std::string::npos) << r.out << r.err;
  bool recorded = false;
  for (const auto& v : r.record["violations"]) recorded |= v["syscall"] == "ptrace";
  EXPECT_TRUE(recorded) << r.record.dump();
}

TEST(Escape, MountIsRefused) {
  auto r = RunSh("mkdir -p /tmp/m; mount -t tmpfs none /tmp/m 2>&1; echo rc=$?; "
                 "python3 -c \"import ctypes; l=ctypes.CDLL(None,use_errno=True); print('mount', l.mount(b'none', b'/tmp/m', b'tmpfs', 0, None), ctypes.get_errno())\"");
  EXPECT_NE(r.out.find("rc=32"), std::string::npos) << r.out;  // mount(8): permission failure
  EXPECT_NE(r.out.find("mount -1 1\n"), std::string::npos) << r.out << r.err;
}

TEST(Escape, UnshareUserNamespaceThenMountIsRefused) {
  auto r = RunSh("unshare -Ur sh -c 'mount -t tmpfs none /tmp && echo MOUNTED' 2>&1; echo rc=$?");
  EXPECT_EQ(r.out.find("MOUNTED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Operation not permitted"), std::string::npos) << r.out;
  bool recorded = false;
  for (const auto& v : r.record["violations"]) recorded |= v["syscall"] == "unshare";
  EXPECT_TRUE(recorded) << r.record.dump();
}

TEST(Escape, SetuidEscalationFails) {
  // /usr/bin/mount and su are setuid root on the host; inside, /usr is nosuid and
  // no_new_privs is set, so they run as the sandbox user.
  auto r = RunSh("id -u; /usr/bin/mount -t tmpfs none /tmp 2>&1; echo mount=$?; "
                 "python3 -c \"import os\ntry:\n os.setuid(0); print('ROOT')\nexcept OSError as e: print('setuid', e.errno)\"; "
                 "grep -E '^(CapEff|CapBnd|CapPrm|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status");
  EXPECT_EQ(r.out.rfind("1000\n", 0), 0u) << r.out;
  EXPECT_EQ(r.out.find("ROOT"), std::string::npos);
  // EPERM, or EINVAL because uid 0 does not even exist in the sandbox's user namespace.
  EXPECT_TRUE(r.out.find("setuid 1\n") != std::string::npos || r.out.find("setuid 22\n") != std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CapEff:\t0000000000000000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CapBnd:\t0000000000000000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CapAmb:\t0000000000000000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NoNewPrivs:\t1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Seccomp:\t2"), std::string::npos) << r.out;
}

TEST(Escape, InheritedFileDescriptorIsClosed) {
  TempDir dir;
  std::string path = dir.Write("leak.txt", "LEAKED-CONTENT");
  int fd = open(path.c_str(), O_RDONLY);  // not close-on-exec: warden inherits it
  ASSERT_GE(fd, 3);
  int high = dup2(fd, 37);
  Invocation inv;
  inv.args = {"run", "--", "sh", "-c", "ls /proc/self/fd | tr '\\n' ' '; cat <&37; cat /proc/self/fd/37"};
  inv.inherit_fds = {fd, high};
  auto r = RunWarden(inv);
  close(fd);
  close(high);
  EXPECT_EQ(r.out.find("LEAKED-CONTENT"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.rfind("0 1 2 3 ", 0), 0u) << "only stdio (and ls's own directory fd):\n" << r.out;
}

TEST(Escape, HostEnvironmentDoesNotLeak) {
  Invocation inv;
  inv.args = {"run", "--env", "GIVEN=yes", "--", "env"};
  inv.extra_env = {{"AWS_SECRET_ACCESS_KEY", "hunter2"}, {"OPENAI_API_KEY", "sk-secret"}};
  auto r = RunWarden(inv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("hunter2"), std::string::npos);
  EXPECT_EQ(r.out.find("sk-secret"), std::string::npos);
  EXPECT_NE(r.out.find("GIVEN=yes"), std::string::npos);
  EXPECT_NE(r.out.find("PATH="), std::string::npos);
}

// --env-inherit (how the gateway passes an upstream's secrets, docs/credentials.md): the named
// variable alone crosses from warden's environment, never through argv; an unnamed one stays out.
TEST(Escape, EnvInheritPassesOnlyTheNamedVariable) {
  Invocation inv;
  inv.args = {"run", "--env-inherit", "SERVICE_TOKEN", "--", "env"};
  inv.extra_env = {{"SERVICE_TOKEN", "tok-123456789"}, {"OTHER_SECRET", "hunter2"}};
  auto r = RunWarden(inv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("SERVICE_TOKEN=tok-123456789"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("hunter2"), std::string::npos) << r.out;

  Invocation missing;
  missing.args = {"run", "--env-inherit", "NOT_SET_ANYWHERE", "--", "true"};
  auto m = RunWarden(missing);
  EXPECT_NE(m.exit_code, 0);
  EXPECT_NE(m.err.find("--env-inherit NOT_SET_ANYWHERE: not set"), std::string::npos) << m.err;
}

TEST(Escape, TiocstiInjectionIsRefused) {
  auto r = RunSh("python3 -c \"import fcntl,termios,os\nfd=os.open('/dev/null', os.O_RDONLY)\n"
                 "try:\n fcntl.ioctl(0, termios.TIOCSTI, b'x'); print('INJECTED')\nexcept OSError as e: print('tiocsti', e.errno)\"");
  EXPECT_EQ(r.out.find("INJECTED"), std::string::npos);
  EXPECT_NE(r.out.find("tiocsti 1"), std::string::npos) << r.out << r.err;
  bool recorded = false;
  for (const auto& v : r.record["violations"]) recorded |= v["syscall"] == "ioctl";
  EXPECT_TRUE(recorded) << r.record.dump();
}

TEST(Escape, NoControllingTerminalAndOwnSession) {
  auto r = RunSh("python3 -c \"import os; print('sid', os.getsid(0) == os.getpid() or os.getsid(0))\"; (tty || true)");
  EXPECT_NE(r.out.find("not a tty"), std::string::npos) << r.out;
}

TEST(Escape, SymlinkAndDotDotEscapesFromRwBind) {
  TempDir ws;
  chown(ws.path().c_str(), 65534, 65534);
  // A link planted in the workspace (say by an earlier run) that points at a host secret.
  symlink("/etc/shadow", (ws.path() + "/shadow").c_str());
  auto r = RunSh("cat /work/shadow 2>&1; ln -s / /work/root && ls /work/root/ | tr '\\n' ' '; echo; "
                 "cat /work/../../../etc/shadow 2>&1; cd /work/../..; pwd; ls /work/.. | tr '\\n' ' '",
                 {"--rw", ws.path() + ":/work"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("root:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/etc/shadow: No such file"), std::string::npos) << r.out;
  // The planted link resolves inside the sandbox's root, which has no shadow file.
  EXPECT_NE(r.out.find("/work/shadow: No such file"), std::string::npos) << r.out;
}

// Run 1 plants a link in its workspace pointing at a host directory; run 2 nests a bind below it.
// Creating the nested bind's mount point happens before pivot_root, where an absolute link is the
// host's path: walking through it would create directories on the host (as the sandbox's user).
// The walk must refuse the link, create nothing, and fail closed naming it.
TEST(Escape, PlantedSymlinkRedirectsNestedMountPointOntoHost) {
  TempDir ws, other;
  TempDir target("/var/tmp");  // not under /tmp, where the new root sits while it is built
  chown(ws.path().c_str(), 65534, 65534);
  chmod(other.path().c_str(), 0755);
  chmod(target.path().c_str(), 0777);  // writable by the sandbox's user: only the walk stands in the way
  auto plant = RunSh("ln -s " + target.path() + " /work/sub", {"--rw", ws.path() + ":/work"});
  ASSERT_EQ(plant.exit_code, 0) << plant.err;
  auto r = RunSh("echo RAN", {"--rw", ws.path() + ":/work", "--ro", other.path() + ":/work/sub/deeper"});
  EXPECT_TRUE(std::filesystem::is_empty(target.path())) << "created through the planted link: " << target.path();
  EXPECT_EQ(access((target.path() + "/deeper").c_str(), F_OK), -1);
  EXPECT_EQ(r.exit_code, 125) << r.out << r.err;
  EXPECT_EQ(r.out.find("RAN"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("/work/sub is a symbolic link"), std::string::npos) << r.err;
}

// Bind sources beneath a directory the sandbox's user cannot search (a 0700 root-owned directory,
// as /root is, holding a checkout): warden opens them before the clone, so they are bound; inside,
// only the files' own permissions count, and a root-only file (0600) stays unreadable.
TEST(Escape, ReadRootOnlyFileBeneathPrivateDirectoryThroughBind) {
  if (!IsRoot()) GTEST_SKIP() << "needs root to create root-only files";
  TempDir priv;
  ASSERT_EQ(chmod(priv.path().c_str(), 0700), 0);
  priv.Write("data/public.txt", "PUBLIC", 0644);
  priv.Write("data/secret.txt", "TOPSECRET", 0600);
  priv.Write("public-file.txt", "FILE", 0644);
  priv.Write("secret-file.txt", "TOPSECRET", 0600);
  ASSERT_EQ(chmod((priv.path() + "/data").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((priv.path() + "/out").c_str(), 0755), 0);
  ASSERT_EQ(chown((priv.path() + "/out").c_str(), 65534, 65534), 0);
  auto r = RunSh("cat /data/public.txt /public-file.txt; echo; cat /data/secret.txt; cat /secret-file.txt; "
                 "echo written > /out/w && echo WROTE",
                 {"--ro", priv.path() + "/data:/data", "--ro", priv.path() + "/public-file.txt:/public-file.txt",
                  "--ro", priv.path() + "/secret-file.txt:/secret-file.txt", "--rw", priv.path() + "/out:/out"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "PUBLICFILE\nWROTE\n") << r.err;
  EXPECT_EQ(r.out.find("TOPSECRET"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("/data/secret.txt: Permission denied"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/secret-file.txt: Permission denied"), std::string::npos) << r.err;
  EXPECT_EQ(access((priv.path() + "/out/w").c_str(), F_OK), 0);
}

// A bind source on a shared mount (systemd makes / shared): warden's copy of it must leave the
// host mount's peer group, or what the sandbox mounts on it (a nested bind, the protected paths)
// would propagate to the host and stay there.
TEST(Escape, SandboxMountPropagatesToHostThroughSharedBindSource) {
  if (!IsRoot()) GTEST_SKIP() << "needs root to make a shared mount";
  TempDir base, other;
  chmod(base.path().c_str(), 0755);
  chmod(other.path().c_str(), 0755);
  const std::string shared = base.path() + "/shared";
  ASSERT_EQ(mkdir(shared.c_str(), 0755), 0);
  ASSERT_EQ(mount("none", shared.c_str(), "tmpfs", 0, "mode=0777"), 0) << strerror(errno);
  struct Unmount {
    std::string path;
    ~Unmount() {
      umount2((path + "/sub").c_str(), MNT_DETACH);
      umount2(path.c_str(), MNT_DETACH);
    }
  } unmount{shared};
  ASSERT_EQ(mount(nullptr, shared.c_str(), nullptr, MS_SHARED, nullptr), 0) << strerror(errno);
  ASSERT_EQ(mkdir((shared + "/sub").c_str(), 0777), 0);
  auto r = RunSh("ls /work/sub; echo RAN", {"--rw", shared + ":/work", "--ro", other.path() + ":/work/sub"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "RAN\n") << r.err;
  std::ifstream mounts("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mounts, line)) {
    EXPECT_EQ(line.find(" " + shared + "/sub "), std::string::npos) << "the sandbox's mount reached the host: " << line;
  }
}

TEST(Escape, ProtectedPathsInWorkspaceStayReadOnly) {
  TempDir ws;
  ws.Write(".git/hooks/pre-commit.sample", "#!/bin/sh\n");
  ws.Write(".git/config", "[core]\n");
  ws.Write(".bashrc", "# rc\n");
  std::string cmd = "chown -R 65534:65534 " + ws.path();
  ASSERT_EQ(system(cmd.c_str()), 0);
  auto r = RunSh("cd /work; echo evil > .git/hooks/pre-commit 2>&1; echo x >> .git/config 2>&1; "
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

// Attack on the sandbox's init (issue 10): init is a copy of warden. Through /proc/1/mem a
// command could read warden's memory or write code into init that speaks for it on the channel
// to the supervisor (a forged seccomp listener, then refused syscalls answered "continue"), and
// /proc/1/fd, /proc/1/environ and /proc/1/syscall would show its descriptors, warden's
// environment and its registers. As an ordinary user the uid switch leaves init dumpable: all
// of these opened. None may.
TEST(Escape, InitMemoryDescriptorsAndEnvironmentAreOutOfReach) {
  auto r = RunSh(
      "python3 -c \"\nimport os, errno\n"
      "def attempt(name, f):\n"
      "  try:\n    f(); print(name, 'OPENED')\n"
      "  except OSError as e: print(name, errno.errorcode.get(e.errno, e.errno))\n"
      "attempt('mem-rw', lambda: os.open('/proc/1/mem', os.O_RDWR))\n"
      "attempt('mem-r', lambda: os.open('/proc/1/mem', os.O_RDONLY))\n"
      "attempt('environ', lambda: open('/proc/1/environ', 'rb').read())\n"
      "attempt('fd', lambda: os.listdir('/proc/1/fd'))\n"
      "attempt('syscall', lambda: open('/proc/1/syscall').read())\n"
      "attempt('maps', lambda: open('/proc/1/maps').read())\n"
      "print('cmdline', open('/proc/1/cmdline', 'rb').read().rstrip(b'\\\\0'))\n"
      "\"");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("OPENED"), std::string::npos) << r.out;
  for (const char* name : {"mem-rw", "mem-r", "environ", "fd", "syscall", "maps"}) {
    const bool refused = r.out.find(std::string(name) + " EACCES\n") != std::string::npos ||
                         r.out.find(std::string(name) + " EPERM\n") != std::string::npos;
    EXPECT_TRUE(refused) << name << ":\n" << r.out;
  }
  // Anyone may read a cmdline: init's shows its own name, not warden's arguments.
  EXPECT_NE(r.out.find("cmdline b'warden-init'"), std::string::npos) << r.out;
}

// The same init seen from the host (as root, which can read it): no variable of the environment
// warden was started with is left in it, readable or not.
TEST(Escape, InitHoldsNoVariableOfTheCallersEnvironment) {
  if (!IsRoot()) GTEST_SKIP() << "needs root to read another user's /proc/PID/environ";
  const std::string marker = "init-environment-probe-" + std::to_string(getpid());
  Outcome r;
  std::thread run([&] {
    Invocation inv;
    inv.args = {"run", "--", "sh", "-c", "sleep 3; echo " + marker};
    inv.extra_env = {{"AWS_SECRET_ACCESS_KEY", "canary-hunter2"}};
    r = RunWarden(inv);
  });
  std::string environ_text, cmdline;
  bool found = false;
  for (int i = 0; i < 250 && !found; ++i) {
    usleep(10 * 1000);
    for (pid_t pid : PidsWithCmdline(marker)) {
      const pid_t ppid = ParentPid(pid);
      cmdline = ReadProcText("/proc/" + std::to_string(ppid) + "/cmdline");
      if (ppid == 0 || cmdline.rfind("warden-init", 0) != 0) continue;
      environ_text = ReadProcText("/proc/" + std::to_string(ppid) + "/environ");
      found = true;
      break;
    }
  }
  run.join();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(found) << "no sandbox init named warden-init seen; last cmdline: " << cmdline;
  EXPECT_EQ(environ_text.find("canary-hunter2"), std::string::npos);
  EXPECT_EQ(environ_text.find("PATH="), std::string::npos) << "init kept an environment";
}

// statmount/listmount (Linux 6.8) walk mount namespaces by id: refused as the rest of the mount
// family is, and recorded.
TEST(Escape, ListmountAndStatmountAreRefused) {
  auto r = RunSh(
      "python3 -c \"\nimport ctypes, struct\nl = ctypes.CDLL(None, use_errno=True)\n"
      "req = struct.pack('<IIQQ', 24, 0, 0xffffffffffffffff, 0)\n"
      "ids = ctypes.create_string_buffer(8 * 64)\n"
      "print('listmount', l.syscall(458, req, ids, 64, 0), ctypes.get_errno())\n"
      "sreq = struct.pack('<IIQQ', 24, 0, 1, 1)\nbuf = ctypes.create_string_buffer(4096)\n"
      "print('statmount', l.syscall(457, sreq, buf, 4096, 0), ctypes.get_errno())\n"
      "\"");
  EXPECT_NE(r.out.find("listmount -1 1\n"), std::string::npos) << r.out << r.err;  // EPERM
  EXPECT_NE(r.out.find("statmount -1 1\n"), std::string::npos) << r.out << r.err;
  bool listmount = false, statmount = false;
  for (const auto& v : r.record["violations"]) {
    listmount |= v["syscall"] == "listmount";
    statmount |= v["syscall"] == "statmount";
  }
  EXPECT_TRUE(listmount && statmount) << r.record.dump();
}

// --ro/--rw may not replace what warden mounts by spelling it differently.
TEST(Escape, ReservedPathsCannotBeReplacedBySpellingThemDifferently) {
  TempDir dir;
  for (const char* inside : {"/proc/", "/dev/.", "//", "/./", "/proc//", "//dev", "/proc/./", "/proc/sys"}) {
    for (const char* flag : {"--ro", "--rw"}) {
      auto r = RunWarden({{"run", flag, dir.path() + ":" + inside, "--", "true"}});
      EXPECT_EQ(r.exit_code, 125) << flag << " " << inside << ": " << r.err;
      EXPECT_NE(r.err.find("managed by warden"), std::string::npos) << flag << " " << inside << ": " << r.err;
    }
  }
}

TEST(Escape, TwoSandboxesAtOnceCannotSeeEachOther) {
  Outcome a;
  std::thread t([&] { a = RunSh("echo mark > /tmp/marker-a; sleep 1; ls /proc | grep -cE '^[0-9]+$'"); });
  usleep(300 * 1000);
  auto b = RunSh("ls /tmp/marker-a 2>&1; ps -e 2>/dev/null | grep -c sleep; true");
  t.join();
  EXPECT_NE(b.out.find("No such file"), std::string::npos) << b.out;
  EXPECT_EQ(a.exit_code, 0) << a.err;
}

}  // namespace
}  // namespace warden::testing
