#include "sandbox/gvisor_platform.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>

namespace warden::sandbox::gvisor {
namespace {

constexpr const char* kCacheDir = "/run/warden";
constexpr const char* kCacheFile = "/run/warden/gvisor-platform";
constexpr int kProbeTimeoutMs = 3000;

std::string CacheKey(const std::string& runsc) {
  struct stat st;
  if (stat(runsc.c_str(), &st) != 0) return "";
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  std::getline(boot, boot_id);
  std::ostringstream key;
  key << runsc << ' ' << st.st_ino << ' ' << st.st_size << ' ' << st.st_mtim.tv_sec << '.' << st.st_mtim.tv_nsec << ' ' << boot_id;
  return key.str();
}

// The cache holds two lines: the key, then "platform<TAB>tried;tried;...".
bool ReadCache(const std::string& key, PlatformChoice* out) {
  std::ifstream in(kCacheFile);
  std::string k, line;
  if (!std::getline(in, k) || k != key || !std::getline(in, line)) return false;
  std::istringstream fields(line);
  std::string platform, tried;
  std::getline(fields, platform, '\t');
  std::getline(fields, tried);
  if (platform.empty()) return false;
  out->platform = platform;
  std::istringstream items(tried);
  for (std::string item; std::getline(items, item, ';');) {
    if (!item.empty()) out->tried.push_back(item);
  }
  out->from_cache = true;
  return true;
}

// Best effort: without a writable /run the next process probes again.
void WriteCache(const std::string& key, const PlatformChoice& c) {
  mkdir(kCacheDir, 0755);
  std::string tmp = std::string(kCacheFile) + "." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return;
    out << key << '\n' << c.platform << '\t';
    for (const auto& t : c.tried) out << t << ';';
    out << '\n';
    if (!out.flush()) {
      unlink(tmp.c_str());
      return;
    }
  }
  if (rename(tmp.c_str(), kCacheFile) != 0) unlink(tmp.c_str());
}

}  // namespace

PlatformChoice ChoosePlatform(const std::string& runsc, const ProbeFn& probe) {
  static std::map<std::string, PlatformChoice> per_process;
  if (auto it = per_process.find(runsc); it != per_process.end()) return it->second;
  const std::string key = CacheKey(runsc);
  PlatformChoice choice;
  if (key.empty() || !ReadCache(key, &choice)) {
    choice = {};
    for (const char* candidate : {"systrap", "kvm", "ptrace"}) {
      if (std::string(candidate) == "kvm") {
        int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
        if (fd < 0) {
          choice.tried.push_back("kvm: /dev/kvm cannot be opened");
          continue;
        }
        close(fd);
      }
      std::string why;
      if (probe(candidate, kProbeTimeoutMs, &why)) {
        choice.platform = candidate;
        break;
      }
      choice.tried.push_back(std::string(candidate) + ": " + why);
    }
    if (!choice.platform.empty() && !key.empty()) WriteCache(key, choice);
  }
  per_process[runsc] = choice;
  return choice;
}

}  // namespace warden::sandbox::gvisor
