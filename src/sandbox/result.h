// The outcome of one sandbox run: what `warden run --json` prints and what callers (the gateway's
// sandbox__exec) read. Field meanings: ARCHITECTURE.md section 4 and docs/sandbox.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace warden::sandbox {

enum class Reason { kExited, kSignaled, kTimeout, kMemory, kPids, kCpu, kOutputLimit, kSetupError };
const char* ReasonName(Reason r);

struct ViolationRecord {
  std::string syscall;
  int errno_returned = 0;
  int pid = 0;  // the offending process, as warden (the host) numbers it
};

struct RunResult {
  int exit_code = 0;     // warden's own exit status for this run (the contract's mapping)
  int signal = 0;        // the signal that ended the command, 0 if it exited
  Reason reason = Reason::kExited;
  std::string error;     // setup_error: which step failed and why
  uint64_t wall_ms = 0;
  uint64_t cpu_ms = 0;
  uint64_t peak_memory_bytes = 0;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  uint64_t stdout_bytes = 0;  // bytes delivered (after the cut)
  uint64_t stderr_bytes = 0;
  std::vector<ViolationRecord> violations;
  uint64_t violations_dropped = 0;  // beyond the record cap
  std::vector<std::string> degraded;  // features missing and accepted by the profile
  std::vector<std::string> notes;     // things a user should know (e.g. a protected path absent)
  std::string backend = "native";
  std::string platform;             // how the backend ran it, when it has a choice (gvisor: "ptrace", "kvm", ...)
  std::string cgroup;               // "v1", "v2" or "" (rlimits only)
  int landlock_abi = 0;             // 0 when not applied
  nlohmann::json egress = nlohmann::json::array();  // connection records from the egress proxy
  nlohmann::json dns = nlohmann::json::array();     // queries the sandbox's DNS stub answered
};

// The JSON record as one line.
std::string ToJson(const RunResult& result);

}  // namespace warden::sandbox
