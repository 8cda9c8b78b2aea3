// What the gateway benchmarks (gateway_bench.cc, sessions_bench.cc) share: starting and stopping a
// target process, finding its endpoint, JSON-RPC replies in JSON or SSE bodies, the MCP requests
// they send, percentiles, and the process table under /proc. Header-only: each benchmark is one
// translation unit.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

extern char** environ;

namespace warden::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

inline constexpr const char* kProtocolVersion = "2025-06-18";

// "a,b,c" -> {a, b, c} (--targets); SplitList(v, ' ') splits at runs of spaces (--warden-args).
inline std::vector<std::string> SplitList(const std::string& text, char separator) {
  std::vector<std::string> out;
  std::istringstream in(text);
  if (separator == ' ') {
    for (std::string t; in >> t;) out.push_back(t);
  } else {
    for (std::string t; std::getline(in, t, separator);) out.push_back(t);
  }
  return out;
}

inline double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(p * v.size())) - 1;
  return v[std::min(i, v.size() - 1)];
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string LoadAverage() {
  std::istringstream in(ReadFile("/proc/loadavg"));
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

// ---- MCP over Streamable HTTP: the requests and their replies ----

struct Endpoint {
  std::string host;
  std::string port;
  std::string path;
};

// http://HOST:PORT/PATH only (all targets listen on loopback).
inline Result<Endpoint> ParseUrl(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) return Status::Error("not an http:// URL: '" + url + "'");
  size_t slash = url.find('/', scheme.size());
  std::string hostport = url.substr(scheme.size(), slash - scheme.size());
  size_t colon = hostport.rfind(':');
  if (colon == std::string::npos || slash == std::string::npos) {
    return Status::Error("URL without a port or path: '" + url + "'");
  }
  return Endpoint{hostport.substr(0, colon), hostport.substr(colon + 1), url.substr(slash)};
}

inline std::string InitializeBody(int64_t id, const std::string& client_name) {
  nlohmann::json init = {{"jsonrpc", "2.0"},
                         {"id", id},
                         {"method", "initialize"},
                         {"params",
                          {{"protocolVersion", kProtocolVersion},
                           {"capabilities", nlohmann::json::object()},
                           {"clientInfo", {{"name", client_name}, {"version", "1"}}}}}};
  return init.dump();
}

inline constexpr const char* kInitializedBody =
    R"({"jsonrpc":"2.0","method":"notifications/initialized"})";

inline std::string ToolsListBody(int64_t id) {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"method":"tools/list"})";
}

// The text an echo call with this id sends (and must get back).
inline std::string EchoText(int64_t id) { return "bench " + std::to_string(id); }

// A tools/call of `tool` (echo, or PREFIX__echo behind a gateway that prefixes) with EchoText(id).
inline std::string EchoCallBody(int64_t id, const std::string& tool) {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
         R"(,"method":"tools/call","params":{"name":")" + tool + R"(","arguments":{"text":")" +
         EchoText(id) + R"("}}})";
}

// The JSON-RPC response with `id` in a JSON body or in the data lines of an SSE stream. A
// JSON-RPC error reply is returned too (the caller decides); a body without the id is an error.
inline Result<nlohmann::json> FindReply(const std::string& body, int64_t id) {
  std::vector<std::string> candidates;
  if (!body.empty() && body[0] == '{') {
    candidates.push_back(body);
  } else {
    std::istringstream lines(body);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("data:", 0) == 0) candidates.push_back(line.substr(5));
    }
  }
  for (const auto& text : candidates) {
    auto msg = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (msg.is_object() && msg.contains("id") && msg["id"] == id) return msg;
  }
  return Status::Error("no reply for id " + std::to_string(id) + " in '" + body.substr(0, 300) +
                       "'");
}

// Checks that `body` answers the echo call `id` with its text.
inline Status CheckEchoReply(const std::string& body, int64_t id) {
  auto msg = FindReply(body, id);
  if (!msg.ok()) return msg.status();
  if (msg->contains("error")) return Status::Error("tools/call: error " + (*msg)["error"].dump());
  const auto& content = (*msg)["result"]["content"];
  if (!content.is_array() || content.empty() || content[0].value("text", "") != EchoText(id)) {
    return Status::Error("tools/call: unexpected reply " + msg->dump().substr(0, 300));
  }
  return Status::Ok();
}

// ---- The targets: processes started for the run and stopped at its end ----

struct TargetSpec {
  std::string name;
  std::vector<std::string> argv;
  // Either the endpoint is announced on stderr after `announce`, or it is fixed (port chosen here).
  std::string announce;
  std::string fixed_url;
};

struct Running {
  TargetSpec spec;
  pid_t pid = -1;
  std::string log;  // stdout and stderr of the target
  Endpoint endpoint;
};

// A port free right now on 127.0.0.1, for the gateways that take --port but cannot announce it.
inline int FreePort() {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return acceptor.local_endpoint().port();
}

// Starts argv in its own process group (so that stopping it stops the servers it started), with
// stdin from /dev/null and stdout+stderr to `log`.
inline Result<pid_t> Spawn(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> a;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, a[0], &fa, &attr, a.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Status::FromErrno("spawn " + argv[0], rc);
  return pid;
}

// Waits (up to 60 s) until the target announces its endpoint or accepts on its fixed port.
inline Status AwaitReady(Running& t) {
  auto t0 = Clock::now();
  while (SecondsSince(t0) < 60) {
    int status = 0;
    if (waitpid(t.pid, &status, WNOHANG) == t.pid) {
      t.pid = -1;
      return Status::Error("exited before serving; its output: " + ReadFile(t.log).substr(0, 600));
    }
    std::string url = t.spec.fixed_url;
    if (!t.spec.announce.empty()) {
      std::string out = ReadFile(t.log);
      size_t at = out.find(t.spec.announce);
      if (at != std::string::npos) {
        size_t start = at + t.spec.announce.size();
        size_t end = out.find_first_of(" \n", start);
        if (end != std::string::npos) url = out.substr(start, end - start);
      }
    }
    if (!url.empty()) {
      auto ep = ParseUrl(url);
      if (!ep.ok()) return ep.status();
      asio::io_context io;
      tcp::socket probe(io);
      beast::error_code ec;
      probe.connect(tcp::endpoint(asio::ip::make_address(ep->host), std::stoi(ep->port)), ec);
      if (!ec) {
        t.endpoint = *ep;
        return Status::Ok();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status::Error("not serving after 60 s; its output: " + ReadFile(t.log).substr(0, 600));
}

// SIGTERM to the target's process group, `grace` for it to exit, then SIGKILL to what is left of
// the group (servers it started that stayed in it).
inline void Stop(Running& t, std::chrono::milliseconds grace = std::chrono::seconds(5)) {
  if (t.pid <= 0) return;
  kill(-t.pid, SIGTERM);
  auto t0 = Clock::now();
  while (Clock::now() - t0 < grace) {
    if (waitpid(t.pid, nullptr, WNOHANG) == t.pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(-t.pid, SIGKILL);
  waitpid(t.pid, nullptr, WNOHANG);
  t.pid = -1;
}

// ---- The process table ----

struct ProcInfo {
  pid_t ppid = 0;
  double cpu_s = 0;          // user+system time
  uint64_t start_ticks = 0;  // start time since boot, in clock ticks: tells a reused pid apart
};

// Every process now (/proc/PID/stat; processes that vanish while being read are skipped).
inline std::map<pid_t, ProcInfo> ReadProcs() {
  std::map<pid_t, ProcInfo> procs;
  static const double kTick = static_cast<double>(sysconf(_SC_CLK_TCK));
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return procs;
  while (dirent* e = readdir(dir)) {
    pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::string stat = ReadFile("/proc/" + std::string(e->d_name) + "/stat");
    size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 > stat.size()) continue;
    std::istringstream fields(stat.substr(paren + 2));
    std::vector<std::string> f{std::istream_iterator<std::string>(fields), {}};
    // Fields from state (3) on: ppid is f[1], utime f[11], stime f[12], starttime f[19].
    if (f.size() < 20) continue;
    procs[pid] = {std::atoi(f[1].c_str()), (std::stod(f[11]) + std::stod(f[12])) / kTick,
                  std::strtoull(f[19].c_str(), nullptr, 10)};
  }
  closedir(dir);
  return procs;
}

// Whether `pid` is `root` or one of its descendants in `procs`.
inline bool InTree(const std::map<pid_t, ProcInfo>& procs, pid_t pid, pid_t root) {
  for (pid_t p = pid; p > 1;) {
    if (p == root) return true;
    auto it = procs.find(p);
    if (it == procs.end()) return false;
    p = it->second.ppid;
  }
  return false;
}

// `root` and its descendants, root first.
inline std::vector<pid_t> TreeOf(const std::map<pid_t, ProcInfo>& procs, pid_t root) {
  std::vector<pid_t> tree;
  if (procs.count(root)) tree.push_back(root);
  for (const auto& [pid, info] : procs) {
    if (pid != root && InTree(procs, pid, root)) tree.push_back(pid);
  }
  return tree;
}

}  // namespace warden::bench
