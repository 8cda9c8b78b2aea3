// The gateway's built-in tools: `sandbox__exec`, a command run in a fresh warden sandbox
// (src/sandbox) with files in and out and its output captured, and `web__fetch` (web_fetch.h).
// Full contract of both: docs/builtin-tools.md.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "gateway/pipeline/pipeline.h"
#include "policy/model.h"
#include "sandbox/options.h"

namespace warden::gateway {

class ExecPool;
class ExecPoolSlot;

// Each stream's captured output is cut here (and at the profile's output limit when lower): the
// whole result goes back in one JSON-RPC line.
inline constexpr uint64_t kExecOutputCapBytes = 1 << 20;

// The sandbox profile sandbox__exec uses when the policy names none (no rule `sandbox:` and no
// `sandbox.profiles.default`): 30 s wall clock, 512 MiB memory, 128 pids, no network, the default
// protected paths. Memory and pids need cgroups: without them a run fails closed (setup_error).
sandbox::Options DefaultExecProfile();

// Files in and out of a sandbox__exec workspace.
inline constexpr size_t kExecMaxInputFiles = 64;
inline constexpr uint64_t kExecMaxInputBytes = 8 << 20;  // all `files` contents together
inline constexpr size_t kExecMaxOutputFiles = 16;        // files collected, all patterns together
inline constexpr uint64_t kExecOutputFileCapBytes = 1 << 20;  // each collected file is cut here
// Where the workspace appears inside the sandbox (read-write, and the working directory).
inline constexpr const char* kExecWorkspaceInside = "/work";

// What a sandbox__exec call asks for, checked against its input schema.
struct ExecRequest {
  std::vector<std::string> argv;     // `command` becomes {"/bin/sh", "-c", command}
  std::optional<std::string> input;  // `stdin`; absent: /dev/null
  std::optional<uint64_t> timeout_ms;
  // Relative path (checked: no "..", ".", empty or absolute components, no NUL) -> content,
  // written into the workspace before the run. `language` + `code` add main.py/main.sh/main.js.
  std::map<std::string, std::string> files;
  // Relative paths or glob patterns (fnmatch, per path component) collected after the run.
  std::vector<std::string> outputs;
  std::string language;  // "python", "sh", "node" or "" (argv given directly)

  // Whether the call needs a workspace (any of files, outputs, language).
  bool wants_workspace() const { return !files.empty() || !outputs.empty() || !language.empty(); }
};

// The MCP Tool definition (name, title, description, inputSchema, outputSchema, annotations).
nlohmann::json SandboxExecDefinition();
// Checks `arguments` against the input schema: an object with exactly one of `command` (non-empty
// string), `argv` (non-empty array of strings) or `language` ("python", "sh" or "node") with
// `code` (string); optional `stdin` (string), `timeout_s` (positive number), `files` (object:
// relative path -> string; at most 64 files and 8 MiB), `outputs` (array of at most 16 relative
// paths or globs); nothing else. The error says which member is wrong.
Result<ExecRequest> ParseExecArguments(const nlohmann::json& arguments);

// Runs the request on `profile` (timeout_s can shorten the profile's timeout, never lengthen it)
// and returns content [{type: text}], structuredContent {exit_code, reason, stdout, stderr,
// wall_ms, stdout_truncated, stderr_truncated[, error][, outputs, outputs_skipped]} and isError
// when exit_code != 0. A sandbox that could not be built is a result with reason setup_error,
// not a Status.
//
// With a workspace (ExecRequest::wants_workspace): a fresh directory in a private (0700)
// temporary directory on the host, owned by the sandbox's host user, bound read-write at /work
// (the working directory) and removed after the call, whatever happened. The profile's protected
// paths are dropped when the profile has no other writable bind (the workspace is fresh).
// Outputs are read without following symbolic links at any step (openat with O_NOFOLLOW from the
// workspace's descriptor): a link planted by the command is reported, never read through.
//
// `cancel`, when set, ends the run: the `warden run` launcher (or the pooled sandbox) is sent
// SIGKILL and the result has reason "signaled", exit code 137 and an error naming the cancel.
//
// `pool`, when set and serving `profile` (ExecPool::Serves), runs the call in a pre-warmed
// sandbox whose own workspace gets the files before the command starts; the result is the same
// (CallResult::execution says "pre-warmed pool"). When the pool cannot take the call (not
// running, refused), it runs cold.
//
// `egress_check`, when set and the profile has egress (net: proxy), judges every connection and
// plain HTTP request the code makes past the allow-list (ToolEnv::trifecta_egress); the launcher
// asks it over a socket pair (egress/decision_channel.h) and a reason refuses the attempt. Such a
// call never runs pooled (pooled sandboxes have no network).
using EgressCheck = std::function<std::optional<std::string>(
    std::string_view destination, const std::vector<std::string_view>& parts)>;
CallResult RunSandboxExec(const ExecRequest& request, const sandbox::Options& profile,
                          const std::shared_ptr<CancelToken>& cancel = nullptr,
                          const ExecPool* pool = nullptr,
                          const std::map<std::string, std::string>& launch_env = {},
                          const EgressCheck& egress_check = {});

// What a built-in tool runs with, besides its arguments.
struct ToolEnv {
  sandbox::Options profile;                // the sandbox profile the policy chose
  const policy::Policy* policy = nullptr;  // the snapshot the call was decided on (egress)
  std::shared_ptr<CancelToken> cancel;     // may be null
  // Added to the `warden run` child's own environment (never the sandbox's): the values of the
  // profile's egress credentials, which the child's proxy holds (docs/egress.md).
  std::map<std::string, std::string> launch_env;
  // For a call that sends again while it runs (web__fetch following a redirect to another
  // host): the calling session's trifecta verdict on the call with `arguments`, now, with the
  // other calls in flight; a reason refuses. Null: the call has no trifecta state (tests).
  std::function<std::optional<std::string>(const nlohmann::json& arguments)> trifecta_recheck;
  // For sandbox__exec with egress: the calling session's trifecta verdict, now, on one attempt of
  // the sandbox's code to reach `destination` ("host:port") carrying `parts` (a request's URL,
  // header lines and body start; none for a tunnel); a reason refuses. Null: not checked (tests).
  EgressCheck trifecta_egress;
  // For task__end: ends the calling task (forgets its trifecta legs, cancels its other calls in
  // flight, which ends their waits for approval) and says what it did. Null: no task here.
  std::function<Result<nlohmann::json>()> end_task;
};

// task__end's definition (no arguments) and its run: refuses any argument; a tool error when
// ToolEnv::end_task is not set.
nlohmann::json TaskEndDefinition();

// A built-in tool as the gateway lists and runs it.
struct BuiltinTool {
  std::string name;           // full exposed name: sandbox__exec
  std::string server;         // the built-in "server" policy rules match: sandbox
  nlohmann::json definition;  // for tools/list
  // Runs the tool; an error Status means the arguments were refused (JSON-RPC -32602).
  std::function<Result<CallResult>(const nlohmann::json& arguments, const ToolEnv& env)> run;
};

class BuiltinTools {
 public:
  // The built-in set: sandbox__exec (server "sandbox"; through the pool `pools` holds at the
  // call's start, when given, which must outlive the tools) and web__fetch (server "web", egress
  // from ToolEnv.policy's egress.allow).
  static BuiltinTools Default(const ExecPoolSlot* pools = nullptr);
  void Add(BuiltinTool tool) { tools_.push_back(std::move(tool)); }
  const std::vector<BuiltinTool>& list() const { return tools_; }
  // The tool named `name`, or nullptr.
  const BuiltinTool* Find(const std::string& name) const;

 private:
  std::vector<BuiltinTool> tools_;
};

}  // namespace warden::gateway
