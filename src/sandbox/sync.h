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
  kReady = 'R',       // child -> parent: built and locked down; the command may run from now on
  kSocket = 'K',      // child -> parent: a loopback socket made inside for the parent to serve (fd)
};

struct Message {
  Type type = kGo;
  std::string payload;
  int fd = -1;  // received descriptor, owned by the receiver
};

// Both return an error only when the peer is gone or the socket failed.
Status Send(int sock, Type type, const std::string& payload = "", int fd = -1);
Result<Message> Receive(int sock);

// What a supervisor accepts from a sandbox's init, and when (docs/sandbox.md, "The sync
// channel"). While the sandbox is being built, init alone runs: notes, the Landlock ABI, the
// loopback sockets and the seccomp listener (at most once). kReady ends that phase: from then on
// the command may be running, and code that took over init could speak for it. After kReady
// only the command's launch may report (kSetupError, kExecError from its child before the exec)
// and init its end (kExit, once); anything else is an attack, and the supervisor ends the
// sandbox as a setup error with a note.
class Gate {
 public:
  // Ok, or an error that names the message and says why it cannot be accepted now.
  Status Admit(Type type);
  bool ready() const { return ready_; }

 private:
  bool ready_ = false, notify_fd_ = false, exited_ = false;
};

}  // namespace warden::sandbox::sync
