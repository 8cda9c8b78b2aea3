// What many concurrent MCP sessions cost a gateway: N Streamable HTTP sessions are opened and held
// (initialize, notifications/initialized, one tools/call of the echo tool each, so that every
// session's upstream is really in use), then the target's memory and processes are measured:
//   - the gateway process's VmRSS, and for its whole process tree (the gateway and every
//     descendant, found by walking /proc): the number of processes, the sum of VmRSS and the sum
//     of Pss (/proc/PID/smaps_rollup: shared pages split between the processes mapping them, so
//     the sum is what the tree costs the machine);
//   - how many sessions got a correct echo answer, how many were refused (HTTP 503, or JSON-RPC
//     -32004) and the Retry-After values seen;
//   - with all N held: the latency of one more echo call on each of LIVE (default 100) of them,
//     sequentially, to show that the held sessions are live.
// Targets:
//   warden-per_user     `warden serve --config POLICY`: U users with an API key each (sessions
//                       round-robin over them), the echo upstream with `instances: per_user`;
//   warden-shared       the same with `instances: shared`;
//   warden-per_session  the same with `instances: per_session` (one upstream process per session);
//                       against a warden without the instance model (the key is refused at load)
//                       the policy is written without the key: per-session is its only behaviour;
//   supergateway        npm supergateway 4 (stdio -> Streamable HTTP, --stateful): one upstream per
//                       session by design; the peer.
//   direct              (not run by default) the echo server serving Streamable HTTP itself, one
//                       Node process holding every session: what a session costs the SDK alone,
//                       and a check of this client at N sessions without a Node process each.
// Every target fronts bench/fixtures/echo_server.mjs over stdio.
//
// The client is this process: one thread, Boost.Asio coroutines. An MCP session over HTTP is its
// Mcp-Session-Id, not a TCP connection, so sessions are not tied to connections: OPEN (default 16)
// coroutines each keep one keep-alive connection and open sessions on it one after the other, and
// the live calls go over one connection. The client then holds N session ids and OPEN sockets
// instead of N sockets, and the gateway's memory is not inflated by N idle connections.
//
// usage: sessions_bench [--targets warden-per_user,warden-shared,warden-per_session,supergateway]
//                       [--sessions N] [--per-session-n N] [--peer-n N] [--users U]
//                       [--open-concurrency K] [--live-calls L] [--max-instances M]
//                       [--settle-ms MS] [--min-available-mib MIB] [--warden-args 'ARGS']
//   N sessions for warden-per_user, warden-shared and direct (default 1000); --per-session-n for
//   warden-per_session and --peer-n for supergateway (default 100 each, at most 300: each session
//   costs a Node process there). Opening stops early when the machine's MemAvailable falls below
//   MIB (default 4096). WARDEN_BIN picks the warden binary, WARDEN_BENCH_DIR (default /var/tmp)
//   holds the policy, the audit log and the targets' output, WARDEN_BENCH_KEEP=1 keeps them.
#include <openssl/evp.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_http.h"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::awaitable;
using asio::ip::tcp;
using warden::Result;
using warden::Status;
using warden::bench::Clock;
using warden::bench::Endpoint;
using warden::bench::Percentile;
using warden::bench::ReadFile;
using warden::bench::Running;
using warden::bench::SplitList;
using warden::bench::SecondsSince;
using warden::bench::TargetSpec;

constexpr auto kAwait = asio::as_tuple(asio::use_awaitable);
constexpr int kMaxPeerSessions = 300;  // supergateway and per-session warden: a Node process each

volatile sig_atomic_t g_interrupted = 0;
void OnSignal(int) { g_interrupted = 1; }

// ---- Options ----

struct Options {
  std::vector<std::string> targets = {"warden-per_user", "warden-shared", "warden-per_session",
                                      "supergateway"};
  int sessions = 1000, per_session_n = 100, peer_n = 100, users = 10;
  int open_concurrency = 16, live_calls = 100, max_instances = 2000;
  int settle_ms = 2000, min_available_mib = 4096;
  std::vector<std::string> warden_args;
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr, "sessions_bench: %s (usage: the top of bench/sessions_bench.cc)\n",
               why.c_str());
  std::exit(2);
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) Usage(a + " wants a value");
    std::string v = argv[++i];
    if (a == "--targets") {
      o.targets = SplitList(v, ',');
      continue;
    }
    if (a == "--warden-args") {
      for (std::string& t : SplitList(v, ' ')) o.warden_args.push_back(std::move(t));
      continue;
    }
    char* end = nullptr;
    long n = std::strtol(v.c_str(), &end, 10);
    if (end == v.c_str() || *end != '\0' || n <= 0 || n > 1000000) {
      Usage(a + " wants a positive number, got '" + v + "'");
    }
    int* field = a == "--sessions"            ? &o.sessions
                 : a == "--per-session-n"     ? &o.per_session_n
                 : a == "--peer-n"            ? &o.peer_n
                 : a == "--users"             ? &o.users
                 : a == "--open-concurrency"  ? &o.open_concurrency
                 : a == "--live-calls"        ? &o.live_calls
                 : a == "--max-instances"     ? &o.max_instances
                 : a == "--settle-ms"         ? &o.settle_ms
                 : a == "--min-available-mib" ? &o.min_available_mib
                                              : nullptr;
    if (field == nullptr) Usage("unknown option '" + a + "'");
    *field = static_cast<int>(n);
  }
  for (const auto& t : o.targets) {
    if (t != "warden-per_user" && t != "warden-shared" && t != "warden-per_session" &&
        t != "supergateway" && t != "direct") {
      Usage("unknown target '" + t +
            "' (warden-per_user, warden-shared, warden-per_session, supergateway, direct)");
    }
  }
  // 500 supergateway sessions once took 13.9 GiB here (a Node process each); the machine has 24.
  if (o.peer_n > kMaxPeerSessions) {
    Usage("--peer-n " + std::to_string(o.peer_n) +
          " is refused: supergateway runs a Node process " +
          "per session (500 sessions took 13.9 GiB here); at most " +
          std::to_string(kMaxPeerSessions));
  }
  if (o.per_session_n > kMaxPeerSessions) {
    Usage("--per-session-n " + std::to_string(o.per_session_n) +
          " is refused: a Node process per session; at most " + std::to_string(kMaxPeerSessions));
  }
  return o;
}

// ---- Memory and processes ----

uint64_t MemAvailableMiB() {
  std::istringstream in(ReadFile("/proc/meminfo"));
  for (std::string key; in >> key;) {
    uint64_t kib = 0;
    in >> kib;
    if (key == "MemAvailable:") return kib / 1024;
    in.ignore(1 << 10, '\n');
  }
  return 0;
}

// The value in kB of `key` ("VmRSS:", "Pss:") in a /proc file of "Key: N kB" lines; 0 if absent.
uint64_t KiBField(const std::string& path, const std::string& key) {
  std::istringstream in(ReadFile(path));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) == 0) return std::strtoull(line.c_str() + key.size(), nullptr, 10);
  }
  return 0;
}

// An echo server itself: `node .../echo_server.mjs ...` (not the shell, sandbox launcher or gateway
// whose command line names it).
bool IsEchoServer(pid_t pid) {
  std::string cmdline = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
  size_t end0 = cmdline.find('\0');
  if (end0 == std::string::npos) return false;
  std::string exe = cmdline.substr(0, end0);
  std::string arg1 = cmdline.substr(end0 + 1, cmdline.find('\0', end0 + 1) - end0 - 1);
  auto ends_with = [](const std::string& a, const std::string& b) {
    return a.size() >= b.size() && a.compare(a.size() - b.size(), b.size(), b) == 0;
  };
  return (exe == "node" || ends_with(exe, "/node")) &&
         ends_with(arg1, "bench/fixtures/echo_server.mjs");
}

struct TreeMemory {
  int processes = 0;
  int upstreams = 0;  // echo_server.mjs processes among them
  uint64_t gateway_rss_kib = 0, rss_kib = 0, pss_kib = 0;
  std::vector<std::pair<pid_t, uint64_t>> members;  // (pid, start time): for the leftover check
};

TreeMemory MeasureTree(pid_t root) {
  TreeMemory m;
  auto procs = warden::bench::ReadProcs();
  for (pid_t pid : warden::bench::TreeOf(procs, root)) {
    std::string dir = "/proc/" + std::to_string(pid);
    uint64_t rss = KiBField(dir + "/status", "VmRSS:");
    m.processes++;
    m.rss_kib += rss;
    m.pss_kib += KiBField(dir + "/smaps_rollup", "Pss:");
    if (pid == root) m.gateway_rss_kib = rss;
    if (IsEchoServer(pid)) m.upstreams++;
    m.members.emplace_back(pid, procs[pid].start_ticks);
  }
  return m;
}

// ---- The client ----

struct Reply {
  Status status;  // transport failure (the HTTP status is not judged here)
  int http = 0;
  std::string body, session_id, retry_after;
};

// One keep-alive connection, used by one coroutine at a time; any session's requests may go on it.
class Connection {
 public:
  Connection(asio::io_context& io, const Endpoint& ep) : stream_(io), ep_(ep) {
    target_ = tcp::endpoint(asio::ip::make_address(ep.host),
                            static_cast<unsigned short>(std::stoi(ep.port)));
  }

  awaitable<Reply> Post(const std::string& body, const std::string& session_id,
                        const std::string& key) {
    http::request<http::string_body> req{http::verb::post, ep_.path, 11};
    req.set(http::field::content_type, "application/json");
    req.set(http::field::accept, "application/json, text/event-stream");
    req.body() = body;
    req.prepare_payload();
    co_return co_await Exchange(req, session_id, key);
  }

  awaitable<Reply> Delete(const std::string& session_id, const std::string& key) {
    http::request<http::string_body> req{http::verb::delete_, ep_.path, 11};
    co_return co_await Exchange(req, session_id, key);
  }

 private:
  awaitable<Reply> Exchange(http::request<http::string_body>& req, const std::string& session_id,
                            const std::string& key) {
    req.set(http::field::host, ep_.host + ":" + ep_.port);
    if (!key.empty()) req.set(http::field::authorization, "Bearer " + key);
    if (!session_id.empty()) {
      req.set("Mcp-Session-Id", session_id);
      req.set("MCP-Protocol-Version", warden::bench::kProtocolVersion);
    }
    Reply out;
    for (int attempt = 0; attempt < 2; ++attempt) {
      bool fresh = false;
      if (!open_) {
        stream_.expires_after(std::chrono::seconds(10));
        auto [ec] = co_await stream_.async_connect(target_, kAwait);
        if (ec) {
          out.status = Status::Error("connect " + ep_.host + ":" + ep_.port + ": " + ec.message());
          co_return out;
        }
        stream_.socket().set_option(tcp::no_delay(true));
        buffer_.clear();
        open_ = fresh = true;
      }
      // Generous: a per-session upstream starts a sandbox and Node, on a loaded machine.
      stream_.expires_after(std::chrono::seconds(120));
      auto [wec, wn] = co_await http::async_write(stream_, req, kAwait);
      http::response_parser<http::string_body> parser;
      parser.body_limit(16 << 20);
      beast::error_code ec = wec;
      if (!ec) {
        auto [rec, rn] = co_await http::async_read(stream_, buffer_, parser, kAwait);
        ec = rec;
      }
      if (!ec) {
        auto res = parser.release();
        out.http = res.result_int();
        if (auto it = res.find("Mcp-Session-Id"); it != res.end()) out.session_id = it->value();
        if (auto it = res.find(http::field::retry_after); it != res.end()) {
          out.retry_after = it->value();
        }
        if (!res.keep_alive()) Close();
        out.body = std::move(res.body());
        co_return out;
      }
      Close();
      // A kept connection the server closed while it was idle: once more on a new one.
      if (fresh || ec == beast::error::timeout) {
        out.status = Status::Error(std::string(req.method_string()) + ": " + ec.message());
        co_return out;
      }
    }
    out.status = Status::Error("the connection failed twice");
    co_return out;
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    open_ = false;
  }

  beast::tcp_stream stream_;
  Endpoint ep_;
  tcp::endpoint target_;
  beast::flat_buffer buffer_;
  bool open_ = false;
};

struct Session {
  std::string key;  // the API key its requests carry (empty for supergateway)
  std::string id;   // Mcp-Session-Id
  int64_t next_id = 1;
  bool ok = false;       // got its echo answer
  bool refused = false;  // HTTP 503 or -32004
  std::string retry_after;
  std::string refused_at;  // the step refused
  std::string error;       // anything else
  double open_s = 0;       // initialize to the echo answer
};

// A refusal for lack of instances: HTTP 503, or a JSON-RPC error -32004 in any reply.
bool IsRefusal(const Reply& r, int64_t id) {
  if (r.http == 503) return true;
  auto msg = warden::bench::FindReply(r.body, id);
  return msg.ok() && msg->contains("error") && (*msg)["error"].value("code", 0) == -32004;
}

struct Run {
  asio::io_context& io;
  Endpoint ep;
  std::string tool;  // echo__echo behind warden (prefix echo), echo behind supergateway
  std::vector<Session>& sessions;
  int next = 0;
  int min_available_mib;
  std::string stopped_early;  // why opening stopped before N
};

// Does one step of a session; false when it ended the session (refused or failed).
bool Judge(Session& s, const Reply& r, int64_t id, const std::string& step) {
  if (!r.status.ok()) {
    s.error = step + ": " + r.status.message();
    return false;
  }
  if (IsRefusal(r, id)) {
    s.refused = true;
    s.refused_at = step;
    s.retry_after = r.retry_after.empty() ? "(none)" : r.retry_after;
    return false;
  }
  if (r.http / 100 != 2) {
    s.error = step + ": HTTP " + std::to_string(r.http) + ": " + r.body.substr(0, 200);
    return false;
  }
  return true;
}

awaitable<void> OpenOne(Run& run, Connection& conn, Session& s) {
  auto t0 = Clock::now();
  int64_t id = s.next_id++;
  Reply init =
      co_await conn.Post(warden::bench::InitializeBody(id, "warden-sessions-bench"), "", s.key);
  if (!Judge(s, init, id, "initialize")) co_return;
  if (init.session_id.empty()) {
    s.error = "initialize: no Mcp-Session-Id in the reply";
    co_return;
  }
  s.id = init.session_id;
  Reply ack = co_await conn.Post(warden::bench::kInitializedBody, s.id, s.key);
  if (!Judge(s, ack, -1, "notifications/initialized")) co_return;
  id = s.next_id++;
  Reply call = co_await conn.Post(warden::bench::EchoCallBody(id, run.tool), s.id, s.key);
  if (!Judge(s, call, id, "tools/call")) co_return;
  Status st = warden::bench::CheckEchoReply(call.body, id);
  if (!st.ok()) {
    s.error = st.message();
    co_return;
  }
  s.ok = true;
  s.open_s = SecondsSince(t0);
}

awaitable<void> Opener(Run& run) {
  Connection conn(run.io, run.ep);
  while (!g_interrupted && run.stopped_early.empty() &&
         run.next < static_cast<int>(run.sessions.size())) {
    uint64_t avail = MemAvailableMiB();
    if (avail < static_cast<uint64_t>(run.min_available_mib)) {
      run.stopped_early = "stopped opening at session " + std::to_string(run.next) +
                          ": MemAvailable " + std::to_string(avail) + " MiB < " +
                          std::to_string(run.min_available_mib);
      break;
    }
    Session& s = run.sessions[run.next++];
    co_await OpenOne(run, conn, s);
  }
}

awaitable<void> LiveCalls(Run& run, std::vector<Session*> picked, std::vector<double>& ms,
                          std::string& failure) {
  Connection conn(run.io, run.ep);
  for (Session* s : picked) {
    if (g_interrupted) break;
    int64_t id = s->next_id++;
    auto t0 = Clock::now();
    Reply r = co_await conn.Post(warden::bench::EchoCallBody(id, run.tool), s->id, s->key);
    double elapsed = SecondsSince(t0) * 1e3;
    Status st = r.status;
    if (st.ok() && r.http / 100 != 2) st = Status::Error("HTTP " + std::to_string(r.http));
    if (st.ok()) st = warden::bench::CheckEchoReply(r.body, id);
    if (!st.ok()) {
      if (failure.empty()) failure = "live call on session " + s->id + ": " + st.message();
      continue;
    }
    ms.push_back(elapsed);
  }
}

awaitable<void> Closer(Run& run, std::vector<Session*>& todo, size_t& next) {
  Connection conn(run.io, run.ep);
  while (next < todo.size()) {
    Session* s = todo[next++];
    co_await conn.Delete(s->id, s->key);
  }
}

// ---- Targets ----

std::string Sha256Hex(const std::string& text) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), md, &len, EVP_sha256(), nullptr);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

std::vector<std::string> MakeKeys(int n) {
  std::random_device rd;
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) {
    std::string k = "wk_bench_" + std::to_string(i) + "_";
    for (int j = 0; j < 4; ++j) {
      char buf[9];
      std::snprintf(buf, sizeof buf, "%08x", rd());
      k += buf;
    }
    keys.push_back(k);
  }
  return keys;
}

// The policy for a warden target: U users, an agent with one API key each, the echo upstream with
// `instances: MODE` (no instance keys when `mode` is empty), a rule allowing its tools, the audit
// log in `dir`, no pre-warmed sandbox__exec pool (it is not what is measured).
std::string WardenPolicy(const std::string& mode, const std::vector<std::string>& keys,
                         const std::string& echo_server, const std::string& audit_db,
                         const Options& o) {
  std::ostringstream y;
  y << "version: 1\n"
    << "storage: { sqlite: \"" << audit_db << "\", sync: normal }\n"
    << "identity:\n  tenants:\n    bench:\n      users:\n";
  for (size_t i = 0; i < keys.size(); ++i) y << "        u" << i << ": {}\n";
  y << "      agents:\n";
  for (size_t i = 0; i < keys.size(); ++i) {
    y << "        a" << i << ": { user: u" << i << ", keys: [\"sha256:" << Sha256Hex(keys[i])
      << "\"] }\n";
  }
  y << "upstreams:\n  echo:\n    command: [\"node\", \"" << echo_server << "\"]\n";
  if (!mode.empty()) {
    y << "    instances: " << mode << "\n    max_instances: " << o.max_instances << "\n";
  }
  y << "sandbox:\n  pool: { size: 0 }\n"
    << "tools:\n  - match: { server: \"echo\" }\n    risk: low\n    effect: allow\n"
    << "defaults:\n  unknown_tool: { risk: high, effect: deny }\n";
  return y.str();
}

struct Figures {
  std::string name;
  int asked = 0, open = 0, refused = 0, failed = 0;
  std::map<std::string, int> retry_after;  // value -> refusals
  std::string first_error, stopped_early, note, failure;
  TreeMemory base, held;
  double open_wall_s = 0;
  std::vector<double> open_s, live_ms;
  std::vector<std::string> leftovers;
};

// Stops the target and checks that its whole tree is gone: every process of the last snapshot
// (pid and start time, so a reused pid is not mistaken for it) must vanish; survivors get SIGKILL
// by pid and are reported.
void StopAndCheck(Running& t, Figures& f) {
  if (t.pid <= 0) return;
  pid_t root = t.pid;
  auto snapshot = MeasureTree(root).members;
  warden::bench::Stop(t, std::chrono::seconds(20));
  auto alive = [](const std::pair<pid_t, uint64_t>& m) {
    auto procs = warden::bench::ReadProcs();
    auto it = procs.find(m.first);
    return it != procs.end() && it->second.start_ticks == m.second;
  };
  auto t0 = Clock::now();
  std::vector<std::pair<pid_t, uint64_t>> left;
  do {
    left.clear();
    for (const auto& m : snapshot) {
      if (m.first != root && alive(m)) left.push_back(m);
    }
    if (left.empty()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (SecondsSince(t0) < 10);
  for (const auto& m : left) {
    std::string comm = ReadFile("/proc/" + std::to_string(m.first) + "/comm");
    if (!comm.empty() && comm.back() == '\n') comm.pop_back();
    f.leftovers.push_back(std::to_string(m.first) + " (" + comm + ")");
    kill(m.first, SIGKILL);
  }
}

// Echo servers running now that the target did not start (so that the end check can tell).
std::set<pid_t> EchoServersNow() {
  std::set<pid_t> out;
  for (const auto& [pid, info] : warden::bench::ReadProcs()) {
    if (IsEchoServer(pid)) out.insert(pid);
  }
  return out;
}

struct Target {
  std::string name;
  int n = 0;
  std::string mode;  // warden's instances value; empty for supergateway
};

class TargetRun {
 public:
  TargetRun(const Target& t, const Options& o, const std::string& dir) : t_(t), o_(o), dir_(dir) {
    f_.name = t.name;
    f_.asked = t.n;
  }
  ~TargetRun() { StopAndCheck(running_, f_); }  // on every path out, errors included

  Figures Go() {
    Status st = Start();
    if (st.ok()) st = Measure();
    if (!st.ok()) f_.failure = st.message();
    StopAndCheck(running_, f_);
    return f_;
  }

 private:
  Status StartWith(const TargetSpec& spec) {
    running_ = Running{};
    running_.spec = spec;
    running_.log = dir_ + "/" + t_.name + ".log";
    auto pid = warden::bench::Spawn(spec.argv, running_.log);
    if (!pid.ok()) return pid.status();
    running_.pid = *pid;
    return warden::bench::AwaitReady(running_);
  }

  Status Start() {
    const std::string echo = std::filesystem::absolute("bench/fixtures/echo_server.mjs").string();
    if (t_.name == "direct") {  // the echo server holding every session itself
      tool_ = "echo";
      return StartWith({t_.name, {"node", echo, "--http", "0"}, "MCP endpoint ", ""});
    }
    if (t_.mode.empty()) {  // supergateway
      std::string port = std::to_string(warden::bench::FreePort());
      tool_ = "echo";
      return StartWith({t_.name,
                        {"tests/e2e/node_modules/.bin/supergateway", "--stdio", "node " + echo,
                         "--outputTransport", "streamableHttp", "--stateful", "--port", port,
                         "--logLevel", "none"},
                        "",
                        "http://127.0.0.1:" + port + "/mcp"});
    }
    tool_ = "echo__echo";
    keys_ = MakeKeys(o_.users);
    const char* bin = std::getenv("WARDEN_BIN");
    const std::string policy = dir_ + "/" + t_.name + ".yaml";
    auto spec_for = [&](const std::string& mode) {
      std::ofstream(policy) << WardenPolicy(mode, keys_, echo, dir_ + "/" + t_.name + ".db", o_);
      std::vector<std::string> argv = {
          bin ? bin : WARDEN_BIN, "serve", "--config", policy, "--listen", "127.0.0.1:0"};
      argv.insert(argv.end(), o_.warden_args.begin(), o_.warden_args.end());
      return TargetSpec{t_.name, argv, "MCP endpoint ", ""};
    };
    Status st = StartWith(spec_for(t_.mode));
    if (st.ok() || st.message().find("unknown key 'instances'") == std::string::npos) return st;
    // A warden from before the instance model: per-session upstreams are all it has.
    if (t_.mode != "per_session") {
      return Status::Error(
          "this warden has no instance model (`instances` is an unknown key); "
          "set WARDEN_BIN to a warden that has it");
    }
    f_.note = "this warden has no `instances` key: the policy has none (per-session upstreams)";
    StopAndCheck(running_, f_);
    return StartWith(spec_for(""));
  }

  Status Measure() {
    std::this_thread::sleep_for(std::chrono::milliseconds(o_.settle_ms));
    f_.base = MeasureTree(running_.pid);

    std::vector<Session> sessions(t_.n);
    for (int i = 0; i < t_.n; ++i) {
      if (!keys_.empty()) sessions[i].key = keys_[i % keys_.size()];
    }
    asio::io_context io;
    Run run{io, running_.endpoint, tool_, sessions, 0, o_.min_available_mib, ""};
    auto t0 = Clock::now();
    for (int k = 0; k < std::min(o_.open_concurrency, t_.n); ++k) {
      asio::co_spawn(io, Opener(run), asio::detached);
    }
    io.run();
    f_.open_wall_s = SecondsSince(t0);
    f_.stopped_early = run.stopped_early;
    std::vector<Session*> open, with_id;
    for (auto& s : sessions) {
      if (!s.id.empty()) with_id.push_back(&s);
      if (s.ok) {
        f_.open++;
        f_.open_s.push_back(s.open_s);
        open.push_back(&s);
      } else if (s.refused) {
        f_.refused++;
        f_.retry_after["at " + s.refused_at + ", Retry-After: " + s.retry_after]++;
      } else if (!s.error.empty()) {
        f_.failed++;
        if (f_.first_error.empty()) f_.first_error = s.error;
      }
    }
    if (g_interrupted) return Status::Error("interrupted");

    std::this_thread::sleep_for(std::chrono::milliseconds(o_.settle_ms));
    f_.held = MeasureTree(running_.pid);

    // The live calls: L held sessions spread evenly over those open.
    std::vector<Session*> picked;
    size_t l = std::min<size_t>(o_.live_calls, open.size());
    for (size_t i = 0; i < l; ++i) picked.push_back(open[i * open.size() / l]);
    std::string live_failure;
    io.restart();
    asio::co_spawn(io, LiveCalls(run, picked, f_.live_ms, live_failure), asio::detached);
    io.run();
    if (!live_failure.empty() && f_.first_error.empty()) f_.first_error = live_failure;

    // End every session the target gave an id, refused ones too, as a client would (a per-session
    // upstream stops with its session).
    size_t next = 0;
    io.restart();
    for (int k = 0; k < o_.open_concurrency; ++k) {
      asio::co_spawn(io, Closer(run, with_id, next), asio::detached);
    }
    io.run();
    if (g_interrupted) return Status::Error("interrupted");
    if (f_.open == 0) return Status::Error("no session opened: " + f_.first_error);
    return Status::Ok();
  }

  Target t_;
  const Options& o_;
  std::string dir_;
  Running running_;
  std::vector<std::string> keys_;
  std::string tool_;
  Figures f_;
};

// ---- Report ----

double MiB(uint64_t kib) { return static_cast<double>(kib) / 1024; }

void Report(const std::vector<Figures>& all) {
  std::printf("\n%-19s %5s %5s %4s %4s | %5s %4s | %7s %8s %8s %8s %8s %7s | %6s %7s %7s\n",
              "target", "N", "open", "refd", "fail", "procs", "upst", "gw RSS", "tree RSS",
              "tree PSS", "base PSS", "PSS/ses", "+PSS/s", "open s", "call50", "call99");
  std::printf("%-19s %5s %5s %4s %4s | %5s %4s | %7s %8s %8s %8s %8s %7s | %6s %7s %7s\n", "", "",
              "", "", "", "", "", "MiB", "MiB", "MiB", "MiB", "KiB", "KiB", "", "ms", "ms");
  for (const auto& f : all) {
    if (!f.failure.empty() && (f.open == 0 || f.held.processes == 0)) {  // no held figures
      std::printf("%-19s %5d not measured: %s\n", f.name.c_str(), f.asked, f.failure.c_str());
      continue;
    }
    double per = f.open > 0 ? static_cast<double>(f.held.pss_kib) / f.open : NAN;
    double marginal =
        f.open > 0 ? (static_cast<double>(f.held.pss_kib) - f.base.pss_kib) / f.open : NAN;
    std::printf(
        "%-19s %5d %5d %4d %4d | %5d %4d | %7.1f %8.1f %8.1f %8.1f %8.0f %7.0f | %6.1f %7.2f "
        "%7.2f\n",
        f.name.c_str(), f.asked, f.open, f.refused, f.failed, f.held.processes, f.held.upstreams,
        MiB(f.held.gateway_rss_kib), MiB(f.held.rss_kib), MiB(f.held.pss_kib), MiB(f.base.pss_kib),
        per, marginal, f.open_wall_s, Percentile(f.live_ms, 0.5), Percentile(f.live_ms, 0.99));
  }
  for (const auto& f : all) {
    if (!f.note.empty()) std::printf("%s: %s\n", f.name.c_str(), f.note.c_str());
    if (!f.failure.empty() && f.open > 0) {
      std::printf("%s: failed after opening: %s\n", f.name.c_str(), f.failure.c_str());
    }
    if (!f.stopped_early.empty()) std::printf("%s: %s\n", f.name.c_str(), f.stopped_early.c_str());
    for (const auto& [what, n] : f.retry_after) {
      std::printf("%s: %d refused %s\n", f.name.c_str(), n, what.c_str());
    }
    if (!f.first_error.empty()) {
      std::printf("%s: first error: %s\n", f.name.c_str(), f.first_error.c_str());
    }
    if (!f.live_ms.empty() || f.open > 0) {
      std::printf(
          "%s: %zu live calls; session open (initialize to echo answer) p50 %.1f ms, p99 "
          "%.1f ms\n",
          f.name.c_str(), f.live_ms.size(), 1e3 * Percentile(f.open_s, 0.5),
          1e3 * Percentile(f.open_s, 0.99));
    }
    if (!f.leftovers.empty()) {
      std::string list;
      for (const auto& l : f.leftovers) list += " " + l;
      std::printf("%s: LEFTOVER processes after stop (killed):%s\n", f.name.c_str(), list.c_str());
    }
  }
  const Figures* peer = nullptr;
  for (const auto& f : all) {
    if (f.name == "supergateway" && f.open > 0) peer = &f;
  }
  if (peer == nullptr) return;
  double peer_pss = static_cast<double>(peer->held.pss_kib) / peer->open;
  double peer_procs = static_cast<double>(peer->held.processes) / peer->open;
  for (const auto& f : all) {
    if (&f == peer || f.open == 0) continue;
    double pss = static_cast<double>(f.held.pss_kib) / f.open;
    double procs = static_cast<double>(f.held.processes) / f.open;
    std::printf(
        "%s / supergateway, per session: tree PSS %.3f (%.0f / %.0f KiB), processes %.3f (%.3f / "
        "%.3f)\n",
        f.name.c_str(), pss / peer_pss, pss, peer_pss, procs / peer_procs, procs, peer_procs);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o = ParseOptions(argc, argv);
  // The fixture and the npm packages are found relative to the source tree.
  if (chdir(WARDEN_SOURCE_DIR) != 0) {
    std::perror("sessions_bench: chdir to the source tree");
    return 1;
  }
  signal(SIGPIPE, SIG_IGN);
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);

  const char* dir_env = std::getenv("WARDEN_BENCH_DIR");
  std::string dir = std::string(dir_env ? dir_env : "/var/tmp") + "/warden-sessions-bench." +
                    std::to_string(getpid());
  if (mkdir(dir.c_str(), 0700) != 0) {
    std::perror(("sessions_bench: mkdir " + dir).c_str());
    return 1;
  }
  std::set<pid_t> echo_before = EchoServersNow();
  std::printf("load average at start: %s; MemAvailable %llu MiB\n",
              warden::bench::LoadAverage().c_str(),
              static_cast<unsigned long long>(MemAvailableMiB()));
  std::vector<Figures> all;
  for (const auto& name : o.targets) {
    if (g_interrupted) break;
    Target t{name, 0, ""};
    if (name == "supergateway") {
      t.n = o.peer_n;
    } else if (name == "direct") {
      t.n = o.sessions;
    } else {
      t.mode = name.substr(std::string("warden-").size());
      t.n = t.mode == "per_session" ? o.per_session_n : o.sessions;
    }
    std::printf("%s: %d sessions, %d at a time...\n", name.c_str(), t.n, o.open_concurrency);
    std::fflush(stdout);
    TargetRun run(t, o, dir);
    all.push_back(run.Go());
    std::printf("  load average %s\n", warden::bench::LoadAverage().c_str());
    std::fflush(stdout);
  }
  Report(all);
  std::printf("load average at end: %s\n", warden::bench::LoadAverage().c_str());

  // Echo servers that appeared during the run and are still there: a target's tree escaped.
  std::vector<pid_t> stray;
  for (pid_t pid : EchoServersNow()) {
    if (!echo_before.count(pid)) stray.push_back(pid);
  }
  if (!stray.empty()) {
    std::printf(
        "WARNING: %zu echo_server.mjs processes started during the run are still running "
        "(another benchmark's, or escaped from a target):",
        stray.size());
    for (pid_t p : stray) std::printf(" %d", p);
    std::printf("\n");
  }
  bool leftovers =
      std::any_of(all.begin(), all.end(), [](const Figures& f) { return !f.leftovers.empty(); });
  bool failed = std::any_of(all.begin(), all.end(), [](const Figures& f) {
    return !f.failure.empty() && f.failure.find("no instance model") == std::string::npos;
  });
  if (failed || leftovers || std::getenv("WARDEN_BENCH_KEEP") != nullptr) {
    std::printf("policies, audit logs and the targets' output kept in %s\n", dir.c_str());
  } else {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  if (g_interrupted) return 130;
  return failed || leftovers ? 1 : 0;
}
