// Launching `warden run` as a child process: the way a multi-threaded process (the gateway) gets a
// sandbox. sandbox::Run itself must be called from a single-threaded process (sandbox.h); a fresh
// `warden run` is one, and posix_spawn (vfork + exec) is safe from any number of threads.
// The child is the same contract as the command line: exit statuses, limits, the JSON record.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "sandbox/options.h"

namespace warden::sandbox {

// The `warden run` arguments (after the binary's own name) that ask for `options`: every limit,
// bind, protected path, environment entry, network setting and degradation, then "--" and argv.
// `record_path`, when not empty, becomes `--json record_path`. Options.hostname is not
// expressible (always "sandbox").
std::vector<std::string> RunArgs(const Options& options, const std::string& record_path = "");

// The part of RunArgs that `warden pool start` takes too: limits, binds, protected paths, workdir,
// environment and degradations (no network, backend, record or command).
std::vector<std::string> ProfileArgs(const Options& options);

// The warden binary to launch: $WARDEN_BIN when set (tests), else this process's own executable
// when it is a warden binary (its name starts with "warden"), else "" (launching then fails).
std::string LauncherBinary();

struct SpawnIo {
  int stdin_fd = -1;   // -1: /dev/null
  int stdout_fd = -1;  // -1: /dev/null
  int stderr_fd = -1;  // -1: /dev/null
  int record_fd = -1;  // when >= 0, passed as fd 3 and the record is written to /dev/fd/3
  // When >= 0 (SpawnRun only), passed as fd 4 with `--decision-fd 4`: the child's end of the
  // session check's channel (egress/decision_channel.h).
  int decision_fd = -1;
  // Added to the child's environment (beside PATH): the values of Options::inherit_env.
  std::map<std::string, std::string> env;
};

// Spawns `LauncherBinary() run ...` for `options` with the given descriptors as its stdio and
// returns its pid. The source descriptors must be above 4 (or equal to their target)
// (the caller waits for it; its exit status is the command's, per `warden run`).
// The child gets only those descriptors and a clean environment (PATH and io.env). Thread-safe.
Result<pid_t> SpawnRun(const Options& options, const SpawnIo& io);

// Spawns `LauncherBinary() ARGS...` the same way (stdio from `io`, nothing else inherited, a clean
// environment, default signal handling): any warden subcommand, e.g. the gateway's pool.
Result<pid_t> SpawnWarden(std::vector<std::string> args, const SpawnIo& io);

// Spawns `warden run` like SpawnRun (record_fd is ignored: the record goes to a memfd), waits for
// it and returns its result record (ToJson's fields). When the launcher could not start or wrote
// no record (killed, say) the record has reason "setup_error", exit_code 125 and an `error`.
// `on_started`, when set, is called with the child's pid before waiting (to let a kill switch end
// it). Thread-safe: this is how the gateway runs sandboxes.
nlohmann::json RunViaLauncher(const Options& options, const SpawnIo& io,
                              const std::function<void(pid_t)>& on_started = {});

}  // namespace warden::sandbox
