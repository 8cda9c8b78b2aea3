// The sandbox options `warden run` and `warden pool start` both take: a --profile file, limits,
// binds, protected paths, workdir, environment and accepted degradations. The network, backend
// and command are each subcommand's own.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "sandbox/options.h"

namespace warden::cli {

struct ProfileFlags {
  std::string profile, timeout, memory, cpu, output_limit, tmpfs_size, file_size, workdir;
  uint32_t pids = 0, open_files = 0;
  bool no_protect = false;
  std::vector<std::string> ro, rw, env, env_inherit, protect, accept_missing;

  // Adds the options to `app`.
  void AddTo(CLI::App* app);
  // The options they ask for: the defaults, then the --profile file, then each flag given on
  // `app`. The error names the flag or file.
  Result<sandbox::Options> ToOptions(const CLI::App& app) const;
};

}  // namespace warden::cli
