// Host-side plumbing every backend's supervisor shares (native subproc.cc, gvisor.cc, the pool
// client): the signals that end a run, writing output through, how the command's stdin is handed
// over, and the clean environment.
#pragma once

#include <signal.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "sandbox/options.h"

namespace warden::sandbox {

// SIGINT, SIGTERM, SIGHUP, SIGQUIT: what warden turns into ending the sandbox.
sigset_t TerminationSignals();

// Writes all of `data` to `fd`, waiting when it is non-blocking. Output that cannot be delivered
// (a closed reader) is dropped: the command must not die because our caller stopped reading.
void WriteAll(int fd, const char* data, size_t len);

// The sandbox's stdin: handed over directly when it can only be read (a pipe, a read-only file),
// a file open for writing is reopened read-only, anything else (a terminal, a socket) is relayed
// through a pipe: it must never be reachable from inside.
struct StdinPlan {
  UniqueFd child_end;  // what the command gets as fd 0
  UniqueFd relay_in;   // host side to read from (borrowed fd dup), when relaying
  UniqueFd relay_out;  // pipe write end, when relaying
};
Result<StdinPlan> PlanStdin(int fd);

// Moves what the relay's input has to the command's stdin pipe, blocking on the pipe (a command
// reading slowly throttles our reading). Returns false, with both ends closed (EOF for the
// command) and the input taken out of `epoll_fd` when given, once the relay is over: its input
// ended, or the command closed its stdin (the rest is dropped).
bool RelayStdin(StdinPlan& in, int epoll_fd = -1);

// One of the command's output streams as the host reads it: the read end of its pipe, where it
// goes, and how much got through.
struct OutputStream {
  UniqueFd fd;
  int out = -1;
  uint64_t delivered = 0;
  bool truncated = false;
  bool open = true;
};

// Reads what `s.fd` has and writes it through to `s.out`, cut at `limit` bytes in all (0: no
// cut); past the cut, output is read and dropped. Returns false at end of file (or a read error):
// the stream is over. Sets *limit_hit when this read reached the cut.
bool PumpOutput(OutputStream& s, uint64_t limit, bool* limit_hit);

// The clean environment every backend starts a command with: PATH, HOME=/tmp, LANG=C.UTF-8,
// USER=sandbox and TERM (`term` when it is not empty, else "dumb"). Nothing of warden's own
// environment but TERM, and that only as the caller passes it.
std::map<std::string, std::string> CleanEnv(const std::string& term);

// The clean environment (CleanEnv(term)) plus options.env, as NAME=VALUE; `path` gets the PATH
// used to find the command.
std::vector<std::string> BuildEnv(const Options& options, const std::string& term,
                                  std::string* path);
// The same with warden's own TERM.
std::vector<std::string> BuildEnv(const Options& options, std::string* path);

}  // namespace warden::sandbox
