// The microvm backend (backends.h). Not built yet: refused as a setup error until it is.
#include "sandbox/backends.h"

namespace warden::sandbox {

RunResult RunMicrovm(const Options& options, const Io& io, NetworkProvider* network) {
  (void)options;
  (void)io;
  (void)network;
  RunResult r;
  r.backend = "microvm";
  r.exit_code = 125;
  r.reason = Reason::kSetupError;
  r.error = "--backend microvm is not available in this build: use --backend native";
  return r;
}

}  // namespace warden::sandbox
