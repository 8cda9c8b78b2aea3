// The gateway's built-in tools. This slice has one: `sandbox__exec`, a command run in a fresh
// warden sandbox (src/sandbox) with its output captured and returned as an MCP tool result.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "gateway/pipeline.h"
#include "sandbox/options.h"

namespace warden::gateway {

// Each stream's captured output is cut here (and at the profile's output limit when lower): the
// whole result goes back in one JSON-RPC line.
inline constexpr uint64_t kExecOutputCapBytes = 1 << 20;

// The sandbox profile sandbox__exec uses when the policy names none (no rule `sandbox:` and no
// `sandbox.profiles.default`): 30 s wall clock, 512 MiB memory, 128 pids, no network, the default
// protected paths. Memory and pids need cgroups: without them a run fails closed (setup_error).
sandbox::Options DefaultExecProfile();

// What a sandbox__exec call asks for, checked against its input schema.
struct ExecRequest {
  std::vector<std::string> argv;     // `command` becomes {"/bin/sh", "-c", command}
  std::optional<std::string> input;  // `stdin`; absent: /dev/null
  std::optional<uint64_t> timeout_ms;
};

// The MCP Tool definition (name, title, description, inputSchema, annotations).
nlohmann::json SandboxExecDefinition();
// Checks `arguments` against the input schema: an object with exactly one of `command` (non-empty
// string) or `argv` (non-empty array of strings), optional `stdin` (string) and `timeout_s`
// (positive number), nothing else. The error says which member is wrong.
Result<ExecRequest> ParseExecArguments(const nlohmann::json& arguments);
// Runs the request on `profile` (timeout_s can shorten the profile's timeout, never lengthen it)
// and returns content [{type: text}], structuredContent {exit_code, reason, stdout, stderr,
// wall_ms, stdout_truncated, stderr_truncated[, error]} and isError when exit_code != 0.
// A sandbox that could not be built is a result with reason setup_error, not a Status.
ToolResult RunSandboxExec(const ExecRequest& request, const sandbox::Options& profile);

// A built-in tool as the gateway lists and runs it.
struct BuiltinTool {
  std::string name;           // full exposed name: sandbox__exec
  std::string server;         // the built-in "server" policy rules match: sandbox
  nlohmann::json definition;  // for tools/list
  // Runs the tool; an error Status means the arguments were refused (JSON-RPC -32602).
  std::function<Result<ToolResult>(const nlohmann::json& arguments,
                                   const sandbox::Options& profile)>
      run;
};

class BuiltinTools {
 public:
  // The built-in set of this slice: sandbox__exec.
  static BuiltinTools Default();
  void Add(BuiltinTool tool) { tools_.push_back(std::move(tool)); }
  const std::vector<BuiltinTool>& list() const { return tools_; }
  // The tool named `name`, or nullptr.
  const BuiltinTool* Find(const std::string& name) const;

 private:
  std::vector<BuiltinTool> tools_;
};

}  // namespace warden::gateway
