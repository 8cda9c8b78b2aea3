// The isolation backends behind sandbox::Run: native (namespaces + seccomp + Landlock, subproc.cc)
// and the stronger tiers chosen with Options::backend ("gvisor": gVisor's runsc, gvisor.cc;
// "microvm": a QEMU microvm with its own kernel, microvm.cc). Each honours the same contract as
// native: options, exit statuses, output caps and result record (docs/sandbox.md, docs/backends.md);
// what a backend cannot express is refused as a setup error (exit 125) naming the option.
#pragma once

#include "sandbox/sandbox.h"

namespace warden::sandbox {

RunResult RunNative(const Options& options, const Io& io, NetworkProvider* network);
RunResult RunGvisor(const Options& options, const Io& io, NetworkProvider* network);
RunResult RunMicrovm(const Options& options, const Io& io, NetworkProvider* network);

}  // namespace warden::sandbox
