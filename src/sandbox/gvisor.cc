// The gvisor backend (backends.h). Not built yet: refused as a setup error until it is.
#include "sandbox/backends.h"

namespace warden::sandbox {

RunResult RunGvisor(const Options& options, const Io& io, NetworkProvider* network) {
  (void)options;
  (void)io;
  (void)network;
  RunResult r;
  r.backend = "gvisor";
  r.exit_code = 125;
  r.reason = Reason::kSetupError;
  r.error = "--backend gvisor is not available in this build: use --backend native";
  return r;
}

}  // namespace warden::sandbox
