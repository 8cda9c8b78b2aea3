// Start-to-exit latency of `/bin/true` and `python3 -c pass` under every way warden can start a
// sandbox, against bare exec and its peers, in one run. Every launcher runs once in turn, for both
// commands, and the whole is repeated, so that machine noise hits all of them alike; ratios are
// taken within the run. Figures and how to read them: bench/README.md, "Sandbox start-up".
//
// Launchers (the name is what --only takes):
//   bare           fork+exec+wait of the command
//   warden-version `warden --version`, no sandbox and no command: what starting the binary costs
//   unshare        unshare(1) with warden's namespaces (user, pid, mount, net, ipc, uts, cgroup)
//   bwrap          bubblewrap with equivalent isolation (no seccomp, no Landlock)
//   warden         cold `warden run`
//   warden-limits  cold `warden run --memory 256M --pids 64 --timeout 30s`
//   pool           `warden run --pool` against a pool this program starts (`warden pool start`)
//   pool-limits    the same against a pool of sandboxes with those limits
//   inproc         the pool client called in this process (sandbox::pool::RunPooled), as
//                  `warden serve` uses it
//   inproc-limits  the same against the pool with limits
//   runsc          bare runsc with a minimal OCI bundle, on the platform warden chose
//   runsc-warden   bare runsc with the bundle warden generates for the command (its mounts,
//                  /etc, /tmp, environment): the denominator of the 1.1x target
//   gvisor         `warden run --backend gvisor`
//   microvm        `warden run --backend microvm` (only --microvm-rounds rounds, spread over the
//   run)
// Each pooled sample, and every other sample too, starts with the pools full: the program waits,
// untimed, for the refill, so that it measures the claim and no refill runs behind another sample.
// What cannot run here (no root, no runsc, no bwrap, no microvm kernel) is skipped with the reason.
//
// usage: startup_bench [ROUNDS] [--only NAME,...] [--microvm-rounds N]   (defaults: 40, all, 3)
// WARDEN_BIN in the environment picks the warden binary (to compare builds); the in-process pool
// client is always this build's.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "sandbox/gvisor_bundle.h"
#include "sandbox/host_io.h"
#include "sandbox/mnt.h"
#include "sandbox/pool.h"
#include "sandbox/profile.h"
#include "sandbox/user.h"

extern char** environ;

namespace {

using Argv = std::vector<std::string>;

const Argv kLimits = {"--memory", "256M", "--pids", "64", "--timeout", "30s"};

double NowUs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

Argv Concat(Argv a, const Argv& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Starts argv with stdin and stdout on /dev/null and stderr on `stderr_path` (/dev/null by
// default: a terminal would add its own cost). Returns the pid, or -1.
pid_t Spawn(const Argv& argv, const std::string& stderr_path = "/dev/null") {
  std::vector<char*> a;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = -1;
  if (posix_spawn(&pid, a[0], &fa, nullptr, a.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// Runs argv to completion; returns its wait status, or -1 when it could not start.
int RunToExit(const Argv& argv, const std::string& stderr_path = "/dev/null") {
  pid_t pid = Spawn(argv, stderr_path);
  if (pid < 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// Microseconds for argv to run to a zero exit, or -1.
double TimeSpawn(const Argv& argv) {
  double t0 = NowUs();
  int status = RunToExit(argv);
  double t1 = NowUs();
  return (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) ? t1 - t0 : -1;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

std::string Which(const char* name) {
  for (const char* dir : {"/usr/bin/", "/bin/", "/usr/sbin/", "/usr/local/bin/"}) {
    std::string p = std::string(dir) + name;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string FirstLine(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  return line.empty() ? "(no message)" : line;
}

std::string Describe(int status) {
  if (status < 0) return "could not start";
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "exit " + std::to_string(WEXITSTATUS(status));
}

// A scratch directory removed with everything in it when the benchmark ends.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    char tmpl[] = "/tmp/warden-startup-bench-XXXXXX";
    if (mkdtemp(tmpl) != nullptr) path = tmpl;
  }
  ~ScratchDir() {
    std::error_code ignored;
    if (!path.empty()) std::filesystem::remove_all(path, ignored);
  }
};

struct Command {
  std::string label;
  Argv argv;
};

// One way of starting a command. `run` returns microseconds to a zero exit, or -1.
struct Launcher {
  std::string name;   // for --only
  std::string title;  // in the tables
  std::function<double(const Command&)> run;
  bool sparse = false;          // runs only in --microvm-rounds rounds
  Argv prefix;                  // argv before the command, for launchers that spawn one
  bool measure_memory = false;  // cold launchers: memory per sandbox is measured too
};

Launcher SpawnLauncher(std::string name, std::string title, const Argv& prefix,
                       bool measure_memory = false) {
  Launcher l{std::move(name), std::move(title),
             [prefix](const Command& c) { return TimeSpawn(Concat(prefix, c.argv)); }};
  l.prefix = prefix;
  l.measure_memory = measure_memory;
  return l;
}

// ---- Peers on the host kernel -------------------------------------------------------------

Argv UnsharePrefix(const std::string& unshare) {
  return {unshare,   "--user", "--map-root-user", "--pid", "--fork",
          "--mount", "--net",  "--ipc",           "--uts", "--cgroup"};
}

// Equivalent isolation to warden's defaults (bubblewrap has no Landlock, and its seccomp needs a
// compiled filter, so it runs without one: warden carries both and is still timed).
Argv BwrapPrefix(const std::string& bwrap) {
  Argv b = {bwrap,           "--unshare-all", "--die-with-parent",
            "--new-session", "--cap-drop",    "ALL",
            "--uid",         "1000",          "--gid",
            "1000",          "--ro-bind",     "/usr",
            "/usr"};
  for (const char* l : {"/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"}) {
    char target[256];
    ssize_t n = readlink(l, target, sizeof(target) - 1);
    if (n > 0) {
      target[n] = 0;
      b.insert(b.end(), {"--symlink", target, l});
    }
  }
  return Concat(b, {"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--ro-bind",
                    "/etc/ld.so.cache", "/etc/ld.so.cache", "--ro-bind", "/etc/ssl/certs",
                    "/etc/ssl/certs", "--ro-bind", "/etc/alternatives", "/etc/alternatives", "--"});
}

// ---- Pre-warmed pools -----------------------------------------------------------------------

// A `warden pool start` server owned by this process: SIGTERMed when the benchmark ends, and by
// the kernel if the benchmark dies first (parent-death signal).
class PoolServer {
 public:
  // Starts the pool and waits until it is full; null with `why` set when it did not fill.
  static std::unique_ptr<PoolServer> Start(const std::string& warden, const std::string& dir,
                                           const std::string& name, const Argv& flags,
                                           std::string* why) {
    auto p = std::unique_ptr<PoolServer>(new PoolServer);
    p->socket = dir + "/pool-" + name + ".sock";
    const std::string log = dir + "/pool-" + name + ".log";
    Argv argv = Concat({warden, "pool", "start", "--socket", p->socket, "--size", "4"}, flags);
    p->pid_ = fork();
    if (p->pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      dup2(out, 1);
      dup2(out, 2);
      std::vector<char*> a;
      for (auto& s : argv) a.push_back(s.data());
      a.push_back(nullptr);
      execv(a[0], a.data());
      _exit(127);
    }
    if (p->WaitFull(10 * 1000 * 1000)) return p;
    *why = "`warden pool start` did not fill within 10 s: " + FirstLine(ReadFile(log));
    return nullptr;
  }
  ~PoolServer() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
  // Waits until every sandbox of the pool is ready; false when `budget_us` ran out first.
  bool WaitFull(double budget_us) const {
    const double deadline = NowUs() + budget_us;
    do {
      auto s = warden::sandbox::pool::QueryStatus(socket);
      if (s.ok() && (*s)["ready"] == (*s)["size"]) return true;
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;  // reaped: never signal a pid the kernel may have reused
        return false;
      }
      usleep(2 * 1000);
    } while (NowUs() < deadline);
    return false;
  }

  std::string socket;

 private:
  PoolServer() = default;
  mutable pid_t pid_ = -1;
};

// Times one command through the pool client in this process, as `warden serve` calls it.
double TimeInProcess(const PoolServer& pool, const Command& c) {
  warden::sandbox::Options o;  // everything at its default: the pool's settings apply
  o.protect = warden::sandbox::DefaultProtectedPaths();
  o.argv = c.argv;
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  double t0 = NowUs();
  auto r = warden::sandbox::pool::RunPooled(pool.socket, o, {null, null, null});
  double t1 = NowUs();
  close(null);
  return r.exit_code == 0 ? t1 - t0 : -1;
}

// ---- gVisor -------------------------------------------------------------------------------

// The platform warden chose (from its record), so that bare runsc runs on the same one; empty
// with `why` set when `warden run --backend gvisor` fails.
std::string WardenGvisorPlatform(const std::string& warden, const std::string& dir,
                                 std::string* why) {
  const std::string json = dir + "/gvisor-record.json", err = dir + "/gvisor-stderr";
  int status =
      RunToExit({warden, "run", "--backend", "gvisor", "--json", json, "--", "/bin/true"}, err);
  auto record = nlohmann::json::parse(ReadFile(json), nullptr, false);
  if (status != 0 || !record.is_object() || !record.contains("platform")) {
    *why = "`warden run --backend gvisor` failed (" + Describe(status) +
           "): " + FirstLine(ReadFile(err));
    return "";
  }
  return record["platform"].get<std::string>();
}

// A bundle as small as runsc accepts: read-only root with the merged-/usr links, /usr bound
// read-only, gVisor's /proc, no user namespace games.
bool WriteMinimalBundle(const std::string& dir, const Argv& args) {
  const std::string rootfs = dir + "/rootfs";
  std::error_code ec;
  std::filesystem::create_directories(rootfs, ec);
  for (const char* d : {"/usr", "/proc", "/tmp"}) mkdir((rootfs + d).c_str(), 0755);
  for (const char* l : {"bin", "lib", "lib64", "sbin"})
    symlink((std::string("usr/") + l).c_str(), (rootfs + "/" + l).c_str());
  nlohmann::json config = {
      {"ociVersion", "1.0.2"},
      {"process",
       {{"args", args},
        {"cwd", "/"},
        {"env", {"PATH=/usr/bin:/bin"}},
        {"user", {{"uid", 65534}, {"gid", 65534}}}}},
      {"root", {{"path", "rootfs"}, {"readonly", true}}},
      {"mounts",
       {{{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}},
        {{"destination", "/usr"},
         {"type", "bind"},
         {"source", "/usr"},
         {"options", {"rbind", "ro"}}}}},
      {"linux",
       {{"namespaces",
         {{{"type", "pid"}},
          {{"type", "network"}},
          {{"type", "ipc"}},
          {{"type", "uts"}},
          {{"type", "mount"}}}}}},
  };
  std::ofstream out(dir + "/config.json");
  out << config.dump();
  return static_cast<bool>(out);
}

// The bundle `warden run --backend gvisor -- ARGS` hands to runsc (same library calls as
// gvisor.cc: the default profile's mounts, generated /etc, /tmp, environment, ids), so that bare
// runsc with it measures what warden adds around runsc and nothing of what the bundle asks of
// gVisor.
bool WriteWardenBundle(const std::string& dir, const Argv& args) {
  warden::sandbox::Options o;
  o.protect = warden::sandbox::DefaultProtectedPaths();
  o.argv = args;
  const auto ids = warden::sandbox::user::ChooseFromParent();
  auto plan = warden::sandbox::mnt::PlanFromParent(o, ids.host_uid, ids.host_gid);
  if (!plan) return false;
  warden::sandbox::gvisor::ProcessSpec process;
  std::string path;
  process.argv = args;
  process.env = warden::sandbox::BuildEnv(o, &path);
  process.uid = ids.host_uid;
  process.gid = ids.host_gid;
  process.workdir = "/tmp";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  return warden::sandbox::gvisor::WriteBundle(dir, o, *plan, process).ok();
}

// Bare runsc, one bundle per command (the command is in the bundle's config.json), written by
// `write`.
std::optional<Launcher> RunscLauncher(const std::string& name, const std::string& title,
                                      bool (*write)(const std::string&, const Argv&),
                                      const std::string& runsc, const std::string& platform,
                                      const std::string& dir,
                                      const std::vector<Command>& commands) {
  std::map<std::string, std::string> bundles;
  for (size_t i = 0; i < commands.size(); ++i) {
    std::string bundle = dir + "/" + name + "-bundle-" + std::to_string(i);
    if (!write(bundle, commands[i].argv)) return std::nullopt;
    bundles[commands[i].label] = bundle;
  }
  Argv prefix = {runsc,       "--root", dir + "/" + name + "-state", "--platform", platform,
                 "--network", "none",   "--ignore-cgroups",   "run"};
  return Launcher{name, title + " (" + platform + ")", [prefix, bundles](const Command& c) {
                    return TimeSpawn(
                        Concat(prefix, {"--bundle", bundles.at(c.label), "startup-bench"}));
                  }};
}

// ---- microVM ------------------------------------------------------------------------------

// Where warden looks for the guest kernel (src/sandbox/microvm.cc, docs/backends.md).
std::string MicrovmKernel() {
  const char* dir = getenv("WARDEN_MICROVM_DIR");
  return std::string(dir != nullptr && *dir ? dir : "/var/lib/warden/microvm") + "/vmlinux";
}

// The accelerator warden reports in its record's notes ("microvm: tcg (...)"), or "".
std::string MicrovmAccelerator(const std::string& warden, const std::string& dir) {
  const std::string json = dir + "/microvm-record.json";
  RunToExit({warden, "run", "--backend", "microvm", "--json", json, "--", "/bin/true"});
  auto record = nlohmann::json::parse(ReadFile(json), nullptr, false);
  if (!record.is_object() || !record.contains("notes")) return "";
  for (const auto& note : record["notes"]) {
    std::string n = note.get<std::string>();
    if (n.rfind("microvm: ", 0) == 0) return n.substr(9, n.find(' ', 9) - 9);
  }
  return "";
}

// ---- Memory per sandbox -------------------------------------------------------------------

struct Memory {
  long pss_kib = 0;
  long private_kib = 0;  // Private_Clean + Private_Dirty
};

std::string Comm(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

// Memory of `pid` and its descendants, except the command itself (the `sleep` leaf).
void Accumulate(pid_t pid, Memory* m, bool is_child) {
  std::ifstream children("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) +
                         "/children");
  std::vector<pid_t> kids;
  pid_t child;
  while (children >> child) kids.push_back(child);
  bool is_command = is_child && kids.empty() && Comm(pid) == "sleep";
  if (!is_command) {
    std::ifstream rollup("/proc/" + std::to_string(pid) + "/smaps_rollup");
    std::string line;
    while (std::getline(rollup, line)) {
      if (line.rfind("Pss:", 0) == 0) m->pss_kib += std::atol(line.c_str() + 4);
      if (line.rfind("Private_", 0) == 0)
        m->private_kib += std::atol(line.c_str() + line.find(':') + 1);
    }
  }
  for (pid_t k : kids) Accumulate(k, m, true);
}

// What a launcher costs per sandbox with `n` sandboxes running at once (each holding a `sleep`):
// shared pages of the launcher's binary count once across all of them, as on a busy host.
Memory LauncherMemory(const Argv& prefix, int n) {
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) pids.push_back(Spawn(Concat(prefix, {"/bin/sleep", "1"})));
  usleep(500 * 1000);
  Memory total;
  for (pid_t p : pids) Accumulate(p, &total, false);
  for (pid_t p : pids) waitpid(p, nullptr, 0);
  return {total.pss_kib / n, total.private_kib / n};
}

// ---- The run --------------------------------------------------------------------------------

struct Args {
  int rounds = 40;
  int microvm_rounds = 3;
  std::set<std::string> only;  // empty: all
};

std::optional<Args> ParseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--only" && i + 1 < argc) {
      std::stringstream list(argv[++i]);
      for (std::string name; std::getline(list, name, ',');) a.only.insert(name);
    } else if (arg == "--microvm-rounds" && i + 1 < argc) {
      a.microvm_rounds = std::atoi(argv[++i]);
    } else if (!arg.empty() && arg.find_first_not_of("0123456789") == std::string::npos) {
      a.rounds = std::atoi(arg.c_str());
    } else {
      return std::nullopt;
    }
  }
  if (a.rounds < 1) return std::nullopt;
  return a;
}

// Everything the launchers need to stay alive for the run: pools and the scratch directory.
struct Fixtures {
  ScratchDir dir;
  std::unique_ptr<PoolServer> plain_pool, limited_pool;
  std::vector<const PoolServer*> Pools() const {
    std::vector<const PoolServer*> p;
    for (const auto* s : {plain_pool.get(), limited_pool.get()})
      if (s) p.push_back(s);
    return p;
  }
};

class Selection {
 public:
  explicit Selection(const Args& a) : only_(a.only) {}
  bool Wants(const std::string& name) const {
    return only_.empty() || only_.count(name) || name == "bare";
  }
  bool WantsAny(std::initializer_list<const char*> names) const {
    return std::any_of(names.begin(), names.end(), [&](const char* n) { return Wants(n); });
  }

 private:
  std::set<std::string> only_;
};

void Skip(const std::string& what, const std::string& why) {
  std::printf("skipped %s: %s\n", what.c_str(), why.c_str());
}

void AddHostLaunchers(const Selection& want, const std::string& warden,
                      std::vector<Launcher>* out) {
  out->push_back(SpawnLauncher("bare", "bare", {}));
  if (want.Wants("unshare")) {
    std::string unshare = Which("unshare");
    if (unshare.empty())
      Skip("unshare", "no unshare(1)");
    else
      out->push_back(SpawnLauncher("unshare", "unshare", UnsharePrefix(unshare), true));
  }
  if (want.Wants("bwrap")) {
    std::string bwrap = Which("bwrap");
    if (bwrap.empty())
      Skip("bwrap", "no bwrap (Debian package bubblewrap)");
    else
      out->push_back(SpawnLauncher("bwrap", "bwrap", BwrapPrefix(bwrap), true));
  }
  if (want.Wants("warden-version")) {
    const Argv version = {warden, "--version"};
    out->push_back({"warden-version", "`warden --version` (no sandbox)",
                    [version](const Command&) { return TimeSpawn(version); }});
  }
  if (want.Wants("warden"))
    out->push_back(SpawnLauncher("warden", "warden (cold)", {warden, "run", "--"}, true));
  if (want.Wants("warden-limits")) {
    out->push_back(SpawnLauncher("warden-limits", "warden + limits",
                                 Concat(Concat({warden, "run"}, kLimits), {"--"}), true));
  }
}

void AddPoolLaunchers(const Selection& want, const std::string& warden, Fixtures* f,
                      std::vector<Launcher>* out) {
  std::string why;
  if (want.WantsAny({"pool", "inproc"})) {
    f->plain_pool = PoolServer::Start(warden, f->dir.path, "plain", {}, &why);
    if (!f->plain_pool) Skip("pool, inproc", why);
  }
  if (want.WantsAny({"pool-limits", "inproc-limits"})) {
    f->limited_pool = PoolServer::Start(warden, f->dir.path, "limits", kLimits, &why);
    if (!f->limited_pool) Skip("pool-limits, inproc-limits", why);
  }
  for (const auto& [pool, suffix, title] :
       {std::tuple{f->plain_pool.get(), "", ""},
        std::tuple{f->limited_pool.get(), "-limits", " + limits"}}) {
    if (pool == nullptr) continue;
    const PoolServer* p = pool;
    if (want.Wants(std::string("pool") + suffix)) {
      out->push_back(SpawnLauncher(std::string("pool") + suffix,
                                   std::string("warden run --pool") + title,
                                   {warden, "run", "--pool", p->socket, "--"}));
    }
    if (want.Wants(std::string("inproc") + suffix)) {
      out->push_back({std::string("inproc") + suffix, std::string("pooled in-process") + title,
                      [p](const Command& c) { return TimeInProcess(*p, c); }});
    }
  }
}

void AddGvisorLaunchers(const Selection& want, const std::string& warden,
                        const std::vector<Command>& commands, Fixtures* f,
                        std::vector<Launcher>* out) {
  if (!want.WantsAny({"runsc", "runsc-warden", "gvisor"})) return;
  const std::string runsc = Which("runsc");
  if (geteuid() != 0 || runsc.empty()) {
    Skip("runsc, gvisor", geteuid() != 0
                              ? "needs root"
                              : "no runsc (Debian package runsc, scripts/install-deps.sh)");
    return;
  }
  std::string why;
  const std::string platform = WardenGvisorPlatform(warden, f->dir.path, &why);
  if (platform.empty()) {
    Skip("runsc, gvisor", why);
    return;
  }
  if (want.Wants("runsc")) {
    if (auto l = RunscLauncher("runsc", "bare runsc, minimal bundle", WriteMinimalBundle, runsc,
                               platform, f->dir.path, commands))
      out->push_back(*l);
    else
      Skip("runsc", "could not write the bundles under " + f->dir.path);
  }
  if (want.Wants("runsc-warden")) {
    if (auto l = RunscLauncher("runsc-warden", "bare runsc, warden's bundle", WriteWardenBundle,
                               runsc, platform, f->dir.path, commands))
      out->push_back(*l);
    else
      Skip("runsc-warden", "could not write warden's bundles under " + f->dir.path);
  }
  if (want.Wants("gvisor"))
    out->push_back(SpawnLauncher("gvisor", "warden --backend gvisor",
                                 {warden, "run", "--backend", "gvisor", "--"}));
}

// Returns the accelerator ("kvm", "tcg") when the launcher was added.
std::string AddMicrovmLauncher(const Selection& want, const Args& args, const std::string& warden,
                               Fixtures* f, std::vector<Launcher>* out) {
  if (!want.Wants("microvm")) return "";
  if (args.microvm_rounds < 1) {
    Skip("microvm", "--microvm-rounds 0");
    return "";
  }
  if (access(MicrovmKernel().c_str(), R_OK) != 0) {
    Skip("microvm", "no guest kernel at " + MicrovmKernel() +
                        " (scripts/install-microvm.sh, or set WARDEN_MICROVM_DIR)");
    return "";
  }
  if (Which("qemu-system-x86_64").empty() && getenv("WARDEN_MICROVM_QEMU") == nullptr) {
    Skip("microvm", "no qemu-system-x86_64 (Debian package qemu-system-x86)");
    return "";
  }
  std::string accel = MicrovmAccelerator(warden, f->dir.path);
  Launcher l = SpawnLauncher("microvm", "warden --backend microvm",
                             {warden, "run", "--backend", "microvm", "--"});
  l.sparse = true;
  out->push_back(l);
  return accel.empty() ? "unknown" : accel;
}

// Runs each launcher once per command, untimed (page cache, caches warden keeps per boot), and
// drops, with the reason, those that fail.
void WarmUp(const std::vector<Command>& commands, const Fixtures& f,
            std::vector<Launcher>* launchers) {
  std::vector<Launcher> kept;
  for (auto& l : *launchers) {
    bool ok = true;
    for (const auto& c : commands) {
      for (const auto* p : f.Pools()) p->WaitFull(2e6);
      if (l.run(c) < 0) {
        std::string why = "`" + c.label + "` failed in the warm-up run";
        if (!l.prefix.empty()) {  // once more, to say why
          const std::string err = f.dir.path + "/warm-up-stderr";
          int status = RunToExit(Concat(l.prefix, c.argv), err);
          why += " (" + Describe(status) + "): " + FirstLine(ReadFile(err));
        }
        Skip(l.name, why);
        ok = false;
        break;
      }
    }
    if (ok) kept.push_back(std::move(l));
  }
  *launchers = std::move(kept);
}

using Samples =
    std::map<std::string, std::map<std::string, std::vector<double>>>;  // command -> launcher -> us

// True when the sparse launchers run in round `i` of `rounds`: `n` rounds spread evenly.
bool SparseRound(int i, int rounds, int n) {
  return n >= rounds || (i * n) / rounds != ((i + 1) * n) / rounds;
}

Samples Measure(const Args& args, const std::vector<Command>& commands,
                const std::vector<Launcher>& launchers, const Fixtures& f, int* failures,
                int* not_full) {
  Samples s;
  for (const auto& c : commands) s[c.label];
  for (int i = 0; i < args.rounds; ++i) {
    for (const auto& c : commands) {
      for (const auto& l : launchers) {
        if (l.sparse && !SparseRound(i, args.rounds, args.microvm_rounds)) continue;
        for (const auto* p : f.Pools())
          if (!p->WaitFull(2e6)) ++*not_full;
        double us = l.run(c);
        if (us < 0)
          ++*failures;
        else
          s[c.label][l.name].push_back(us);
      }
    }
  }
  return s;
}

void PrintTable(const Command& c, const std::vector<Launcher>& launchers, const Samples& s) {
  const auto& by = s.at(c.label);
  const double bare = by.count("bare") ? Percentile(by.at("bare"), 0.5) : 0;
  std::printf("\n`%s` (ms):\n\n| launcher | median | p90 | n | x bare |\n|---|---|---|---|---|\n",
              c.label.c_str());
  for (const auto& l : launchers) {
    auto it = by.find(l.name);
    if (it == by.end()) {
      std::printf("| %s | failed | | 0 | |\n", l.title.c_str());
      continue;
    }
    double median = Percentile(it->second, 0.5);
    std::printf("| %s | %.2f | %.2f | %zu | %.2f |\n", l.title.c_str(), median / 1000,
                Percentile(it->second, 0.9) / 1000, it->second.size(),
                bare > 0 ? median / bare : 0);
  }
}

// One line per target: the ratio of medians for each command, and whether it meets `target`
// (0: no target, the ratio alone).
void PrintRatio(const Samples& s, const std::vector<Command>& commands, const std::string& what,
                const std::string& num, const std::string& den, double target,
                const std::string& note = "") {
  std::string line;
  for (const auto& c : commands) {
    const auto& by = s.at(c.label);
    if (!by.count(num) || !by.count(den)) continue;
    double r = Percentile(by.at(num), 0.5) / Percentile(by.at(den), 0.5);
    char buf[128];
    std::snprintf(buf, sizeof(buf), "%s `%s` %.2f%s", line.empty() ? "" : ";", c.label.c_str(), r,
                  target <= 0   ? ""
                  : r <= target ? " (met)"
                                : " (NOT met)");
    line += buf;
  }
  if (line.empty()) return;
  char t[48] = "";
  if (target > 0) std::snprintf(t, sizeof(t), " (target <= %.1f)", target);
  std::printf("- %s%s:%s\n", what.c_str(), t, line.c_str());
  if (!note.empty()) std::printf("  %s\n", note.c_str());
}

// `warden run --pool` starts the warden binary, which then has the pool start the command: at
// least two fork+execs where bare has one. Its floor is `warden --version` plus bare.
std::string TwoExecsNote(const Samples& s, const std::vector<Command>& commands) {
  const std::string why =
      "warden run --pool execs the warden binary and then the command: at least two fork+execs "
      "where bare has one";
  std::string note = why + "; floor (warden --version + bare) / bare:";
  for (const auto& c : commands) {
    const auto& by = s.at(c.label);
    if (!by.count("bare") || !by.count("warden-version")) return why;
    double bare = Percentile(by.at("bare"), 0.5),
           version_us = Percentile(by.at("warden-version"), 0.5);
    char buf[96];
    std::snprintf(buf, sizeof(buf), " `%s` %.2f", c.label.c_str(), (version_us + bare) / bare);
    note += buf;
  }
  return note;
}

void PrintTargets(const Samples& s, const std::vector<Command>& commands,
                  const std::string& accel) {
  std::printf("\nTargets (ratios of medians):\n");
  PrintRatio(s, commands, "pooled in-process / bare", "inproc", "bare", 1.5);
  PrintRatio(s, commands, "pooled in-process + limits / bare", "inproc-limits", "bare", 1.5);
  PrintRatio(s, commands, "warden run --pool / bare", "pool", "bare", 2, TwoExecsNote(s, commands));
  PrintRatio(s, commands, "warden run --pool + limits / bare", "pool-limits", "bare", 2);
  PrintRatio(s, commands, "warden gvisor / bare runsc with warden's bundle (warden's own cost)",
             "gvisor", "runsc-warden", 1.1);
  PrintRatio(s, commands, "warden gvisor / bare runsc with a minimal bundle", "gvisor", "runsc", 0);
  PrintRatio(s, commands, "cold warden / bwrap (the sandbox issue's target)", "warden", "bwrap",
             0.8);
  PrintRatio(s, commands, "cold warden + limits / bwrap", "warden-limits", "bwrap", 0);
  PrintRatio(s, commands, "cold warden / warden run --pool", "warden", "pool", 0);
  PrintRatio(s, commands, "cold warden + limits / warden run --pool + limits", "warden-limits",
             "pool-limits", 0);
  for (const auto& c : commands) {
    const auto& by = s.at(c.label);
    if (!by.count("microvm")) continue;
    const auto& v = by.at("microvm");
    std::printf(
        "- microvm boot to exit, `%s` (%s): median %.0f ms, min %.0f, max %.0f over %zu runs "
        "(goal under 150 ms where KVM works)\n",
        c.label.c_str(), accel.c_str(), Percentile(v, 0.5) / 1000, Percentile(v, 0) / 1000,
        Percentile(v, 1) / 1000, v.size());
  }
}

void PrintMemory(const std::vector<Launcher>& launchers) {
  const int concurrent = 8;
  bool header = false;
  for (const auto& l : launchers) {
    if (!l.measure_memory) continue;
    if (!header) {
      std::printf(
          "\nMemory per sandbox with %d running at once (launcher processes only, not the "
          "command):\n\n"
          "| launcher | Pss KiB | private KiB |\n|---|---|---|\n",
          concurrent);
      header = true;
    }
    Memory m = LauncherMemory(l.prefix, concurrent);
    std::printf("| %s | %ld | %ld |\n", l.title.c_str(), m.pss_kib, m.private_kib);
  }
}

}  // namespace

int main(int argc, char** argv) {
  auto args = ParseArgs(argc, argv);
  if (!args) {
    std::fprintf(stderr,
                 "usage: startup_bench [ROUNDS] [--only NAME,...] [--microvm-rounds N]\n"
                 "names: bare (always), warden-version, unshare, bwrap, warden, warden-limits, "
                 "pool, pool-limits, inproc,\n"
                 "       inproc-limits, runsc, runsc-warden, gvisor, microvm\n");
    return 2;
  }
  const char* bin_env = getenv("WARDEN_BIN");
  const std::string warden = bin_env != nullptr && *bin_env ? bin_env : WARDEN_BIN;
  const std::vector<Command> commands = {{"/bin/true", {"/bin/true"}},
                                         {"python3 -c pass", {"/usr/bin/python3", "-c", "pass"}}};
  Fixtures f;
  if (f.dir.path.empty()) {
    std::perror("startup_bench: mkdtemp");
    return 1;
  }
  signal(SIGPIPE, SIG_IGN);
  const Selection want(*args);
  std::vector<Launcher> launchers;
  AddHostLaunchers(want, warden, &launchers);
  AddPoolLaunchers(want, warden, &f, &launchers);
  AddGvisorLaunchers(want, warden, commands, &f, &launchers);
  const std::string accel = AddMicrovmLauncher(want, *args, warden, &f, &launchers);
  WarmUp(commands, f, &launchers);

  std::printf("\nwarden: %s\nrounds: %d interleaved (microvm: %d), start-to-exit\n", warden.c_str(),
              args->rounds, std::min(args->microvm_rounds, args->rounds));
  int failures = 0, not_full = 0;
  Samples s = Measure(*args, commands, launchers, f, &failures, &not_full);
  for (const auto& c : commands) PrintTable(c, launchers, s);
  PrintTargets(s, commands, accel);
  if (failures) std::printf("(%d runs failed and are left out)\n", failures);
  if (not_full)
    std::printf("(%d samples started before a pool had refilled, after 2 s of waiting)\n",
                not_full);
  PrintMemory(launchers);
  std::printf("\nload average at the end: %s", ReadFile("/proc/loadavg").c_str());
  return 0;
}
