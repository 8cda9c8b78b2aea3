// Start-to-exit latency of a sandboxed command under several launchers, measured interleaved
// (one run of each launcher in turn, repeated) so that machine noise hits all of them alike.
// Reports median and p90 per launcher and the ratio of warden's median to bubblewrap's.
// Also: the Pss (proportional memory) warden's supervisor and sandbox init hold per sandbox.
//
// usage: startup_bench [ROUNDS]   (default 200)
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

struct Launcher {
  std::string name;
  std::vector<std::string> prefix;  // argv before the command
};

double NowUs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

pid_t Spawn(const std::vector<std::string>& argv) {
  std::vector<char*> a;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  if (posix_spawn(&pid, a[0], &fa, nullptr, a.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// Runs argv to completion; returns microseconds, or -1 when it failed.
double TimeOnce(const std::vector<std::string>& argv) {
  double t0 = NowUs();
  pid_t pid = Spawn(argv);
  if (pid < 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  double t1 = NowUs();
  return (WIFEXITED(status) && WEXITSTATUS(status) == 0) ? t1 - t0 : -1;
}

double Percentile(std::vector<double> v, double p) {
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
  std::ifstream children("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  std::vector<pid_t> kids;
  pid_t child;
  while (children >> child) kids.push_back(child);
  bool is_command = is_child && kids.empty() && Comm(pid) == "sleep";
  if (!is_command) {
    std::ifstream rollup("/proc/" + std::to_string(pid) + "/smaps_rollup");
    std::string line;
    while (std::getline(rollup, line)) {
      if (line.rfind("Pss:", 0) == 0) m->pss_kib += std::atol(line.c_str() + 4);
      if (line.rfind("Private_", 0) == 0) m->private_kib += std::atol(line.c_str() + line.find(':') + 1);
    }
  }
  for (pid_t k : kids) Accumulate(k, m, true);
}

// What a launcher costs per sandbox with `n` sandboxes running at once (each holding a `sleep`):
// shared pages of the launcher's binary count once across all of them, as on a busy host.
Memory LauncherMemory(const Launcher& l, int n) {
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> argv = l.prefix;
    argv.insert(argv.end(), {"/bin/sleep", "1"});
    pids.push_back(Spawn(argv));
  }
  usleep(500 * 1000);
  Memory total;
  for (pid_t p : pids) Accumulate(p, &total, false);
  for (pid_t p : pids) waitpid(p, nullptr, 0);
  return {total.pss_kib / n, total.private_kib / n};
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 200;
  std::string warden = WARDEN_BIN;
  std::string bwrap = Which("bwrap"), unshare = Which("unshare");
  std::vector<Launcher> launchers = {{"bare", {}}};
  if (!unshare.empty()) {
    launchers.push_back({"unshare", {unshare, "--user", "--map-root-user", "--pid", "--fork", "--mount", "--net", "--ipc", "--uts", "--cgroup"}});
  }
  if (!bwrap.empty()) {
    // Equivalent isolation to warden's defaults (bubblewrap has no Landlock, and its seccomp
    // needs a compiled filter, so it runs without one: warden carries both and is still timed).
    std::vector<std::string> b = {bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
                                  "--uid", "1000", "--gid", "1000", "--ro-bind", "/usr", "/usr"};
    for (const char* l : {"/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"}) {
      char target[256];
      ssize_t n = readlink(l, target, sizeof(target) - 1);
      if (n > 0) {
        target[n] = 0;
        b.insert(b.end(), {"--symlink", target, l});
      }
    }
    b.insert(b.end(), {"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache",
                       "--ro-bind", "/etc/ssl/certs", "/etc/ssl/certs", "--ro-bind", "/etc/alternatives", "/etc/alternatives", "--"});
    launchers.push_back({"bwrap", b});
  }
  launchers.push_back({"warden", {warden, "run", "--"}});
  launchers.push_back({"warden+limits", {warden, "run", "--memory", "256M", "--pids", "64", "--timeout", "30s", "--"}});

  const std::vector<std::pair<std::string, std::vector<std::string>>> commands = {
      {"/bin/true", {"/bin/true"}}, {"python3 -c pass", {"/usr/bin/python3", "-c", "pass"}}};

  std::printf("rounds=%d (interleaved), times are start-to-exit in milliseconds\n", rounds);
  {
    std::vector<double> v;
    for (int i = 0; i < std::min(rounds, 100); ++i) v.push_back(TimeOnce({warden, "--version"}));
    std::printf("warden --version (binary start alone): median %.2f ms\n\n", Percentile(v, 0.5) / 1000);
  }
  for (const auto& [label, cmd] : commands) {
    std::map<std::string, std::vector<double>> samples;
    int failures = 0;
    for (int i = 0; i < rounds; ++i) {
      for (const auto& l : launchers) {
        std::vector<std::string> full = l.prefix;
        full.insert(full.end(), cmd.begin(), cmd.end());
        double us = TimeOnce(full);
        if (us < 0) ++failures; else samples[l.name].push_back(us);
      }
    }
    std::printf("%-18s %10s %10s %8s\n", label.c_str(), "median", "p90", "n");
    for (const auto& l : launchers) {
      const auto& v = samples[l.name];
      if (v.empty()) { std::printf("%-18s %10s\n", l.name.c_str(), "failed"); continue; }
      std::printf("%-18s %10.2f %10.2f %8zu\n", l.name.c_str(), Percentile(v, 0.5) / 1000, Percentile(v, 0.9) / 1000, v.size());
    }
    if (!samples["bwrap"].empty() && !samples["warden"].empty()) {
      double bw = Percentile(samples["bwrap"], 0.5);
      std::printf("ratio warden/bwrap (median): %.2f   warden+limits/bwrap: %.2f\n", Percentile(samples["warden"], 0.5) / bw,
                  Percentile(samples["warden+limits"], 0.5) / bw);
    }
    if (failures) std::printf("(%d runs failed)\n", failures);
    std::printf("\n");
  }
  const int concurrent = 8;
  std::printf("memory per sandbox with %d running at once (launcher processes only, not the command):\n", concurrent);
  std::printf("  %-16s %10s %12s\n", "", "Pss KiB", "private KiB");
  for (const auto& l : launchers) {
    if (l.name == "bare") continue;
    Memory m = LauncherMemory(l, concurrent);
    std::printf("  %-16s %10ld %12ld\n", l.name.c_str(), m.pss_kib, m.private_kib);
  }
  return 0;
}
