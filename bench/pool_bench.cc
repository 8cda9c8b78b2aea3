// Start-to-exit of /bin/true in a pre-warmed pooled sandbox (docs/pool.md) against a cold
// `warden run` and a bare fork+exec+wait, interleaved in one run so that machine noise hits all
// alike; with and without cgroup limits. "pooled in-process" is the pool client called from this
// process (sandbox::pool::RunPooled), as `warden serve` would use it; "warden run --pool" adds the
// start of the warden binary.
//
// usage: pool_bench [ROUNDS]   (default 200)
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sandbox/pool.h"
#include "sandbox/profile.h"

extern char** environ;

namespace {

double NowUs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

pid_t Spawn(const std::vector<std::string>& argv, bool quiet_stderr = false) {
  std::vector<char*> a;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  if (quiet_stderr) posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  if (posix_spawn(&pid, a[0], &fa, nullptr, a.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// Microseconds for argv to run to a zero exit, or -1.
double TimeSpawn(const std::vector<std::string>& argv) {
  double t0 = NowUs();
  pid_t pid = Spawn(argv);
  if (pid < 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  double t1 = NowUs();
  return (WIFEXITED(status) && WEXITSTATUS(status) == 0) ? t1 - t0 : -1;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
double P90(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(0.9 * (v.size() - 1) + 0.5))];
}

struct Pool {
  std::string socket;
  pid_t pid = -1;
};

Pool StartPool(const std::string& warden, const std::string& name, std::vector<std::string> flags) {
  Pool p;
  p.socket = "/tmp/warden-pool-bench-" + std::to_string(getpid()) + "-" + name + ".sock";
  std::vector<std::string> argv = {warden, "pool", "start", "--socket", p.socket};
  argv.insert(argv.end(), flags.begin(), flags.end());
  p.pid = Spawn(argv, /*quiet_stderr=*/true);
  for (int i = 0; i < 500; ++i) {
    auto s = warden::sandbox::pool::QueryStatus(p.socket);
    if (s.ok() && (*s)["ready"] == (*s)["size"]) return p;
    usleep(20 * 1000);
  }
  std::fprintf(stderr, "pool %s did not become ready\n", name.c_str());
  std::exit(1);
}

// Waits until the pool is full again, so each pooled sample starts from a full pool.
void WaitFull(const Pool& p) {
  for (int i = 0; i < 500; ++i) {
    auto s = warden::sandbox::pool::QueryStatus(p.socket);
    if (s.ok() && (*s)["ready"] == (*s)["size"]) return;
    usleep(2 * 1000);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 200;
  // WARDEN_BIN in the environment compares another build (the in-process client is this one).
  const char* bin_env = getenv("WARDEN_BIN");
  const std::string warden = bin_env && *bin_env ? bin_env : WARDEN_BIN;
  const std::vector<std::string> limits = {"--memory", "256M", "--pids", "64", "--timeout", "30s"};
  Pool plain = StartPool(warden, "plain", {"--size", "4"});
  std::vector<std::string> limited_flags = {"--size", "4"};
  limited_flags.insert(limited_flags.end(), limits.begin(), limits.end());
  Pool limited = StartPool(warden, "limits", limited_flags);

  using Sample = std::function<double()>;
  auto spawn = [](std::vector<std::string> argv) -> Sample {
    return [argv] { return TimeSpawn(argv); };
  };
  auto in_process = [](const Pool& p) -> Sample {
    return [&p] {
      warden::sandbox::Options o;  // everything at its default: the pool's settings apply
      o.protect = warden::sandbox::DefaultProtectedPaths();
      o.argv = {"/bin/true"};
      int null = open("/dev/null", O_RDWR | O_CLOEXEC);
      double t0 = NowUs();
      auto r = warden::sandbox::pool::RunPooled(p.socket, o, {null, null, null});
      double t1 = NowUs();
      close(null);
      return r.exit_code == 0 ? t1 - t0 : -1;
    };
  };
  std::vector<std::string> cold_limits = {warden, "run"};
  cold_limits.insert(cold_limits.end(), limits.begin(), limits.end());
  cold_limits.insert(cold_limits.end(), {"--", "/bin/true"});
  struct Launcher {
    std::string name;
    Sample run;
    const Pool* pool;
  };
  std::vector<Launcher> launchers = {
      {"bare", spawn({"/bin/true"}), nullptr},
      {"warden run (cold)", spawn({warden, "run", "--", "/bin/true"}), nullptr},
      {"warden run --pool", spawn({warden, "run", "--pool", plain.socket, "--", "/bin/true"}),
       &plain},
      {"pooled in-process", in_process(plain), &plain},
      {"cold + limits", spawn(cold_limits), nullptr},
      {"--pool + limits", spawn({warden, "run", "--pool", limited.socket, "--", "/bin/true"}),
       &limited},
      {"in-process + limits", in_process(limited), &limited},
  };
  std::map<std::string, std::vector<double>> samples;
  int failures = 0;
  for (int i = 0; i < rounds; ++i) {
    for (auto& l : launchers) {
      if (l.pool) WaitFull(*l.pool);
      double us = l.run();
      if (us < 0)
        ++failures;
      else
        samples[l.name].push_back(us);
    }
  }
  std::printf("rounds=%d (interleaved), /bin/true start-to-exit in milliseconds\n", rounds);
  std::printf("%-22s %8s %8s %6s %10s\n", "launcher", "median", "p90", "n", "x bare");
  const double bare = Median(samples["bare"]);
  for (const auto& l : launchers) {
    const auto& v = samples[l.name];
    std::printf("%-22s %8.2f %8.2f %6zu %10.2f\n", l.name.c_str(), Median(v) / 1000, P90(v) / 1000,
                v.size(), bare > 0 ? Median(v) / bare : 0);
  }
  std::printf("ratio cold/pooled (warden run): %.2f   with limits: %.2f\n",
              Median(samples["warden run (cold)"]) / Median(samples["warden run --pool"]),
              Median(samples["cold + limits"]) / Median(samples["--pool + limits"]));
  if (failures) std::printf("(%d runs failed)\n", failures);
  for (const Pool* p : {&plain, &limited}) {
    kill(p->pid, SIGTERM);
    waitpid(p->pid, nullptr, 0);
  }
  return 0;
}
