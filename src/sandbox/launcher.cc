#include "sandbox/launcher.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "sandbox/profile.h"

namespace warden::sandbox {
namespace {

std::string Bytes(uint64_t n) { return std::to_string(n); }
std::string Millis(uint64_t ms) { return std::to_string(ms) + "ms"; }

std::string BindSpec(const Bind& b) {
  return b.inside.empty() ? b.host : b.host + ":" + b.inside;
}

}  // namespace

std::vector<std::string> ProfileArgs(const Options& o) {
  std::vector<std::string> a;
  auto add = [&a](const char* flag, std::string value) {
    a.emplace_back(flag);
    a.push_back(std::move(value));
  };
  if (o.timeout_ms) add("--timeout", Millis(o.timeout_ms));
  if (o.memory_bytes) add("--memory", Bytes(o.memory_bytes));
  if (o.pids) add("--pids", std::to_string(o.pids));
  if (o.cpu_ms) add("--cpu", Millis(o.cpu_ms));
  add("--output-limit", Bytes(o.output_limit_bytes));
  add("--tmpfs-size", Bytes(o.tmpfs_bytes));
  if (o.file_size_bytes) add("--file-size", Bytes(o.file_size_bytes));
  add("--open-files", std::to_string(o.open_files));
  for (const Bind& b : o.binds) add(b.writable ? "--rw" : "--ro", BindSpec(b));
  if (o.protect.empty()) a.emplace_back("--no-protect");
  else if (o.protect != DefaultProtectedPaths())
    for (const auto& p : o.protect) add("--protect", p);
  if (!o.workdir.empty()) add("--workdir", o.workdir);
  for (const auto& [k, v] : o.env) add("--env", k + "=" + v);
  for (const auto& name : o.inherit_env) add("--env-inherit", name);
  if (o.degrade.allow_no_landlock) add("--accept-missing", "landlock");
  if (o.degrade.allow_no_cgroups) add("--accept-missing", "cgroups");
  return a;
}

std::vector<std::string> RunArgs(const Options& o, const std::string& record_path) {
  std::vector<std::string> a = {"run"};
  std::vector<std::string> profile = ProfileArgs(o);
  a.insert(a.end(), profile.begin(), profile.end());
  auto add = [&a](const char* flag, std::string value) {
    a.emplace_back(flag);
    a.push_back(std::move(value));
  };
  add("--net", o.net == NetMode::kProxy ? "proxy" : "none");
  for (const auto& h : o.allow) add("--allow", h);
  for (const auto& c : o.egress_credentials) add("--egress-credential", EgressCredentialArg(c));
  for (const auto& [h, ip] : o.resolve) add("--resolve", h + "=" + ip);
  if (!o.backend.empty() && o.backend != "native") add("--backend", o.backend);
  if (!record_path.empty()) add("--json", record_path);
  a.emplace_back("--");
  a.insert(a.end(), o.argv.begin(), o.argv.end());
  return a;
}

std::string LauncherBinary() {
  if (const char* env = std::getenv("WARDEN_BIN"); env && *env) return env;
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string self(buf, static_cast<size_t>(n));
  // Only the warden binary understands `run`: a test binary launching itself would recurse.
  std::string base = self.substr(self.rfind('/') + 1);
  return base.rfind("warden", 0) == 0 ? self : "";
}

Result<pid_t> SpawnRun(const Options& options, const SpawnIo& io) {
  if (options.argv.empty()) return Status::Error("sandbox launch: no command");
  std::vector<std::string> args = RunArgs(options, io.record_fd >= 0 ? "/dev/fd/3" : "");
  if (io.decision_fd >= 0) args.insert(args.begin() + 1, {"--decision-fd", "4"});
  return SpawnWarden(std::move(args), io);
}

Result<pid_t> SpawnWarden(std::vector<std::string> args, const SpawnIo& io) {
  const std::string bin = LauncherBinary();
  if (bin.empty())
    return Status::Error("sandbox launch: this process is not warden; set WARDEN_BIN to the warden binary");
  args.insert(args.begin(), bin);
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_text = {
      "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"};
  for (const auto& [k, v] : io.env) env_text.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  // Each target fd is set with dup2 from its source; a source equal to its target has its
  // close-on-exec flag cleared by dup2 in glibc (>= 2.29 semantics for posix_spawn).
  int targets[] = {0, 1, 2, 3, 4};
  int sources[] = {io.stdin_fd, io.stdout_fd, io.stderr_fd, io.record_fd, io.decision_fd};
  for (int i = 0; i < 5; ++i) {
    if (sources[i] >= 0) {
      posix_spawn_file_actions_adddup2(&fa, sources[i], targets[i]);
    } else if (i < 3) {
      posix_spawn_file_actions_addopen(&fa, targets[i], "/dev/null", i == 0 ? O_RDONLY : O_WRONLY, 0);
    }
  }
  // Everything else the parent has open stays behind.
  posix_spawn_file_actions_addclosefrom_np(&fa, 5);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  sigset_t all;
  sigfillset(&all);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_USEVFORK);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, bin.c_str(), &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Status::FromErrno("sandbox launch: posix_spawn " + bin, rc);
  return pid;
}

nlohmann::json RunViaLauncher(const Options& options, const SpawnIo& io,
                              const std::function<void(pid_t)>& on_started) {
  auto failure = [](const std::string& error) {
    return nlohmann::json{{"exit_code", 125}, {"signal", 0},       {"reason", "setup_error"},
                          {"error", error},   {"wall_ms", 0},      {"stdout_truncated", false},
                          {"stderr_truncated", false}};
  };
  int record = memfd_create("warden_run_record", MFD_CLOEXEC);
  if (record < 0) return failure(Status::FromErrno("memfd_create", errno).message());
  SpawnIo with_record = io;
  with_record.record_fd = record;
  auto pid = SpawnRun(options, with_record);
  if (!pid) {
    close(record);
    return failure(pid.status().message());
  }
  if (on_started) on_started(*pid);
  int wstatus = 0;
  while (waitpid(*pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  std::string text;
  char buf[8192];
  off_t offset = 0;
  for (;;) {
    ssize_t n = pread(record, buf, sizeof buf, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    offset += n;
  }
  close(record);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    std::string how = WIFSIGNALED(wstatus) ? "killed by signal " + std::to_string(WTERMSIG(wstatus))
                                           : "exit status " + std::to_string(WEXITSTATUS(wstatus));
    return failure("the sandbox launcher wrote no result record (" + how + ")");
  }
  return j;
}

}  // namespace warden::sandbox
