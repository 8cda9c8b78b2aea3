// The client's half of a pooled run: connect, send the request with the command's stdio, stream
// the output (cut at the output limit) and wait for the result record. It does for a pooled
// sandbox what subproc.cc's Supervisor does with the streams of a cold one.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <optional>

#include "common/clock.h"
#include "common/unique_fd.h"
#include "sandbox/host_io.h"
#include "sandbox/pool.h"
#include "sandbox/pool_protocol.h"

namespace warden::sandbox::pool {
namespace {

RunResult SetupError(const std::string& message) {
  RunResult r;
  r.exit_code = 125;
  r.reason = Reason::kSetupError;
  r.error = message;
  return r;
}

Result<UniqueFd> Connect(const std::string& path) {
  struct sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path))
    return Status::Error("pool socket " + path + ": not a usable socket path");
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  UniqueFd fd(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Status::FromErrno("socket", errno);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Status::FromErrno(
        "pool socket " + path + ": connect (is `warden pool start --socket " + path + "` running?)",
        errno);
  }
  return fd;
}

}  // namespace

RunResult RunPooled(const std::string& socket_path, const Options& options, const Io& io,
                    bool forward_signals, PooledRun* extra) {
  PooledRun none;
  PooledRun& x = extra ? *extra : none;
  x.not_served = false;
  if (options.argv.empty())
    return SetupError(
        "no command given: usage: warden run --pool PATH [OPTIONS] -- COMMAND [ARG...]");
  Options request = options;
  request.binds = NormalizeBinds(options.binds);
  auto conn = Connect(socket_path);
  if (!conn) {
    x.not_served = true;
    return SetupError(conn.status().message());
  }
  auto in = PlanStdin(io.stdin_fd);
  if (!in) return SetupError(in.status().message());
  int po[2], pe[2];
  if (pipe2(po, O_CLOEXEC) != 0)
    return SetupError(Status::FromErrno("pipe for output", errno).message());
  OutputStream out, err;
  out.fd.reset(po[0]);
  UniqueFd child_out(po[1]);
  if (pipe2(pe, O_CLOEXEC) != 0)
    return SetupError(Status::FromErrno("pipe for output", errno).message());
  err.fd.reset(pe[0]);
  UniqueFd child_err(pe[1]);
  out.out = io.stdout_fd;
  err.out = io.stderr_fd;

  sigset_t sigs, old_mask;
  sigemptyset(&sigs);
  UniqueFd sigfd;
  if (forward_signals) {
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&sigs, s);
    sigprocmask(SIG_BLOCK, &sigs, &old_mask);
    sigfd.reset(signalfd(-1, &sigs, SFD_CLOEXEC));
  }
  auto restore = [&] {
    if (forward_signals) sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  };

  nlohmann::json body = RunRequest(request);
  if (x.workspace) body["workspace"] = true;
  Status sent = Send(conn->get(), body,
                     {in->child_end.get(), child_out.get(), child_err.get()});
  in->child_end.reset();
  child_out.reset();
  child_err.reset();
  if (!sent.ok()) {
    restore();
    return SetupError(sent.Wrap("--pool " + socket_path).message());
  }
  auto reply = Receive(conn->get());
  if (!reply) {
    restore();
    return SetupError(reply.status().Wrap("--pool " + socket_path).message());
  }
  if (reply->body.contains("refused")) {
    restore();
    x.not_served = true;
    return SetupError(reply->body.value("refused", "refused by the pool"));
  }
  const uint64_t limit = reply->body.value("output_limit_bytes", options.output_limit_bytes);
  if (x.on_accepted) {
    // A descriptor of its own, so that a late kill never writes to a reused number.
    auto killer = std::make_shared<UniqueFd>(fcntl(conn->get(), F_DUPFD_CLOEXEC, 0));
    x.on_accepted([killer] {
      if (killer->valid()) Send(killer->get(), {{"kill", "signal"}, {"signal", SIGKILL}});
    });
  }

  std::optional<nlohmann::json> record;
  bool out_open = true, err_open = true, conn_open = true, limit_sent = false;
  uint64_t drain_deadline = 0;
  while (out_open || err_open || !record) {
    struct pollfd p[5] = {{out_open ? out.fd.get() : -1, POLLIN, 0},
                          {err_open ? err.fd.get() : -1, POLLIN, 0},
                          {conn_open ? conn->get() : -1, POLLIN, 0},
                          {in->relay_in.valid() ? in->relay_in.get() : -1, POLLIN, 0},
                          {sigfd.valid() ? sigfd.get() : -1, POLLIN, 0}};
    int timeout = -1;
    if (record || !conn_open) {
      if (drain_deadline == 0) drain_deadline = MonotonicMs() + 2000;
      uint64_t now = MonotonicMs();
      if (now >= drain_deadline) break;
      timeout = static_cast<int>(drain_deadline - now);
    }
    if (poll(p, 5, timeout) < 0 && errno != EINTR) break;
    bool limit_hit = false;
    if (p[0].revents) out_open = PumpOutput(out, limit, &limit_hit);
    if (p[1].revents) err_open = PumpOutput(err, limit, &limit_hit);
    if (limit_hit && !limit_sent && !record) {
      limit_sent = true;
      Send(conn->get(), {{"kill", "output_limit"}});
    }
    if (p[2].revents) {
      auto m = Receive(conn->get());
      if (!m) {
        conn_open = false;
      } else if (m->body.contains("result")) {
        record = m->body["result"];
      } else if (m->body.contains("workspace") && x.workspace) {
        // A sandbox is ours and waits: fill its workspace, then let the command start.
        Status st = x.prepare ? x.prepare(m->body.value("workspace", "")) : Status::Ok();
        if (!st.ok()) {
          restore();
          return SetupError(st.Wrap("workspace").message());  // closing ends the sandbox
        }
        Send(conn->get(), {{"op", "start"}});
      }
      if (record) conn_open = false;
    }
    if (p[3].revents) RelayStdin(*in);
    if (p[4].revents) {
      struct signalfd_siginfo si;
      if (read(sigfd.get(), &si, sizeof(si)) == sizeof(si) && conn_open) {
        Send(conn->get(), {{"kill", "signal"}, {"signal", static_cast<int>(si.ssi_signo)}});
      }
    }
  }
  restore();
  if (!record)
    return SetupError("--pool " + socket_path +
                      ": the pool closed the connection before the result (was it stopped?)");
  auto r = ResultFromJson(*record);
  if (!r) return SetupError(r.status().Wrap("--pool " + socket_path).message());
  if (x.workspace && x.finish) x.finish();
  r->stdout_truncated = out.truncated;
  r->stderr_truncated = err.truncated;
  r->stdout_bytes = out.delivered;
  r->stderr_bytes = err.delivered;
  return *r;
}

Result<nlohmann::json> QueryStatus(const std::string& socket_path) {
  auto conn = Connect(socket_path);
  if (!conn) return conn.status();
  WARDEN_RETURN_IF_ERROR(Send(conn->get(), {{"op", "status"}}));
  auto m = Receive(conn->get());
  if (!m) return m.status().Wrap("--socket " + socket_path);
  return m->body;
}

}  // namespace warden::sandbox::pool
