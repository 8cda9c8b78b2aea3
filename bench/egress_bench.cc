// Egress proxy throughput and per-request latency, measured in one run against the same transfer
// without the proxy. A small HTTP/1.1 server (keep-alive, in this process) serves /big (100 MiB)
// and /small (64 bytes) on the host's loopback; curl fetches them
//   direct:  curl on the host, straight to the server;
//   proxied: curl inside `warden run --allow bench.test:PORT --resolve bench.test=127.0.0.1`,
//            through warden's egress proxy.
// Both include curl's own start; the proxied run also includes the sandbox's start (~5 ms), which
// is small against the transfer and is subtracted for the latency figure via an empty run.
//   checked: the proxied small requests again with the gateway's session check (`--decision-fd`,
//            docs/trifecta.md "Sandbox egress") answered by this process over the decision
//            channel, on a session holding both legs and 2,000 private ledger lines, approved: the
//            slowest answer there is (every request's URL and headers are looked into).
//
// usage: egress_bench [REQUESTS]   (default 2000 small requests)
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "egress/decision_channel.h"
#include "policy/trifecta.h"

namespace {

constexpr size_t kBig = 100u << 20;

double NowSec() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

void ServeClient(int c) {
  static const std::string big_chunk(1 << 20, 'x');
  std::string buf;
  char tmp[16384];
  for (;;) {
    size_t end;
    while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
      ssize_t n = recv(c, tmp, sizeof(tmp), 0);
      if (n <= 0) { close(c); return; }
      buf.append(tmp, static_cast<size_t>(n));
    }
    std::string head = buf.substr(0, end);
    buf.erase(0, end + 4);
    bool big = head.find(" /big ") != std::string::npos;
    size_t len = big ? kBig : 64;
    std::string resp = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(len) + "\r\n\r\n";
    if (!big) resp.append(len, 'x');  // one write: no Nagle/delayed-ACK stall between head and body
    if (send(c, resp.data(), resp.size(), MSG_NOSIGNAL) < 0) { close(c); return; }
    for (size_t sent = 0; big && sent < len;) {
      size_t n = std::min(len - sent, big_chunk.size());
      ssize_t w = send(c, big_chunk.data(), n, MSG_NOSIGNAL);
      if (w <= 0) { close(c); return; }
      sent += static_cast<size_t>(w);
    }
  }
}

int StartServer() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  listen(fd, 64);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  std::thread([fd] {
    for (;;) {
      int c = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      int one = 1;
      setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      std::thread(ServeClient, c).detach();
    }
  }).detach();
  return ntohs(a.sin_port);
}

// Runs a shell command and returns its wall time in seconds (negative when it failed).
double Time(const std::string& cmd) {
  double t0 = NowSec();
  int rc = std::system(cmd.c_str());
  double t1 = NowSec();
  return rc == 0 ? t1 - t0 : -1;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int requests = argc > 1 ? std::atoi(argv[1]) : 2000;
  int port = StartServer();
  std::string p = std::to_string(port);
  std::string warden = std::string(WARDEN_BIN) + " run --allow bench.test:" + p + " --resolve bench.test=127.0.0.1 -- ";
  // A URL list for curl: one process, one keep-alive connection, `requests` requests.
  std::string urls = "/var/tmp/warden-egress-bench-urls.txt";
  {
    std::ofstream out(urls);
    for (int i = 0; i < requests; ++i) out << "url = \"http://bench.test:" << p << "/small\"\noutput = \"/dev/null\"\n";
  }
  std::string curl = "curl -s --fail ";
  std::string direct_big = curl + "-o /dev/null --resolve bench.test:" + p + ":127.0.0.1 http://bench.test:" + p + "/big";
  std::string proxied_big = warden + curl + "-o /dev/null http://bench.test:" + p + "/big";
  std::string direct_small = curl + "--resolve bench.test:" + p + ":127.0.0.1 -K " + urls;
  std::string proxied_small = warden + "curl -s --fail -K - < " + urls;
  std::string proxied_empty = warden + "true";

  // The session check: a session that read a page and a private document, and a person approved.
  warden::policy::FlowState state;
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "ledger line " + std::to_string(i * 7919) + " owed ";
  state.Add(warden::policy::Absorb(nullptr, warden::policy::kPrivateOutput, nlohmann::json::object(),
                                   nlohmann::json(text), {2, "drive__read_file"}));
  state.Add(warden::policy::Absorb(nullptr, warden::policy::kUntrustedOutput,
                                   nlohmann::json::object(), nlohmann::json("a page"),
                                   {1, "web__fetch"}));
  // One channel per run, as sandbox__exec makes one per call: the child shuts its end down at exit.
  std::atomic<uint64_t> answered{0}, refused{0};
  auto time_checked = [&](const std::string& command) -> double {
    auto channel = warden::egress::MakeDecisionChannel();
    if (!channel) {
      std::fprintf(stderr, "egress_bench: %s\n", channel.status().message().c_str());
      return -1;
    }
    const int child_fd = channel->second.get();
    fcntl(child_fd, F_SETFD, 0);  // inherited by `warden run` through the shell
    warden::egress::DecisionServer server(
        std::move(channel->first), [&](const warden::egress::Attempt& a) {
          auto c = warden::policy::CheckSandboxEgress(
              state, {}, {warden::policy::Effect::kAsk, true}, true,
              a.host + ":" + std::to_string(a.port), {a.target, a.headers, a.body});
          if (c.effect == warden::policy::Effect::kAllow) return warden::egress::Decision::Defer();
          ++refused;
          return warden::egress::Decision::Deny(c.reason);
        });
    double t = Time(std::string(WARDEN_BIN) + " run --decision-fd " + std::to_string(child_fd) +
                    " --allow bench.test:" + p + " --resolve bench.test=127.0.0.1 -- " + command);
    channel->second.reset();
    server.Stop();
    answered += server.answered();
    return t;
  };
  const std::string checked_small = "curl -sS --fail -K - < " + urls;

  std::vector<double> db, pb, ds, ps, pe, cs, ce;
  for (int round = 0; round < 5; ++round) {  // interleaved
    db.push_back(Time(direct_big));
    pb.push_back(Time(proxied_big));
    ds.push_back(Time(direct_small));
    ps.push_back(Time(proxied_small));
    pe.push_back(Time(proxied_empty));
    cs.push_back(time_checked(checked_small));
    ce.push_back(time_checked("true"));
  }
  unlink(urls.c_str());
  const char* names[] = {"direct big", "proxied big", "direct small", "proxied small",
                         "proxied empty", "checked small", "checked empty"};
  int at = 0;
  for (const auto* v : {&db, &pb, &ds, &ps, &pe, &cs, &ce}) {
    const char* name = names[at++];
    if (std::any_of(v->begin(), v->end(), [](double x) { return x < 0; })) {
      std::fprintf(stderr, "egress_bench: a transfer failed (%s; %llu answers, %llu refused)\n", name,
                   static_cast<unsigned long long>(answered.load()),
                   static_cast<unsigned long long>(refused.load()));
      return 1;
    }
  }
  double mib = kBig / double(1 << 20);
  double direct_tp = mib / Median(db), proxied_tp = mib / Median(pb);
  std::printf("100 MiB download (median of 5, interleaved)\n");
  std::printf("  direct            %8.1f MiB/s\n", direct_tp);
  std::printf("  through proxy     %8.1f MiB/s   ratio %.2f\n", proxied_tp, proxied_tp / direct_tp);
  double direct_rps = requests / Median(ds);
  double proxied_rps = requests / (Median(ps) - Median(pe));
  std::printf("%d small requests on one keep-alive connection (median of 5)\n", requests);
  std::printf("  direct            %8.0f req/s\n", direct_rps);
  std::printf("  through proxy     %8.0f req/s   (sandbox start %.1f ms subtracted)\n", proxied_rps, Median(pe) * 1000);
  std::printf("  added latency     %8.1f us per request\n", (1e6 / proxied_rps) - (1e6 / direct_rps));
  double checked_rps = requests / (Median(cs) - Median(ce));
  std::printf("  with session check%8.0f req/s   ratio to the proxy alone %.2f, %.1f us more per request"
              " (%llu answers, %llu refused)\n",
              checked_rps, checked_rps / proxied_rps, (1e6 / checked_rps) - (1e6 / proxied_rps),
              static_cast<unsigned long long>(answered.load()),
              static_cast<unsigned long long>(refused.load()));
  return 0;
}
