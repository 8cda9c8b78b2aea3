#include "sandbox/landlock.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>

namespace warden::sandbox::landlock {
namespace {

// Landlock cannot be undone, so every test restricts a forked child. The child collects the
// failed checks as text; the parent asserts there are none.
class Checks {
 public:
  void Expect(bool ok, const std::string& what) {
    if (!ok) failures_ += what + "\n";
  }
  // `result` is the return value of a call expected to fail with `err`.
  void ExpectErrno(long result, int err, const std::string& what) {
    const int got = errno;
    if (result != -1 || got != err) {
      failures_ += what + ": expected errno " + std::to_string(err) + ", got result " +
                   std::to_string(result) + (result == -1 ? " errno " + std::to_string(got) : "") +
                   "\n";
    }
  }
  void ExpectOk(long result, const std::string& what) {
    if (result < 0) failures_ += what + ": " + std::strerror(errno) + "\n";
  }
  const std::string& failures() const { return failures_; }

 private:
  std::string failures_;
};

std::string InChild(const std::function<void(Checks&)>& body) {
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return "pipe failed";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(report[0]);
    Checks checks;
    body(checks);
    const std::string& text = checks.failures();
    (void)!::write(report[1], text.data(), text.size());
    ::_exit(0);
  }
  ::close(report[1]);
  std::string text;
  char buf[1024];
  for (ssize_t n; (n = ::read(report[0], buf, sizeof buf)) > 0;) text.append(buf, n);
  ::close(report[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    text += "child died, status " + std::to_string(status);
  return text;
}

int OpenPath(const std::string& path) { return ::open(path.c_str(), O_PATH | O_CLOEXEC); }

// Applies `rules` and records a failure unless Landlock took effect.
void Apply(Checks& c, const Ruleset& rules) {
  bool applied = false;
  Status st = ApplyFromChild(rules, &applied);
  c.Expect(st.ok(), "ApplyFromChild: " + st.message());
  c.Expect(applied, "ApplyFromChild reported not applied");
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/warden-landlock-test-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) std::abort();
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A file outside the rules that root could otherwise read.
std::string UnlistedFile() {
  return ::access("/etc/hostname", R_OK) == 0 ? "/etc/hostname" : "/etc/passwd";
}

class LandlockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (AbiVersion() == 0) GTEST_SKIP() << "kernel without Landlock (or disabled at boot)";
  }
};

TEST(LandlockAbiTest, KernelHereHasLandlock) { EXPECT_GE(AbiVersion(), 1); }

TEST_F(LandlockTest, ReadOnlyAndWritableRulesLimitTheFilesystem) {
  TempDir tmp;
  const std::string unlisted = UnlistedFile();
  const std::string probe = "/usr/warden-landlock-probe-" + std::to_string(::getpid());
  std::string failures = InChild([&](Checks& c) {
    const int usr = OpenPath("/usr");
    const int work = OpenPath(tmp.path());
    c.ExpectOk(::open(unlisted.c_str(), O_RDONLY | O_CLOEXEC), "read " + unlisted + " before");
    Apply(c, {.paths = {{usr, false}, {work, true}}});

    c.ExpectErrno(::open(unlisted.c_str(), O_RDONLY | O_CLOEXEC), EACCES, "read " + unlisted);
    c.ExpectOk(::open("/usr", O_RDONLY | O_DIRECTORY | O_CLOEXEC), "list /usr");
    c.ExpectErrno(::open(probe.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600), EACCES,
                  "create a file in /usr");
    c.ExpectErrno(::mkdir((probe + ".d").c_str(), 0700), EACCES, "mkdir in /usr");

    const std::string file = tmp.path() + "/file";
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    c.ExpectOk(fd, "create a file in the writable dir");
    c.ExpectOk(::write(fd, "data", 4), "write it");
    ::close(fd);
    c.ExpectOk(::truncate(file.c_str(), 1), "truncate it");
    c.ExpectOk(::mkdir((tmp.path() + "/sub").c_str(), 0700), "mkdir in the writable dir");
    c.ExpectOk(::rename(file.c_str(), (tmp.path() + "/sub/file").c_str()),
               "move a file between directories (refer)");
    c.ExpectOk(::symlink("file", (tmp.path() + "/sub/link").c_str()), "symlink");
    c.ExpectOk(::unlink((tmp.path() + "/sub/link").c_str()), "unlink");
    c.ExpectOk(::unlink((tmp.path() + "/sub/file").c_str()), "unlink");
    c.ExpectOk(::rmdir((tmp.path() + "/sub").c_str()), "rmdir");
  });
  ::unlink(probe.c_str());  // only there if the test failed
  ::rmdir((probe + ".d").c_str());
  EXPECT_EQ(failures, "");
}

// Like moving a file from /tmp into a --rw bind: a rename across two rules needs REFER on both.
TEST_F(LandlockTest, FilesMoveBetweenTwoWritableRules) {
  TempDir tmp;
  const std::string from = tmp.path() + "/from";
  const std::string to = tmp.path() + "/to";
  ASSERT_EQ(::mkdir(from.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(to.c_str(), 0700), 0);
  std::string failures = InChild([&](Checks& c) {
    Apply(c, {.paths = {{OpenPath(from), true}, {OpenPath(to), true}}});
    c.ExpectOk(::close(::open((from + "/f").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600)),
               "create in the first rule");
    c.ExpectOk(::rename((from + "/f").c_str(), (to + "/f").c_str()), "rename into the second");
    c.ExpectOk(::link((to + "/f").c_str(), (from + "/g").c_str()), "hard link back");
  });
  EXPECT_EQ(failures, "");
}

TEST_F(LandlockTest, ReadOnlyRuleAllowsExecutingPrograms) {
  std::string failures = InChild([&](Checks& c) {
    Apply(c, {.paths = {{OpenPath("/usr"), false},
                        {OpenPath("/lib"), false},
                        {OpenPath("/lib64"), false},
                        {OpenPath("/etc"), false}}});
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::execl("/usr/bin/true", "true", nullptr);
      ::_exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    c.Expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
             "exec /usr/bin/true: status " + std::to_string(status));
  });
  EXPECT_EQ(failures, "");
}

TEST_F(LandlockTest, ExecutedProgramsInheritTheRestrictions) {
  const std::string unlisted = UnlistedFile();
  std::string failures = InChild([&](Checks& c) {
    const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    Apply(c,
          {.paths = {
               {OpenPath("/usr"), false}, {OpenPath("/lib"), false}, {OpenPath("/lib64"), false}}});
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
      ::execl("/usr/bin/cat", "cat", unlisted.c_str(), nullptr);
      ::_exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    c.Expect(WIFEXITED(status) && WEXITSTATUS(status) == 1,
             "cat " + unlisted + " should fail with exit 1, status " + std::to_string(status));
  });
  EXPECT_EQ(failures, "");
}

TEST_F(LandlockTest, RuleOnASingleFileAllowsOnlyThatFile) {
  TempDir tmp;
  const std::string allowed = tmp.path() + "/allowed";
  const std::string other = tmp.path() + "/other";
  ASSERT_EQ(::close(::open(allowed.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600)), 0);
  ASSERT_EQ(::close(::open(other.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600)), 0);
  std::string failures = InChild([&](Checks& c) {
    // A writable rule on a file gets only the rights that apply to files (else EINVAL).
    Apply(c, {.paths = {{OpenPath(allowed), true}}});
    c.ExpectOk(::open(allowed.c_str(), O_RDWR | O_TRUNC | O_CLOEXEC), "open the allowed file");
    c.ExpectErrno(::open(other.c_str(), O_RDONLY | O_CLOEXEC), EACCES, "read another file");
    c.ExpectErrno(::open((tmp.path() + "/new").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600),
                  EACCES, "create a sibling");
  });
  EXPECT_EQ(failures, "");
}

// A listening TCP socket on 127.0.0.1 with a kernel-chosen port.
struct Listener {
  int fd = -1;
  uint16_t port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, 8) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      std::abort();
    }
    port = ntohs(addr.sin_port);
  }
  ~Listener() { ::close(fd); }
};

int ConnectTcp(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  const int err = errno;
  ::close(fd);
  errno = err;
  return rc;
}

int BindTcp(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  const int err = errno;
  ::close(fd);
  errno = err;
  return rc;
}

TEST_F(LandlockTest, TcpConnectOnlyToListedPortsAndNoBind) {
  if (AbiVersion() < 4) GTEST_SKIP() << "Landlock ABI " << AbiVersion() << " has no network rules";
  Listener proxy, other;
  std::string failures = InChild([&](Checks& c) {
    c.ExpectOk(ConnectTcp(other.port), "connect to the unlisted port before restricting");
    Apply(c, {.connect_tcp_ports = {proxy.port}, .restrict_net = true});
    c.ExpectOk(ConnectTcp(proxy.port), "connect to the listed port");
    c.ExpectErrno(ConnectTcp(other.port), EACCES, "connect to an unlisted port");
    c.ExpectErrno(BindTcp(0), EACCES, "bind an ephemeral port");
    c.ExpectErrno(BindTcp(other.port == 65535 ? 65534 : other.port + 1), EACCES, "bind a port");
  });
  EXPECT_EQ(failures, "");
}

TEST_F(LandlockTest, WithoutRestrictNetTcpIsLeftToTheNetworkNamespace) {
  Listener other;
  std::string failures = InChild([&](Checks& c) {
    Apply(c, {});
    c.ExpectOk(ConnectTcp(other.port), "connect with restrict_net off");
  });
  EXPECT_EQ(failures, "");
}

TEST_F(LandlockTest, SandboxCannotSignalProcessesOutsideIt) {
  if (AbiVersion() < 6) GTEST_SKIP() << "Landlock ABI " << AbiVersion() << " has no scopes";
  const pid_t outsider = ::fork();
  if (outsider == 0) {
    for (;;) ::pause();
  }
  std::string failures = InChild([&](Checks& c) {
    c.ExpectOk(::kill(outsider, 0), "signal the outsider before restricting");
    Apply(c, {});
    c.ExpectErrno(::kill(outsider, SIGKILL), EPERM, "kill a process outside the domain");
    c.ExpectErrno(::kill(::getppid(), 0), EPERM, "probe the parent with signal 0");
    c.ExpectOk(::kill(::getpid(), 0), "signal itself");
    const pid_t inside = ::fork();
    if (inside == 0) {
      for (;;) ::pause();
    }
    c.ExpectOk(::kill(inside, SIGKILL), "kill its own child");
    ::waitpid(inside, nullptr, 0);
  });
  EXPECT_EQ(failures, "");
  EXPECT_EQ(::waitpid(outsider, nullptr, WNOHANG), 0) << "the outsider was killed";
  ::kill(outsider, SIGKILL);
  ::waitpid(outsider, nullptr, 0);
}

TEST_F(LandlockTest, SandboxCannotConnectToAbstractUnixSocketsOutsideIt) {
  if (AbiVersion() < 6) GTEST_SKIP() << "Landlock ABI " << AbiVersion() << " has no scopes";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string name = "warden-landlock-test-" + std::to_string(::getpid());
  std::memcpy(addr.sun_path + 1, name.data(), name.size());  // sun_path[0] = 0: abstract
  const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  const int server = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::bind(server, reinterpret_cast<sockaddr*>(&addr), len), 0) << std::strerror(errno);
  ASSERT_EQ(::listen(server, 8), 0);
  auto connect_abstract = [&] {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), len);
    const int err = errno;
    ::close(fd);
    errno = err;
    return rc;
  };
  std::string failures = InChild([&](Checks& c) {
    c.ExpectOk(connect_abstract(), "connect before restricting");
    Apply(c, {});
    c.ExpectErrno(connect_abstract(), EPERM, "connect to an abstract socket outside the domain");
  });
  ::close(server);
  EXPECT_EQ(failures, "");
}

TEST_F(LandlockTest, BadRuleDescriptorNamesTheStepAndErrno) {
  std::string failures = InChild([&](Checks& c) {
    bool applied = true;
    Status st = ApplyFromChild({.paths = {{-1, false}}}, &applied);
    c.Expect(!st.ok(), "ApplyFromChild accepted fd -1");
    c.Expect(!applied, "reported applied after a failure");
    c.Expect(st.message().find("fd -1") != std::string::npos, "message: " + st.message());
    c.Expect(st.message().find("errno 9") != std::string::npos, "message: " + st.message());
  });
  EXPECT_EQ(failures, "");
}

}  // namespace
}  // namespace warden::sandbox::landlock
