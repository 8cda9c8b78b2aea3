// Pre-warmed pools of native sandboxes (docs/pool.md). A pool server keeps `size` sandboxes built
// ahead of time (namespaces, root, mounts, cgroup, capabilities dropped, Landlock, seccomp) whose
// init waits for one command; each is claimed once, supervised like a cold run, and destroyed;
// the pool refills in the background. Clients (`warden run --pool`, the gateway) talk to it over
// a Unix socket (pool_protocol.h) and get the same exit statuses, output and result record as
// sandbox::Run.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "sandbox/options.h"
#include "sandbox/result.h"
#include "sandbox/sandbox.h"

namespace warden::sandbox::pool {

struct PoolConfig {
  std::string socket_path;  // created 0600; a stale socket nobody serves is replaced
  uint32_t size = 4;        // sandboxes kept ready (or being built)
  uint64_t idle_timeout_ms =
      0;            // a ready sandbox older than this is destroyed and replaced; 0: never
  Options profile;  // what every sandbox is built from (argv ignored)
  // Each sandbox gets a fresh, empty host directory bound read-write at kWorkspaceInside (the
  // default working directory), made when the sandbox is built and removed after its one use.
  bool workspace = false;
};

// Where a pool's per-sandbox workspace appears inside.
inline constexpr const char* kWorkspaceInside = "/work";

// Runs the pool in the foreground until SIGINT, SIGTERM or SIGHUP; then destroys every sandbox,
// removes the socket and returns 0. Returns 125 (after printing why to stderr) when the profile
// cannot be pooled, the socket cannot be served, or the first sandboxes fail to build.
// Call it from a single-threaded process, as sandbox::Run: every sandbox is a clone of it.
int Serve(const PoolConfig& config);

// The options a claim runs with: the pool's profile, with the per-command fields of `run` (argv,
// env additions, workdir, timeout, output limit, CPU limit, file size, open files) on top. A field
// that must be set up ahead (binds, memory, pids, tmpfs size, protected paths, hostname, network,
// backend) is taken from the pool when `run` leaves it at its default, and refused when `run` asks
// for a different value: the error names the option. `pool_has_cgroup`: --cpu needs one.
// `pool_degraded`: features the pool's sandboxes run without ("landlock", "cgroups"), which `run`
// must accept too. Binds compare by canonical host path (NormalizeBinds).
Result<Options> Effective(const Options& pool, const Options& run, bool pool_has_cgroup,
                          const std::vector<std::string>& pool_degraded);

// Host paths made canonical (realpath, relative to the current directory) and the inside path
// filled in, so that two spellings of one bind compare equal. A path that does not resolve is kept.
std::vector<Bind> NormalizeBinds(const std::vector<Bind>& binds);

// Runs options.argv in a sandbox of the pool serving `socket_path` and waits for it. Output
// streams to io's descriptors through pipes read here, cut at the output limit; stdin is handed
// over as sandbox::Run does (a terminal or socket is relayed through a pipe). Never throws; a pool
// that cannot be reached or refuses the options gives reason setup_error and exit code 125 with
// the reason in `error`. With `forward_signals`, SIGINT/SIGTERM/SIGHUP/SIGQUIT to this process
// end the sandbox (reported as sandbox::Run does); leave it off in multi-threaded callers.
// Thread-safe otherwise.
//
// `extra`, when given, adds to the run and reports on it:
struct PooledRun {
  // Asks for the sandbox's workspace (the pool must have one). `prepare` is called with its host
  // path once a sandbox is assigned and before the command starts (the sandbox waits for it); an
  // error from it ends the run before anything ran (setup_error). `finish` is called after the
  // result, while the workspace still exists: the pool removes it when the connection closes.
  bool workspace = false;
  std::function<Status(const std::string& host_path)> prepare;
  std::function<void()> finish;
  // Called once the pool accepted the request, with a function that ends the run (SIGKILL, as a
  // forwarded signal). It may be called from any thread, and after the run (then it does nothing).
  std::function<void(std::function<void()> kill)> on_accepted;
  // Out: true when nothing ran because the pool could not be reached or refused the options (the
  // caller may run the command cold instead).
  bool not_served = false;
};
RunResult RunPooled(const std::string& socket_path, const Options& options, const Io& io = {},
                    bool forward_signals = false, PooledRun* extra = nullptr);

// The pool's state: size, ready, starting, in_use, waiting, started, failed, refills, expired,
// served, refused, idle_timeout_ms (and last_error when a sandbox failed to build).
Result<nlohmann::json> QueryStatus(const std::string& socket_path);

}  // namespace warden::sandbox::pool
