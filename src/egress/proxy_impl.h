// Internal to the egress proxy (proxy.cc, session.cc): the shared state behind EgressProxy and
// one client connection's Session. The only egress header that includes Asio.
#pragma once

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "common/unique_fd.h"
#include "egress/address_guard.h"
#include "egress/credential_grant.h"
#include "egress/http_message.h"
#include "egress/proxy.h"
#include "egress/resolver.h"
#include "egress/socks5.h"

namespace warden::egress {

namespace asio = boost::asio;
using asio::ip::tcp;
using SteadyTime = std::chrono::steady_clock::time_point;

class Session;

// Lets resolver threads post back to the loop, and stops them from doing so once it is gone.
struct LoopGate {
  std::mutex mu;
  asio::io_context* io = nullptr;
};

struct EgressProxy::Impl {
  explicit Impl(ProxyOptions opts);

  void Log(const std::string& line) const;
  // Delivers an attempt's record (loop thread).
  void Record(EgressRecord record);
  void RecordDns(DnsQueryRecord record);
  void StopOnLoop();
  asio::awaitable<void> AcceptLoop(tcp::acceptor& acceptor);
  asio::awaitable<void> DnsLoop(asio::ip::udp::socket& socket);

  ProxyOptions options;
  AddressGuard guard;
  DnsStub dns;
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> work;
  std::shared_ptr<LoopGate> gate = std::make_shared<LoopGate>();
  std::unique_ptr<ResolverPool> resolver;

  // Loop thread only.
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
  std::vector<std::unique_ptr<asio::ip::udp::socket>> dns_sockets;
  std::unordered_set<Session*> sessions;
  size_t active = 0;             // sessions within max_connections
  size_t over_limit_active = 0;  // sessions being refused
  bool stopping = false;
  std::unique_ptr<asio::steady_timer> stop_failsafe;  // set by StopOnLoop
  // Called by each session as it ends (after its record).
  void SessionEnded(Session* session, bool over_limit);

  // TLS interception (ProxyOptions::tls_intercepts): a server context per intercepted
  // "host:port", and the client context that verifies the real hosts. Made by the constructor;
  // when that failed, tls_error says why and AddListener refuses to serve.
  void SetUpTls();
  asio::ssl::context* InterceptFor(const std::string& host, uint16_t port);
  std::vector<std::pair<std::string, std::unique_ptr<asio::ssl::context>>> intercept_contexts;
  std::unique_ptr<asio::ssl::context> upstream_tls;
  std::string tls_error;

  std::thread thread;
  std::atomic<bool> stop_requested{false};
  std::atomic<bool> started{false};

  mutable std::mutex records_mu;
  std::vector<EgressRecord> records;
  std::vector<DnsQueryRecord> dns_records;

  struct AtomicStats {
    std::atomic<uint64_t> connections_accepted{0}, connections_active{0}, connections_over_limit{0},
        attempts_allowed{0}, attempts_denied{0}, bad_requests{0}, header_timeouts{0},
        idle_timeouts{0}, lifetime_timeouts{0}, connect_failures{0}, bytes_up{0}, bytes_down{0},
        dns_queries{0}, records_dropped{0};
  } stats;
};

// One client connection, from accept to close. Runs on the loop thread only.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(EgressProxy::Impl& proxy, tcp::socket client, bool over_limit);
  asio::awaitable<void> Run();
  // Closes both sockets; everything in flight fails and the session unwinds, recording what
  // it was doing with `reason` as the error.
  void Abort(const std::string& reason);

 private:
  enum class Phase { kHead, kIdle, kConnecting, kActive };
  enum class Failure {
    kNone,
    kBadHost,
    kDenied,
    kOverLimit,
    kResolveFailed,
    kConnectFailed,
    kTimedOut,
    kAborted
  };
  struct Outcome {
    Failure failure = Failure::kNone;
    std::string message;  // the reason or error, for the client and the record
    int error = 0;        // errno of the last connect failure
  };
  enum class BodyResult { kDone, kEof, kReadError, kWriteError, kMalformed, kRefused };
  enum class RequestResult { kSent, kUpstreamGone, kClientGone, kClientMalformed, kRefused };
  enum class SpliceResult { kDone, kEof, kReadError, kWriteError, kUnsupported };
  // One direction of forwarding: a copy buffer, and a pipe for splice(2) when the kernel allows.
  struct Direction {
    std::unique_ptr<char[]> buf;
    UniqueFd pipe_read;
    UniqueFd pipe_write;
    size_t pipe_capacity = 0;
    size_t in_pipe = 0;
    bool splice_unavailable = false;  // then copy through `buf`
  };
  struct ResponseResult {
    bool ok = false;
    bool close_client = true;
    bool sent_anything = false;
    std::string error;
  };

  // Timeouts.
  asio::awaitable<void> Watchdog();
  void SetPhase(Phase phase);
  void Touch() { last_activity_ = std::chrono::steady_clock::now(); }
  SteadyTime Deadline(Phase* which_phase, bool* lifetime) const;

  // Reading into inbuf_, at most up to `limit` bytes in total. Returns the error, if any.
  asio::awaitable<boost::system::error_code> ReadMore(size_t limit);

  // Protocols.
  // `first`: inbuf_ already holds the start of the first request.
  asio::awaitable<void> ServeHttp(bool first = true);
  asio::awaitable<void> ServeConnect(const http::RequestHead& head, EgressRecord& rec);
  // Returns whether the client connection may carry another request.
  asio::awaitable<bool> ServeHttpRequest(const http::RequestHead& head, EgressRecord& rec);
  asio::awaitable<void> ServeSocks5();
  // A tunnel to an intercepted host (rec.host:rec.port, connected): TLS with the client under
  // `server`, TLS with the real host verified, then HTTP/1.1 requests in between (ServeHttp).
  asio::awaitable<void> ServeIntercepted(asio::ssl::context& server, EgressRecord& rec);

  // The decision (hook -> allow-list), then addresses, the address guard and the connection.
  // `request`: the HTTP request being decided; null for a tunnel (CONNECT, SOCKS5).
  Outcome Decide(EgressRecord& rec, const std::string& raw_host, uint16_t port, Host* host,
                 const http::RequestHead* request = nullptr);
  // Sets grant_ for an allowed attempt (credential_grant.h): denies an HTTP request that carries
  // a placeholder out of its place, or a tunnel whose request (current_head_) carries one.
  Outcome PlanCredentials(EgressRecord& rec, const Host& host, uint16_t port,
                          const http::RequestHead* request);
  asio::awaitable<Outcome> Connect(EgressRecord& rec, const Host& host, uint16_t port);
  asio::awaitable<Outcome> DecideAndConnect(EgressRecord& rec, const std::string& raw_host,
                                            uint16_t port);
  asio::awaitable<Result<std::vector<IpAddress>>> ResolveName(const std::string& name);
  // The session check (ProxyOptions::check) on an attempt the allow-list let through: waits for
  // its answer on handoff_wait_, at most check_timeout. kNone when there is no check or it allows.
  asio::awaitable<Outcome> Check(EgressRecord& rec, const Attempt& attempt);
  // For the check of a plain HTTP request: reads a body of known length up to check_body_bytes
  // into inbuf_ (it is forwarded from there as usual) and returns the start of the body.
  asio::awaitable<std::string> BodyForCheck(const http::BodyFraming& framing);

  // I/O on one side (client_ or upstream_): through its TLS stream once it has one.
  using TlsStream = asio::ssl::stream<tcp::socket&>;
  TlsStream* TlsOf(tcp::socket& s) const {
    return &s == &client_ ? client_tls_.get() : upstream_tls_.get();
  }
  asio::awaitable<std::tuple<boost::system::error_code, size_t>> ReadSome(tcp::socket& s,
                                                                          asio::mutable_buffer b);
  asio::awaitable<std::tuple<boost::system::error_code, size_t>> WriteAll(tcp::socket& s,
                                                                          asio::const_buffer b);

  // Forwarding.
  asio::awaitable<void> Splice(EgressRecord& rec);
  asio::awaitable<void> Pump(tcp::socket& from, tcp::socket& to, Direction& dir, uint64_t& counter);
  // Forwards one message body. With `rewrite`, every byte passes through it (kRefused when it
  // refuses); a chunked body is decoded first and framed anew, trailers dropped, so that no
  // chunk boundary can hide a string from it.
  asio::awaitable<BodyResult> ForwardBody(tcp::socket& from, tcp::socket& to, std::string& pending,
                                          http::BodyFraming framing, Direction& dir,
                                          uint64_t& counter, StreamRewriter* rewrite = nullptr);
  // Moves bytes from `from` to `to` through the direction's pipe, never through user space:
  // `limit` bytes (kDone), or until EOF (kEof) when limit is UINT64_MAX. kUnsupported, before
  // any byte moved, when the pipe cannot be had or splice refuses these sockets.
  asio::awaitable<SpliceResult> SpliceBytes(tcp::socket& from, tcp::socket& to, Direction& dir,
                                            uint64_t limit, uint64_t& counter);
  bool CanSplice(Direction& dir);
  asio::awaitable<RequestResult> SendRequest(const std::string& upstream_head,
                                             http::BodyFraming framing, EgressRecord& rec);
  asio::awaitable<ResponseResult> ForwardResponse(const http::RequestHead& head, bool client_close,
                                                  EgressRecord& rec);
  bool UpstreamStillUsable();
  void CloseUpstream();
  void EnsureBuffers();

  // Answers.
  asio::awaitable<void> SendHttpError(int status, const std::string& text);
  asio::awaitable<void> SendSocksReply(socks5::Reply code);
  // Writes all of `data` to the client; returns the error (falsy on success).
  asio::awaitable<boost::system::error_code> WriteClient(std::string_view data);
  static int HttpStatusFor(Failure failure);
  static std::string ClientText(const Outcome& outcome);  // the 4xx/5xx body after the prefix
  static socks5::Reply SocksReplyFor(const Outcome& outcome);
  EgressRecord NewRecord(Protocol protocol);
  void Finish(EgressRecord& rec);

  EgressProxy::Impl& proxy_;
  const ProxyLimits& limits_;
  tcp::socket client_;
  tcp::socket upstream_;
  asio::steady_timer watchdog_;
  asio::steady_timer handoff_wait_;  // a result another thread hands over (resolve, check)
  const bool over_limit_;

  std::string inbuf_;    // client bytes received and not yet used
  std::string respbuf_;  // upstream bytes received and not yet used (HTTP responses)
  Direction up_;         // client -> upstream
  Direction down_;       // upstream -> client

  // Upstream connection kept for HTTP keep-alive.
  std::string upstream_key_;  // "host:port" it was opened for; empty when none
  std::string upstream_address_;
  std::string upstream_note_;  // the address guard's exception that let it through, if any
  bool upstream_reusable_ = false;
  bool request_done_ = false;

  // Timeouts.
  Phase phase_ = Phase::kHead;
  SteadyTime started_;
  SteadyTime last_activity_;
  SteadyTime head_deadline_;
  SteadyTime connect_deadline_;
  SteadyTime armed_;  // what watchdog_ waits for
  bool finished_ = false;
  bool connect_timed_out_ = false;
  std::string abort_reason_;

  // Handoffs to the loop (handoff_wait_): from the resolver pool, and from the session check.
  std::optional<Result<std::vector<IpAddress>>> resolved_;
  uint64_t resolve_generation_ = 0;
  std::optional<Decision> checked_;
  uint64_t check_generation_ = 0;

  SteadyTime record_started_;  // of the attempt being served

  // Credentials (credential_grant.h): the request head being served, or a SOCKS5 request's host
  // as sent (kept only when the proxy has credentials or a check), what to do for the attempt
  // being served, and a refusal found in a body.
  std::string current_head_;
  GrantPlan grant_;
  std::string refused_in_body_;

  // An intercepted tunnel: the TLS streams over client_ and upstream_, its destination, and the
  // rule that allowed it (each request inside is recorded with it).
  std::unique_ptr<TlsStream> client_tls_;
  std::unique_ptr<TlsStream> upstream_tls_;
  bool intercepted_ = false;
  std::string tunnel_host_;
  uint16_t tunnel_port_ = 0;
  std::string tunnel_rule_;
};

}  // namespace warden::egress
