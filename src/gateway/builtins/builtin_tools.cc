#include "gateway/builtins/builtin_tools.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <set>

#include "common/unique_fd.h"
#include "egress/decision_channel.h"
#include "egress/host_name.h"
#include "gateway/builtins/exec_pool.h"
#include "gateway/builtins/web_fetch.h"
#include "monitor/families.h"
#include "sandbox/launcher.h"
#include "sandbox/pool.h"
#include "sandbox/profile.h"
#include "sandbox/result.h"
#include "sandbox/user.h"
#include "sandbox/workspace_dir.h"

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

namespace {

json ExecOutputSchema() {
  json output_file = {
      {"type", "object"},
      {"properties",
       {{"path", {{"type", "string"}}},
        {"encoding", {{"type", "string"}, {"enum", {"utf-8", "base64"}}}},
        {"content", {{"type", "string"}}},
        {"bytes", {{"type", "integer"}, {"description", "The file's size"}}},
        {"truncated", {{"type", "boolean"}, {"description", "content cut at 1 MiB"}}}}},
      {"required", {"path", "encoding", "content", "bytes", "truncated"}}};
  json skipped = {
      {"type", "object"},
      {"properties", {{"path", {{"type", "string"}}}, {"reason", {{"type", "string"}}}}},
      {"required", {"path", "reason"}}};
  return {{"type", "object"},
          {"properties",
           {{"exit_code", {{"type", "integer"}}},
            {"reason",
             {{"type", "string"},
              {"description",
               "exited, signaled, timeout, memory, pids, cpu, output_limit or setup_error"}}},
            {"stdout", {{"type", "string"}}},
            {"stderr", {{"type", "string"}}},
            {"wall_ms", {{"type", "integer"}}},
            {"stdout_truncated", {{"type", "boolean"}}},
            {"stderr_truncated", {{"type", "boolean"}}},
            {"error", {{"type", "string"}}},
            {"outputs", {{"type", "array"}, {"items", output_file}}},
            {"outputs_skipped", {{"type", "array"}, {"items", skipped}}}}},
          {"required",
           {"exit_code", "reason", "stdout", "stderr", "wall_ms", "stdout_truncated",
            "stderr_truncated"}}};
}

struct Language {
  const char* name;
  const char* interpreter;  // absolute, as inside the sandbox (/usr is the host's, read-only)
  const char* main_file;
};
constexpr Language kLanguages[] = {{"python", "/usr/bin/python3", "main.py"},
                                   {"sh", "/bin/sh", "main.sh"},
                                   {"node", "/usr/bin/node", "main.js"}};

const Language* FindLanguage(const std::string& name) {
  for (const Language& l : kLanguages)
    if (name == l.name) return &l;
  return nullptr;
}

bool HasGlob(std::string_view s) { return s.find_first_of("*?[") != std::string_view::npos; }

// A path relative to the workspace: no empty, "." or ".." component, not absolute, no NUL.
Status CheckRelativePath(const std::string& what, const std::string& path) {
  std::string quoted = egress::Quote(path);
  if (path.empty()) return Status::Error(what + ": a path is empty");
  if (path.find('\0') != std::string::npos)
    return Status::Error(what + ": path " + quoted + " contains a NUL byte");
  if (path[0] == '/') return Status::Error(what + ": path " + quoted + " must be relative");
  if (path.size() > 4096) return Status::Error(what + ": path " + quoted + " is too long");
  size_t pos = 0;
  while (true) {
    size_t slash = path.find('/', pos);
    std::string_view part = std::string_view(path).substr(
        pos, slash == std::string::npos ? std::string::npos : slash - pos);
    if (part.empty()) return Status::Error(what + ": path " + quoted + " has an empty component");
    if (part == "..") return Status::Error(what + ": path " + quoted + " must not contain ..");
    if (part == ".") return Status::Error(what + ": path " + quoted + " must not contain .");
    if (part.size() > 255)
      return Status::Error(what + ": path " + quoted + " has a component over 255 bytes");
    if (slash == std::string::npos) break;
    pos = slash + 1;
  }
  return Status::Ok();
}

Status ParseFiles(const json& value, ExecRequest& req) {
  if (!value.is_object()) return Status::Error("files must be an object (relative path -> text)");
  if (value.size() > kExecMaxInputFiles)
    return Status::Error("files: more than " + std::to_string(kExecMaxInputFiles) + " files");
  for (const auto& [path, content] : value.items()) {
    WARDEN_RETURN_IF_ERROR(CheckRelativePath("files", path));
    if (!content.is_string())
      return Status::Error("files: the content of " + egress::Quote(path) + " must be a string");
    req.files[path] = content.get<std::string>();
  }
  return Status::Ok();
}

Status ParseOutputs(const json& value, ExecRequest& req) {
  if (!value.is_array()) return Status::Error("outputs must be an array of relative paths");
  if (value.size() > kExecMaxOutputFiles)
    return Status::Error("outputs: more than " + std::to_string(kExecMaxOutputFiles) + " entries");
  for (const json& v : value) {
    if (!v.is_string()) return Status::Error("outputs must be an array of relative paths");
    WARDEN_RETURN_IF_ERROR(CheckRelativePath("outputs", v.get<std::string>()));
    req.outputs.push_back(v.get<std::string>());
  }
  return Status::Ok();
}

}  // namespace

json SandboxExecDefinition() {
  return {
      {"name", "sandbox__exec"},
      {"title", "Run a command in a sandbox"},
      {"description",
       "Runs a command in a fresh, isolated sandbox (no network, private /tmp, limited time, "
       "memory and processes) and returns its exit status, stdout and stderr. Give `command` "
       "(run with sh -c), `argv`, or `language` (python, sh, node) with `code`. `files` are "
       "written into /work (the working directory) first; `outputs` (paths or globs under /work) "
       "are returned after the run."},
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
          {"language",
           {{"type", "string"},
            {"enum", {"python", "sh", "node"}},
            {"description", "Runs `code` with python3, sh or node (as /work/main.py, .sh, .js)"}}},
          {"code", {{"type", "string"}, {"description", "The program for `language`"}}},
          {"stdin",
           {{"type", "string"}, {"description", "Text given to the command's standard input"}}},
          {"timeout_s",
           {{"type", "number"},
            {"exclusiveMinimum", 0},
            {"description", "Wall-clock limit in seconds (at most the sandbox profile's)"}}},
          {"files",
           {{"type", "object"},
            {"additionalProperties", {{"type", "string"}}},
            {"maxProperties", kExecMaxInputFiles},
            {"description",
             "Relative path -> text, written under /work before the run (at most 64 files, "
             "8 MiB)"}}},
          {"outputs",
           {{"type", "array"},
            {"items", {{"type", "string"}}},
            {"maxItems", kExecMaxOutputFiles},
            {"description",
             "Relative paths or globs (out/*.txt) under /work returned after the run (16 files, "
             "1 MiB each; non-UTF-8 files as base64)"}}}}},
        {"additionalProperties", false}}},
      {"outputSchema", ExecOutputSchema()},
      // Claims about the tool for clients; warden never trusts such hints from upstreams.
      {"annotations",
       {{"readOnlyHint", false}, {"destructiveHint", false}, {"openWorldHint", false}}},
  };
}

Result<ExecRequest> ParseExecArguments(const json& arguments) {
  if (!arguments.is_object()) return Status::Error("arguments must be an object");
  ExecRequest req;
  std::optional<std::string> code;
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
    } else if (key == "language") {
      if (!value.is_string() || FindLanguage(value.get<std::string>()) == nullptr)
        return Status::Error("language must be one of python, sh, node");
      req.language = value.get<std::string>();
    } else if (key == "code") {
      if (!value.is_string()) return Status::Error("code must be a string");
      code = value.get<std::string>();
    } else if (key == "stdin") {
      if (!value.is_string()) return Status::Error("stdin must be a string");
      req.input = value.get<std::string>();
    } else if (key == "timeout_s") {
      if (!value.is_number() || !(value.get<double>() > 0) || !std::isfinite(value.get<double>()))
        return Status::Error("timeout_s must be a positive number");
      double ms = std::ceil(value.get<double>() * 1000.0);
      req.timeout_ms = ms > 1e12 ? uint64_t{1'000'000'000'000} : static_cast<uint64_t>(ms);
    } else if (key == "files") {
      WARDEN_RETURN_IF_ERROR(ParseFiles(value, req));
    } else if (key == "outputs") {
      WARDEN_RETURN_IF_ERROR(ParseOutputs(value, req));
    } else {
      return Status::Error("unknown argument '" + egress::Printable(key) +
                           "' (expected command, argv or language and code; stdin, timeout_s, "
                           "files, outputs)");
    }
  }
  int programs =
      arguments.contains("command") + arguments.contains("argv") + arguments.contains("language");
  if (programs > 1) return Status::Error("give one of command, argv or language, not several");
  if (programs == 0) return Status::Error("command, argv or language (with code) is required");
  if (!req.language.empty()) {
    if (!code) return Status::Error("code is required with language");
    const Language* lang = FindLanguage(req.language);
    if (req.files.contains(lang->main_file))
      return Status::Error(std::string("files must not contain ") + lang->main_file +
                           " when language is " + lang->name + " (code is written there)");
    if (req.files.size() + 1 > kExecMaxInputFiles)
      return Status::Error("files: more than " + std::to_string(kExecMaxInputFiles) +
                           " files with the code's " + lang->main_file);
    req.files[lang->main_file] = std::move(*code);
    req.argv = {lang->interpreter, lang->main_file};
  } else if (code) {
    return Status::Error("code needs language (python, sh or node)");
  }
  uint64_t total = 0;
  for (const auto& [path, content] : req.files) total += content.size();
  if (total > kExecMaxInputBytes)
    return Status::Error("files: " + std::to_string(total) + " bytes in all, over the 8 MiB limit");
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

// ---------------------------------------------------------------------------------------------
// The workspace: a fresh host directory bound at /work. Everything in it is reached through
// descriptors, one component at a time, never following a symbolic link: the command may have
// planted links, and the gateway (possibly root) must never read or remove through them.

using sandbox::workspace::kDirOpenFlags;
using sandbox::workspace::OpenForListing;

std::string ErrnoText(int err) { return std::strerror(err); }

// Text of a collected file, or base64 when it is not UTF-8. A file cut at the cap may end in
// the middle of a character: up to 3 trailing bytes are dropped to keep it text.
void EncodeContent(std::string& content, bool truncated, json& entry) {
  if (!IsValidUtf8(content) && truncated) {
    for (size_t drop = 1; drop <= 3 && drop < content.size(); ++drop) {
      if (IsValidUtf8(std::string_view(content).substr(0, content.size() - drop))) {
        content.resize(content.size() - drop);
        break;
      }
    }
  }
  if (IsValidUtf8(content)) {
    entry["encoding"] = "utf-8";
    entry["content"] = std::move(content);
    return;
  }
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((content.size() + 2) / 3 * 4);
  for (size_t i = 0; i < content.size(); i += 3) {
    uint32_t n = static_cast<uint8_t>(content[i]) << 16;
    if (i + 1 < content.size()) n |= static_cast<uint8_t>(content[i + 1]) << 8;
    if (i + 2 < content.size()) n |= static_cast<uint8_t>(content[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < content.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < content.size() ? kAlphabet[n & 63] : '=';
  }
  entry["encoding"] = "base64";
  entry["content"] = std::move(out);
}

// What the outputs patterns found.
struct Collected {
  json files = json::array();
  json skipped = json::array();
  std::set<std::string> seen;
  size_t skipped_dropped = 0;  // skipped entries beyond the 64 reported

  void Skip(const std::string& path, const std::string& reason) {
    if (skipped.size() >= 64) {
      ++skipped_dropped;
      return;
    }
    skipped.push_back({{"path", path}, {"reason", reason}});
  }
};

class Workspace {
 public:
  // Makes a private directory under $TMPDIR or /tmp (mkdtemp: 0700, ours) and in it the
  // workspace (0700), owned by the sandbox's user on the host. When that user is not us (the
  // gateway runs as root), `warden run` opens the bind source as that user, so the private
  // directory becomes 0711: searchable, not listable; the workspace itself stays 0700.
  static Result<std::unique_ptr<Workspace>> Create() {
    auto ws = std::unique_ptr<Workspace>(new Workspace);
    auto parent = sandbox::workspace::MakePrivateParent(sandbox::workspace::TempBase(),
                                                        "warden-exec-", ws->ids_, &ws->parent_fd_);
    if (!parent) return parent.status();
    ws->parent_ = *parent;
    ws->path_ = ws->parent_ + "/work";
    auto fd = sandbox::workspace::MakeOwnedDir(ws->parent_fd_.get(), "work", ws->ids_);
    if (!fd) return fd.status().Wrap(ws->path_);
    ws->fd_ = std::move(*fd);
    return ws;
  }

  // A workspace somebody else made and removes (a pool's, for one claimed sandbox): opened
  // here, before the command runs, and never removed by us.
  static Result<std::unique_ptr<Workspace>> Adopt(const std::string& path) {
    auto ws = std::unique_ptr<Workspace>(new Workspace);
    ws->path_ = path;
    ws->fd_.reset(open(path.c_str(), kDirOpenFlags));
    if (!ws->fd_.valid()) return Status::FromErrno("open workspace " + path, errno);
    ws->adopted_ = true;
    return ws;
  }

  ~Workspace() {
    if (adopted_) return;
    if (fd_.valid()) sandbox::workspace::RemoveContents(fd_.get());
    fd_.reset();
    if (parent_fd_.valid()) unlinkat(parent_fd_.get(), "work", AT_REMOVEDIR);
    parent_fd_.reset();
    if (!parent_.empty()) rmdir(parent_.c_str());
  }

  const std::string& host_path() const { return path_; }

  // Writes each file, creating its directories; fails on the first file that cannot be written.
  Status Write(const std::map<std::string, std::string>& files) {
    for (const auto& [path, content] : files) {
      Status st = WriteOne(path, content);
      if (!st.ok()) return st.Wrap("files: " + egress::Quote(path));
    }
    return Status::Ok();
  }

  // Collects every file the patterns name, in pattern order (glob matches sorted by name).
  Collected Collect(const std::vector<std::string>& patterns) {
    Collected c;
    for (const std::string& pattern : patterns) {
      std::vector<std::string> parts = Split(pattern);
      size_t before = c.files.size() + c.skipped.size() + c.skipped_dropped;
      Walk(fd_.get(), parts, 0, "", HasGlob(pattern), c);
      if (c.files.size() + c.skipped.size() + c.skipped_dropped == before)
        c.Skip(pattern, HasGlob(pattern) ? "no file matches" : "not found");
    }
    if (c.skipped_dropped > 0)
      c.skipped.push_back(
          {{"path", ""}, {"reason", std::to_string(c.skipped_dropped) + " more not listed"}});
    return c;
  }

 private:
  Workspace() = default;

  Status Own(int fd, const std::string& what) {
    return sandbox::workspace::Own(fd, ids_, what);
  }

  static std::vector<std::string> Split(const std::string& path) {
    std::vector<std::string> parts;
    size_t pos = 0;
    for (size_t slash; (slash = path.find('/', pos)) != std::string::npos; pos = slash + 1)
      parts.push_back(path.substr(pos, slash - pos));
    parts.push_back(path.substr(pos));
    return parts;
  }

  Status WriteOne(const std::string& path, const std::string& content) {
    std::vector<std::string> parts = Split(path);
    UniqueFd dir(dup(fd_.get()));
    if (!dir.valid()) return Status::FromErrno("dup", errno);
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      bool made = mkdirat(dir.get(), parts[i].c_str(), 0755) == 0;
      if (!made && errno != EEXIST) return Status::FromErrno("mkdir " + parts[i], errno);
      UniqueFd next(openat(dir.get(), parts[i].c_str(), kDirOpenFlags));
      if (!next.valid()) return Status::FromErrno("open directory " + parts[i], errno);
      if (made) WARDEN_RETURN_IF_ERROR(Own(next.get(), parts[i]));
      dir = std::move(next);
    }
    UniqueFd file(openat(dir.get(), parts.back().c_str(),
                         O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!file.valid()) return Status::FromErrno("create", errno);
    WARDEN_RETURN_IF_ERROR(Own(file.get(), path));
    std::string_view rest = content;
    while (!rest.empty()) {
      ssize_t n = write(file.get(), rest.data(), rest.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::FromErrno("write", errno);
      rest.remove_prefix(static_cast<size_t>(n));
    }
    return Status::Ok();
  }

  // Matches parts[i..] below `dirfd`; `prefix` is the relative path of `dirfd`.
  void Walk(int dirfd, const std::vector<std::string>& parts, size_t i, const std::string& prefix,
            bool globbing, Collected& c) {
    const std::string& part = parts[i];
    bool last = i + 1 == parts.size();
    std::vector<std::string> names;
    if (!HasGlob(part)) {
      names.push_back(part);
    } else {
      UniqueFd listing(OpenForListing(dirfd));
      DIR* dir = listing.valid() ? fdopendir(listing.release()) : nullptr;
      if (dir == nullptr) return;
      while (dirent* e = readdir(dir)) {
        // FNM_PERIOD: "*" does not match hidden files, as in the shell.
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
            fnmatch(part.c_str(), e->d_name, FNM_PERIOD) == 0)
          names.push_back(e->d_name);
      }
      closedir(dir);
      std::sort(names.begin(), names.end());
    }
    for (const std::string& name : names) {
      std::string path = prefix + name;
      if (last) {
        TakeFile(dirfd, name, path, globbing, c);
        continue;
      }
      UniqueFd sub(openat(dirfd, name.c_str(), kDirOpenFlags));
      if (!sub.valid()) {
        if (errno == ELOOP || errno == ENOTDIR) {
          struct stat st;
          if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
            c.Skip(path, "a symbolic link (not followed)");
          else if (!globbing)
            c.Skip(path, "not a directory");
        } else if (!globbing) {
          c.Skip(path, ErrnoText(errno));
        }
        continue;
      }
      Walk(sub.get(), parts, i + 1, path + "/", globbing, c);
    }
  }

  void TakeFile(int dirfd, const std::string& name, const std::string& path, bool globbing,
                Collected& c) {
    if (!c.seen.insert(path).second) return;
    UniqueFd fd(
        openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    if (!fd.valid()) {
      int err = errno;
      if (err == ELOOP) return c.Skip(path, "a symbolic link (not followed)");
      if (err == ENOENT) return c.Skip(path, "not found");
      return c.Skip(path, ErrnoText(err));
    }
    struct stat st;
    if (fstat(fd.get(), &st) != 0) return c.Skip(path, ErrnoText(errno));
    if (S_ISDIR(st.st_mode)) {
      if (!globbing) c.Skip(path, "a directory");
      return;
    }
    if (!S_ISREG(st.st_mode)) return c.Skip(path, "not a regular file");
    if (c.files.size() >= kExecMaxOutputFiles)
      return c.Skip(path, "more than " + std::to_string(kExecMaxOutputFiles) + " output files");
    std::string content = ReadBack(fd.get(), kExecOutputFileCapBytes + 1);
    bool truncated = content.size() > kExecOutputFileCapBytes;
    if (truncated) content.resize(kExecOutputFileCapBytes);
    json entry = {
        {"path", path}, {"bytes", static_cast<uint64_t>(st.st_size)}, {"truncated", truncated}};
    EncodeContent(content, truncated, entry);
    c.files.push_back(std::move(entry));
  }

  sandbox::user::IdMap ids_ = sandbox::user::ChooseFromParent();
  std::string parent_, path_;
  UniqueFd parent_fd_, fd_;
  bool adopted_ = false;
};

// ---------------------------------------------------------------------------------------------
// Results

json BaseRecord(int exit_code, const std::string& reason) {
  return {{"exit_code", exit_code},
          {"reason", reason},
          {"stdout", ""},
          {"stderr", ""},
          {"wall_ms", 0},
          {"stdout_truncated", false},
          {"stderr_truncated", false}};
}

CallResult SetupFailure(const std::string& error) {
  CallResult r = CallResult::FromText("sandbox__exec could not run: " + error, true);
  json structured = BaseRecord(125, "setup_error");
  structured["error"] = error;
  r.value["structuredContent"] = std::move(structured);
  return r;
}

std::string CancelledError(const std::shared_ptr<CancelToken>& cancel) {
  std::string why = cancel->reason();
  return "cancelled" + (why.empty() ? std::string() : " (" + why + ")") +
         ": the sandbox was killed";
}

// Appends the collected outputs to the text the agent reads: text files in full (they are
// already capped), binary ones as a note.
void DescribeOutputs(const Collected& c, std::string& text) {
  for (const json& f : c.files) {
    if (!text.empty() && text.back() != '\n') text += '\n';
    text += "[output " + f["path"].get<std::string>() + ", " +
            std::to_string(f["bytes"].get<uint64_t>()) + " bytes";
    if (f["truncated"].get<bool>()) text += ", cut at 1 MiB";
    if (f["encoding"] == "base64") {
      text += ", not UTF-8: base64 in structuredContent]\n";
    } else {
      text += "]\n" + f["content"].get<std::string>();
    }
  }
  for (const json& s : c.skipped) {
    if (!text.empty() && text.back() != '\n') text += '\n';
    text += "[output " + s["path"].get<std::string>() +
            " not returned: " + s["reason"].get<std::string>() + "]\n";
  }
}

// Stops the launcher when the call is cancelled. A pidfd rather than the pid: the launcher is
// reaped inside RunViaLauncher, after which its pid may belong to someone else.
void KillOnCancel(const std::shared_ptr<CancelToken>& cancel, pid_t pid) {
  auto pidfd = std::make_shared<UniqueFd>(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  cancel->OnCancel([pidfd] {
    if (pidfd->valid()) syscall(SYS_pidfd_send_signal, pidfd->get(), SIGKILL, nullptr, 0);
  });
}

// Adds the workspace to the options: bound read-write at /work, the working directory.
Status AddWorkspace(const Workspace& ws, sandbox::Options& o) {
  bool other_writable = false;
  for (const sandbox::Bind& b : o.binds) {
    std::string_view inside = b.inside.empty() ? b.host : b.inside;
    if (inside == kExecWorkspaceInside ||
        inside.starts_with(std::string(kExecWorkspaceInside) + "/"))
      return Status::Error("the sandbox profile already binds " + std::string(inside) +
                           ", where the workspace goes");
    other_writable |= b.writable;
  }
  // Protected paths guard an existing project against the command; the fresh workspace has
  // nothing to guard. They stay when another writable bind needs them (they apply to every
  // writable bind).
  if (!other_writable) o.protect.clear();
  o.binds.push_back({.host = ws.host_path(), .inside = kExecWorkspaceInside, .writable = true});
  o.workdir = kExecWorkspaceInside;
  return Status::Ok();
}

// Runs `o` in a sandbox of `pool` with the request's workspace (filled once a sandbox is ours,
// read before the pool removes it). Nothing (std::nullopt) when the pool could not take it: the
// caller runs it cold.
std::optional<json> RunPooledExec(const ExecPool& pool, const ExecRequest& request,
                                  sandbox::Options o, const sandbox::Io& io,
                                  const std::shared_ptr<CancelToken>& cancel,
                                  std::optional<Collected>& collected) {
  // No writable bind but the workspace (ExecPool::Start): the cold run would clear the protected
  // paths too. The working directory is the cold run's.
  o.workdir = request.wants_workspace() ? kExecWorkspaceInside
              : o.workdir.empty()       ? "/tmp"
                                        : o.workdir;
  std::unique_ptr<Workspace> workspace;
  sandbox::pool::PooledRun x;
  x.workspace = request.wants_workspace();
  x.prepare = [&](const std::string& path) -> Status {
    auto adopted = Workspace::Adopt(path);
    if (!adopted) return adopted.status();
    workspace = std::move(*adopted);
    return workspace->Write(request.files);
  };
  x.finish = [&] {
    if (workspace && !request.outputs.empty()) collected = workspace->Collect(request.outputs);
  };
  if (cancel) x.on_accepted = [&cancel](std::function<void()> kill) { cancel->OnCancel(kill); };
  sandbox::RunResult r = sandbox::pool::RunPooled(pool.socket(), o, io, false, &x);
  if (cancel) cancel->OnCancel({});
  if (x.not_served) return std::nullopt;
  return json::parse(sandbox::ToJson(r));
}

// The run in /metrics (its end, the syscalls refused in it, and its proxy's connections) and in
// `facts`, for the anomaly detectors.
void CountRun(const monitor::Families& metrics, const json& record, const std::string& backend,
              const std::string& reason, CallResult::Facts& facts) {
  metrics.sandbox_runs.Add({backend, reason});
  facts.sandbox_end = reason;
  if (auto v = record.find("violations"); v != record.end() && v->is_array()) {
    double refused = static_cast<double>(v->size());
    if (auto d = record.find("violations_dropped"); d != record.end() && d->is_number_unsigned())
      refused += d->get<double>();
    if (refused > 0) metrics.sandbox_violations.Add({backend}, refused);
    facts.refused_syscalls = static_cast<uint64_t>(refused);
  }
  if (auto e = record.find("egress"); e != record.end() && e->is_array()) {
    double allowed = 0, denied = 0;
    for (const json& c : *e) {
      const bool ok = c.is_object() && c.value("allowed", false);
      (ok ? allowed : denied) += 1;
      if (ok) {
        auto host = c.find("host");
        if (host != c.end() && host->is_string() && !host->get<std::string>().empty() &&
            facts.hosts.size() < 256)
          facts.hosts.push_back(host->get<std::string>());
      }
    }
    if (allowed > 0) metrics.egress.Add({"sandbox", "allowed"}, allowed);
    if (denied > 0) metrics.egress.Add({"sandbox", "denied"}, denied);
  }
}

}  // namespace

CallResult RunSandboxExec(const ExecRequest& request, const sandbox::Options& profile,
                          const std::shared_ptr<CancelToken>& cancel, const ExecPool* pool,
                          const std::map<std::string, std::string>& launch_env,
                          const EgressCheck& egress_check) {
  sandbox::Options o = profile;
  o.argv = request.argv;
  if (request.timeout_ms && (o.timeout_ms == 0 || *request.timeout_ms < o.timeout_ms))
    o.timeout_ms = *request.timeout_ms;
  uint64_t cap = kExecOutputCapBytes;
  if (o.output_limit_bytes != 0) cap = std::min(cap, o.output_limit_bytes);
  o.output_limit_bytes = cap;

  if (!request.language.empty() && access(request.argv[0].c_str(), X_OK) != 0)
    return SetupFailure("language " + request.language + " needs " + request.argv[0] +
                        ", which this host does not have");
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
  const int stdin_fd = in.valid() ? in.get() : -1;

  json record;
  std::optional<Collected> collected;
  bool ran = false, pooled = false;
  const monitor::Families& metrics = monitor::Metrics();
  metrics.sandbox_starts.Add({o.backend});
  if (cancel && cancel->cancelled()) {
    record = BaseRecord(137, "signaled");
    ran = true;
  } else if (pool != nullptr && pool->Serves(profile)) {
    auto pooled_record = RunPooledExec(*pool, request, o, {stdin_fd, out->get(), err->get()},
                                       cancel, collected);
    if (pooled_record) {
      record = std::move(*pooled_record);
      ran = pooled = true;
    }
  }
  if (!ran) {
    std::unique_ptr<Workspace> workspace;
    if (request.wants_workspace()) {
      auto created = Workspace::Create();
      if (!created) return SetupFailure("workspace: " + created.status().message());
      workspace = std::move(*created);
      Status st = workspace->Write(request.files);
      if (st.ok()) st = AddWorkspace(*workspace, o);
      if (!st.ok()) return SetupFailure(st.message());
    }
    // The sandbox is a `warden run` child: the gateway is multi-threaded (sandbox/launcher.h).
    sandbox::SpawnIo io{.stdin_fd = stdin_fd, .stdout_fd = out->get(), .stderr_fd = err->get()};
    io.env = launch_env;  // the egress credentials' values, for the child's proxy alone
    // The session check: every attempt the child's allow-list lets through is put to it.
    std::unique_ptr<egress::DecisionServer> decisions;
    UniqueFd child_end;
    if (egress_check && o.net == sandbox::NetMode::kProxy) {
      auto channel = egress::MakeDecisionChannel();
      if (!channel) return SetupFailure(channel.status().message());
      child_end = std::move(channel->second);
      io.decision_fd = child_end.get();
      decisions = std::make_unique<egress::DecisionServer>(
          std::move(channel->first), [&egress_check](const egress::Attempt& a) {
            const std::string host = a.host.find(':') != std::string::npos ? "[" + a.host + "]" : a.host;
            auto why = egress_check(host + ":" + std::to_string(a.port),
                                    {a.target, a.headers, a.body});
            return why ? egress::Decision::Deny(*why) : egress::Decision::Defer();
          });
    }
    std::function<void(pid_t)> on_started;
    if (cancel) on_started = [&cancel](pid_t pid) { KillOnCancel(cancel, pid); };
    record = sandbox::RunViaLauncher(o, io, on_started);
    if (cancel) cancel->OnCancel({});
    if (decisions) decisions->Stop();  // the child is gone: nothing more will ask
    if (workspace && !request.outputs.empty()) collected = workspace->Collect(request.outputs);
  }
  if (cancel && cancel->cancelled()) {
    // The launcher died before writing its record; say what happened instead of setup_error.
    record["exit_code"] = 137;
    record["reason"] = "signaled";
    record["error"] = CancelledError(cancel);
  }
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
  CallResult::Facts facts;
  CountRun(metrics, record, o.backend, reason, facts);

  const bool failed = run.exit_code != 0;
  std::string text = stdout_text;
  if (!stderr_text.empty())
    text += (text.empty() || text.back() == '\n' ? "" : "\n") + std::string("[stderr]\n") +
            stderr_text;
  if (failed) {
    text += (text.empty() || text.back() == '\n' ? "" : "\n") + std::string("[exit code ") +
            std::to_string(run.exit_code) + ", " + reason + "]";
    if (!run.error.empty()) text += " " + run.error;
  }
  json structured = {{"exit_code", run.exit_code},
                     {"reason", reason},
                     {"stdout", stdout_text},
                     {"stderr", stderr_text},
                     {"wall_ms", run.wall_ms},
                     {"stdout_truncated", run.stdout_truncated},
                     {"stderr_truncated", run.stderr_truncated}};
  if (!run.error.empty()) structured["error"] = run.error;
  if (collected) {
    DescribeOutputs(*collected, text);
    structured["outputs"] = std::move(collected->files);
    structured["outputs_skipped"] = std::move(collected->skipped);
  }
  CallResult r = CallResult::FromText(std::move(text), failed);
  r.value["structuredContent"] = std::move(structured);
  r.facts = std::move(facts);
  if (pooled) r.execution = "pre-warmed pool";
  return r;
}

json TaskEndDefinition() {
  return {{"name", "task__end"},
          {"title", "End this task"},
          {"description",
           "Ends the task this call belongs to (_meta[\"warden/task\"], else the session, else the "
           "caller's default task): what the task was exposed to (its trifecta legs) is "
           "forgotten and its other calls still running or waiting for approval are cancelled. "
           "Call it when the task is done. Takes no arguments."},
          {"inputSchema", {{"type", "object"}, {"properties", json::object()}, {"additionalProperties", false}}},
          {"annotations", {{"readOnlyHint", false}, {"destructiveHint", false}, {"idempotentHint", true},
                           {"openWorldHint", false}}}};
}

BuiltinTools BuiltinTools::Default(const ExecPoolSlot* pools) {
  BuiltinTools tools;
  tools.Add({.name = "sandbox__exec",
             .server = "sandbox",
             .definition = SandboxExecDefinition(),
             .run = [pools](const json& arguments, const ToolEnv& env) -> Result<CallResult> {
               auto request = ParseExecArguments(arguments);
               if (!request) return request.status();
               // Held to the end of the call: a reload may replace the pool meanwhile.
               std::shared_ptr<const ExecPool> pool = pools ? pools->Current() : nullptr;
               return RunSandboxExec(*request, env.profile, env.cancel, pool.get(), env.launch_env,
                                     env.trifecta_egress);
             }});
  tools.Add({.name = "web__fetch",
             .server = "web",
             .definition = WebFetchDefinition(),
             .run = [](const json& arguments, const ToolEnv& env) -> Result<CallResult> {
               auto request = ParseFetchArguments(arguments);
               if (!request) return request.status();
               FetchEgress egress{.allow = env.policy ? &env.policy->egress_allow : nullptr};
               if (env.trifecta_recheck) {
                 egress.redirect_check = [&env, &arguments](const std::string& url) {
                   json hop = arguments;
                   hop["url"] = url;
                   return env.trifecta_recheck(hop);
                 };
               }
               return RunWebFetch(*request, egress, env.cancel);
             }});
  tools.Add({.name = "task__end",
             .server = "task",
             .definition = TaskEndDefinition(),
             .run = [](const json& arguments, const ToolEnv& env) -> Result<CallResult> {
               if (!arguments.is_object() || !arguments.empty())
                 return Status::Error("task__end takes no arguments");
               if (!env.end_task)
                 return CallResult::FromText("task__end: this call belongs to no task warden tracks", true);
               auto ended = env.end_task();
               if (!ended) return CallResult::FromText("task__end: " + ended.status().message(), true);
               CallResult r = CallResult::FromText(ended->value("summary", std::string("task ended")), false);
               r.value["structuredContent"] = std::move(*ended);
               return r;
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
