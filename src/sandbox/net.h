// The sandbox's network namespace from the parent's side: entering it only long enough to create
// sockets that then serve from outside (a socket keeps the namespace it was made in), and the
// provider interface through which the egress proxy plugs in without the sandbox knowing it.
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

// Runs `fn` on the calling thread inside the network namespace of process `pid`, then returns the
// thread to its own namespace (always, even when `fn` fails). Requires privilege over the
// sandbox's user namespace, which its creator has.
Status InNamespaceFromParent(pid_t pid, const std::function<Status()>& fn);

// Inside a namespace: brings loopback up (a new namespace starts with it down).
Status LoopbackUp();
// Inside a namespace: a TCP socket listening on 127.0.0.1:port (close-on-exec).
Result<UniqueFd> ListenLoopbackTcp(uint16_t port);
// Inside a namespace: a UDP socket bound to 127.0.0.1:port (close-on-exec).
Result<UniqueFd> BindLoopbackUdp(uint16_t port);

}  // namespace net

// What a sandbox with `--net proxy` is connected to. The sandbox calls these from its parent
// process, in this order: Environment() before the clone; SetUpInNamespace() with the thread
// inside the new network namespace (loopback up) before the sandbox is built; Start() back
// in warden's own namespace; Finish() after the sandbox has ended.
class NetworkProvider {
 public:
  virtual ~NetworkProvider() = default;
  virtual std::map<std::string, std::string> Environment() const = 0;
  // TCP ports inside the namespace that the command may connect to (Landlock's network rules).
  virtual std::vector<uint16_t> AllowedTcpPorts() const = 0;
  virtual Status SetUpInNamespace() = 0;
  virtual Status Start() = 0;
  virtual void Finish(RunResult* result) = 0;
};

}  // namespace warden::sandbox
