// Cost of a tools/call through the gateway: per-call latency (p50, p99) and calls per second of an
// MCP `echo` tool over Streamable HTTP, for the same client against
//   direct:        bench/fixtures/echo_server.mjs serving Streamable HTTP itself (the SDK's
//                  transport, stateful, JSON responses);
//   warden:        `warden serve --no-prefix --upstream echo=stdio:'node echo_server.mjs'`, audit
//                  log on WARDEN_BENCH_DIR (default /var/tmp; sync normal, as in production);
//   supergateway:  npm supergateway 4 (stdio -> Streamable HTTP, --stateful);
//   mcp-proxy:     npm mcp-proxy 6 (stdio -> Streamable HTTP, stateful, no event store);
//   warden-2026:   the same warden, the client speaking MCP 2026-07-28 (no session: _meta and
//                  the Mcp-Method/Mcp-Name headers on every request, served by a task context).
// The gateways front the same echo server over stdio, so "added" = target minus direct is what the
// gateway costs. The client is this process (Boost.Beast, blocking sockets, one keep-alive
// connection per MCP session), identical for every target.
//
// Per target: one session for the sequential figures (each call's round trip timed) and SESSIONS
// sessions driven by one thread each for throughput. Rounds are interleaved, rotating the order of
// targets, so that load from the rest of the machine falls on all of them alike. The CPU columns
// are the target's process tree's user+system time (/proc) over the sequential calls: "gateway" is
// the gateway's own process, "total" includes the upstream it runs.
//
// usage: gateway_bench [--calls N] [--rounds R] [--sessions S] [--conc-calls M] [--warmup W]
//                      [--targets direct,warden,warden-2026,supergateway,mcp-proxy]
//                      [--warden-args 'ARGS']
//        gateway_bench --wakeups   (only what one thread waking another costs here)
//   N sequential calls per target in all (default 3000), split over R rounds (default 3); S
//   concurrent sessions (default 8) making M calls each per round (default 250); W warm-up calls
//   per session before measuring (default 200); ARGS (split at spaces) are added to `warden serve`.
//   WARDEN_BIN overrides the warden binary, WARDEN_BENCH_KEEP=1 keeps the targets' output. Run
//   from anywhere: it works in the source tree.
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_http.h"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
using warden::Result;
using warden::Status;

using warden::bench::AwaitReady;
using warden::bench::Clock;
using warden::bench::Endpoint;
using warden::bench::FreePort;
using warden::bench::kProtocolVersion;
using warden::bench::LoadAverage;
using warden::bench::Percentile;
using warden::bench::ReadFile;
using warden::bench::Running;
using warden::bench::SecondsSince;
using warden::bench::SplitList;
using warden::bench::Spawn;
using warden::bench::Stop;
using warden::bench::TargetSpec;

// ---- The client: one MCP session over one keep-alive connection. ----

// The _meta of a 2026-07-28 request (no session: each request says who its client is).
constexpr char kModernMeta[] =
    R"("_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",)"
    R"("io.modelcontextprotocol/clientInfo":{"name":"warden-gateway-bench","version":"1"},)"
    R"("io.modelcontextprotocol/clientCapabilities":{}})";

class McpSession {
 public:
  // `modern`: MCP 2026-07-28, stateless (server/discover, then requests with _meta and the
  // Mcp-Method/Mcp-Name headers); else a 2025-11-25 session.
  explicit McpSession(Endpoint endpoint, bool modern = false)
      : endpoint_(std::move(endpoint)), modern_(modern) {}

  // initialize, notifications/initialized and tools/list; keeps the Mcp-Session-Id the server gave.
  Status Open() {
    if (modern_) {
      auto discover = Post(R"({"jsonrpc":"2.0","id":)" + std::to_string(next_id_++) +
                               R"(,"method":"server/discover","params":{)" + kModernMeta + "}}",
                           "server/discover");
      if (!discover.ok()) return discover.status().Wrap("server/discover");
      auto list = Post(R"({"jsonrpc":"2.0","id":)" + std::to_string(next_id_++) +
                           R"(,"method":"tools/list","params":{)" + kModernMeta + "}}",
                       "tools/list");
      if (!list.ok()) return list.status().Wrap("tools/list");
      if (list->find("\"echo\"") == std::string::npos)
        return Status::Error("tools/list does not name echo: " + list->substr(0, 300));
      return Status::Ok();
    }
    auto reply = Post(warden::bench::InitializeBody(next_id_++, "warden-gateway-bench"));
    if (!reply.ok()) return reply.status().Wrap("initialize");
    if (session_id_.empty()) return Status::Error("initialize: no Mcp-Session-Id in the reply");
    auto ack = Post(warden::bench::kInitializedBody);
    if (!ack.ok()) return ack.status().Wrap("notifications/initialized");
    // As clients do before calling; a gateway also waits here for its upstream to be ready.
    auto list = Post(warden::bench::ToolsListBody(next_id_++));
    if (!list.ok()) return list.status().Wrap("tools/list");
    if (list->find("\"echo\"") == std::string::npos) {
      return Status::Error("tools/list does not name echo: " + list->substr(0, 300));
    }
    return Status::Ok();
  }

  // One tools/call of `echo`; checks that the reply answers this id with the text sent.
  Status CallEcho() {
    int64_t id = next_id_++;
    std::string body = warden::bench::EchoCallBody(id, "echo");
    if (modern_) body.insert(body.size() - 2, std::string(",") + kModernMeta);
    auto reply = modern_ ? Post(body, "tools/call", "echo") : Post(body);
    if (!reply.ok()) return reply.status().Wrap("tools/call");
    return warden::bench::CheckEchoReply(*reply, id);
  }

  // DELETE the session (stops a gateway's upstream for it); errors are ignored: the target is
  // about to be stopped anyway.
  void Close() {
    if (session_id_.empty()) return;
    http::request<http::string_body> req{http::verb::delete_, endpoint_.path, 11};
    req.set(http::field::host, endpoint_.host);
    req.set("Mcp-Session-Id", session_id_);
    req.set("MCP-Protocol-Version", kProtocolVersion);
    http::response<http::string_body> res;
    (void)RoundTrip(req, res);
  }

 private:
  // POSTs one JSON-RPC message; returns the body (JSON or an SSE stream) of a 2xx reply.
  Result<std::string> Post(const std::string& body, const char* method = nullptr,
                           const char* name = nullptr) {
    http::request<http::string_body> req{http::verb::post, endpoint_.path, 11};
    req.set(http::field::host, endpoint_.host);
    req.set(http::field::content_type, "application/json");
    req.set(http::field::accept, "application/json, text/event-stream");
    if (modern_) {
      req.set("MCP-Protocol-Version", "2026-07-28");
      if (method) req.set("Mcp-Method", method);
      if (name) req.set("Mcp-Name", name);
    }
    if (!session_id_.empty()) {
      req.set("Mcp-Session-Id", session_id_);
      req.set("MCP-Protocol-Version", kProtocolVersion);
    }
    req.body() = body;
    req.prepare_payload();
    http::response<http::string_body> res;
    WARDEN_RETURN_IF_ERROR(RoundTrip(req, res));
    if (res.result_int() / 100 != 2) {
      return Status::Error("HTTP " + std::to_string(res.result_int()) + ": " + res.body());
    }
    if (auto sid = res.find("Mcp-Session-Id"); sid != res.end()) {
      session_id_ = std::string(sid->value());
    }
    return std::move(res.body());
  }

  // Sends on the kept connection; a connection the server closed while idle (supergateway's
  // keep-alive timeout is 5 s) is reopened once and the request sent again.
  Status RoundTrip(http::request<http::string_body>& req, http::response<http::string_body>& res) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      beast::error_code ec;
      if (!socket_.is_open()) {
        tcp::resolver resolver(io_);
        auto addrs = resolver.resolve(endpoint_.host, endpoint_.port, ec);
        if (!ec) asio::connect(socket_, addrs, ec);
        if (ec)
          return Status::Error("connect " + endpoint_.host + ":" + endpoint_.port + ": " +
                               ec.message());
        socket_.set_option(tcp::no_delay(true));
        buffer_.clear();
      }
      http::write(socket_, req, ec);
      if (!ec) http::read(socket_, buffer_, res, ec);
      if (!ec) {
        if (!res.keep_alive()) socket_.close(ec);
        return Status::Ok();
      }
      socket_.close(ec);
      res = {};
    }
    return Status::Error("the connection failed twice");
  }

  Endpoint endpoint_;
  asio::io_context io_;
  tcp::socket socket_{io_};
  beast::flat_buffer buffer_;
  std::string session_id_;
  int64_t next_id_ = 1;
  bool modern_ = false;
};

// User+system CPU seconds of `root` alone and of `root` with all its descendants (/proc).
struct Cpu {
  double own = 0;
  double tree = 0;
  double own_switches = 0;  // context switches of root's threads (voluntary and not)
};

// Context switches of the threads `pid` has now (those that ended are not counted: the gateways
// keep their threads).
double SwitchesOf(pid_t pid) {
  double total = 0;
  std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = opendir(tasks.c_str());
  if (dir == nullptr) return 0;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::istringstream status(ReadFile(tasks + "/" + e->d_name + "/status"));
    for (std::string line; std::getline(status, line);) {
      if (line.find("ctxt_switches:") != std::string::npos) {
        total += std::stod(line.substr(line.find(':') + 1));
      }
    }
  }
  closedir(dir);
  return total;
}

Cpu CpuOf(pid_t root) {
  auto procs = warden::bench::ReadProcs();
  Cpu cpu;
  cpu.own_switches = SwitchesOf(root);
  for (pid_t pid : warden::bench::TreeOf(procs, root)) {
    cpu.tree += procs[pid].cpu_s;
    if (pid == root) cpu.own += procs[pid].cpu_s;
  }
  return cpu;
}

// ---- Measurements ----

struct Figures {
  std::vector<double> seq_us;     // every sequential round trip
  std::vector<double> conc_us;    // every round trip under concurrency
  std::vector<double> conc_rate;  // calls/s of each concurrent round
  double cpu_own_s = 0, cpu_tree_s = 0, own_switches = 0;
  int seq_calls = 0;
  std::string failure;  // non-empty: the target did not complete
};

Status Calls(McpSession& s, int n, std::vector<double>* us) {
  for (int i = 0; i < n; ++i) {
    auto t0 = Clock::now();
    WARDEN_RETURN_IF_ERROR(s.CallEcho());
    if (us != nullptr) us->push_back(SecondsSince(t0) * 1e6);
  }
  return Status::Ok();
}

// What one thread waking another costs on this machine: a ping-pong over a condition variable
// between two threads pinned to the same CPU or to CPUs 0 and 1, back to back or with both idle
// for `gap_us` between exchanges (as a gateway's threads are between the hops of one call; an
// idle virtual CPU must be woken by an interrupt through the hypervisor). Prints the round trip
// (two wake-ups) p50 and p90.
void PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

void MeasureWakeups(int gap_us, bool same_cpu) {
  constexpr int kExchanges = 4000;
  std::mutex mu;
  std::condition_variable cv;
  bool ping = false;
  std::thread peer([&] {
    PinTo(same_cpu ? 0 : 1);
    for (int i = 0; i < kExchanges; ++i) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return ping; });
      ping = false;
      cv.notify_all();
    }
  });
  PinTo(0);
  std::vector<double> us;
  for (int i = 0; i < kExchanges; ++i) {
    if (gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    auto t0 = Clock::now();
    std::unique_lock<std::mutex> lock(mu);
    ping = true;
    cv.notify_all();
    cv.wait(lock, [&] { return !ping; });
    us.push_back(SecondsSince(t0) * 1e6);
  }
  peer.join();
  std::printf(
      "thread ping-pong, %-9s %3d us idle between: round trip (2 wake-ups) p50 %6.1f us, "
      "p90 %6.1f us\n",
      same_cpu ? "same CPU," : "2 CPUs,", gap_us, Percentile(us, 0.5), Percentile(us, 0.9));
}

struct Options {
  int calls = 3000, rounds = 3, sessions = 8, conc_calls = 250, warmup = 200;
  std::vector<std::string> targets = {"direct", "warden", "warden-2026", "supergateway",
                                      "mcp-proxy"};
  std::vector<std::string> warden_args;  // added to `warden serve` (experiments: --threads 1)
  bool wakeups = false;                  // only measure thread wake-ups
};

struct Bench {
  Running target;
  std::unique_ptr<McpSession> seq;
  std::vector<std::unique_ptr<McpSession>> conc;
  Figures fig;
};

Status OpenSessions(Bench& b, const Options& o) {
  const bool modern = b.target.spec.name == "warden-2026";
  b.seq = std::make_unique<McpSession>(b.target.endpoint, modern);
  WARDEN_RETURN_IF_ERROR(b.seq->Open());
  WARDEN_RETURN_IF_ERROR(Calls(*b.seq, o.warmup, nullptr));
  for (int i = 0; i < o.sessions; ++i) {
    b.conc.push_back(std::make_unique<McpSession>(b.target.endpoint, modern));
    WARDEN_RETURN_IF_ERROR(b.conc.back()->Open());
    WARDEN_RETURN_IF_ERROR(Calls(*b.conc.back(), std::max(1, o.warmup / 4), nullptr));
  }
  return Status::Ok();
}

Status SequentialRound(Bench& b, int n) {
  WARDEN_RETURN_IF_ERROR(Calls(*b.seq, 20, nullptr));  // re-warm after the other targets ran
  Cpu before = CpuOf(b.target.pid);
  WARDEN_RETURN_IF_ERROR(Calls(*b.seq, n, &b.fig.seq_us));
  Cpu after = CpuOf(b.target.pid);
  b.fig.cpu_own_s += after.own - before.own;
  b.fig.cpu_tree_s += after.tree - before.tree;
  b.fig.own_switches += after.own_switches - before.own_switches;
  b.fig.seq_calls += n;
  return Status::Ok();
}

Status ConcurrentRound(Bench& b, int per_session) {
  size_t k = b.conc.size();
  std::vector<std::vector<double>> us(k);
  std::vector<Status> status(k);
  std::atomic<size_t> ready{0};
  std::atomic<bool> go{false};
  Clock::time_point t0;
  std::vector<std::thread> threads;
  for (size_t i = 0; i < k; ++i) {
    threads.emplace_back([&, i] {
      status[i] = Calls(*b.conc[i], 5, nullptr);
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      if (status[i].ok()) status[i] = Calls(*b.conc[i], per_session, &us[i]);
    });
  }
  while (ready.load() < k) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  t0 = Clock::now();
  go.store(true);
  for (auto& t : threads) t.join();
  double wall = SecondsSince(t0);
  for (size_t i = 0; i < k; ++i) {
    WARDEN_RETURN_IF_ERROR(status[i]);
    b.fig.conc_us.insert(b.fig.conc_us.end(), us[i].begin(), us[i].end());
  }
  b.fig.conc_rate.push_back(static_cast<double>(k * per_session) / wall);
  return Status::Ok();
}

// ---- Set-up and report ----

TargetSpec SpecFor(const std::string& name, const std::string& audit_db, const Options& o) {
  const std::string echo = "node bench/fixtures/echo_server.mjs";
  const std::string bin = "tests/e2e/node_modules/.bin/";
  if (name == "direct") {
    return {name, {"node", "bench/fixtures/echo_server.mjs", "--http", "0"}, "MCP endpoint ", ""};
  }
  if (name == "warden" || name == "warden-2026") {
    const char* override_bin = std::getenv("WARDEN_BIN");
    std::vector<std::string> argv = {override_bin ? override_bin : WARDEN_BIN,
                                     "serve",
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--audit-db",
                                     audit_db,
                                     "--no-prefix",
                                     "--upstream",
                                     "echo=stdio:" + echo};
    argv.insert(argv.end(), o.warden_args.begin(), o.warden_args.end());
    return {name, argv, "MCP endpoint ", ""};
  }
  std::string port = std::to_string(FreePort());
  std::string url = "http://127.0.0.1:" + port + "/mcp";
  if (name == "supergateway") {
    return {name,
            {bin + "supergateway", "--stdio", echo, "--outputTransport", "streamableHttp",
             "--stateful", "--port", port, "--logLevel", "none"},
            "",
            url};
  }
  // mcp-proxy spawns the command without a shell: its argv follows `--`.
  return {name,
          {"node", bin + "mcp-proxy", "--host", "127.0.0.1", "--port", port, "--server", "stream",
           "--no-eventStore", "--", "node", "bench/fixtures/echo_server.mjs"},
          "",
          url};
}

void Report(const std::vector<Bench>& benches, const Options& o) {
  const Figures* direct = nullptr;
  for (const auto& b : benches) {
    if (b.target.spec.name == "direct" && b.fig.failure.empty()) direct = &b.fig;
  }
  std::printf(
      "\nsequential: %d calls per target on one session (%d rounds, interleaved); "
      "concurrent: %d sessions x %d calls per round\n",
      o.calls, o.rounds, o.sessions, o.conc_calls);
  std::printf("%-13s %8s %8s %8s %9s %9s | %9s %8s %8s | %9s %9s %6s\n", "target", "p50 us",
              "p99 us", "calls/s", "+p50 us", "+p99 us", "conc c/s", "c.p50", "c.p99", "cpu gw us",
              "cpu all us", "cs gw");
  for (const auto& b : benches) {
    const Figures& f = b.fig;
    if (!f.failure.empty()) {
      std::printf("%-13s not measured: %s\n", b.target.spec.name.c_str(), f.failure.c_str());
      continue;
    }
    double p50 = Percentile(f.seq_us, 0.5), p99 = Percentile(f.seq_us, 0.99);
    double add50 = direct ? p50 - Percentile(direct->seq_us, 0.5) : NAN;
    double add99 = direct ? p99 - Percentile(direct->seq_us, 0.99) : NAN;
    double mean = 0;
    for (double v : f.seq_us) mean += v;
    mean /= std::max<size_t>(1, f.seq_us.size());
    std::printf("%-13s %8.0f %8.0f %8.0f %9.0f %9.0f | %9.0f %8.0f %8.0f | %9.0f %9.0f %6.1f\n",
                b.target.spec.name.c_str(), p50, p99, 1e6 / mean, add50, add99,
                Percentile(f.conc_rate, 0.5), Percentile(f.conc_us, 0.5),
                Percentile(f.conc_us, 0.99), 1e6 * f.cpu_own_s / f.seq_calls,
                1e6 * f.cpu_tree_s / f.seq_calls, f.own_switches / f.seq_calls);
  }
  const Figures* warden = nullptr;
  for (const auto& b : benches) {
    if (b.target.spec.name == "warden" && b.fig.failure.empty()) warden = &b.fig;
  }
  for (const auto& b : benches) {
    const std::string& peer = b.target.spec.name;
    if (!direct || !warden || !b.fig.failure.empty() || peer == "direct" || peer == "warden") {
      continue;
    }
    if (peer == "warden-2026") {
      // The same gateway, each request stateless (MCP 2026-07-28) against a 2025 session.
      std::printf("warden-2026 / warden (2025 session): p50 %.2f, added p50 %.2f, concurrent "
                  "calls/s %.2f\n",
                  Percentile(b.fig.seq_us, 0.5) / Percentile(warden->seq_us, 0.5),
                  (Percentile(b.fig.seq_us, 0.5) - Percentile(direct->seq_us, 0.5)) /
                      (Percentile(warden->seq_us, 0.5) - Percentile(direct->seq_us, 0.5)),
                  Percentile(b.fig.conc_rate, 0.5) / Percentile(warden->conc_rate, 0.5));
      continue;
    }
    auto added = [&](const Figures& f) {
      return Percentile(f.seq_us, 0.5) - Percentile(direct->seq_us, 0.5);
    };
    std::printf("warden / %s: added p50 %.2f, concurrent calls/s %.2f, gateway CPU per call %.2f\n",
                peer.c_str(), added(*warden) / added(b.fig),
                Percentile(warden->conc_rate, 0.5) / Percentile(b.fig.conc_rate, 0.5),
                warden->cpu_own_s / warden->seq_calls / (b.fig.cpu_own_s / b.fig.seq_calls));
  }
  std::printf(
      "(+p50/+p99: minus direct; conc c/s: median of rounds; cpu: per sequential call, "
      "gw = the target's own process, all = with its children, 10 ms tick resolution; "
      "cs gw: context switches of the target's own threads per sequential call)\n");
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--wakeups") {
      o.wakeups = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr,
                   "gateway_bench: %s wants a value (see the usage at the top of "
                   "bench/gateway_bench.cc)\n",
                   a.c_str());
      std::exit(2);
    }
    std::string v = argv[++i];
    if (a == "--targets") {
      o.targets = SplitList(v, ',');
      continue;
    }
    if (a == "--warden-args") {
      for (std::string& t : SplitList(v, ' ')) o.warden_args.push_back(std::move(t));
      continue;
    }
    int n = std::atoi(v.c_str());
    if (n <= 0) {
      std::fprintf(stderr, "gateway_bench: %s wants a positive number, got '%s'\n", a.c_str(),
                   v.c_str());
      std::exit(2);
    }
    if (a == "--calls")
      o.calls = n;
    else if (a == "--rounds")
      o.rounds = n;
    else if (a == "--sessions")
      o.sessions = n;
    else if (a == "--conc-calls")
      o.conc_calls = n;
    else if (a == "--warmup")
      o.warmup = n;
    else {
      std::fprintf(stderr, "gateway_bench: unknown option '%s'\n", a.c_str());
      std::exit(2);
    }
  }
  for (const auto& t : o.targets) {
    if (t != "direct" && t != "warden" && t != "warden-2026" && t != "supergateway" &&
        t != "mcp-proxy") {
      std::fprintf(stderr,
                   "gateway_bench: unknown target '%s' (direct, warden, supergateway, "
                   "mcp-proxy)\n",
                   t.c_str());
      std::exit(2);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = ParseOptions(argc, argv);
  if (o.wakeups) {
    for (int round = 0; round < 3; ++round) {
      for (bool same_cpu : {true, false}) {
        for (int gap : {0, 300}) MeasureWakeups(gap, same_cpu);
      }
    }
    return 0;
  }
  // The fixture and the npm packages are found relative to the source tree, and warden's stdio
  // upstream sandbox can read the current directory: run from there.
  if (chdir(WARDEN_SOURCE_DIR) != 0) {
    std::perror("gateway_bench: chdir to the source tree");
    return 1;
  }
  signal(SIGPIPE, SIG_IGN);
  const char* dir_env = std::getenv("WARDEN_BENCH_DIR");
  std::string dir = std::string(dir_env ? dir_env : "/var/tmp") + "/warden-gateway-bench." +
                    std::to_string(getpid());
  if (mkdir(dir.c_str(), 0700) != 0) {
    std::perror(("gateway_bench: mkdir " + dir).c_str());
    return 1;
  }
  std::printf("load average at start: %s\n", LoadAverage().c_str());

  std::vector<Bench> benches;
  for (const auto& name : o.targets) {
    Bench b;
    b.target.spec = SpecFor(name, dir + "/audit.db", o);
    b.target.log = dir + "/" + name + ".log";
    auto pid = Spawn(b.target.spec.argv, b.target.log);
    Status st = pid.status();
    if (pid.ok()) {
      b.target.pid = *pid;
      st = AwaitReady(b.target);
    }
    if (st.ok()) st = OpenSessions(b, o);
    if (!st.ok()) b.fig.failure = st.message();
    benches.push_back(std::move(b));
  }

  auto run_rounds = [&](auto&& one) {
    for (int r = 0; r < o.rounds; ++r) {
      for (size_t j = 0; j < benches.size(); ++j) {
        Bench& b = benches[(j + r) % benches.size()];  // rotate who goes first
        if (!b.fig.failure.empty()) continue;
        Status st = one(b);
        if (!st.ok()) b.fig.failure = st.message();
      }
    }
  };
  int per_round = std::max(1, o.calls / o.rounds);
  run_rounds([&](Bench& b) { return SequentialRound(b, per_round); });
  run_rounds([&](Bench& b) { return ConcurrentRound(b, o.conc_calls); });

  for (auto& b : benches) {
    for (auto& s : b.conc) s->Close();
    if (b.seq) b.seq->Close();
    Stop(b.target);
  }
  Report(benches, o);
  std::printf("load average at end: %s\n", LoadAverage().c_str());
  bool any_failed = std::any_of(benches.begin(), benches.end(),
                                [](const Bench& b) { return !b.fig.failure.empty(); });
  if (any_failed || std::getenv("WARDEN_BENCH_KEEP") != nullptr) {
    std::printf("targets' output and the audit log kept in %s\n", dir.c_str());
  } else {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  // The npm peers are optional (reported as not measured); direct and warden are the point.
  bool core_failed = std::any_of(benches.begin(), benches.end(), [](const Bench& b) {
    return !b.fig.failure.empty() &&
           (b.target.spec.name == "direct" || b.target.spec.name == "warden");
  });
  return core_failed ? 1 : 0;
}
