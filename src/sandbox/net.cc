#include "sandbox/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace warden::sandbox::net {
namespace {

Result<UniqueFd> BoundLoopback(int type, uint16_t port) {
  UniqueFd s(socket(AF_INET, type | SOCK_CLOEXEC, 0));
  if (!s.valid()) return Status::FromErrno("socket", errno);
  int one = 1;
  setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  struct sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(s.get(), reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Status::FromErrno("bind 127.0.0.1:" + std::to_string(port), errno);
  }
  return s;
}

}  // namespace

Status InNamespaceFromParent(pid_t pid, const std::function<Status()>& fn) {
  UniqueFd own(open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!own.valid()) return Status::FromErrno("open own network namespace", errno);
  std::string path = "/proc/" + std::to_string(pid) + "/ns/net";
  UniqueFd target(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!target.valid()) return Status::FromErrno("open " + path, errno);
  if (setns(target.get(), CLONE_NEWNET) != 0) return Status::FromErrno("enter the sandbox's network namespace", errno);
  Status st = fn();
  if (setns(own.get(), CLONE_NEWNET) != 0) {
    // Staying in the sandbox's namespace would be worse than dying: nothing after this is safe.
    std::perror("warden: return to own network namespace");
    std::abort();
  }
  return st;
}

Status LoopbackUp() {
  UniqueFd sock(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock.valid()) return Status::FromErrno("socket for loopback", errno);
  struct ifreq ifr = {};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (ioctl(sock.get(), SIOCGIFFLAGS, &ifr) != 0) return Status::FromErrno("read loopback flags", errno);
  if (ifr.ifr_flags & IFF_UP) return Status::Ok();
  ifr.ifr_flags |= IFF_UP;
  if (ioctl(sock.get(), SIOCSIFFLAGS, &ifr) != 0) return Status::FromErrno("bring loopback up", errno);
  return Status::Ok();
}

Result<UniqueFd> ListenLoopbackTcp(uint16_t port) {
  auto s = BoundLoopback(SOCK_STREAM, port);
  if (!s) return s;
  if (listen(s->get(), 128) != 0) return Status::FromErrno("listen on 127.0.0.1:" + std::to_string(port), errno);
  return s;
}

Result<UniqueFd> BindLoopbackUdp(uint16_t port) { return BoundLoopback(SOCK_DGRAM, port); }

Result<UniqueFd> OpenLoopback(const LoopbackSocket& s) {
  if (s.type == SOCK_STREAM) return ListenLoopbackTcp(s.port);
  if (s.type == SOCK_DGRAM) return BindLoopbackUdp(s.port);
  return Status::Error("loopback socket of unknown type " + std::to_string(s.type));
}

Status StartInNamespaceFromParent(pid_t pid, NetworkProvider& network) {
  std::vector<UniqueFd> sockets;
  WARDEN_RETURN_IF_ERROR(InNamespaceFromParent(pid, [&]() -> Status {
    WARDEN_RETURN_IF_ERROR(LoopbackUp());
    for (const LoopbackSocket& s : network.Sockets()) {
      auto fd = OpenLoopback(s);
      if (!fd) return fd.status();
      sockets.push_back(std::move(*fd));
    }
    return Status::Ok();
  }));
  return network.Start(std::move(sockets));
}

}  // namespace warden::sandbox::net
