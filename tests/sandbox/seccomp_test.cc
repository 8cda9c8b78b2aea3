// Security tests of the seccomp filter. Each test forks a child that does what the sandbox does
// before exec (no_new_privs, then InstallFromChild), tries one attack with raw syscall(), and
// reports each result to the parent through a pipe; the parent asserts the exact errno. Tests run
// in both delivery modes: in-kernel ERRNO, and user notification, where the parent receives the
// listener over a socketpair (SCM_RIGHTS) and answers with AnswerOneFromParent, exactly as the
// supervisor does. In notify mode a test also proves that the filter, not the kernel, refused.
#include "sandbox/seccomp.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/unique_fd.h"

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif

extern char** environ;

namespace warden::sandbox::seccomp {
namespace {

enum class Mode { kErrno, kNotify };

std::string ModeName(Mode mode) { return mode == Mode::kErrno ? "Errno" : "Notify"; }
void PrintTo(Mode mode, std::ostream* out) { *out << ModeName(mode); }

std::string ErrnoName(int err) {
  if (err == 0) return "success";
  const char* name = strerrorname_np(err);
  return name ? name : std::to_string(err);
}

// ---------------------------------------------------------------------------------------------
// The harness: a filtered child and a parent that plays the supervisor.

// The result of one call made in the child.
struct Outcome {
  long ret = 0;
  int err = 0;
};

// Child side: sends outcomes to the parent.
class Reporter {
 public:
  explicit Reporter(int fd) : fd_(fd) {}
  // Records a call's return value and, when it failed, its errno. Call it on the result of the
  // syscall directly, so that nothing runs in between to change errno.
  void Record(long ret) {
    const Outcome outcome{ret, ret < 0 ? errno : 0};
    if (write(fd_, &outcome, sizeof outcome) != sizeof outcome) _exit(kReportFailed);
  }
  static constexpr int kReportFailed = 91;

 private:
  int fd_;
};

using Attack = std::function<void(Reporter&)>;

struct ChildRun {
  bool got_listener = false;
  std::vector<Outcome> outcomes;
  std::vector<Violation> violations;       // what the parent answered
  std::vector<std::string> answer_errors;  // AnswerOneFromParent errors
  int wait_status = 0;
  bool timed_out = false;

  bool exited_cleanly() const { return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0; }
  std::string Describe() const {
    std::ostringstream out;
    if (WIFEXITED(wait_status)) out << "child exited " << WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status)) out << "child killed by " << strsignal(WTERMSIG(wait_status));
    if (timed_out) out << " (timed out)";
    for (const std::string& error : answer_errors) out << "; answer error: " << error;
    return out.str();
  }
};

constexpr int kInstallFailedExit = 90;

void SendFd(int socket, int fd) {
  char byte = 'L';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cmsg), &fd, sizeof fd);
  if (sendmsg(socket, &msg, 0) != 1) _exit(kInstallFailedExit);
}

// Returns the fd sent with SendFd, or an invalid UniqueFd when the peer closed without one.
UniqueFd ReceiveFd(int socket) {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  if (recvmsg(socket, &msg, MSG_CMSG_CLOEXEC) != 1) return UniqueFd();
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  if (cmsg == nullptr || cmsg->cmsg_type != SCM_RIGHTS) return UniqueFd();
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(cmsg), sizeof fd);
  return UniqueFd(fd);
}

// No core files from children this suite kills on purpose (core_pattern may be a plain "core").
void DisableCoreDumps() {
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  rlimit none{0, 0};
  setrlimit(RLIMIT_CORE, &none);
}

[[noreturn]] void RunChild(Mode mode, int results, int channel, const Attack& attack) {
  setsid();  // no controlling terminal: vhangup and TIOCSTI cannot reach the test's terminal
  DisableCoreDumps();
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(kInstallFailedExit);
  int notify_fd = -1;
  const Status installed =
      InstallFromChild({.report_violations = mode == Mode::kNotify}, &notify_fd);
  if (!installed.ok()) {
    std::fprintf(stderr, "InstallFromChild: %s\n", installed.message().c_str());
    _exit(kInstallFailedExit);
  }
  if (notify_fd >= 0) {
    SendFd(channel, notify_fd);
    close(notify_fd);  // the attack must not hold the fd that answers its own refusals
  }
  close(channel);
  Reporter reporter(results);
  attack(reporter);
  _exit(0);
}

// Serves the listener (if any) and collects outcomes until the child closes the results pipe.
void Supervise(pid_t pid, int results, const UniqueFd& listener, ChildRun& run) {
  for (;;) {
    pollfd fds[2] = {{results, POLLIN, 0}, {listener.get(), POLLIN, 0}};
    const int n = poll(fds, 2, 20'000);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      run.timed_out = true;
      kill(pid, SIGKILL);
      return;
    }
    if (fds[1].revents & POLLIN) {
      Result<Violation> violation = AnswerOneFromParent(listener.get());
      if (!violation.ok()) {
        run.answer_errors.push_back(violation.status().message());
      } else if (!violation->syscall.empty()) {  // empty: vanished, nothing to record
        run.violations.push_back(*violation);
      }
      continue;
    }
    if (fds[0].revents & (POLLIN | POLLHUP)) {
      Outcome outcome;
      const ssize_t got = read(results, &outcome, sizeof outcome);
      if (got <= 0) return;
      if (got == sizeof outcome) run.outcomes.push_back(outcome);
    }
  }
}

ChildRun RunFiltered(Mode mode, const Attack& attack) {
  int results[2];
  int channel[2];
  if (pipe2(results, O_CLOEXEC) != 0 ||
      socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, channel) != 0) {
    ADD_FAILURE() << "pipe/socketpair: " << std::strerror(errno);
    return {};
  }
  const pid_t pid = fork();
  if (pid == 0) {
    close(results[0]);
    close(channel[0]);
    RunChild(mode, results[1], channel[1], attack);
  }
  close(results[1]);
  close(channel[1]);
  UniqueFd results_read(results[0]);
  UniqueFd channel_read(channel[0]);
  ChildRun run;
  UniqueFd listener;
  if (mode == Mode::kNotify) listener = ReceiveFd(channel_read.get());
  run.got_listener = listener.valid();
  Supervise(pid, results_read.get(), listener, run);
  waitpid(pid, &run.wait_status, 0);
  return run;
}

// One call in a filtered child.
struct Attempt {
  Outcome outcome;
  ChildRun run;
};

Attempt TryInChild(Mode mode, const std::function<long()>& call) {
  Attempt attempt;
  attempt.run = RunFiltered(mode, [&](Reporter& reporter) { reporter.Record(call()); });
  EXPECT_TRUE(attempt.run.exited_cleanly()) << attempt.run.Describe();
  EXPECT_EQ(attempt.run.outcomes.size(), 1u) << attempt.run.Describe();
  if (!attempt.run.outcomes.empty()) attempt.outcome = attempt.run.outcomes.front();
  return attempt;
}

// The call failed with `err`; in notify mode the supervisor recorded it as `syscall`.
void ExpectRefused(Mode mode, const Attempt& attempt, const std::string& syscall, int err) {
  EXPECT_EQ(attempt.outcome.ret, -1);
  EXPECT_EQ(ErrnoName(attempt.outcome.err), ErrnoName(err));
  if (mode != Mode::kNotify) return;
  EXPECT_TRUE(attempt.run.got_listener);
  ASSERT_EQ(attempt.run.violations.size(), 1u) << attempt.run.Describe();
  EXPECT_EQ(attempt.run.violations[0].syscall, syscall);
  EXPECT_EQ(ErrnoName(attempt.run.violations[0].errno_returned), ErrnoName(err));
}

void ExpectAllowed(const Attempt& attempt) {
  EXPECT_GE(attempt.outcome.ret, 0) << ErrnoName(attempt.outcome.err);
  EXPECT_TRUE(attempt.run.violations.empty());
}

// ---------------------------------------------------------------------------------------------
// Every row of the table refuses what it says, with the errno it says, in both modes.

// Arguments that satisfy every comparison of `row`; the rest are all-ones, which makes each
// syscall fail harmlessly (EFAULT, EBADF, EINVAL) should the filter ever let it through.
std::array<uint64_t, 6> ExampleArgs(const Refusal& row) {
  std::array<uint64_t, 6> args;
  args.fill(~uint64_t{0});
  for (const ArgMatch& match : row.when) {
    args[match.arg] = match.op == ArgOp::kNe ? match.value + 1 : match.value;
  }
  return args;
}

class RefusalRowTest : public ::testing::TestWithParam<std::tuple<Mode, size_t>> {};

TEST_P(RefusalRowTest, RefusesWithTheTableErrno) {
  const auto [mode, index] = GetParam();
  const Refusal row = RefusalTable().at(index);
  const int nr = SyscallNumber(row.syscall);
  ASSERT_GE(nr, 0) << row.syscall;
  const std::array<uint64_t, 6> a = ExampleArgs(row);
  const Attempt attempt = TryInChild(mode, [&] {
    const long ret = syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
    if (ret == 0 && (row.syscall == "clone" || row.syscall == "clone3")) _exit(0);  // escaped
    return ret;
  });
  if (row.reported) {
    ExpectRefused(mode, attempt, row.syscall, row.errno_value);
  } else {
    EXPECT_EQ(attempt.outcome.ret, -1);
    EXPECT_EQ(ErrnoName(attempt.outcome.err), ErrnoName(row.errno_value));
    EXPECT_TRUE(attempt.run.violations.empty()) << "quiet rows are never reported";
  }
}

INSTANTIATE_TEST_SUITE_P(EveryRow, RefusalRowTest,
                         ::testing::Combine(::testing::Values(Mode::kErrno, Mode::kNotify),
                                            ::testing::Range(size_t{0}, RefusalTable().size())),
                         [](const ::testing::TestParamInfo<RefusalRowTest::ParamType>& info) {
                           const size_t index = std::get<1>(info.param);
                           return ModeName(std::get<0>(info.param)) + "_" +
                                  RefusalTable()[index].syscall + "_" + std::to_string(index);
                         });

// ---------------------------------------------------------------------------------------------
// Named attacks and the normal programs that must keep working, in both modes.

class SeccompTest : public ::testing::TestWithParam<Mode> {
 protected:
  Mode mode() const { return GetParam(); }
  Attempt Try(const std::function<long()>& call) { return TryInChild(mode(), call); }
  void ExpectRefused(const Attempt& attempt, const std::string& syscall, int err) {
    seccomp::ExpectRefused(mode(), attempt, syscall, err);
  }
};

INSTANTIATE_TEST_SUITE_P(BothModes, SeccompTest, ::testing::Values(Mode::kErrno, Mode::kNotify),
                         [](const ::testing::TestParamInfo<Mode>& info) {
                           return ModeName(info.param);
                         });

// Namespaces.

TEST_P(SeccompTest, CloneIntoNewUserNamespaceIsRefused) {
  ExpectRefused(Try([] {
                  const long ret = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
                  if (ret == 0) _exit(0);
                  return ret;
                }),
                "clone", EPERM);
}

TEST_P(SeccompTest, CloneWithSeveralNamespaceFlagsIsRefused) {
  ExpectRefused(Try([] {
                  const long ret =
                      syscall(SYS_clone, CLONE_NEWNS | CLONE_NEWPID | SIGCHLD, 0, 0, 0, 0);
                  if (ret == 0) _exit(0);
                  return ret;
                }),
                "clone", EPERM);
}

TEST_P(SeccompTest, UnshareNetworkNamespaceIsRefused) {
  ExpectRefused(Try([] { return syscall(SYS_unshare, CLONE_NEWNET); }), "unshare", EPERM);
}

TEST_P(SeccompTest, UnshareTimeNamespaceIsRefused) {
  ExpectRefused(Try([] { return syscall(SYS_unshare, CLONE_NEWTIME); }), "unshare", EPERM);
}

TEST_P(SeccompTest, UnshareWithoutNamespaceFlagsIsAllowed) {
  ExpectAllowed(Try([] { return syscall(SYS_unshare, CLONE_FILES | CLONE_FS); }));
}

TEST_P(SeccompTest, SetnsIntoAnotherNamespaceIsRefused) {
  ExpectRefused(Try([] {
                  const int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
                  if (fd < 0) return -2L;
                  return syscall(SYS_setns, fd, CLONE_NEWNET);
                }),
                "setns", EPERM);
}

// clone3 cannot be inspected, so it fails as "not implemented" and glibc falls back to clone.
TEST_P(SeccompTest, Clone3FailsWithEnosysAndIsNotReported) {
  const Attempt attempt = Try([] {
    clone_args args{};
    args.flags = CLONE_NEWUSER;
    args.exit_signal = SIGCHLD;
    const long ret = syscall(SYS_clone3, &args, sizeof args);
    if (ret == 0) _exit(0);
    return ret;
  });
  EXPECT_EQ(attempt.outcome.ret, -1);
  EXPECT_EQ(ErrnoName(attempt.outcome.err), "ENOSYS");
  EXPECT_TRUE(attempt.run.violations.empty());
}

TEST_P(SeccompTest, PlainForkStillWorks) {
  const Attempt attempt = Try([] {
    const pid_t pid = fork();
    if (pid == 0) _exit(7);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1L;
    return WIFEXITED(status) ? long{WEXITSTATUS(status)} : -2L;
  });
  EXPECT_EQ(attempt.outcome.ret, 7) << ErrnoName(attempt.outcome.err);
}

TEST_P(SeccompTest, ForkAndExecOfTrueStillWorks) {
  const Attempt attempt = Try([] {
    const pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/true", "true", static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1L;
    return WIFEXITED(status) ? long{WEXITSTATUS(status)} : -2L;
  });
  EXPECT_EQ(attempt.outcome.ret, 0) << ErrnoName(attempt.outcome.err);
}

// posix_spawn and pthread_create try clone3 first: they must fall back to clone.
TEST_P(SeccompTest, PosixSpawnFallsBackFromClone3) {
  const Attempt attempt = Try([] {
    pid_t pid = 0;
    char arg0[] = "true";
    char* argv[] = {arg0, nullptr};
    if (posix_spawn(&pid, "/bin/true", nullptr, nullptr, argv, environ) != 0) return -1L;
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return -1L;
    return WIFEXITED(status) ? long{WEXITSTATUS(status)} : -2L;
  });
  EXPECT_EQ(attempt.outcome.ret, 0);
  EXPECT_TRUE(attempt.run.violations.empty());
}

TEST_P(SeccompTest, ThreadsStillStart) {
  const Attempt attempt = Try([] {
    long value = 0;
    std::thread thread([&value] { value = 42; });
    thread.join();
    return value;
  });
  EXPECT_EQ(attempt.outcome.ret, 42);
}

// Sockets.

TEST_P(SeccompTest, PacketSocketIsRefused) {
  ExpectRefused(Try([] { return syscall(SYS_socket, AF_PACKET, SOCK_RAW, 0); }), "socket",
                EAFNOSUPPORT);
}

TEST_P(SeccompTest, VsockToTheHostIsRefused) {
  ExpectRefused(Try([] { return syscall(SYS_socket, AF_VSOCK, SOCK_STREAM, 0); }), "socket",
                EAFNOSUPPORT);
}

TEST_P(SeccompTest, KernelCryptoSocketIsRefused) {
  ExpectRefused(Try([] { return syscall(SYS_socket, AF_ALG, SOCK_SEQPACKET, 0); }), "socket",
                EAFNOSUPPORT);
}

TEST_P(SeccompTest, FamilyHiddenBehindHighBitsIsRefused) {
  ExpectRefused(Try([] { return syscall(SYS_socket, (1UL << 32) | AF_PACKET, SOCK_RAW, 0); }),
                "socket", EAFNOSUPPORT);
}

TEST_P(SeccompTest, SocketpairOfRefusedFamilyIsRefused) {
  ExpectRefused(Try([] {
                  int fds[2];
                  return syscall(SYS_socketpair, AF_PACKET, SOCK_DGRAM, 0, fds);
                }),
                "socketpair", EAFNOSUPPORT);
}

TEST_P(SeccompTest, NetlinkAuditIsRefused) {
  ExpectRefused(Try([] { return syscall(SYS_socket, AF_NETLINK, SOCK_RAW, NETLINK_AUDIT); }),
                "socket", EPROTONOSUPPORT);
}

TEST_P(SeccompTest, NetlinkXfrmIsRefused) {
  ExpectRefused(Try([] { return syscall(SYS_socket, AF_NETLINK, SOCK_RAW, NETLINK_XFRM); }),
                "socket", EPROTONOSUPPORT);
}

TEST_P(SeccompTest, NetlinkRouteIsAllowed) {
  ExpectAllowed(
      Try([] { return syscall(SYS_socket, AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE); }));
}

TEST_P(SeccompTest, RawInetSocketIsRefused) {
  ExpectRefused(Try([] { return syscall(SYS_socket, AF_INET, SOCK_RAW, IPPROTO_ICMP); }), "socket",
                EPERM);
}

TEST_P(SeccompTest, RawInet6SocketWithFlagsIsRefused) {
  ExpectRefused(Try([] {
                  return syscall(SYS_socket, AF_INET6, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC,
                                 IPPROTO_ICMPV6);
                }),
                "socket", EPERM);
}

TEST_P(SeccompTest, InetSockPacketIsRefused) {
  ExpectRefused(Try([] { return syscall(SYS_socket, AF_INET, SOCK_PACKET, 0); }), "socket", EPERM);
}

TEST_P(SeccompTest, InetStreamSocketIsAllowed) {
  ExpectAllowed(Try([] { return syscall(SYS_socket, AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); }));
}

TEST_P(SeccompTest, Inet6DatagramSocketIsAllowed) {
  UniqueFd unfiltered(socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!unfiltered.valid()) GTEST_SKIP() << "no IPv6 in this kernel";
  ExpectAllowed(Try([] { return syscall(SYS_socket, AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0); }));
}

TEST_P(SeccompTest, UnixSocketpairIsAllowed) {
  ExpectAllowed(Try([] {
    int fds[2];
    return syscall(SYS_socketpair, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds);
  }));
}

// Terminal ioctls, on a pty the child opens itself.

// Opens a pty pair and returns the replica side, or -1.
int OpenPtyReplica() {
  const int primary = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (primary < 0 || grantpt(primary) != 0 || unlockpt(primary) != 0) return -1;
  const char* name = ptsname(primary);
  return name ? open(name, O_RDWR | O_NOCTTY | O_CLOEXEC) : -1;
}

TEST_P(SeccompTest, TiocstiInjectionIsRefused) {
  ExpectRefused(Try([] {
                  const int tty = OpenPtyReplica();
                  if (tty < 0) return -2L;
                  char c = 'x';
                  return syscall(SYS_ioctl, tty, TIOCSTI, &c);
                }),
                "ioctl", EPERM);
}

// CVE-2019-10063: the kernel reads the command as 32 bits, so garbage above them must not help.
TEST_P(SeccompTest, TiocstiWithHighBitsSetIsRefused) {
  ExpectRefused(Try([] {
                  const int tty = OpenPtyReplica();
                  if (tty < 0) return -2L;
                  char c = 'x';
                  return syscall(SYS_ioctl, tty, (1UL << 32) | TIOCSTI, &c);
                }),
                "ioctl", EPERM);
}

TEST_P(SeccompTest, TioclinuxIsRefused) {
  ExpectRefused(Try([] {
                  const int tty = OpenPtyReplica();
                  if (tty < 0) return -2L;
                  char subcode = 0;
                  return syscall(SYS_ioctl, tty, TIOCLINUX, &subcode);
                }),
                "ioctl", EPERM);
}

TEST_P(SeccompTest, LineDisciplineChangeIsRefused) {
  ExpectRefused(Try([] {
                  const int tty = OpenPtyReplica();
                  if (tty < 0) return -2L;
                  int discipline = 0;  // N_TTY
                  return syscall(SYS_ioctl, tty, TIOCSETD, &discipline);
                }),
                "ioctl", EPERM);
}

TEST_P(SeccompTest, OrdinaryTerminalIoctlIsAllowed) {
  ExpectAllowed(Try([] {
    const int tty = OpenPtyReplica();
    if (tty < 0) return -2L;
    winsize size{};
    return syscall(SYS_ioctl, tty, TIOCGWINSZ, &size);
  }));
}

// personality and prctl.

TEST_P(SeccompTest, DockerPersonalitiesAreAllowed) {
  const ChildRun run = RunFiltered(mode(), [](Reporter& reporter) {
    for (unsigned long persona : {0x0UL, 0x8UL, 0x20000UL, 0x20008UL, 0xffffffffUL}) {
      reporter.Record(syscall(SYS_personality, persona));
    }
  });
  ASSERT_EQ(run.outcomes.size(), 5u) << run.Describe();
  for (const Outcome& outcome : run.outcomes) EXPECT_GE(outcome.ret, 0);
  EXPECT_TRUE(run.violations.empty());
}

TEST_P(SeccompTest, OtherPersonalitiesAreRefused) {
  const std::vector<unsigned long> refused = {
      ADDR_NO_RANDOMIZE,
      READ_IMPLIES_EXEC,
      MMAP_PAGE_ZERO,
      PER_BSD,
      PER_SVR4,
      0x1,
      0xfffffff7,
      0xfffdffff,
      0xfffdfff7,
      0x7fffffff,
      (1UL << 32) | ADDR_NO_RANDOMIZE,  // the kernel reads 32 bits
  };
  const ChildRun run = RunFiltered(mode(), [&](Reporter& reporter) {
    for (unsigned long persona : refused) reporter.Record(syscall(SYS_personality, persona));
  });
  ASSERT_EQ(run.outcomes.size(), refused.size()) << run.Describe();
  for (size_t i = 0; i < refused.size(); ++i) {
    EXPECT_EQ(ErrnoName(run.outcomes[i].err), "EPERM") << std::hex << refused[i];
  }
  if (mode() == Mode::kNotify) {
    EXPECT_EQ(run.violations.size(), refused.size());
  }
}

TEST_P(SeccompTest, PrctlSetMmIsRefused) {
  ExpectRefused(Try([] { return syscall(SYS_prctl, PR_SET_MM, PR_SET_MM_START_BRK, 0, 0, 0); }),
                "prctl", EPERM);
}

TEST_P(SeccompTest, PrctlNoNewPrivsAndSeccompQueriesAreAllowed) {
  const ChildRun run = RunFiltered(mode(), [](Reporter& reporter) {
    reporter.Record(syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
    reporter.Record(syscall(SYS_prctl, PR_GET_SECCOMP, 0, 0, 0, 0));
  });
  ASSERT_EQ(run.outcomes.size(), 2u) << run.Describe();
  EXPECT_EQ(run.outcomes[0].ret, 0);
  EXPECT_EQ(run.outcomes[1].ret, SECCOMP_MODE_FILTER);
}

// Nested sandboxes (Chrome, Node, warden itself) stack their own filters.

TEST_P(SeccompTest, NestedLibseccompFilterIsStillInstallable) {
  const ChildRun run = RunFiltered(mode(), [](Reporter& reporter) {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == nullptr) _exit(3);
    seccomp_rule_add(ctx, SCMP_ACT_ERRNO(E2BIG), SCMP_SYS(getppid), 0);
    reporter.Record(seccomp_load(ctx));
    seccomp_release(ctx);
    reporter.Record(syscall(SYS_getppid));
  });
  ASSERT_EQ(run.outcomes.size(), 2u) << run.Describe();
  EXPECT_EQ(run.outcomes[0].ret, 0) << ErrnoName(-run.outcomes[0].ret);
  EXPECT_EQ(ErrnoName(run.outcomes[1].err), "E2BIG");
}

TEST_P(SeccompTest, PrctlSetSeccompIsStillAllowed) {
  const Attempt attempt = Try([] {
    sock_filter allow_all = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    sock_fprog program{1, &allow_all};
    return syscall(SYS_prctl, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0);
  });
  ExpectAllowed(attempt);
}

// Foreign ABIs.

bool KilledBy(const ChildRun& run, int signal) {
  return WIFSIGNALED(run.wait_status) && WTERMSIG(run.wait_status) == signal;
}

#if defined(__x86_64__)
TEST_P(SeccompTest, X32SyscallKillsTheProcess) {
  const ChildRun run = RunFiltered(
      mode(), [](Reporter& reporter) { reporter.Record(syscall(0x40000000 | __NR_getpid)); });
  EXPECT_TRUE(KilledBy(run, SIGSYS)) << run.Describe();
  EXPECT_TRUE(run.outcomes.empty());
}

// i386 getpid (20) through the 32-bit entry point: killed (SIGSYS), or SIGSEGV where the kernel
// has no IA-32 emulation. It must never run.
long I386Getpid() {
  long ret = 20;
  asm volatile("int $0x80" : "+a"(ret) : : "memory", "r8", "r9", "r10", "r11");
  return ret;
}

TEST_P(SeccompTest, I386SyscallThroughInt80KillsTheProcess) {
  const ChildRun run = RunFiltered(mode(), [](Reporter& reporter) {
    // Without IA-32 emulation the int 0x80 faults: let the fault end the process, not ASan's SEGV
    // handler (which exits with its own status instead of dying of it). The raw syscall, since
    // ASan's interceptor ignores a program's attempt to replace its SIGSEGV handler.
    struct {
      void* handler;
      unsigned long flags;
      void* restorer;
      unsigned long mask;
    } dfl = {reinterpret_cast<void*>(SIG_DFL), 0, nullptr, 0};
    syscall(SYS_rt_sigaction, SIGSEGV, &dfl, nullptr, sizeof(dfl.mask));
    const long ret = I386Getpid();
    reporter.Record(ret == getpid() ? ret : -1);
  });
  EXPECT_TRUE(KilledBy(run, SIGSYS) || KilledBy(run, SIGSEGV)) << run.Describe();
  for (const Outcome& outcome : run.outcomes) EXPECT_LT(outcome.ret, 0) << "getpid ran";
}
#endif

// ---------------------------------------------------------------------------------------------
// The notify path.

TEST(SeccompNotifyTest, ViolationNamesTheSyscallAndItsArguments) {
  const Attempt attempt =
      TryInChild(Mode::kNotify, [] { return syscall(SYS_unshare, CLONE_NEWUSER | CLONE_NEWNS); });
  ExpectRefused(Mode::kNotify, attempt, "unshare", EPERM);
  ASSERT_EQ(attempt.run.violations.size(), 1u);
  const Violation& violation = attempt.run.violations[0];
  EXPECT_EQ(violation.nr, SYS_unshare);
  EXPECT_EQ(violation.args[0], uint64_t{CLONE_NEWUSER | CLONE_NEWNS});
  EXPECT_GT(violation.pid, 0);
}

TEST(SeccompNotifyTest, EachRefusalIsAnsweredInTurn) {
  const ChildRun run = RunFiltered(Mode::kNotify, [](Reporter& reporter) {
    reporter.Record(syscall(SYS_mount, "none", "/mnt", "tmpfs", 0, nullptr));
    reporter.Record(syscall(SYS_socket, AF_VSOCK, SOCK_STREAM, 0));
    reporter.Record(syscall(SYS_io_uring_setup, 8, nullptr));
    reporter.Record(syscall(SYS_getpid));
  });
  ASSERT_EQ(run.outcomes.size(), 4u) << run.Describe();
  EXPECT_EQ(ErrnoName(run.outcomes[0].err), "EPERM");
  EXPECT_EQ(ErrnoName(run.outcomes[1].err), "EAFNOSUPPORT");
  EXPECT_EQ(ErrnoName(run.outcomes[2].err), "ENOSYS");
  EXPECT_GT(run.outcomes[3].ret, 0);
  ASSERT_EQ(run.violations.size(), 3u);
  EXPECT_EQ(run.violations[0].syscall, "mount");
  EXPECT_EQ(run.violations[1].syscall, "socket");
  EXPECT_EQ(run.violations[1].args[0], uint64_t{AF_VSOCK});
  EXPECT_EQ(run.violations[2].syscall, "io_uring_setup");
}

// warden inside warden: the inner filter cannot get a listener (EBUSY) and answers in-kernel.
TEST(SeccompNotifyTest, NestedInstallFallsBackToErrnoAnswers) {
  const ChildRun run = RunFiltered(Mode::kNotify, [](Reporter& reporter) {
    int inner_fd = -2;
    const Status inner = InstallFromChild({.report_violations = true}, &inner_fd);
    reporter.Record(inner.ok() ? inner_fd : -1000);
    reporter.Record(syscall(SYS_chroot, "/"));
  });
  ASSERT_EQ(run.outcomes.size(), 2u) << run.Describe();
  EXPECT_EQ(run.outcomes[0].ret, -1) << "inner install failed or got a listener";
  EXPECT_EQ(ErrnoName(run.outcomes[1].err), "EPERM");
  // The inner filter's ERRNO outranks the outer filter's USER_NOTIF: nothing reaches the parent.
  EXPECT_TRUE(run.violations.empty());
}

TEST(SeccompNotifyTest, ErrnoModeGivesNoListener) {
  const ChildRun run = RunFiltered(Mode::kErrno, [](Reporter&) {});
  EXPECT_TRUE(run.exited_cleanly()) << run.Describe();
  EXPECT_FALSE(run.got_listener);
}

// The listener answers refusals: an inherited copy would let the command answer its own.
TEST(SeccompNotifyTest, ListenerIsCloseOnExec) {
  const pid_t pid = fork();
  if (pid == 0) {
    int fd = -1;
    if (!InstallFromChild({.report_violations = true}, &fd).ok() || fd < 0) _exit(2);
    _exit((fcntl(fd, F_GETFD) & FD_CLOEXEC) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

TEST(SeccompNotifyTest, AnswerReportsEsrchOnceTheTreeHasExited) {
  int channel[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, channel), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    int fd = -1;
    if (!InstallFromChild({.report_violations = true}, &fd).ok() || fd < 0) _exit(2);
    SendFd(channel[1], fd);
    _exit(0);
  }
  close(channel[1]);
  UniqueFd channel_read(channel[0]);
  UniqueFd listener = ReceiveFd(channel_read.get());
  ASSERT_TRUE(listener.valid());
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  // Guard against a hang: the exited tree must already show as a hang-up.
  pollfd pfd{listener.get(), POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, 5'000), 1);
  const Result<Violation> answer = AnswerOneFromParent(listener.get());
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(ErrnoName(answer.status().err()), "ESRCH") << answer.status().message();
}

// A filtered child that stays alive until `release` closes, after handing its listener over.
// With `refuse_in_grandchild`, it first forks a grandchild that blocks in a refused call and
// reports the grandchild's pid through `report`.
struct ListenerHolder {
  pid_t pid = -1;
  UniqueFd listener;
  UniqueFd release;  // close to let the child exit
  pid_t grandchild = -1;
};

ListenerHolder StartListenerHolder(bool refuse_in_grandchild) {
  int channel[2];
  int release[2];
  int report[2];
  ListenerHolder holder;
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, channel) != 0 ||
      pipe2(release, O_CLOEXEC) != 0 || pipe2(report, O_CLOEXEC) != 0) {
    return holder;
  }
  holder.pid = fork();
  if (holder.pid == 0) {
    close(channel[0]);
    close(release[1]);
    close(report[0]);
    DisableCoreDumps();
    int fd = -1;
    if (!InstallFromChild({.report_violations = true}, &fd).ok() || fd < 0) _exit(2);
    SendFd(channel[1], fd);
    close(fd);
    if (refuse_in_grandchild) {
      const pid_t grandchild = fork();
      if (grandchild == 0) _exit(syscall(SYS_chroot, "/") == 0 ? 3 : 4);
      if (write(report[1], &grandchild, sizeof grandchild) != sizeof grandchild) _exit(5);
    }
    char byte;
    while (read(release[0], &byte, 1) > 0) {
    }
    _exit(0);
  }
  close(channel[1]);
  close(release[0]);
  close(report[1]);
  UniqueFd channel_read(channel[0]);
  UniqueFd report_read(report[0]);
  holder.release.reset(release[1]);
  holder.listener = ReceiveFd(channel_read.get());
  if (refuse_in_grandchild && read(report_read.get(), &holder.grandchild,
                                   sizeof holder.grandchild) != sizeof holder.grandchild) {
    holder.grandchild = -1;
  }
  return holder;
}

void StopListenerHolder(ListenerHolder& holder) {
  holder.release.reset();
  int status = 0;
  waitpid(holder.pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

TEST(SeccompNotifyTest, AnswerDoesNotBlockWhenNothingIsPending) {
  ListenerHolder holder = StartListenerHolder(/*refuse_in_grandchild=*/false);
  ASSERT_TRUE(holder.listener.valid());
  const Result<Violation> answer = AnswerOneFromParent(holder.listener.get());
  ASSERT_TRUE(answer.ok()) << answer.status().message();
  EXPECT_TRUE(answer->syscall.empty());
  StopListenerHolder(holder);
}

// The refusing thread dies while its notification waits: a skipped record, not an error, and the
// listener keeps working for the rest of the tree.
TEST(SeccompNotifyTest, NotificationOfAKilledThreadIsASkippedRecord) {
  ListenerHolder holder = StartListenerHolder(/*refuse_in_grandchild=*/true);
  ASSERT_TRUE(holder.listener.valid());
  ASSERT_GT(holder.grandchild, 0);
  pollfd pending{holder.listener.get(), POLLIN, 0};
  ASSERT_EQ(poll(&pending, 1, 5'000), 1);  // the grandchild waits in chroot()
  UniqueFd grandchild(static_cast<int>(syscall(SYS_pidfd_open, holder.grandchild, 0)));
  ASSERT_TRUE(grandchild.valid());
  ASSERT_EQ(kill(holder.grandchild, SIGKILL), 0);
  pollfd dead{grandchild.get(), POLLIN, 0};
  ASSERT_EQ(poll(&dead, 1, 5'000), 1);
  const Result<Violation> answer = AnswerOneFromParent(holder.listener.get());
  ASSERT_TRUE(answer.ok()) << answer.status().message();
  EXPECT_TRUE(answer->syscall.empty());
  StopListenerHolder(holder);
}

TEST(SeccompNotifyTest, AnswerOnABadFdFails) {
  const Result<Violation> answer = AnswerOneFromParent(-1);
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(ErrnoName(answer.status().err()), "EBADF");
}

TEST(SeccompNotifyTest, NullNotifyFdIsAnError) { EXPECT_FALSE(InstallFromChild({}, nullptr).ok()); }

// ---------------------------------------------------------------------------------------------
// The table itself (no child needed).

TEST(RefusalTableTest, EverySyscallNameResolvesOnThisBuild) {
  EXPECT_TRUE(UnresolvedSyscalls().empty())
      << "unresolved: " << ::testing::PrintToString(UnresolvedSyscalls());
}

TEST(RefusalTableTest, CoversTheRequiredSyscalls) {
  std::set<std::string> names;
  for (const Refusal& row : RefusalTable()) names.insert(row.syscall);
  for (const char* required : {"clone",
                               "unshare",
                               "setns",
                               "clone3",
                               "mount",
                               "umount2",
                               "fsopen",
                               "fsconfig",
                               "fsmount",
                               "fspick",
                               "move_mount",
                               "open_tree",
                               "mount_setattr",
                               "pivot_root",
                               "chroot",
                               "ptrace",
                               "process_vm_readv",
                               "process_vm_writev",
                               "kcmp",
                               "pidfd_getfd",
                               "process_madvise",
                               "keyctl",
                               "add_key",
                               "request_key",
                               "bpf",
                               "userfaultfd",
                               "perf_event_open",
                               "io_uring_setup",
                               "io_uring_enter",
                               "io_uring_register",
                               "kexec_load",
                               "kexec_file_load",
                               "init_module",
                               "finit_module",
                               "delete_module",
                               "open_by_handle_at",
                               "name_to_handle_at",
                               "reboot",
                               "settimeofday",
                               "clock_settime",
                               "clock_adjtime",
                               "adjtimex",
                               "swapon",
                               "swapoff",
                               "acct",
                               "quotactl",
                               "quotactl_fd",
                               "syslog",
                               "iopl",
                               "ioperm",
                               "lookup_dcookie",
                               "uselib",
                               "ustat",
                               "sysfs",
                               "vhangup",
                               "move_pages",
                               "mbind",
                               "set_mempolicy",
                               "migrate_pages",
                               "fanotify_init",
                               "ioctl",
                               "personality",
                               "prctl",
                               "socket",
                               "socketpair"}) {
    EXPECT_TRUE(names.count(required)) << required;
  }
}

TEST(RefusalTableTest, NamesRoundTripThroughNumbers) {
  for (const Refusal& row : RefusalTable()) {
    const int nr = SyscallNumber(row.syscall);
    std::array<uint64_t, 6> args = ExampleArgs(row);
    const std::optional<Refusal> match = MatchRefusal(nr, args.data());
    ASSERT_TRUE(match.has_value()) << row.syscall;
    EXPECT_EQ(match->syscall, row.syscall);
    EXPECT_EQ(match->errno_value, row.errno_value) << row.syscall;
  }
}

TEST(RefusalTableTest, ProbesGetEnosysAndTheRestEperm) {
  for (const Refusal& row : RefusalTable()) {
    if (row.syscall == "socket" || row.syscall == "socketpair") continue;
    const bool probe = row.syscall == "clone3" || row.syscall == "userfaultfd" ||
                       row.syscall.rfind("io_uring_", 0) == 0;
    EXPECT_EQ(ErrnoName(row.errno_value), probe ? "ENOSYS" : "EPERM") << row.syscall;
  }
}

TEST(RefusalTableTest, OrdinaryCallsMatchNoRow) {
  const struct {
    int nr;
    std::array<uint64_t, 6> args;
  } allowed[] = {
      {SYS_getpid, {}},
      {SYS_clone, {SIGCHLD}},
      {SYS_clone, {CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD}},
      {SYS_socket, {AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0}},
      {SYS_socket, {AF_INET6, SOCK_DGRAM, IPPROTO_ICMPV6}},
      {SYS_socket, {AF_UNIX, SOCK_SEQPACKET, 0}},
      {SYS_socket, {AF_NETLINK, SOCK_RAW, NETLINK_ROUTE}},
      {SYS_ioctl, {1, TIOCGWINSZ}},
      {SYS_prctl, {PR_SET_NO_NEW_PRIVS, 1}},
      {SYS_prctl, {PR_SET_SECCOMP, SECCOMP_MODE_FILTER}},
      {SYS_personality, {0xffffffff}},
      {SYS_personality, {(1UL << 32) | PER_LINUX32}},
      {SYS_seccomp, {SECCOMP_SET_MODE_FILTER}},
  };
  for (const auto& call : allowed) {
    const std::optional<Refusal> match = MatchRefusal(call.nr, call.args.data());
    EXPECT_FALSE(match.has_value()) << call.nr << " refused by " << match->syscall;
  }
}

// The personality rows spell "anything but Docker's values" indirectly; check the spelling.
TEST(RefusalTableTest, PersonalityRowsRefuseExactlyTheNonDockerValues) {
  auto refused = [](uint64_t persona) {
    const uint64_t args[6] = {persona};
    return MatchRefusal(SYS_personality, args).has_value();
  };
  auto docker_allows = [](uint64_t persona) {
    const uint32_t low = static_cast<uint32_t>(persona);
    return low == 0 || low == 0x8 || low == 0x20000 || low == 0x20008 || low == 0xffffffff;
  };
  std::vector<uint64_t> samples = {0, 0x8, 0x20000, 0x20008, 0xffffffff, 0xfffffffe, 0x7fffffff};
  for (int a = 0; a < 32; ++a) {
    samples.push_back(1ULL << a);
    samples.push_back(0xffffffffULL & ~(1ULL << a));
    for (int b = 0; b < 32; ++b) samples.push_back((1ULL << a) | (1ULL << b));
  }
  std::mt19937_64 random(20240601);
  for (int i = 0; i < 20'000; ++i) samples.push_back(random());
  for (uint64_t persona : samples) {
    EXPECT_EQ(refused(persona), !docker_allows(persona)) << std::hex << persona;
  }
}

// docs/seccomp.md is the human-readable table; it must name every syscall the filter refuses.
TEST(RefusalTableTest, DocsNameEveryRefusedSyscall) {
  std::string path = __FILE__;
  path = path.substr(0, path.rfind("tests/sandbox/")) + "docs/seccomp.md";
  std::ifstream file(path);
  if (!file) GTEST_SKIP() << "no " << path;
  std::stringstream text;
  text << file.rdbuf();
  for (const Refusal& row : RefusalTable()) {
    EXPECT_NE(text.str().find("`" + row.syscall + "`"), std::string::npos) << row.syscall;
  }
}

}  // namespace
}  // namespace warden::sandbox::seccomp

// The programs warden loads were compiled at build time; they must be exactly what the refusal
// table compiles to now, or the table and the running filter have drifted apart.
#include "sandbox/seccomp_programs.h"

namespace warden::sandbox::seccomp {
namespace {

bool SameProgram(const std::vector<sock_filter>& a, const std::vector<sock_filter>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].code != b[i].code || a[i].jt != b[i].jt || a[i].jf != b[i].jf || a[i].k != b[i].k) return false;
  }
  return true;
}

TEST(PrecompiledPrograms, EqualWhatTheTableCompilesTo) {
  for (bool notify : {true, false}) {
    auto fresh = CompileProgram(notify);
    ASSERT_TRUE(fresh.ok()) << fresh.status().message();
    EXPECT_GT(fresh->size(), 10u);
    EXPECT_TRUE(SameProgram(PrecompiledProgram(notify), *fresh)) << "notify=" << notify;
  }
}

}  // namespace
}  // namespace warden::sandbox::seccomp
