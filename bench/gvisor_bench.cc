// Start-to-exit of /bin/true under gVisor: `warden run --backend gvisor` against bare runsc with a
// minimal OCI bundle (read-only root with the merged-/usr links, /usr bound read-only, gVisor's
// /proc; the same platform, --network none, --ignore-cgroups), measured interleaved so that
// machine noise hits both alike. Reports medians, p90 and the ratio (target: at most 1.1x).
//
// usage: gvisor_bench [ROUNDS]   (default 30; needs root and runsc)
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

extern char** environ;

namespace {

double NowUs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

// Runs argv to completion with stdio on /dev/null; returns microseconds, or -1 when it failed.
double TimeOnce(const std::vector<std::string>& argv) {
  std::vector<char*> a;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  double t0 = NowUs();
  pid_t pid = -1;
  int rc = posix_spawn(&pid, a[0], &fa, nullptr, a.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  double t1 = NowUs();
  return (WIFEXITED(status) && WEXITSTATUS(status) == 0) ? t1 - t0 : -1;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

// The platform warden chose (its record), so that bare runsc runs on the same one.
std::string WardenPlatform() {
  const std::string json = "/run/warden-gvisor-bench.json";
  std::string cmd = std::string(WARDEN_BIN) + " run --backend gvisor --json " + json + " -- /bin/true >/dev/null 2>&1";
  if (system(cmd.c_str()) != 0) return "";
  std::ifstream in(json);
  auto record = nlohmann::json::parse(in, nullptr, false);
  unlink(json.c_str());
  return record.is_object() && record.contains("platform") ? record["platform"].get<std::string>() : "";
}

bool WriteMinimalBundle(const std::string& dir) {
  std::string rootfs = dir + "/rootfs";
  mkdir(dir.c_str(), 0755);
  mkdir(rootfs.c_str(), 0755);
  for (const char* d : {"/usr", "/proc", "/tmp"}) mkdir((rootfs + d).c_str(), 0755);
  for (const char* l : {"bin", "lib", "lib64", "sbin"}) symlink((std::string("usr/") + l).c_str(), (rootfs + "/" + l).c_str());
  nlohmann::json config = {
      {"ociVersion", "1.0.2"},
      {"process", {{"args", {"/bin/true"}}, {"cwd", "/"}, {"env", {"PATH=/usr/bin:/bin"}}, {"user", {{"uid", 65534}, {"gid", 65534}}}}},
      {"root", {{"path", "rootfs"}, {"readonly", true}}},
      {"mounts", {{{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}},
                  {{"destination", "/usr"}, {"type", "bind"}, {"source", "/usr"}, {"options", {"rbind", "ro"}}}}},
      {"linux", {{"namespaces", {{{"type", "pid"}}, {{"type", "network"}}, {{"type", "ipc"}}, {{"type", "uts"}}, {{"type", "mount"}}}}}},
  };
  std::ofstream out(dir + "/config.json");
  out << config.dump();
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 30;
  const std::string runsc = access("/usr/bin/runsc", X_OK) == 0 ? "/usr/bin/runsc" : "/usr/sbin/runsc";
  if (geteuid() != 0 || access(runsc.c_str(), X_OK) != 0) {
    std::printf("gvisor_bench: skipped (needs root and runsc)\n");
    return 0;
  }
  const std::string platform = WardenPlatform();
  if (platform.empty()) {
    std::printf("gvisor_bench: warden run --backend gvisor failed; nothing to compare\n");
    return 1;
  }
  char tmpl[] = "/run/gvisor-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string dir = tmpl;
  if (!WriteMinimalBundle(dir + "/bundle")) return 1;
  const std::vector<std::string> bare = {runsc, "--root", dir + "/state", "--platform", platform, "--network", "none",
                                         "--ignore-cgroups", "run", "--bundle", dir + "/bundle", "bench"};
  const std::vector<std::string> warden = {WARDEN_BIN, "run", "--backend", "gvisor", "--", "/bin/true"};
  std::vector<double> t_bare, t_warden;
  TimeOnce(bare);  // warm the page cache for both
  TimeOnce(warden);
  int failures = 0;
  for (int i = 0; i < rounds; ++i) {
    double b = TimeOnce(bare), w = TimeOnce(warden);
    if (b < 0 || w < 0) {
      ++failures;
      continue;
    }
    t_bare.push_back(b / 1000);
    t_warden.push_back(w / 1000);
  }
  std::string cleanup = "rm -rf " + dir;
  (void)!system(cleanup.c_str());
  if (t_bare.empty()) {
    std::printf("gvisor_bench: every round failed\n");
    return 1;
  }
  std::printf("platform %s, %zu rounds (%d failed)\n", platform.c_str(), t_bare.size(), failures);
  std::printf("| launcher | /bin/true median (ms) | p90 (ms) |\n|---|---|---|\n");
  std::printf("| bare runsc | %.1f | %.1f |\n", Percentile(t_bare, 0.5), Percentile(t_bare, 0.9));
  std::printf("| warden --backend gvisor | %.1f | %.1f |\n", Percentile(t_warden, 0.5), Percentile(t_warden, 0.9));
  std::printf("| **warden / bare runsc** | **%.2f** | |\n", Percentile(t_warden, 0.5) / Percentile(t_bare, 0.5));
  return 0;
}
