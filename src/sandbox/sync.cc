#include "sandbox/sync.h"

#include <sys/socket.h>

#include <cstring>

namespace warden::sandbox::sync {

Status Send(int sock, Type type, const std::string& payload, int fd) {
  std::string buf(1, static_cast<char>(type));
  buf += payload.substr(0, 4000);
  struct iovec iov = {buf.data(), buf.size()};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  while (sendmsg(sock, &msg, MSG_NOSIGNAL) < 0) {
    if (errno != EINTR) return Status::FromErrno("send to sandbox peer", errno);
  }
  return Status::Ok();
}

Result<Message> Receive(int sock) {
  char buf[4096];
  struct iovec iov = {buf, sizeof(buf)};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  while ((n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC)) < 0) {
    if (errno != EINTR) return Status::FromErrno("receive from sandbox peer", errno);
  }
  if (n == 0) return Status::Error("sandbox peer closed the channel");
  Message m;
  m.type = static_cast<Type>(buf[0]);
  m.payload.assign(buf + 1, static_cast<size_t>(n - 1));
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(&m.fd, CMSG_DATA(c), sizeof(int));
  }
  return m;
}

Status Gate::Admit(Type type) {
  auto refuse = [type](const char* why) {
    return Status::Error(std::string("the sandbox's init sent control message '") +
                         static_cast<char>(type) + "' " + why +
                         ": treated as an attack on the supervisor, the sandbox was killed");
  };
  switch (type) {
    case kNote:
    case kLandlock:
    case kSocket:
      if (ready_) return refuse("after the command could start");
      return Status::Ok();
    case kNotifyFd:
      if (ready_) return refuse("after the command could start");
      if (notify_fd_) return refuse("a second time");
      notify_fd_ = true;
      return Status::Ok();
    case kReady:
      if (ready_) return refuse("a second time");
      ready_ = true;
      return Status::Ok();
    case kSetupError:
    case kExecError:
      if (exited_) return refuse("after the command's end");
      return Status::Ok();
    case kExit:
      if (!ready_) return refuse("before the sandbox was locked down");
      if (exited_) return refuse("a second time");
      exited_ = true;
      return Status::Ok();
    case kGo:
      break;
  }
  return refuse("that a sandbox never sends");
}

}  // namespace warden::sandbox::sync
