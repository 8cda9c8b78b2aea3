#include "harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grp.h>
#include <time.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace warden::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// warden as another user: a copy of the binary in a directory every user can reach (the build
// tree may sit under a 0700 directory, as a root user's checkout in /root does), made once per
// test process and removed at its exit.
class ReachableCopy {
 public:
  const std::string& path() {
    if (path_.empty()) {
      char tmpl[] = "/tmp/warden-test-bin-XXXXXX";
      if (mkdtemp(tmpl) == nullptr) return path_;
      dir_ = tmpl;
      chmod(dir_.c_str(), 0755);
      std::error_code ec;
      std::filesystem::copy_file(WARDEN_BIN, dir_ + "/warden", ec);
      if (!ec && chmod((dir_ + "/warden").c_str(), 0755) == 0) path_ = dir_ + "/warden";
    }
    return path_;
  }
  ~ReachableCopy() {
    if (dir_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

 private:
  std::string dir_, path_;
};

ReachableCopy reachable_copy;

}  // namespace

bool IsRoot() { return geteuid() == 0; }

uid_t TestUid() {
  const char* v = getenv("WARDEN_TEST_AS_UID");
  if (v == nullptr || !IsRoot()) return 0;
  return static_cast<uid_t>(std::strtoul(v, nullptr, 10));
}

std::string WardenBinaryFor(uid_t uid) {
  if (uid == 0 || !IsRoot()) return WARDEN_BIN;
  const std::string& copy = reachable_copy.path();
  return copy.empty() ? std::string(WARDEN_BIN) : copy;
}

Outcome RunWarden(const Invocation& inv) {
  Outcome o;
  std::string json_path;
  const uid_t uid = inv.uid ? inv.uid : TestUid();
  std::vector<std::string> args = {WardenBinaryFor(uid)};
  for (size_t i = 0; i < inv.args.size(); ++i) {
    args.push_back(inv.args[i]);
    // Pooled variants of the end-to-end tests (escape_pooled_test.cc) send every run to a pool.
    if (i == 0 && inv.args[0] == "run" && getenv("WARDEN_TEST_POOL") != nullptr) {
      args.push_back("--pool");
      args.push_back(getenv("WARDEN_TEST_POOL"));
    }
    // Backend variants (escape tests against gvisor, microvm) give every run the backend.
    if (i == 0 && inv.args[0] == "run" && getenv("WARDEN_TEST_BACKEND") != nullptr) {
      args.push_back("--backend");
      args.push_back(getenv("WARDEN_TEST_BACKEND"));
    }
    if (i == 0 && inv.json) {
      char tmpl[] = "/tmp/warden-test-json-XXXXXX";
      int fd = mkstemp(tmpl);
      close(fd);
      if (uid) chown(tmpl, uid, static_cast<gid_t>(-1));
      json_path = tmpl;
      args.push_back("--json");
      args.push_back(json_path);
    }
  }
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) return o;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    for (int fd : inv.inherit_fds) fcntl(fd, F_SETFD, 0);
    for (const auto& [k, v] : inv.extra_env) setenv(k.c_str(), v.c_str(), 1);
    if (uid) {
      if (setgroups(0, nullptr) != 0 || setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0) _exit(99);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(98);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  // Feed stdin and collect both outputs without deadlocking on full pipes.
  size_t fed = 0;
  if (inv.stdin_data.empty()) {
    close(in[1]);
    in[1] = -1;
  } else {
    fcntl(in[1], F_SETFL, O_NONBLOCK);
  }
  o.pid = pid;
  bool out_open = true, err_open = true;
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  bool killed = false;
  while (out_open || err_open) {
    struct pollfd p[3] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {in[1], POLLOUT, 0}};
    int wait_ms = -1;
    if (inv.kill_after_ms && !killed) {
      struct timespec now;
      clock_gettime(CLOCK_MONOTONIC, &now);
      long elapsed = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
      if (elapsed >= inv.kill_after_ms) {
        kill(pid, SIGKILL);
        killed = true;
      } else {
        wait_ms = static_cast<int>(inv.kill_after_ms - elapsed);
      }
    }
    poll(p, in[1] >= 0 ? 3 : 2, wait_ms);
    char buf[65536];
    if (p[0].revents) {
      ssize_t n = read(out[0], buf, sizeof(buf));
      if (n <= 0) { out_open = false; p[0].fd = -1; } else o.out.append(buf, static_cast<size_t>(n));
    }
    if (p[1].revents) {
      ssize_t n = read(err[0], buf, sizeof(buf));
      if (n <= 0) err_open = false; else o.err.append(buf, static_cast<size_t>(n));
    }
    if (in[1] >= 0 && p[2].revents) {
      ssize_t n = write(in[1], inv.stdin_data.data() + fed, inv.stdin_data.size() - fed);
      if (n > 0) fed += static_cast<size_t>(n);
      if (n < 0 || fed == inv.stdin_data.size()) { close(in[1]); in[1] = -1; }
    }
    if (!out_open) { close(out[0]); out[0] = -1; out_open = false; }
    if (!err_open && err[0] >= 0) { close(err[0]); err[0] = -1; }
  }
  if (in[1] >= 0) close(in[1]);
  int status = 0;
  waitpid(pid, &status, 0);
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (!json_path.empty()) {
    std::string text = ReadAll(json_path);
    unlink(json_path.c_str());
    if (!text.empty()) o.record = nlohmann::json::parse(text, nullptr, false);
  }
  return o;
}

Outcome RunSh(const std::string& script, const std::vector<std::string>& flags) {
  Invocation inv;
  inv.args = {"run"};
  inv.args.insert(inv.args.end(), flags.begin(), flags.end());
  inv.args.insert(inv.args.end(), {"--", "sh", "-c", script});
  return RunWarden(inv);
}

TempDir::TempDir() : TempDir("/tmp") {}

TempDir::TempDir(const std::string& parent) {
  std::string tmpl = parent + "/warden-test-XXXXXX";
  path_ = mkdtemp(tmpl.data());
  // Runs as another user bind it: the directory is theirs (the files Write makes stay root's).
  if (uid_t uid = TestUid(); uid != 0) chown(path_.c_str(), uid, static_cast<gid_t>(-1));
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::Write(const std::string& rel, const std::string& content, mode_t mode) const {
  std::filesystem::path p = std::filesystem::path(path_) / rel;
  std::filesystem::create_directories(p.parent_path());
  {
    std::ofstream out(p);
    out << content;
  }
  chmod(p.c_str(), mode);
  return p.string();
}

std::string ReadProcText(const std::string& path) {
  std::string text;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  close(fd);
  return text;
}

pid_t ParentPid(pid_t pid) {
  const std::string text = ReadProcText("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = text.rfind(')');  // the command name may hold spaces and ')'
  if (paren == std::string::npos) return 0;
  std::istringstream rest(text.substr(paren + 1));
  std::string state;
  pid_t ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

std::vector<pid_t> PidsWithCmdline(const std::string& needle) {
  std::vector<pid_t> pids;
  DIR* d = opendir("/proc");
  if (!d) return pids;
  while (struct dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::string cmd = ReadAll(std::string("/proc/") + e->d_name + "/cmdline");
    for (auto& c : cmd) if (c == '\0') c = ' ';
    if (cmd.find(needle) != std::string::npos) pids.push_back(std::atoi(e->d_name));
  }
  closedir(d);
  return pids;
}

std::vector<std::string> WardenCgroupDirs() {
  std::vector<std::string> found;
  std::error_code ec;
  for (const char* root : {"/sys/fs/cgroup"}) {
    for (auto it = std::filesystem::recursive_directory_iterator(root, std::filesystem::directory_options::skip_permission_denied, ec);
         it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) break;
      if (it->is_directory(ec) && it->path().filename().string().rfind("warden-", 0) == 0) found.push_back(it->path());
      if (it.depth() > 6) it.disable_recursion_pending();
    }
  }
  return found;
}

int MountCount() {
  std::string m = ReadAll("/proc/self/mountinfo");
  return static_cast<int>(std::count(m.begin(), m.end(), '\n'));
}

}  // namespace warden::testing
