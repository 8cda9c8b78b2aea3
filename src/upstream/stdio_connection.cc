// The stdio transport: the server runs as `warden run <sandbox flags> -- command` with three pipes
// as its stdio; newline-delimited JSON-RPC on stdin/stdout, stderr kept as a short tail for error
// messages. One reader thread per connection polls stdout, stderr and a wake-up eventfd; writes are
// serialised under a mutex and never block past Close (non-blocking fd + poll on the eventfd).
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "common/guard.h"
#include "common/unique_fd.h"
#include "sandbox/launcher.h"
#include "upstream/connection.h"
#include "upstream/process_tree.h"
#include "upstream/stderr_tail.h"

namespace warden::upstream {
namespace {

using Clock = std::chrono::steady_clock;

// How long the server may take to exit by itself once its stdin is closed (Stop) and once its
// stdout has ended (it is exiting: `warden run` is writing its record and tearing down).
constexpr int kGraceOnCloseMs = 200;
constexpr int kGraceOnEofMs = 1000;
// How long `warden run` gets to take its sandbox down after SIGTERM before it is killed.
constexpr int kGraceOnTermMs = 1000;
// How long Close waits for the processes that were inside the sandbox to be gone after the kill.
constexpr int kTreeGoneMs = 2000;

int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }
int PidfdSignal(int pidfd, int sig) {
  return static_cast<int>(syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
}

// True when the process behind `pidfd` has exited within `ms`.
bool WaitExited(int pidfd, int ms) {
  struct pollfd p = {pidfd, POLLIN, 0};
  const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    int rc = poll(&p, 1, static_cast<int>(std::max<long>(0, left)));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return false;
  }
}

std::string DescribeStatus(int wstatus) {
  if (WIFEXITED(wstatus)) return "exited with status " + std::to_string(WEXITSTATUS(wstatus));
  if (WIFSIGNALED(wstatus))
    return "killed by signal " + std::to_string(WTERMSIG(wstatus)) + " (" +
           strsignal(WTERMSIG(wstatus)) + ")";
  return "ended (wait status " + std::to_string(wstatus) + ")";
}

// A pipe end for the child, moved above fd 3 (SpawnRun dup2s sources onto 0..3: a source in that
// range could be overwritten before it is used).
Result<UniqueFd> AboveThree(UniqueFd fd) {
  if (fd.get() > 3) return fd;
  int moved = fcntl(fd.get(), F_DUPFD_CLOEXEC, 4);
  if (moved < 0) return Status::FromErrno("fcntl(F_DUPFD_CLOEXEC)", errno);
  return UniqueFd(moved);
}

Status SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return Status::FromErrno("fcntl(O_NONBLOCK)", errno);
  return Status::Ok();
}

class StdioConnection final : public Connection {
 public:
  StdioConnection(const Spec& spec, const ClientOptions& options, ConnectionSink sink,
                  std::map<std::string, std::string> env)
      : spec_(spec), options_(options), sink_(std::move(sink)), env_(std::move(env)) {}
  ~StdioConnection() override { Close(); }

  Status Open(Clock::time_point deadline) override;
  void Send(const mcp::Message& message) override;
  void Close() override;
  int pid() const override { return pid_.load(); }

 private:
  enum class End { kEof, kClosed, kTooBig, kReadError };
  void ReadLoop();
  // Reads what stdout has; returns false (and sets `end`) when the connection is over.
  bool ReadStdout(std::string& partial, End& end);
  void Deliver(std::string_view line);
  // Makes sure the `warden run` process and everything inside it are gone, and reaps it.
  int EndProcess(bool exiting_by_itself);
  void DrainStderr();

  const Spec spec_;
  const ClientOptions options_;
  const ConnectionSink sink_;
  const std::map<std::string, std::string> env_;  // Spec::start_env's, for this process

  std::atomic<pid_t> pid_{0};
  UniqueFd pidfd_;
  UniqueFd from_server_;  // its stdout
  UniqueFd errors_;       // its stderr
  UniqueFd wake_;         // eventfd: readable once Close has begun
  std::mutex write_mu_;   // serialises writes; guards to_server_
  UniqueFd to_server_;    // its stdin
  std::atomic<bool> closing_{false};
  std::mutex close_mu_;
  std::thread reader_;
  StderrTail tail_;  // reader thread only
};

Status StdioConnection::Open(Clock::time_point /*deadline: spawning does not wait*/) {
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0) return Status::FromErrno("pipe for the server's stdin", errno);
  UniqueFd in_child(in[0]), in_ours(in[1]);
  if (pipe2(out, O_CLOEXEC) != 0) return Status::FromErrno("pipe for the server's stdout", errno);
  UniqueFd out_ours(out[0]), out_child(out[1]);
  if (pipe2(err, O_CLOEXEC) != 0) return Status::FromErrno("pipe for the server's stderr", errno);
  UniqueFd err_ours(err[0]), err_child(err[1]);
  auto in_c = AboveThree(std::move(in_child));
  auto out_c = AboveThree(std::move(out_child));
  auto err_c = AboveThree(std::move(err_child));
  if (!in_c) return in_c.status();
  if (!out_c) return out_c.status();
  if (!err_c) return err_c.status();
  for (int fd : {in_ours.get(), out_ours.get(), err_ours.get()})
    WARDEN_RETURN_IF_ERROR(SetNonBlocking(fd));
  wake_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_.valid()) return Status::FromErrno("eventfd", errno);

  sandbox::Options options = spec_.sandbox;
  options.argv = spec_.command;
  // The server lives as long as the gateway: a cap on its total output would kill a healthy server
  // after enough traffic. Each message is bounded by max_message_bytes instead.
  options.output_limit_bytes = 0;
  sandbox::SpawnIo io;
  io.stdin_fd = in_c->get();
  io.stdout_fd = out_c->get();
  io.stderr_fd = err_c->get();
  // Credentials go through `warden run`'s environment, not its argv (/proc/PID/cmdline is
  // world-readable; environ is the owner's alone).
  for (const auto& [name, value] : env_) {
    options.inherit_env.push_back(name);
    options.env.erase(name);
    io.env[name] = value;
  }
  auto pid = sandbox::SpawnRun(options, io);
  if (!pid) return pid.status();
  // The child has its ends now; ours must go, or EOF on stdout would never come.
  *in_c = UniqueFd();
  *out_c = UniqueFd();
  *err_c = UniqueFd();
  pidfd_.reset(PidfdOpen(*pid));
  if (!pidfd_.valid()) {
    const int e = errno;
    kill(*pid, SIGKILL);
    int ws;
    while (waitpid(*pid, &ws, 0) < 0 && errno == EINTR) {
    }
    return Status::FromErrno("pidfd_open", e);
  }
  pid_ = *pid;
  to_server_ = std::move(in_ours);
  from_server_ = std::move(out_ours);
  errors_ = std::move(err_ours);
  reader_ = std::thread([this] {
    RunGuarded("upstream stdio reader", "the connection stops reading", [this] { ReadLoop(); });
  });
  return Status::Ok();
}

void StdioConnection::Send(const mcp::Message& message) {
  if (closing_) return;
  std::string line = mcp::Serialize(message);
  line.push_back('\n');
  // A write to a pipe whose reader is gone raises SIGPIPE, which would kill the gateway: block it
  // on this thread for the write and swallow one that we caused.
  sigset_t pipe_only, old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  sigset_t pending_before;
  sigpending(&pending_before);
  bool broke = false;
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    size_t off = 0;
    while (to_server_.valid() && off < line.size()) {
      ssize_t n = write(to_server_.get(), line.data() + off, line.size() - off);
      if (n > 0) {
        off += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && errno == EAGAIN) {
        // The server is not reading: wait for room or for Close, whichever comes first.
        struct pollfd p[2] = {{to_server_.get(), POLLOUT, 0}, {wake_.get(), POLLIN, 0}};
        if (poll(p, 2, -1) < 0 && errno != EINTR) break;
        if (p[1].revents & POLLIN) break;
      } else {
        broke = (n < 0 && errno == EPIPE);
        break;  // the server is gone: the reader sees EOF and reports the death
      }
    }
  }
  if (broke && !sigismember(&pending_before, SIGPIPE)) {
    struct timespec zero = {0, 0};
    sigtimedwait(&pipe_only, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void StdioConnection::ReadLoop() {
  std::string partial;
  End end = End::kEof;
  struct pollfd fds[3] = {
      {from_server_.get(), POLLIN, 0}, {errors_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
  for (;;) {
    if (poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      end = End::kReadError;
      break;
    }
    if (fds[2].revents & POLLIN) {
      end = End::kClosed;
      break;
    }
    if (fds[1].revents) {
      char buf[4096];
      ssize_t n = read(errors_.get(), buf, sizeof buf);
      if (n > 0)
        tail_.Append(std::string_view(buf, static_cast<size_t>(n)));
      else if (n == 0 || (errno != EINTR && errno != EAGAIN))
        fds[1].fd = -1;  // closed: poll skips it
    }
    if (fds[0].revents && !ReadStdout(partial, end)) break;
  }
  int wstatus = EndProcess(end == End::kEof);
  DrainStderr();
  if (end == End::kClosed || closing_) return;
  std::string detail;
  std::string why;
  std::string last = tail_.LastLine();
  switch (end) {
    case End::kEof:
      why = DescribeStatus(wstatus);
      detail = why.rfind("exited with ", 0) == 0 ? why.substr(std::strlen("exited with ")) : why;
      if (!last.empty()) {
        why += ": " + last;
        detail += ": " + last;
      }
      sink_.on_dead(why, "server exited (" + detail + ")");
      return;
    case End::kTooBig:
      why = "sent a message over " + std::to_string(options_.max_message_bytes) + " bytes; killed";
      sink_.on_dead(why, "server killed (sent a message over " +
                             std::to_string(options_.max_message_bytes) + " bytes)");
      return;
    default:
      why = "reading its stdout failed; killed";
      sink_.on_dead(why, "server killed (" + why + ")");
      return;
  }
}

bool StdioConnection::ReadStdout(std::string& partial, End& end) {
  char buf[65536];
  ssize_t n = read(from_server_.get(), buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n < 0) {
    end = End::kReadError;
    return false;
  }
  if (n == 0) {
    end = End::kEof;  // a last line without a newline is not a whole message: dropped
    return false;
  }
  const size_t scanned = partial.size();
  partial.append(buf, static_cast<size_t>(n));
  size_t start = 0;
  for (size_t nl = partial.find('\n', scanned); nl != std::string::npos;
       nl = partial.find('\n', start)) {
    std::string_view line(partial.data() + start, nl - start);
    if (line.size() > options_.max_message_bytes) {
      end = End::kTooBig;
      return false;
    }
    Deliver(line);
    start = nl + 1;
  }
  partial.erase(0, start);
  if (partial.size() > options_.max_message_bytes) {
    end = End::kTooBig;
    return false;
  }
  return true;
}

void StdioConnection::Deliver(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.find_first_not_of(" \t") == std::string_view::npos) return;
  mcp::ParseOptions parse;
  parse.max_bytes = options_.max_message_bytes;
  parse.allow_batch = true;  // only 2025-03-26 servers send them; harmless to accept from any
  mcp::ParseResult parsed = mcp::Parse(line, parse);
  for (auto& entry : parsed.entries) {
    // A line that is not a JSON-RPC message is dropped: the server broke the stdio rule, but one
    // stray log line should not cost every request in flight.
    if (auto* message = std::get_if<mcp::Message>(&entry)) sink_.on_message(std::move(*message));
  }
}

int StdioConnection::EndProcess(bool exiting_by_itself) {
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    to_server_.reset();  // EOF on its stdin: a well-behaved server exits now
  }
  const pid_t pid = pid_.load();
  int wstatus = 0;
  bool exited = WaitExited(pidfd_.get(), exiting_by_itself ? kGraceOnEofMs : kGraceOnCloseMs);
  if (!exited) {
    // SIGTERM: `warden run` kills its sandbox, reaps the sandbox's init and removes its cgroup.
    PidfdSignal(pidfd_.get(), SIGTERM);
    exited = WaitExited(pidfd_.get(), kGraceOnTermMs);
  }
  if (!exited) {
    // Pin what is inside before the kill so we can wait for exactly those processes.
    std::vector<UniqueFd> inside = PinDescendants(pid);
    PidfdSignal(pidfd_.get(), SIGKILL);
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    // Killing `warden run` ends its init (parent-death signal), and with it the pid namespace.
    const auto deadline = Clock::now() + std::chrono::milliseconds(kTreeGoneMs);
    for (UniqueFd& fd : inside) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (!WaitExited(fd.get(), static_cast<int>(std::max<long>(0, left)))) {
        PidfdSignal(fd.get(), SIGKILL);  // should not happen; make sure anyway
      }
    }
  } else {
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = 0;
  return wstatus;
}

void StdioConnection::DrainStderr() {
  // `warden run` is gone, so stderr ends soon; read what it left (bounded wait).
  const auto deadline = Clock::now() + std::chrono::milliseconds(200);
  struct pollfd p = {errors_.get(), POLLIN, 0};
  while (Clock::now() < deadline) {
    if (poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    ssize_t n = read(errors_.get(), buf, sizeof buf);
    if (n > 0)
      tail_.Append(std::string_view(buf, static_cast<size_t>(n)));
    else if (n == 0 || (errno != EINTR && errno != EAGAIN))
      return;
  }
}

void StdioConnection::Close() {
  std::lock_guard<std::mutex> lock(close_mu_);
  closing_ = true;
  if (wake_.valid()) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_.get(), &one, sizeof one);
  }
  if (reader_.joinable()) reader_.join();
}

}  // namespace

std::unique_ptr<Connection> MakeStdioConnection(const Spec& spec, const ClientOptions& options,
                                                ConnectionSink sink,
                                                std::map<std::string, std::string> env) {
  return std::make_unique<StdioConnection>(spec, options, std::move(sink), std::move(env));
}

}  // namespace warden::upstream
