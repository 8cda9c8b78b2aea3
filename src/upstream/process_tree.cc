#include "upstream/process_tree.h"

#include <dirent.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "common/read_file.h"

namespace warden::upstream {

std::optional<pid_t> ParentFromStat(const std::string& stat) {
  const size_t paren = stat.rfind(')');  // the command name may contain spaces and ')'
  if (paren == std::string::npos) return std::nullopt;
  // ") S PPID ..."
  size_t at = paren + 1;
  while (at < stat.size() && stat[at] == ' ') ++at;
  while (at < stat.size() && stat[at] != ' ') ++at;  // the state
  while (at < stat.size() && stat[at] == ' ') ++at;
  const char* begin = stat.c_str() + at;
  char* end = nullptr;
  errno = 0;
  const long ppid = std::strtol(begin, &end, 10);
  if (end == begin || errno != 0 || ppid < 0) return std::nullopt;
  return static_cast<pid_t>(ppid);
}

std::multimap<pid_t, pid_t> ProcChildren() {
  std::multimap<pid_t, pid_t> children;  // parent -> child
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return children;
  while (struct dirent* e = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    // A process that exits between readdir and here: open fails (ENOENT), or read does (ESRCH,
    // once it is reaped). Either way it is no longer a process to pin.
    auto text = ReadFileUpTo("/proc/" + std::string(e->d_name) + "/stat", 4096);
    if (!text.ok()) continue;
    if (auto ppid = ParentFromStat(*text)) children.emplace(*ppid, static_cast<pid_t>(pid));
  }
  closedir(proc);
  return children;
}

std::vector<UniqueFd> PinDescendants(pid_t root) {
  const std::multimap<pid_t, pid_t> children = ProcChildren();
  std::vector<UniqueFd> pinned;
  std::vector<pid_t> todo = {root};
  while (!todo.empty()) {
    const pid_t parent = todo.back();
    todo.pop_back();
    auto [first, last] = children.equal_range(parent);
    for (auto it = first; it != last; ++it) {
      todo.push_back(it->second);
      UniqueFd fd(static_cast<int>(syscall(SYS_pidfd_open, it->second, 0)));
      if (fd.valid()) pinned.push_back(std::move(fd));
    }
  }
  return pinned;
}

}  // namespace warden::upstream
