#include "sandbox/microvm_egress.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "sandbox/microvm_init/egress_wire.h"

namespace warden::sandbox::microvm {
namespace {

// Buffered bytes per direction beyond which the side that produces them is no longer read.
constexpr size_t kBufferLimit = 256 * 1024;

void AppendFrame(std::string* out, char type, const char* data, size_t n) {
  char header[wire::kHeaderBytes];
  wire::AppendHeader(header, type, n);
  out->append(header, sizeof(header));
  out->append(data, n);
}

}  // namespace

// One egress port: at most one guest connection at a time, and its connection to the proxy.
struct EgressBridge::Stream {
  UniqueFd port;
  UniqueFd proxy;
  bool open = false;          // between the guest's kOpen and both kEnds
  bool connecting = false;    // non-blocking connect to the proxy in progress
  bool guest_ended = false;   // the guest sent kEnd
  bool proxy_ended = false;   // kEnd queued for the guest (the proxy closed, or could not be reached)
  bool proxy_shut = false;    // the guest's end passed on as shutdown(SHUT_WR)
  bool proxy_broken = false;  // writes to the proxy failed: the guest's further bytes are dropped
  std::string from_port, to_proxy, to_port;
};

Result<std::unique_ptr<EgressBridge>> EgressBridge::Create(NetworkProvider* network) {
  std::vector<uint16_t> ports = network->AllowedTcpPorts();
  if (ports.empty()) return Status::Error("the egress provider names no proxy port");
  // unshare(CLONE_NEWNET) changes the calling thread only: a short-lived thread makes the
  // namespace and the provider's sockets in it, and hands back a descriptor of the namespace.
  Status st = Status::Ok();
  UniqueFd netns;
  std::vector<UniqueFd> sockets;
  std::thread maker([&] {
    if (unshare(CLONE_NEWNET) != 0) {
      st = Status::FromErrno("create a private network namespace for the proxy listener (needs root)", errno);
      return;
    }
    netns.reset(open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    if (!netns.valid()) {
      st = Status::FromErrno("open the proxy listener's network namespace", errno);
      return;
    }
    st = net::LoopbackUp();
    for (const net::LoopbackSocket& s : network->Sockets()) {
      if (!st.ok()) break;
      auto fd = net::OpenLoopback(s);
      if (fd) sockets.push_back(std::move(*fd));
      else st = fd.status();
    }
  });
  maker.join();
  if (!st.ok()) return st;
  WARDEN_RETURN_IF_ERROR(network->Start(std::move(sockets)));
  return std::unique_ptr<EgressBridge>(new EgressBridge(std::move(netns), ports[0]));
}

EgressBridge::EgressBridge(UniqueFd netns, uint16_t proxy_port) : netns_(std::move(netns)), proxy_port_(proxy_port) {}
EgressBridge::~EgressBridge() = default;

void EgressBridge::AddPort(UniqueFd host_end) {
  fcntl(host_end.get(), F_SETFL, O_NONBLOCK);
  auto s = std::make_unique<Stream>();
  s->port = std::move(host_end);
  streams_.push_back(std::move(s));
}

// A socket made in the listener's namespace (a socket keeps the namespace it was made in), then
// connected from this thread's own namespace, as native's supervisor makes its listener.
Result<UniqueFd> EgressBridge::ConnectToProxy() {
  UniqueFd own(open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!own.valid()) return Status::FromErrno("open own network namespace", errno);
  if (setns(netns_.get(), CLONE_NEWNET) != 0) return Status::FromErrno("enter the proxy's network namespace", errno);
  UniqueFd s(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  int socket_errno = errno;
  if (setns(own.get(), CLONE_NEWNET) != 0) {
    // Staying in the other namespace would be worse than dying: nothing after this is safe.
    std::perror("warden: return to own network namespace");
    std::abort();
  }
  if (!s.valid()) return Status::FromErrno("socket", socket_errno);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(proxy_port_);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 && errno != EINPROGRESS) {
    return Status::FromErrno("connect to the egress proxy", errno);
  }
  return s;
}

void EgressBridge::StartConnection(Stream& s) {
  if (s.open) {
    // A new connection before the last one ended on both sides: the guest broke the protocol;
    // the old connection is dropped.
    s.proxy.reset();
    s.to_proxy.clear();
  }
  s.open = true;
  s.guest_ended = s.proxy_ended = s.proxy_shut = s.proxy_broken = false;
  ++connections_;
  auto c = ConnectToProxy();
  if (!c.ok()) {
    s.proxy_ended = s.proxy_broken = true;
    AppendFrame(&s.to_port, wire::kEnd, nullptr, 0);
    return;
  }
  s.proxy = std::move(*c);
  s.connecting = true;
}

void EgressBridge::ParseFromGuest(Stream& s) {
  size_t pos = 0;
  while (s.from_port.size() - pos >= wire::kHeaderBytes) {
    const char* h = s.from_port.data() + pos;
    size_t len = wire::PayloadLength(h);
    if (s.from_port.size() - pos < wire::kHeaderBytes + len) break;
    const char* payload = h + wire::kHeaderBytes;
    if (h[0] == wire::kOpen) {
      StartConnection(s);
    } else if (h[0] == wire::kData) {
      if (s.open && !s.guest_ended && !s.proxy_broken) s.to_proxy.append(payload, len);
    } else if (h[0] == wire::kEnd) {
      if (s.open) s.guest_ended = true;
    } else {
      // Not our protocol: this port carries nothing more.
      s.port.reset();
      s.proxy.reset();
      s.open = false;
      return;
    }
    pos += wire::kHeaderBytes + len;
  }
  s.from_port.erase(0, pos);
}

void EgressBridge::FinishIfDone(Stream& s) {
  if (!s.open) return;
  if (s.guest_ended && s.to_proxy.empty() && !s.proxy_shut && s.proxy.valid() && !s.connecting) {
    shutdown(s.proxy.get(), SHUT_WR);
    s.proxy_shut = true;
  }
  if (s.guest_ended && s.proxy_ended) {
    s.proxy.reset();
    s.to_proxy.clear();
    s.open = s.connecting = false;
  }
}

void EgressBridge::OnPort(Stream& s, short revents) {
  if (revents & POLLOUT) {
    ssize_t w = send(s.port.get(), s.to_port.data(), s.to_port.size(), MSG_NOSIGNAL);
    if (w > 0) s.to_port.erase(0, w);
    else if (w < 0 && errno != EAGAIN && errno != EINTR) revents |= POLLHUP;
  }
  if (revents & (POLLIN | POLLHUP | POLLERR)) {
    char buf[65536];
    ssize_t r = read(s.port.get(), buf, sizeof(buf));
    if (r > 0) {
      s.from_port.append(buf, r);
      ParseFromGuest(s);
    } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
      // QEMU is gone: so is the guest's side of every connection on this port.
      s.port.reset();
      s.proxy.reset();
      s.open = false;
    }
  }
}

void EgressBridge::OnProxy(Stream& s, short revents) {
  if (s.connecting && (revents & (POLLOUT | POLLERR | POLLHUP))) {
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(s.proxy.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    s.connecting = false;
    if (err != 0) {
      s.proxy_broken = s.proxy_ended = true;
      s.to_proxy.clear();
      s.proxy.reset();
      AppendFrame(&s.to_port, wire::kEnd, nullptr, 0);
      return;
    }
  }
  if (!s.connecting && !s.to_proxy.empty() && (revents & (POLLOUT | POLLERR | POLLHUP))) {
    ssize_t w = send(s.proxy.get(), s.to_proxy.data(), s.to_proxy.size(), MSG_NOSIGNAL);
    if (w > 0) s.to_proxy.erase(0, w);
    else if (w < 0 && errno != EAGAIN && errno != EINTR) {
      s.proxy_broken = true;
      s.to_proxy.clear();
    }
  }
  if (!s.proxy_ended && (revents & (POLLIN | POLLHUP | POLLERR))) {
    char buf[wire::kMaxPayload];
    ssize_t r = recv(s.proxy.get(), buf, sizeof(buf), 0);
    if (r > 0) {
      AppendFrame(&s.to_port, wire::kData, buf, r);
    } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
      s.proxy_ended = true;
      AppendFrame(&s.to_port, wire::kEnd, nullptr, 0);
    }
  }
}

void EgressBridge::AddToPoll(std::vector<pollfd>* fds) {
  poll_first_ = fds->size();
  for (auto& sp : streams_) {
    Stream& s = *sp;
    pollfd port = {-1, 0, 0}, proxy = {-1, 0, 0};
    if (s.port.valid()) {
      port.fd = s.port.get();
      if (s.to_proxy.size() < kBufferLimit) port.events |= POLLIN;
      if (!s.to_port.empty()) port.events |= POLLOUT;
      if (port.events == 0) port.fd = -1;  // nothing wanted: a hang-up must not spin the loop
    }
    if (s.proxy.valid()) {
      proxy.fd = s.proxy.get();
      if (!s.proxy_ended && s.to_port.size() < kBufferLimit) proxy.events |= POLLIN;
      if (s.connecting || !s.to_proxy.empty()) proxy.events |= POLLOUT;
      if (proxy.events == 0) proxy.fd = -1;
    }
    fds->push_back(port);
    fds->push_back(proxy);
  }
}

void EgressBridge::OnPoll(const std::vector<pollfd>& fds) {
  for (size_t i = 0; i < streams_.size(); ++i) {
    Stream& s = *streams_[i];
    const pollfd& port = fds[poll_first_ + 2 * i];
    const pollfd& proxy = fds[poll_first_ + 2 * i + 1];
    if (proxy.fd >= 0 && proxy.revents && s.proxy.valid() && proxy.fd == s.proxy.get()) OnProxy(s, proxy.revents);
    if (port.fd >= 0 && port.revents && s.port.valid()) OnPort(s, port.revents);
    FinishIfDone(s);
  }
}

}  // namespace warden::sandbox::microvm
