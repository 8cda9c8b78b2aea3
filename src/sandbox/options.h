// What a sandbox is asked to be: the plain, immutable description of one `warden run`.
// Filled from the command line and/or a YAML profile (profile.h); validated by Validate().
// Runtime state never lives here.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace warden::sandbox {

struct Bind {
  std::string host;    // path on the host, as given (resolved safely at setup)
  std::string inside;  // absolute path inside the sandbox (default: same as host after resolution)
  bool writable = false;
};

enum class NetMode { kNone, kProxy };

// Features a profile may explicitly accept running without (fail-closed otherwise).
struct Degradations {
  bool allow_no_landlock = false;  // run when the kernel has no Landlock
  bool allow_no_cgroups = false;   // enforce memory/pids/cpu with rlimits only
  bool allow_no_seccomp_notify = false;  // unused today: notify failure always falls back to errno
};

// A credential for one allowed destination: the sandboxed code sees `env` holding a placeholder
// of the value's length, and the egress proxy itself puts the value in one header field of every
// request to host:port alone, replacing what the code sent in it, and refuses the placeholder
// anywhere else (`--egress-credential ENV=HOST[:PORT][;header=NAME][;template=TEXT]`, profile key
// `credentials`): plain HTTP, or with `tls` (`ENV=https://HOST[:PORT]`, profile `tls: true`)
// HTTPS, the proxy terminating TLS for that host with a certificate from a CA made for this
// sandbox and trusted inside it for that host alone (docs/egress.md, "Credentials"). `warden
// run` reads the value from its own environment variable `env`; the gateway fills that variable
// from its secret store, the calling user's secret `secret`.
struct EgressCredentialSpec {
  std::string env;
  std::string host;
  uint16_t port = 80;  // 443 when tls and no port is given
  std::string secret;  // gateway profiles only
  bool tls = false;
  std::string header;          // the field the value goes in; empty: Authorization
  std::string value_template;  // that field's value, "{}" the value; empty: "Bearer {}" for
                               // Authorization, "{}" for another header
  bool operator==(const EgressCredentialSpec&) const = default;
};

struct Options {
  // Limits. 0 means "no limit" unless noted.
  uint64_t timeout_ms = 0;             // wall clock for the whole tree
  uint64_t memory_bytes = 0;           // cgroup memory limit (RLIMIT_AS fallback)
  uint32_t pids = 0;                   // cgroup pids.max (RLIMIT_NPROC fallback)
  uint64_t cpu_ms = 0;                 // total CPU time for the tree
  uint64_t output_limit_bytes = 16ull << 20;  // per stream; 0 = unlimited
  uint64_t tmpfs_bytes = 64ull << 20;  // size of /tmp
  uint64_t file_size_bytes = 0;        // RLIMIT_FSIZE; 0 = unlimited
  uint32_t open_files = 1024;          // RLIMIT_NOFILE

  std::vector<Bind> binds;             // --ro / --rw
  std::vector<std::string> protect;    // paths relative to each --rw bind that stay read-only
  std::string workdir;                 // inside; default: first --rw inside path, else /tmp
  std::map<std::string, std::string> env;  // added to the clean environment
  // Variables `warden run` copies from its own environment into the clean one (`--env-inherit
  // NAME`): how a launcher passes secrets without putting them in argv, which any local user can
  // read in /proc. The launcher puts the values in the child's environment (SpawnIo::env).
  std::vector<std::string> inherit_env;

  NetMode net = NetMode::kNone;
  std::vector<std::string> allow;      // egress allow entries (implies kProxy)
  // Credentials the code may use but never holds (docs/egress.md, "Credentials").
  std::vector<EgressCredentialSpec> egress_credentials;
  std::map<std::string, std::string> resolve;  // HOST -> IP for the proxy

  std::string backend = "native";
  std::string hostname = "sandbox";
  Degradations degrade;

  std::vector<std::string> argv;       // the command
};

// A C-style environment variable name: letters, digits and _, not starting with a digit.
bool ValidEnvName(std::string_view name);
// "ENV=HOST[:PORT]" (port 80 by default; an IPv6 host in brackets), or "ENV=https://HOST[:PORT]"
// (port 443 by default), as given to
// --egress-credential, and back. Checks the header (a field name) and template ({} once, no
// control character or ';'), as Validate does.
Result<EgressCredentialSpec> ParseEgressCredentialSpec(const std::string& text);

// Where a credential's value goes (docs/egress.md, "Credentials"): the one rule, for the CLI and
// profile (Validate) and for the egress proxy (egress::MakeEgressCredential). `header` empty
// means Authorization; `value_template` empty means "Bearer {}" for Authorization and "{}" for
// any other header. The header must be a field name (RFC 9110 token) that is not one the proxy
// manages (Host, framing, hop-by-hop, Proxy-*, Accept-Encoding); the template must hold "{}"
// exactly once and no control character or ';'. Errors start with `what`.
inline constexpr std::string_view kDefaultCredentialHeader = "Authorization";
inline constexpr std::string_view kDefaultAuthorizationTemplate = "Bearer {}";
struct CredentialPlacement {
  std::string header;
  std::string value_template;
};
Result<CredentialPlacement> CheckCredentialPlacement(const std::string& what, std::string header,
                                                     std::string value_template);
std::string EgressCredentialArg(const EgressCredentialSpec& c);

// Checks the options for contradictions and impossible values. The message names the
// offending option and says what to do.
Status Validate(const Options& options);

// An absolute path inside the sandbox with empty and "." components removed ("/proc/" and
// "/dev/." become "/proc" and "/dev", "//" becomes "/"); ".." is kept for Validate to refuse.
// A relative or empty path is returned as it is.
std::string NormalInsidePath(const std::string& path);

// "512M", "1G", "64k", "1048576" -> bytes. Error names the bad text.
Result<uint64_t> ParseSize(const std::string& text);
// "30", "30s", "1.5s", "500ms", "10m", "1h" -> milliseconds. A bare number is seconds.
Result<uint64_t> ParseDuration(const std::string& text);

}  // namespace warden::sandbox
