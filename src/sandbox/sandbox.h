// The sandbox runtime's entry point: run one command in a fresh native sandbox and wait for it.
// The contract (options, exit statuses, result record) is `warden run`'s: ARCHITECTURE.md
// section 4 and docs/sandbox.md.
#pragma once

#include "sandbox/net.h"
#include "sandbox/options.h"
#include "sandbox/result.h"

namespace warden::sandbox {

// Where the command's standard streams come from and go to. Output is streamed as it arrives,
// cut at options.output_limit_bytes per stream.
struct Io {
  int stdin_fd = 0;
  int stdout_fd = 1;
  int stderr_fd = 2;
};

// Runs options.argv in a fresh sandbox and waits for it and everything it started. Never throws.
// A failure to build the sandbox is reported as reason kSetupError with exit_code 125 and an
// error naming the step and the errno; nothing of the sandbox outlives this call.
// Call it from a single-threaded process: the sandbox's init is a raw clone of the caller and
// allocates memory, and a lock held by another thread at that moment would never be released in
// the clone. (`warden run` starts its proxy thread only after the clone; the gateway will launch
// sandboxes from a single-threaded launcher process.)
// `network` (not owned) connects a `--net proxy` sandbox to the egress proxy; it is required
// exactly when options.net is kProxy.
RunResult Run(const Options& options, const Io& io = {}, NetworkProvider* network = nullptr);

}  // namespace warden::sandbox
