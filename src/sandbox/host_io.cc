#include "sandbox/host_io.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <map>

namespace warden::sandbox {

sigset_t TerminationSignals() {
  sigset_t sigs;
  sigemptyset(&sigs);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&sigs, s);
  return sigs;
}

void WriteAll(int fd, const char* data, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, data, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        struct pollfd p = {fd, POLLOUT, 0};
        poll(&p, 1, 1000);
        continue;
      }
      return;
    }
    data += n;
    len -= static_cast<size_t>(n);
  }
}

Result<StdinPlan> PlanStdin(int fd) {
  StdinPlan plan;
  struct stat st;
  int flags = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
  if (fd < 0 || fstat(fd, &st) != 0 || flags < 0) {
    plan.child_end.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
    return plan;
  }
  bool read_only = (flags & O_ACCMODE) == O_RDONLY;
  if ((S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode)) && read_only) {
    plan.child_end.reset(fcntl(fd, F_DUPFD_CLOEXEC, 3));
    return plan;
  }
  if (S_ISREG(st.st_mode) || (S_ISCHR(st.st_mode) && !isatty(fd))) {
    off_t offset = lseek(fd, 0, SEEK_CUR);
    std::string self = "/proc/self/fd/" + std::to_string(fd);
    plan.child_end.reset(open(self.c_str(), O_RDONLY | O_CLOEXEC));
    if (!plan.child_end.valid()) return Status::FromErrno("reopen stdin read-only", errno);
    if (offset > 0) lseek(plan.child_end.get(), offset, SEEK_SET);
    return plan;
  }
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return Status::FromErrno("pipe for stdin", errno);
  plan.child_end.reset(p[0]);
  plan.relay_out.reset(p[1]);
  plan.relay_in.reset(fcntl(fd, F_DUPFD_CLOEXEC, 3));
  return plan;
}

std::map<std::string, std::string> CleanEnv(const std::string& term) {
  return {{"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
          {"HOME", "/tmp"},
          {"LANG", "C.UTF-8"},
          {"USER", "sandbox"},
          {"TERM", term.empty() ? "dumb" : term}};
}

std::vector<std::string> BuildEnv(const Options& o, std::string* path) {
  const char* term = getenv("TERM");
  return BuildEnv(o, term != nullptr ? term : "", path);
}

std::vector<std::string> BuildEnv(const Options& o, const std::string& term, std::string* path) {
  std::map<std::string, std::string> env = CleanEnv(term);
  for (const auto& [k, v] : o.env) env[k] = v;
  *path = env["PATH"];
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

bool RelayStdin(StdinPlan& in, int epoll_fd) {
  char buf[65536];
  ssize_t n = read(in.relay_in.get(), buf, sizeof(buf));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n > 0) {
    const char* p = buf;
    size_t left = static_cast<size_t>(n);
    while (left > 0) {
      ssize_t w = write(in.relay_out.get(), p, left);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;  // the command closed its stdin
      p += w;
      left -= static_cast<size_t>(w);
    }
    if (left == 0) return true;
  }
  // Out of the epoll set before the close: relay_in is a dup, and an epoll registration lives
  // as long as any descriptor of the file does.
  if (epoll_fd >= 0) epoll_ctl(epoll_fd, EPOLL_CTL_DEL, in.relay_in.get(), nullptr);
  in.relay_in.reset();
  in.relay_out.reset();
  return false;
}

bool PumpOutput(OutputStream& s, uint64_t limit, bool* limit_hit) {
  char buf[65536];
  ssize_t n = read(s.fd.get(), buf, sizeof(buf));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) return false;
  size_t len = static_cast<size_t>(n);
  if (limit && s.delivered + len > limit) {
    len = static_cast<size_t>(limit - s.delivered);
    s.truncated = true;
    *limit_hit = true;
  }
  if (len > 0) WriteAll(s.out, buf, len);
  s.delivered += len;
  return true;
}

}  // namespace warden::sandbox
