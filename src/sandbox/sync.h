// Parent <-> sandbox-init messages over a SOCK_SEQPACKET socketpair (close-on-exec). Each message
// is one type byte plus a small payload, and may carry one file descriptor (SCM_RIGHTS).
#pragma once

#include <string>

#include "common/status.h"

namespace warden::sandbox::sync {

enum Type : char {
  kGo = 'G',          // parent -> child: ids are mapped, cgroups joined; build the sandbox
  kSetupError = 'S',  // child -> parent: text naming the failed step; the child exits 125
  kNote = 'N',        // child -> parent: text for the result's notes
  kLandlock = 'L',    // child -> parent: Landlock ABI applied (payload: decimal text)
  kNotifyFd = 'F',    // child -> parent: the seccomp listener (fd attached)
  kExecError = 'E',   // command -> parent: execve failed (payload: errno as decimal text)
  kExit = 'X',        // child -> parent: "WAIT_STATUS CPU_US MAXRSS_KB" (decimal), once all is reaped
  kReady = 'R',       // pooled child -> pool server: built and locked down, waiting for a claim
};

struct Message {
  Type type = kGo;
  std::string payload;
  int fd = -1;  // received descriptor, owned by the receiver
};

// Both return an error only when the peer is gone or the socket failed.
Status Send(int sock, Type type, const std::string& payload = "", int fd = -1);
Result<Message> Receive(int sock);

}  // namespace warden::sandbox::sync
