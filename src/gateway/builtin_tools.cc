#include "gateway/builtin_tools.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>

#include "common/unique_fd.h"
#include "sandbox/profile.h"
#include "sandbox/result.h"
#include "sandbox/launcher.h"

namespace warden::gateway {

using nlohmann::json;

sandbox::Options DefaultExecProfile() {
  sandbox::Options o;
  o.timeout_ms = 30'000;
  o.memory_bytes = 512ull << 20;
  o.pids = 128;
  o.net = sandbox::NetMode::kNone;
  o.output_limit_bytes = kExecOutputCapBytes;
  o.protect = sandbox::DefaultProtectedPaths();
  return o;
}

json SandboxExecDefinition() {
  return {
      {"name", "sandbox__exec"},
      {"title", "Run a command in a sandbox"},
      {"description",
       "Runs a command in a fresh, isolated sandbox (no network, private /tmp, limited time, "
       "memory "
       "and processes) and returns its exit status, stdout and stderr. Give either `command` (run "
       "with sh -c) or `argv`."},
      {"inputSchema",
       {{"type", "object"},
        {"properties",
         {{"command",
           {{"type", "string"}, {"description", "A shell command line, run with sh -c"}}},
          {"argv",
           {{"type", "array"},
            {"items", {{"type", "string"}}},
            {"minItems", 1},
            {"description", "The program and its arguments, run without a shell"}}},
          {"stdin",
           {{"type", "string"}, {"description", "Text given to the command's standard input"}}},
          {"timeout_s",
           {{"type", "number"},
            {"exclusiveMinimum", 0},
            {"description", "Wall-clock limit in seconds (at most the sandbox profile's)"}}}}},
        {"additionalProperties", false}}},
      // Claims about the tool for clients; warden never trusts such hints from upstreams.
      {"annotations",
       {{"readOnlyHint", false}, {"destructiveHint", false}, {"openWorldHint", false}}},
  };
}

Result<ExecRequest> ParseExecArguments(const json& arguments) {
  if (!arguments.is_object()) return Status::Error("arguments must be an object");
  ExecRequest req;
  for (const auto& [key, value] : arguments.items()) {
    if (key == "command") {
      if (!value.is_string() || value.get_ref<const std::string&>().empty())
        return Status::Error("command must be a non-empty string");
      req.argv = {"/bin/sh", "-c", value.get<std::string>()};
    } else if (key == "argv") {
      if (!value.is_array() || value.empty())
        return Status::Error("argv must be a non-empty array of strings");
      std::vector<std::string> argv;
      for (const json& a : value) {
        if (!a.is_string()) return Status::Error("argv must be a non-empty array of strings");
        argv.push_back(a.get<std::string>());
      }
      if (argv[0].empty()) return Status::Error("argv[0] must not be empty");
      req.argv = std::move(argv);
    } else if (key == "stdin") {
      if (!value.is_string()) return Status::Error("stdin must be a string");
      req.input = value.get<std::string>();
    } else if (key == "timeout_s") {
      if (!value.is_number() || !(value.get<double>() > 0) || !std::isfinite(value.get<double>()))
        return Status::Error("timeout_s must be a positive number");
      double ms = std::ceil(value.get<double>() * 1000.0);
      req.timeout_ms = ms > 1e12 ? uint64_t{1'000'000'000'000} : static_cast<uint64_t>(ms);
    } else {
      return Status::Error("unknown argument '" + key +
                           "' (expected command or argv, stdin, timeout_s)");
    }
  }
  if (arguments.contains("command") && arguments.contains("argv"))
    return Status::Error("give either command or argv, not both");
  if (req.argv.empty()) return Status::Error("command or argv is required");
  return req;
}

namespace {

// An anonymous in-memory file: the sandbox streams output into it (cut at the output limit) and
// we read it back afterwards, with no relay thread.
Result<UniqueFd> MemFile(const char* name) {
  UniqueFd fd(memfd_create(name, MFD_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno(std::string("memfd_create ") + name, errno);
  return fd;
}

Status WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("write stdin buffer", errno);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

// Reads at most `cap` bytes from the start of `fd`.
std::string ReadBack(int fd, uint64_t cap) {
  std::string out;
  char buf[16384];
  off_t offset = 0;
  while (out.size() < cap) {
    size_t want = std::min<uint64_t>(sizeof(buf), cap - out.size());
    ssize_t n = pread(fd, buf, want, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    offset += n;
  }
  return out;
}

ToolResult SetupFailure(const std::string& error) {
  ToolResult r;
  r.is_error = true;
  r.text = "sandbox__exec could not run: " + error;
  r.mcp_result = {{"content", json::array({{{"type", "text"}, {"text", r.text}}})},
                  {"structuredContent",
                   {{"exit_code", 125},
                    {"reason", "setup_error"},
                    {"stdout", ""},
                    {"stderr", ""},
                    {"wall_ms", 0},
                    {"stdout_truncated", false},
                    {"stderr_truncated", false},
                    {"error", error}}},
                  {"isError", true}};
  return r;
}

}  // namespace

ToolResult RunSandboxExec(const ExecRequest& request, const sandbox::Options& profile) {
  sandbox::Options o = profile;
  o.argv = request.argv;
  if (request.timeout_ms && (o.timeout_ms == 0 || *request.timeout_ms < o.timeout_ms))
    o.timeout_ms = *request.timeout_ms;
  uint64_t cap = kExecOutputCapBytes;
  if (o.output_limit_bytes != 0) cap = std::min(cap, o.output_limit_bytes);
  o.output_limit_bytes = cap;

  auto out = MemFile("sandbox_exec_stdout");
  if (!out) return SetupFailure(out.status().message());
  auto err = MemFile("sandbox_exec_stderr");
  if (!err) return SetupFailure(err.status().message());
  UniqueFd in;
  if (request.input) {
    auto mem = MemFile("sandbox_exec_stdin");
    if (!mem) return SetupFailure(mem.status().message());
    in = std::move(*mem);
    Status st = WriteAll(in.get(), *request.input);
    if (!st.ok()) return SetupFailure(st.message());
    lseek(in.get(), 0, SEEK_SET);
  }
  // Never the gateway's own stdin: over stdio that is the MCP stream. -1 means /dev/null.
  // The sandbox is a `warden run` child: the gateway is multi-threaded (sandbox/launcher.h).
  sandbox::SpawnIo io{
      .stdin_fd = in.valid() ? in.get() : -1, .stdout_fd = out->get(), .stderr_fd = err->get()};
  json record = sandbox::RunViaLauncher(o, io);
  struct {
    int exit_code;
    uint64_t wall_ms;
    bool stdout_truncated, stderr_truncated;
    std::string error;
  } run{record.value("exit_code", 125), record.value("wall_ms", uint64_t{0}),
        record.value("stdout_truncated", false), record.value("stderr_truncated", false),
        record.value("error", std::string())};

  std::string stdout_text = ReadBack(out->get(), cap);
  std::string stderr_text = ReadBack(err->get(), cap);
  std::string reason = record.value("reason", std::string("setup_error"));

  ToolResult r;
  r.is_error = run.exit_code != 0;
  r.text = stdout_text;
  if (!stderr_text.empty())
    r.text += (r.text.empty() || r.text.back() == '\n' ? "" : "\n") + std::string("[stderr]\n") +
              stderr_text;
  if (r.is_error) {
    r.text += (r.text.empty() || r.text.back() == '\n' ? "" : "\n") + std::string("[exit code ") +
              std::to_string(run.exit_code) + ", " + reason + "]";
    if (!run.error.empty()) r.text += " " + run.error;
  }
  json structured = {{"exit_code", run.exit_code},
                     {"reason", reason},
                     {"stdout", stdout_text},
                     {"stderr", stderr_text},
                     {"wall_ms", run.wall_ms},
                     {"stdout_truncated", run.stdout_truncated},
                     {"stderr_truncated", run.stderr_truncated}};
  if (!run.error.empty()) structured["error"] = run.error;
  r.mcp_result = {{"content", json::array({{{"type", "text"}, {"text", r.text}}})},
                  {"structuredContent", std::move(structured)},
                  {"isError", r.is_error}};
  return r;
}

BuiltinTools BuiltinTools::Default() {
  BuiltinTools tools;
  tools.Add(
      {.name = "sandbox__exec",
       .server = "sandbox",
       .definition = SandboxExecDefinition(),
       .run = [](const json& arguments, const sandbox::Options& profile) -> Result<ToolResult> {
         auto request = ParseExecArguments(arguments);
         if (!request) return request.status();
         return RunSandboxExec(*request, profile);
       }});
  return tools;
}

const BuiltinTool* BuiltinTools::Find(const std::string& name) const {
  for (const BuiltinTool& t : tools_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace warden::gateway
