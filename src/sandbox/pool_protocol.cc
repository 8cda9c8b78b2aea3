#include "sandbox/pool_protocol.h"

#include <sys/socket.h>

#include <cstring>
#include <memory>

#include "sandbox/sync.h"

namespace warden::sandbox::pool {
namespace {

constexpr size_t kMaxFds = 3;

Result<Reason> ReasonFromName(const std::string& name) {
  for (Reason r : {Reason::kExited, Reason::kSignaled, Reason::kTimeout, Reason::kMemory,
                   Reason::kPids, Reason::kCpu, Reason::kOutputLimit, Reason::kSetupError}) {
    if (name == ReasonName(r)) return r;
  }
  return Status::Error("unknown reason '" + name + "'");
}

template <typename T>
Status Field(const nlohmann::json& j, const char* key, T* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  try {
    *out = it->get<T>();
  } catch (const nlohmann::json::exception&) {
    return Status::Error(std::string("pool message: field '") + key + "' has the wrong type");
  }
  return Status::Ok();
}

}  // namespace

Status Send(int sock, const nlohmann::json& body, const std::vector<int>& fds) {
  std::string text = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > kMaxMessage) {
    return Status::Error("pool message of " + std::to_string(text.size()) + " bytes is over the " +
                         std::to_string(kMaxMessage) +
                         "-byte limit (argv and environment too large)");
  }
  if (fds.size() > kMaxFds) return Status::Error("pool message: too many descriptors");
  struct iovec iov = {text.data(), text.size()};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  while (sendmsg(sock, &msg, MSG_NOSIGNAL) < 0) {
    if (errno != EINTR) return Status::FromErrno("send to the pool peer", errno);
  }
  return Status::Ok();
}

Result<Message> Receive(int sock) {
  // Not zeroed: a fresh 160 KiB buffer would cost a page fault per 4 KiB in every receiver (the
  // pooled init's memory is copy-on-write), where a message is usually a few hundred bytes.
  auto buf = std::make_unique_for_overwrite<char[]>(kMaxMessage + 1);
  struct iovec iov = {buf.get(), kMaxMessage + 1};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  while ((n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC)) < 0) {
    if (errno != EINTR) return Status::FromErrno("receive from the pool peer", errno);
  }
  Message m;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      m.fds.emplace_back(fd);
    }
  }
  if (n == 0) return Status::Error("the pool peer closed the connection");
  if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) return Status::Error("pool message truncated");
  m.body = nlohmann::json::parse(buf.get(), buf.get() + n, nullptr, /*allow_exceptions=*/false);
  if (!m.body.is_object()) return Status::Error("pool message is not a JSON object");
  return m;
}

nlohmann::json RunRequest(const Options& o) {
  nlohmann::json binds = nlohmann::json::array();
  for (const Bind& b : o.binds)
    binds.push_back({{"host", b.host}, {"inside", b.inside}, {"writable", b.writable}});
  nlohmann::json accept = nlohmann::json::array();
  if (o.degrade.allow_no_landlock) accept.push_back("landlock");
  if (o.degrade.allow_no_cgroups) accept.push_back("cgroups");
  nlohmann::json j = {{"op", "run"},
                      {"argv", o.argv},
                      {"env", o.env},
                      {"workdir", o.workdir},
                      {"timeout_ms", o.timeout_ms},
                      {"memory_bytes", o.memory_bytes},
                      {"pids", o.pids},
                      {"cpu_ms", o.cpu_ms},
                      {"output_limit_bytes", o.output_limit_bytes},
                      {"tmpfs_bytes", o.tmpfs_bytes},
                      {"file_size_bytes", o.file_size_bytes},
                      {"open_files", o.open_files},
                      {"binds", binds},
                      {"protect", o.protect},
                      {"net", o.net == NetMode::kProxy ? "proxy" : "none"},
                      {"allow", o.allow},
                      {"resolve", o.resolve},
                      {"backend", o.backend},
                      {"hostname", o.hostname},
                      {"accept_missing", accept}};
  if (const char* term = getenv("TERM"); term != nullptr && *term) j["term"] = term;
  return j;
}

Result<Options> OptionsFromRequest(const nlohmann::json& j) {
  Options o;
  std::string net = "none";
  std::vector<nlohmann::json> binds;
  std::vector<std::string> accept;
  for (const Status& st :
       {Field(j, "argv", &o.argv), Field(j, "env", &o.env), Field(j, "workdir", &o.workdir),
        Field(j, "timeout_ms", &o.timeout_ms), Field(j, "memory_bytes", &o.memory_bytes),
        Field(j, "pids", &o.pids), Field(j, "cpu_ms", &o.cpu_ms),
        Field(j, "output_limit_bytes", &o.output_limit_bytes),
        Field(j, "tmpfs_bytes", &o.tmpfs_bytes), Field(j, "file_size_bytes", &o.file_size_bytes),
        Field(j, "open_files", &o.open_files), Field(j, "binds", &binds),
        Field(j, "protect", &o.protect), Field(j, "net", &net), Field(j, "allow", &o.allow),
        Field(j, "resolve", &o.resolve), Field(j, "backend", &o.backend),
        Field(j, "hostname", &o.hostname), Field(j, "accept_missing", &accept)}) {
    if (!st.ok()) return st;
  }
  if (o.argv.empty()) return Status::Error("pool request: no command");
  o.net = net == "proxy" ? NetMode::kProxy : NetMode::kNone;
  for (const auto& b : binds) {
    Bind bind;
    if (!b.is_object()) return Status::Error("pool request: a bind is not an object");
    WARDEN_RETURN_IF_ERROR(Field(b, "host", &bind.host));
    WARDEN_RETURN_IF_ERROR(Field(b, "inside", &bind.inside));
    WARDEN_RETURN_IF_ERROR(Field(b, "writable", &bind.writable));
    o.binds.push_back(bind);
  }
  for (const auto& a : accept) {
    if (a == "landlock") o.degrade.allow_no_landlock = true;
    if (a == "cgroups") o.degrade.allow_no_cgroups = true;
  }
  return o;
}

Result<RunResult> ResultFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return Status::Error("pool result is not an object");
  RunResult r;
  std::string reason = "exited";
  nlohmann::json violations = nlohmann::json::array();
  for (const Status& st :
       {Field(j, "exit_code", &r.exit_code), Field(j, "signal", &r.signal),
        Field(j, "reason", &reason), Field(j, "error", &r.error), Field(j, "wall_ms", &r.wall_ms),
        Field(j, "cpu_ms", &r.cpu_ms), Field(j, "peak_memory_bytes", &r.peak_memory_bytes),
        Field(j, "stdout_truncated", &r.stdout_truncated),
        Field(j, "stderr_truncated", &r.stderr_truncated),
        Field(j, "stdout_bytes", &r.stdout_bytes), Field(j, "stderr_bytes", &r.stderr_bytes),
        Field(j, "violations", &violations), Field(j, "violations_dropped", &r.violations_dropped),
        Field(j, "degraded", &r.degraded), Field(j, "notes", &r.notes),
        Field(j, "backend", &r.backend), Field(j, "cgroup", &r.cgroup),
        Field(j, "landlock_abi", &r.landlock_abi)}) {
    if (!st.ok()) return st;
  }
  auto why = ReasonFromName(reason);
  if (!why) return why.status();
  r.reason = *why;
  for (const auto& v : violations) {
    ViolationRecord rec;
    WARDEN_RETURN_IF_ERROR(Field(v, "syscall", &rec.syscall));
    WARDEN_RETURN_IF_ERROR(Field(v, "errno", &rec.errno_returned));
    WARDEN_RETURN_IF_ERROR(Field(v, "pid", &rec.pid));
    r.violations.push_back(rec);
  }
  return r;
}

nlohmann::json Claim(const contain::ChildSpec& c) {
  return {{"argv", c.argv},
          {"env", c.env},
          {"path", c.path},
          {"workdir", c.workdir},
          {"file_size_bytes", c.limits.file_size_bytes},
          {"open_files", c.limits.open_files},
          {"cpu_seconds", c.limits.cpu_seconds}};
}

Status ReceiveClaimFromChild(contain::ChildSpec* spec) {
  auto m = Receive(spec->sync_fd);
  if (!m) return m.status();
  if (m->fds.size() != 3)
    return Status::Error("pool claim without the command's three standard streams");
  const nlohmann::json& j = m->body;
  for (const Status& st : {Field(j, "argv", &spec->argv), Field(j, "env", &spec->env),
                           Field(j, "path", &spec->path), Field(j, "workdir", &spec->workdir),
                           Field(j, "file_size_bytes", &spec->limits.file_size_bytes),
                           Field(j, "open_files", &spec->limits.open_files),
                           Field(j, "cpu_seconds", &spec->limits.cpu_seconds)}) {
    if (!st.ok()) return st;
  }
  if (spec->argv.empty()) return Status::Error("pool claim without a command");
  spec->stdin_fd = m->fds[0].release();
  spec->stdout_fd = m->fds[1].release();
  spec->stderr_fd = m->fds[2].release();
  return Status::Ok();
}

}  // namespace warden::sandbox::pool
