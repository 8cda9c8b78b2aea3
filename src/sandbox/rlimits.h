// Resource limits set with setrlimit: always for file size, open files and core dumps; and as the
// fallback for memory, processes and CPU time where cgroups are not available.
#pragma once

#include <cstdint>

#include "common/status.h"

namespace warden::sandbox::rlimits {

struct Spec {
  uint64_t file_size_bytes = 0;  // 0 = unlimited
  uint32_t open_files = 1024;
  uint64_t address_space_bytes = 0;  // fallback for --memory without cgroups
  uint32_t processes = 0;            // fallback for --pids without cgroups
  uint64_t cpu_seconds = 0;          // per-process CPU time (the whole tree is watched by the parent)
};

// Child side, before exec.
Status ApplyFromChild(const Spec& spec);

}  // namespace warden::sandbox::rlimits
