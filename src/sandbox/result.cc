#include "sandbox/result.h"

namespace warden::sandbox {

const char* ReasonName(Reason r) {
  switch (r) {
    case Reason::kExited: return "exited";
    case Reason::kSignaled: return "signaled";
    case Reason::kTimeout: return "timeout";
    case Reason::kMemory: return "memory";
    case Reason::kPids: return "pids";
    case Reason::kCpu: return "cpu";
    case Reason::kOutputLimit: return "output_limit";
    case Reason::kSetupError: return "setup_error";
  }
  return "unknown";
}

std::string ToJson(const RunResult& r) {
  nlohmann::json j;
  j["exit_code"] = r.exit_code;
  j["signal"] = r.signal;
  j["reason"] = ReasonName(r.reason);
  if (!r.error.empty()) j["error"] = r.error;
  j["wall_ms"] = r.wall_ms;
  j["cpu_ms"] = r.cpu_ms;
  j["peak_memory_bytes"] = r.peak_memory_bytes;
  j["stdout_truncated"] = r.stdout_truncated;
  j["stderr_truncated"] = r.stderr_truncated;
  j["stdout_bytes"] = r.stdout_bytes;
  j["stderr_bytes"] = r.stderr_bytes;
  auto& v = j["violations"] = nlohmann::json::array();
  for (const auto& x : r.violations) v.push_back({{"syscall", x.syscall}, {"errno", x.errno_returned}, {"pid", x.pid}});
  if (r.violations_dropped) j["violations_dropped"] = r.violations_dropped;
  j["egress"] = r.egress;
  j["dns"] = r.dns;
  j["degraded"] = r.degraded;
  j["notes"] = r.notes;
  j["backend"] = r.backend;
  if (!r.platform.empty()) j["platform"] = r.platform;
  j["cgroup"] = r.cgroup;
  j["landlock_abi"] = r.landlock_abi;
  return j.dump();
}

}  // namespace warden::sandbox
