// Sockets that live in the sandbox's network namespace and serve from outside it (a socket keeps
// the namespace it was made in): what they are, how they are made (by the sandbox's init before it
// drops its capabilities, or by a privileged parent entering the namespace), and the provider
// interface through which the egress proxy plugs in without the sandbox knowing it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace warden::sandbox {

struct RunResult;

namespace net {

// A socket on 127.0.0.1 inside the namespace: TCP listening (SOCK_STREAM) or UDP bound
// (SOCK_DGRAM).
struct LoopbackSocket {
  int type = 0;
  uint16_t port = 0;
};
// Inside a namespace: makes `s` (close-on-exec).
Result<UniqueFd> OpenLoopback(const LoopbackSocket& s);

// Runs `fn` on the calling thread inside the network namespace of process `pid`, then returns the
// thread to its own namespace (always, even when `fn` fails). Requires CAP_SYS_ADMIN over the
// sandbox's user namespace and in the caller's own: root has it, an ordinary user does not (the
// native backend has init make its sockets instead; see ChildSpec::sockets).
Status InNamespaceFromParent(pid_t pid, const std::function<Status()>& fn);

// Inside a namespace: brings loopback up (a new namespace starts with it down).
Status LoopbackUp();
// Inside a namespace: a TCP socket listening on 127.0.0.1:port (close-on-exec).
Result<UniqueFd> ListenLoopbackTcp(uint16_t port);
// Inside a namespace: a UDP socket bound to 127.0.0.1:port (close-on-exec).
Result<UniqueFd> BindLoopbackUdp(uint16_t port);

}  // namespace net

// What a sandbox with `--net proxy` is connected to. The sandbox calls these from its parent
// process, in this order: Environment() and Sockets() before the clone; Start() with the sockets
// of Sockets(), made inside the sandbox's network namespace (loopback up), in that order, before
// the command runs; Finish() after the sandbox has ended.
class NetworkProvider {
 public:
  virtual ~NetworkProvider() = default;
  virtual std::map<std::string, std::string> Environment() const = 0;
  // TCP ports inside the namespace that the command may connect to (Landlock's network rules).
  virtual std::vector<uint16_t> AllowedTcpPorts() const = 0;
  virtual std::vector<net::LoopbackSocket> Sockets() const = 0;
  virtual Status Start(std::vector<UniqueFd> sockets) = 0;
  virtual void Finish(RunResult* result) = 0;
};

namespace net {
// For backends whose parent is privileged over the namespace (gvisor, microvm as root): makes
// `network`'s sockets inside the namespace of `pid` (loopback up) and starts it.
Status StartInNamespaceFromParent(pid_t pid, NetworkProvider& network);
}  // namespace net

}  // namespace warden::sandbox
