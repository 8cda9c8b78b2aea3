// The host's side of a microVM's egress (docs/backends.md, "microvm", Network). The guest has no
// network device; its connections to 127.0.0.1:3128 arrive framed on virtio-console ports
// (microvm_init/egress_wire.h) and are carried here to warden's egress proxy, whose listener lives
// in a private network namespace of its own (nothing else on the host can reach it).
#pragma once

#include <poll.h>

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "sandbox/net.h"

namespace warden::sandbox::microvm {

class EgressBridge {
 public:
  // Creates a private network namespace (needs CAP_SYS_ADMIN: warden as root), lets `network`
  // create its listener there and starts it. `network` must outlive the bridge. Error: the
  // namespace or the provider's setup failed (the message names the step).
  static Result<std::unique_ptr<EgressBridge>> Create(NetworkProvider* network);
  ~EgressBridge();

  // The host end of one egress port (a socket connected to QEMU's chardev). Takes ownership.
  void AddPort(UniqueFd host_end);

  // One round of the supervisor's poll loop: AddToPoll appends this bridge's descriptors to
  // `fds` (remembering where), OnPoll handles what poll reported for them.
  void AddToPoll(std::vector<pollfd>* fds);
  void OnPoll(const std::vector<pollfd>& fds);

  // Connections carried so far (for the record's notes).
  uint64_t connections() const { return connections_; }

 private:
  struct Stream;
  EgressBridge(UniqueFd netns, uint16_t proxy_port);
  Result<UniqueFd> ConnectToProxy();
  void ParseFromGuest(Stream& s);
  void StartConnection(Stream& s);
  void FinishIfDone(Stream& s);
  void OnPort(Stream& s, short revents);
  void OnProxy(Stream& s, short revents);

  UniqueFd netns_;  // the proxy listener's namespace
  uint16_t proxy_port_;
  std::vector<std::unique_ptr<Stream>> streams_;
  size_t poll_first_ = 0;
  uint64_t connections_ = 0;
};

}  // namespace warden::sandbox::microvm
