// One client connection of the egress proxy: protocol detection, HTTP (CONNECT and absolute-form
// requests, with keep-alive), SOCKS5, the decision, connecting, forwarding, and the timeouts.
#include <fcntl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <openssl/x509v3.h>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "egress/proxy_impl.h"
#include "egress/socks5.h"

namespace warden::egress {

namespace {

using boost::system::error_code;
using namespace asio::experimental::awaitable_operators;

constexpr auto kUseTuple = asio::as_tuple(asio::use_awaitable);
constexpr size_t kHeadReadChunk = 4096;
constexpr size_t kMaxRecordedTarget = 1024;

const char* StatusText(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 431:
      return "Request Header Fields Too Large";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Error";
  }
}

asio::ip::address ToAsio(const IpAddress& a) {
  if (a.is_v4()) return asio::ip::address_v4(a.v4());
  return asio::ip::address_v6(a.bytes);
}

void RethrowNothing(std::exception_ptr) {}

// Finds the end of an HTTP head in `buf`, scanning only what was not scanned before.
size_t FindHeadEndFrom(const std::string& buf, size_t& scanned) {
  size_t pos = buf.find("\r\n\r\n", scanned);
  if (pos != std::string::npos) return pos + 4;
  scanned = buf.size() >= 3 ? buf.size() - 3 : 0;
  return 0;
}

// t + d, saturating: a limit of milliseconds::max() means "never".
SteadyTime After(SteadyTime t, std::chrono::milliseconds d) {
  if (d.count() <= 0) return t;
  if (std::chrono::duration_cast<std::chrono::milliseconds>(SteadyTime::max() - t) <= d) {
    return SteadyTime::max();
  }
  return t + d;
}

}  // namespace

Session::Session(EgressProxy::Impl& proxy, tcp::socket client, bool over_limit)
    : proxy_(proxy),
      limits_(proxy.options.limits),
      client_(std::move(client)),
      upstream_(proxy.io),
      watchdog_(proxy.io),
      handoff_wait_(proxy.io),
      over_limit_(over_limit) {
  started_ = last_activity_ = std::chrono::steady_clock::now();
  head_deadline_ = After(started_, limits_.header_timeout);
  connect_deadline_ = armed_ = SteadyTime::max();
  proxy_.sessions.insert(this);
  (over_limit_ ? proxy_.over_limit_active : proxy_.active)++;
  proxy_.stats.connections_active = proxy_.active;
}

asio::awaitable<void> Session::Run() {
  auto self = shared_from_this();
  asio::co_spawn(
      proxy_.io, [self]() -> asio::awaitable<void> { co_await self->Watchdog(); }, RethrowNothing);
  try {
    error_code ignored;
    client_.set_option(tcp::no_delay(true), ignored);
    error_code ec = co_await ReadMore(limits_.max_header_bytes);
    if (!ec && !inbuf_.empty()) {
      if (static_cast<uint8_t>(inbuf_[0]) == socks5::kVersion) {
        co_await ServeSocks5();
      } else {
        co_await ServeHttp();
      }
    }
  } catch (const std::exception& e) {
    proxy_.Log(std::string("egress: connection failed: ") + e.what());
  }
  finished_ = true;
  watchdog_.cancel();
  handoff_wait_.cancel();
  error_code ignored;
  client_.close(ignored);
  upstream_.close(ignored);
  proxy_.SessionEnded(this, over_limit_);
}

void Session::Abort(const std::string& reason) {
  if (abort_reason_.empty()) abort_reason_ = reason;
  error_code ignored;
  client_.close(ignored);
  upstream_.close(ignored);
  handoff_wait_.cancel();
}

// ---- Timeouts ----------------------------------------------------------------------------

SteadyTime Session::Deadline(Phase* which_phase, bool* lifetime) const {
  const SteadyTime end_of_life = After(started_, limits_.max_lifetime);
  SteadyTime phase_deadline;
  switch (phase_) {
    case Phase::kHead:
      phase_deadline = head_deadline_;
      break;
    case Phase::kConnecting:
      phase_deadline = connect_deadline_;
      break;
    default:
      phase_deadline = After(last_activity_, limits_.idle_timeout);
  }
  *which_phase = phase_;
  *lifetime = end_of_life <= phase_deadline;
  return std::min(end_of_life, phase_deadline);
}

void Session::SetPhase(Phase phase) {
  phase_ = phase;
  Phase which;
  bool lifetime;
  // Wake the watchdog when the new deadline comes before the one it waits for.
  if (Deadline(&which, &lifetime) < armed_) watchdog_.cancel();
}

asio::awaitable<void> Session::Watchdog() {
  while (!finished_) {
    Phase which;
    bool lifetime;
    const SteadyTime deadline = Deadline(&which, &lifetime);
    if (std::chrono::steady_clock::now() >= deadline) {
      if (lifetime) {
        proxy_.stats.lifetime_timeouts++;
        Abort("connection lifetime limit reached");
        co_return;
      }
      if (which == Phase::kConnecting) {
        // Only the attempt to connect gives up: the client still gets its 504.
        connect_timed_out_ = true;
        connect_deadline_ = SteadyTime::max();
        error_code ignored;
        upstream_.close(ignored);
        handoff_wait_.cancel();
        continue;
      }
      if (which == Phase::kHead) {
        proxy_.stats.header_timeouts++;
        Abort("header timeout");
      } else {
        proxy_.stats.idle_timeouts++;
        Abort("idle timeout");
      }
      proxy_.Log("egress: connection closed: " + abort_reason_);
      co_return;
    }
    armed_ = deadline;
    watchdog_.expires_at(deadline);
    co_await watchdog_.async_wait(kUseTuple);
    armed_ = SteadyTime::max();
  }
}

// ---- Reading -----------------------------------------------------------------------------

asio::awaitable<error_code> Session::ReadMore(size_t limit) {
  if (inbuf_.size() >= limit) co_return asio::error::no_buffer_space;
  const size_t chunk = std::min(limit - inbuf_.size(), kHeadReadChunk);
  const size_t old = inbuf_.size();
  inbuf_.resize(old + chunk);
  auto [ec, n] = co_await ReadSome(client_, asio::buffer(inbuf_.data() + old, chunk));
  inbuf_.resize(old + n);
  if (n > 0) Touch();
  co_return ec;
}

// ---- Records and answers -----------------------------------------------------------------

EgressRecord Session::NewRecord(Protocol protocol) {
  EgressRecord rec;
  rec.time = std::chrono::system_clock::now();
  rec.session_id = proxy_.options.session_id;
  rec.protocol = protocol;
  record_started_ = std::chrono::steady_clock::now();
  return rec;
}

void Session::Finish(EgressRecord& rec) {
  rec.duration_ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                              std::chrono::steady_clock::now() - record_started_)
                                              .count());
  if (rec.allowed && rec.error.empty() && !abort_reason_.empty()) rec.error = abort_reason_;
  if (!rec.allowed) {
    proxy_.Log("egress: denied " + std::string(ProtocolName(rec.protocol)) + " " + rec.host + ":" +
               std::to_string(rec.port) + ": " + rec.rule_or_reason);
  }
  proxy_.Record(rec);
}

asio::awaitable<std::tuple<error_code, size_t>> Session::ReadSome(tcp::socket& s,
                                                                 asio::mutable_buffer b) {
  if (TlsStream* tls = TlsOf(s)) co_return co_await tls->async_read_some(b, kUseTuple);
  co_return co_await s.async_read_some(b, kUseTuple);
}

asio::awaitable<std::tuple<error_code, size_t>> Session::WriteAll(tcp::socket& s,
                                                                 asio::const_buffer b) {
  if (TlsStream* tls = TlsOf(s)) co_return co_await asio::async_write(*tls, b, kUseTuple);
  co_return co_await asio::async_write(s, b, kUseTuple);
}

asio::awaitable<error_code> Session::WriteClient(std::string_view data) {
  auto [ec, n] = co_await WriteAll(client_, asio::buffer(data.data(), data.size()));
  if (!ec) Touch();
  co_return ec;
}

asio::awaitable<void> Session::SendHttpError(int status, const std::string& text) {
  const std::string body = "warden egress: " + text + "\n";
  std::string response = "HTTP/1.1 " + std::to_string(status) + " " + StatusText(status) +
                         "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  co_await WriteClient(response);
  error_code ignored;
  client_.shutdown(tcp::socket::shutdown_send, ignored);
}

asio::awaitable<void> Session::SendSocksReply(socks5::Reply code) {
  co_await WriteClient(socks5::BuildReply(code));
}

int Session::HttpStatusFor(Failure failure) {
  switch (failure) {
    case Failure::kBadHost:
      return 400;
    case Failure::kDenied:
      return 403;
    case Failure::kOverLimit:
      return 503;
    case Failure::kTimedOut:
      return 504;
    default:
      return 502;
  }
}

std::string Session::ClientText(const Outcome& o) {
  switch (o.failure) {
    case Failure::kBadHost:
      return "bad request: " + o.message;
    case Failure::kDenied:
      return "denied: " + o.message;
    default:
      return o.message;
  }
}

socks5::Reply Session::SocksReplyFor(const Outcome& o) {
  switch (o.failure) {
    case Failure::kBadHost:
    case Failure::kDenied:
      return socks5::Reply::kNotAllowedByRuleset;
    case Failure::kOverLimit:
      return socks5::Reply::kGeneralFailure;
    case Failure::kConnectFailed:
      if (o.error == ECONNREFUSED) return socks5::Reply::kConnectionRefused;
      if (o.error == ENETUNREACH) return socks5::Reply::kNetworkUnreachable;
      return socks5::Reply::kHostUnreachable;
    default:
      return socks5::Reply::kHostUnreachable;
  }
}

// ---- Decision and connection -------------------------------------------------------------

Session::Outcome Session::Decide(EgressRecord& rec, const std::string& raw_host, uint16_t port,
                                 Host* host, const http::RequestHead* request) {
  rec.port = port;
  auto parsed = ParseHost(raw_host);
  if (!parsed.ok()) {
    rec.host = Quote(raw_host);
    rec.rule_or_reason = parsed.status().message();
    return {Failure::kBadHost, rec.rule_or_reason};
  }
  *host = std::move(parsed).value();
  rec.host = host->name;
  if (port == 0) {
    rec.rule_or_reason = "port 0 is not a destination port";
    return {Failure::kBadHost, rec.rule_or_reason};
  }
  if (over_limit_) {
    rec.rule_or_reason =
        "too many connections (limit " + std::to_string(limits_.max_connections) + ")";
    return {Failure::kOverLimit, rec.rule_or_reason};
  }
  if (proxy_.options.hook) {
    Attempt attempt{host->name, port, proxy_.options.session_id, rec.protocol, {}, {}, {}};
    Decision d;
    try {
      d = proxy_.options.hook(attempt);
    } catch (const std::exception& e) {
      d = Decision::Deny(std::string("decision hook failed: ") + e.what());
    } catch (...) {
      d = Decision::Deny("decision hook failed");
    }
    if (d.kind != Decision::Kind::kDefer) {
      // The reason goes into a response body, the log and JSON: keep it printable.
      rec.rule_or_reason = "hook: " + Printable(d.reason);
      if (d.kind == Decision::Kind::kDeny) return {Failure::kDenied, rec.rule_or_reason};
      return PlanCredentials(rec, *host, port, request);
    }
  }
  Verdict v = proxy_.options.allow_list.Permits(*host, port);
  rec.rule_or_reason = v.rule_or_reason;
  if (!v.allowed) return {Failure::kDenied, rec.rule_or_reason};
  return PlanCredentials(rec, *host, port, request);
}

Session::Outcome Session::PlanCredentials(EgressRecord& rec, const Host& host, uint16_t port,
                                          const http::RequestHead* request) {
  grant_ = {};
  if (proxy_.options.credentials.empty()) return {};
  if (request == nullptr) {
    // A tunnel: its request may not carry a placeholder; its bytes are not looked at, nothing is
    // put in (an intercepted tunnel's requests are planned one by one).
    grant_.refused = RefuseTunnel(proxy_.options.credentials, current_head_,
                                  rec.protocol == Protocol::kSocks5 ? "the SOCKS5 request"
                                                                    : "the CONNECT request");
  } else {
    grant_ = PlanGrants(proxy_.options.credentials, host.name, port, *request,
                        rec.protocol == Protocol::kHttps);
  }
  if (!grant_.refused.empty()) {
    rec.rule_or_reason = grant_.refused;
    return {Failure::kDenied, rec.rule_or_reason};
  }
  if (!grant_.used.empty()) {
    std::string names;
    for (const auto& n : grant_.used) names += (names.empty() ? "" : ", ") + n;
    rec.rule_or_reason += " (credential " + names + ")";
  }
  return {};
}

asio::awaitable<Result<std::vector<IpAddress>>> Session::ResolveName(const std::string& name) {
  resolved_.reset();
  const uint64_t generation = ++resolve_generation_;
  handoff_wait_.expires_at(SteadyTime::max());
  std::weak_ptr<Session> weak = shared_from_this();
  auto gate = proxy_.gate;
  proxy_.resolver->Lookup(name, [weak, gate, generation](Result<std::vector<IpAddress>> r) {
    std::lock_guard lock(gate->mu);
    if (gate->io == nullptr) return;
    asio::post(*gate->io, [weak, generation, r = std::move(r)]() mutable {
      auto s = weak.lock();
      if (!s || s->resolve_generation_ != generation) return;
      s->resolved_.emplace(std::move(r));
      s->handoff_wait_.cancel();
    });
  });
  co_await handoff_wait_.async_wait(kUseTuple);
  if (!resolved_) {
    co_return Status::Error(connect_timed_out_ ? "timed out" : "connection closed");
  }
  Result<std::vector<IpAddress>> out = std::move(*resolved_);
  resolved_.reset();
  co_return out;
}

asio::awaitable<Session::Outcome> Session::Check(EgressRecord& rec, const Attempt& attempt) {
  if (!proxy_.options.check) co_return Outcome{};
  checked_.reset();
  const uint64_t generation = ++check_generation_;
  handoff_wait_.expires_after(proxy_.options.check_timeout);
  std::weak_ptr<Session> weak = shared_from_this();
  auto gate = proxy_.gate;
  auto answered = std::make_shared<std::atomic<bool>>(false);
  DecisionDone done = [weak, gate, generation, answered](Decision d) {
    if (answered->exchange(true)) return;
    std::lock_guard lock(gate->mu);
    if (gate->io == nullptr) return;
    asio::post(*gate->io, [weak, generation, d = std::move(d)]() mutable {
      auto s = weak.lock();
      if (!s || s->check_generation_ != generation) return;
      s->checked_.emplace(std::move(d));
      s->handoff_wait_.cancel();
    });
  };
  try {
    proxy_.options.check(attempt, done);
  } catch (const std::exception& e) {
    done(Decision::Deny(std::string("it failed: ") + e.what()));
  } catch (...) {
    done(Decision::Deny("it failed"));
  }
  co_await handoff_wait_.async_wait(kUseTuple);
  ++check_generation_;  // an answer that comes later finds nobody waiting
  if (!abort_reason_.empty()) co_return Outcome{Failure::kAborted, abort_reason_};
  std::optional<Decision> d = std::move(checked_);
  checked_.reset();
  if (!d) {
    rec.rule_or_reason = "session check: no answer within " +
                         std::to_string(proxy_.options.check_timeout.count()) + " ms";
    co_return Outcome{Failure::kDenied, rec.rule_or_reason};
  }
  if (d->kind == Decision::Kind::kDeny) {
    rec.rule_or_reason = "session check: " + Printable(d->reason);
    co_return Outcome{Failure::kDenied, rec.rule_or_reason};
  }
  co_return Outcome{};
}

asio::awaitable<std::string> Session::BodyForCheck(const http::BodyFraming& framing) {
  using Kind = http::BodyFraming::Kind;
  if (framing.kind == Kind::kNone) co_return std::string();
  const size_t cap = proxy_.options.check_body_bytes;
  size_t want = cap;
  if (framing.kind == Kind::kLength) {
    want = static_cast<size_t>(std::min<uint64_t>(framing.length, cap));
    if (framing.length <= cap) {
      while (inbuf_.size() < want && abort_reason_.empty()) {
        if (co_await ReadMore(want)) break;  // the client is gone: forwarding will say so
      }
    }
  }
  co_return inbuf_.substr(0, std::min(inbuf_.size(), want));
}

asio::awaitable<Session::Outcome> Session::Connect(EgressRecord& rec, const Host& host,
                                                   uint16_t port) {
  CloseUpstream();
  connect_timed_out_ = false;
  connect_deadline_ = After(std::chrono::steady_clock::now(), limits_.connect_timeout);
  SetPhase(Phase::kConnecting);

  std::vector<IpAddress> addresses;
  if (host.address) {
    addresses.push_back(*host.address);
  } else if (const auto* mapped = proxy_.options.resolve.Find(host.name)) {
    addresses = *mapped;
  } else {
    auto resolved = co_await ResolveName(host.name);
    if (!resolved.ok()) {
      SetPhase(Phase::kActive);
      rec.allowed = true;
      rec.error = "cannot resolve " + host.name + ": " + resolved.status().message();
      proxy_.stats.connect_failures++;
      co_return Outcome{connect_timed_out_      ? Failure::kTimedOut
                        : abort_reason_.empty() ? Failure::kResolveFailed
                                                : Failure::kAborted,
                        rec.error};
    }
    addresses = std::move(resolved).value();
  }

  // The address guard: only checked addresses are ever connected to.
  std::vector<std::pair<IpAddress, std::string>> checked;
  Verdict first_refusal;
  std::string refused_address;
  for (const auto& a : addresses) {
    Verdict v = proxy_.guard.Check(host, a, port);
    if (v.allowed) {
      checked.emplace_back(a, v.rule_or_reason);
    } else if (refused_address.empty()) {
      first_refusal = v;
      refused_address = a.ToString();
    }
  }
  if (checked.empty()) {
    SetPhase(Phase::kActive);
    rec.allowed = false;
    rec.resolved_address = refused_address;
    rec.rule_or_reason = first_refusal.rule_or_reason;
    co_return Outcome{Failure::kDenied, rec.rule_or_reason};
  }
  rec.allowed = true;

  Outcome failed{Failure::kConnectFailed, "", 0};
  for (const auto& [address, guard_note] : checked) {
    if (!abort_reason_.empty() || connect_timed_out_) break;
    tcp::endpoint endpoint(ToAsio(address), port);
    error_code ec;
    upstream_.open(endpoint.protocol(), ec);
    if (!ec) std::tie(ec) = co_await upstream_.async_connect(endpoint, kUseTuple);
    if (!ec) {
      error_code ignored;
      upstream_.set_option(tcp::no_delay(true), ignored);
      rec.resolved_address = address.ToString();
      upstream_note_ = guard_note == "public address" ? "" : " (" + guard_note + ")";
      rec.rule_or_reason += upstream_note_;
      upstream_key_ = host.name + ":" + std::to_string(port);
      upstream_address_ = rec.resolved_address;
      SetPhase(Phase::kActive);
      Touch();
      co_return Outcome{};
    }
    rec.resolved_address = address.ToString();
    failed.error = ec.value();
    failed.message = address.ToUrlHost() + ":" + std::to_string(port) + ": " + ec.message();
    error_code ignored;
    upstream_.close(ignored);
  }
  SetPhase(Phase::kActive);
  proxy_.stats.connect_failures++;
  if (!abort_reason_.empty()) co_return Outcome{Failure::kAborted, abort_reason_};
  if (connect_timed_out_) {
    rec.error = "connect timeout (" + std::to_string(limits_.connect_timeout.count()) + " ms)";
    co_return Outcome{Failure::kTimedOut, rec.error};
  }
  rec.error = "connect failed: " + failed.message;
  failed.message = rec.error;
  co_return failed;
}

asio::awaitable<Session::Outcome> Session::DecideAndConnect(EgressRecord& rec,
                                                            const std::string& raw_host,
                                                            uint16_t port) {
  Host host;
  Outcome o = Decide(rec, raw_host, port, &host);
  if (o.failure != Failure::kNone) co_return o;
  // A named object, not a temporary: GCC 12 destroys a temporary argument of a coroutine twice.
  const Attempt attempt{host.name, port, proxy_.options.session_id, rec.protocol, {}, {}, {}};
  o = co_await Check(rec, attempt);
  if (o.failure != Failure::kNone) co_return o;
  co_return co_await Connect(rec, host, port);
}

void Session::CloseUpstream() {
  error_code ignored;
  upstream_.close(ignored);
  upstream_key_.clear();
  upstream_address_.clear();
  upstream_note_.clear();
  upstream_reusable_ = false;
  respbuf_.clear();
}

bool Session::UpstreamStillUsable() {
  if (!upstream_.is_open()) return false;
  // A kept-alive server may have closed meanwhile; anything readable now (EOF or stray bytes)
  // means the connection cannot carry another request.
  char c;
  ssize_t r = ::recv(upstream_.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

void Session::EnsureBuffers() {
  if (!up_.buf) up_.buf = std::make_unique<char[]>(limits_.buffer_bytes);
  if (!down_.buf) down_.buf = std::make_unique<char[]>(limits_.buffer_bytes);
}

bool Session::CanSplice(Direction& dir) {
  if (dir.splice_unavailable || !proxy_.options.zero_copy) return false;
  if (dir.pipe_read.valid()) return true;
  int fds[2];
  if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) {
    dir.splice_unavailable = true;  // e.g. out of descriptors: copying still works
    return false;
  }
  dir.pipe_read.reset(fds[0]);
  dir.pipe_write.reset(fds[1]);
  dir.in_pipe = 0;
  int size = fcntl(fds[1], F_SETPIPE_SZ, static_cast<int>(limits_.buffer_bytes));
  if (size <= 0) size = fcntl(fds[1], F_GETPIPE_SZ);
  dir.pipe_capacity = size > 0 ? static_cast<size_t>(size) : 4096;
  return true;
}

asio::awaitable<Session::SpliceResult> Session::SpliceBytes(tcp::socket& from, tcp::socket& to,
                                                            Direction& dir, uint64_t limit,
                                                            uint64_t& counter) {
  constexpr unsigned kFlags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;
  error_code ec;
  from.native_non_blocking(true, ec);
  to.native_non_blocking(true, ec);
  auto fail = [&dir](SpliceResult r) {
    // Whatever is left in the pipe belongs to a broken stream: never let it reach another.
    dir.pipe_read.reset();
    dir.pipe_write.reset();
    dir.in_pipe = 0;
    return r;
  };
  uint64_t moved = 0;
  bool eof = false;
  while (moved < limit && !eof) {
    const uint64_t want = std::min<uint64_t>(dir.pipe_capacity, limit - moved);
    ssize_t n = ::splice(from.native_handle(), nullptr, dir.pipe_write.get(), nullptr,
                         static_cast<size_t>(want), kFlags);
    if (n == 0) {
      eof = true;
    } else if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        if (moved == 0 && (errno == EINVAL || errno == ENOSYS)) {
          dir.splice_unavailable = true;
          co_return fail(SpliceResult::kUnsupported);
        }
        co_return fail(SpliceResult::kReadError);
      }
      auto [wait_ec] = co_await from.async_wait(tcp::socket::wait_read, kUseTuple);
      if (wait_ec) co_return fail(SpliceResult::kReadError);
      continue;
    } else {
      dir.in_pipe += static_cast<size_t>(n);
      Touch();
    }
    while (dir.in_pipe > 0) {
      ssize_t m =
          ::splice(dir.pipe_read.get(), nullptr, to.native_handle(), nullptr, dir.in_pipe, kFlags);
      if (m > 0) {
        dir.in_pipe -= static_cast<size_t>(m);
        moved += static_cast<uint64_t>(m);
        counter += static_cast<uint64_t>(m);
        Touch();
      } else if (m < 0 && errno == EINTR) {
        continue;
      } else if (m < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        auto [wait_ec] = co_await to.async_wait(tcp::socket::wait_write, kUseTuple);
        if (wait_ec) co_return fail(SpliceResult::kWriteError);
      } else {
        co_return fail(SpliceResult::kWriteError);
      }
    }
  }
  co_return eof ? SpliceResult::kEof : SpliceResult::kDone;
}

// ---- Forwarding --------------------------------------------------------------------------

asio::awaitable<void> Session::Pump(tcp::socket& from, tcp::socket& to, Direction& dir,
                                    uint64_t& counter) {
  error_code ignored;
  if (CanSplice(dir)) {
    SpliceResult r = co_await SpliceBytes(from, to, dir, UINT64_MAX, counter);
    if (r == SpliceResult::kEof) {
      to.shutdown(tcp::socket::shutdown_send, ignored);  // pass the half-close on
      co_return;
    }
    if (r != SpliceResult::kUnsupported) {
      from.close(ignored);
      to.close(ignored);
      co_return;
    }
  }
  char* buf = dir.buf.get();
  while (true) {
    auto [ec, n] =
        co_await from.async_read_some(asio::buffer(buf, limits_.buffer_bytes), kUseTuple);
    if (ec) {
      if (ec == asio::error::eof) {
        to.shutdown(tcp::socket::shutdown_send, ignored);  // pass the half-close on
      } else {
        from.close(ignored);
        to.close(ignored);
      }
      co_return;
    }
    Touch();
    auto [wec, written] = co_await asio::async_write(to, asio::buffer(buf, n), kUseTuple);
    if (wec) {
      from.close(ignored);
      to.close(ignored);
      co_return;
    }
    counter += written;
    Touch();
  }
}

asio::awaitable<void> Session::Splice(EgressRecord& rec) {
  EnsureBuffers();
  if (!inbuf_.empty()) {  // bytes the client sent right behind its request
    auto [ec, n] = co_await asio::async_write(upstream_, asio::buffer(inbuf_), kUseTuple);
    if (ec) co_return;
    rec.bytes_up += n;
    inbuf_.clear();
  }
  co_await (Pump(client_, upstream_, up_, rec.bytes_up) &&
            Pump(upstream_, client_, down_, rec.bytes_down));
}

asio::awaitable<Session::BodyResult> Session::ForwardBody(tcp::socket& from, tcp::socket& to,
                                                          std::string& pending,
                                                          http::BodyFraming framing, Direction& dir,
                                                          uint64_t& counter,
                                                          StreamRewriter* rewrite) {
  using Kind = http::BodyFraming::Kind;
  if (framing.kind == Kind::kNone) co_return BodyResult::kDone;
  http::ChunkedBodyTracker tracker;
  uint64_t remaining = framing.length;
  auto done = [&] {
    return (framing.kind == Kind::kLength && remaining == 0) ||
           (framing.kind == Kind::kChunked && tracker.done());
  };
  char* buf = dir.buf.get();
  if (rewrite != nullptr && rewrite->empty()) rewrite = nullptr;
  std::string rewritten;
  std::string payload;  // decoded chunk data (rechunk)
  const bool rechunk = rewrite != nullptr && framing.kind == Kind::kChunked;
  // Writes what the rewriter lets through of `data` (all of it without one). With a rewriter, a
  // chunked body's `data` is chunk payload: it goes out as a chunk of its own, and `flush` (the
  // body's end) adds the last chunk.
  auto pass = [&](std::string_view data, bool flush) -> asio::awaitable<BodyResult> {
    if (rewrite == nullptr) {
      auto [wec, written] = co_await WriteAll(to, asio::buffer(data.data(), data.size()));
      if (wec) co_return BodyResult::kWriteError;
      counter += written;
      co_return BodyResult::kDone;
    }
    rewritten.clear();
    rewrite->Feed(data, &rewritten);
    if (!rewrite->refused().empty()) co_return BodyResult::kRefused;
    if (flush) rewrite->Flush(&rewritten);
    if (rechunk) {
      char size[32];
      const int len = std::snprintf(size, sizeof size, "%zx\r\n", rewritten.size());
      rewritten = rewritten.empty() ? "" : std::string(size, static_cast<size_t>(len)) + rewritten + "\r\n";
      if (flush) rewritten += "0\r\n\r\n";
    }
    if (rewritten.empty()) co_return BodyResult::kDone;
    auto [wec, written] = co_await WriteAll(to, asio::buffer(rewritten));
    if (wec) co_return BodyResult::kWriteError;
    counter += written;
    co_return BodyResult::kDone;
  };
  while (!done()) {
    const bool from_pending = !pending.empty();
    if (!from_pending && framing.kind != Kind::kChunked && rewrite == nullptr &&
        TlsOf(from) == nullptr && TlsOf(to) == nullptr && CanSplice(dir)) {
      // A body of known length, or one that runs to EOF: no need to look at its bytes.
      const uint64_t before = counter;
      SpliceResult r = co_await SpliceBytes(
          from, to, dir, framing.kind == Kind::kLength ? remaining : UINT64_MAX, counter);
      if (framing.kind == Kind::kLength) remaining -= counter - before;
      switch (r) {
        case SpliceResult::kDone:
          continue;
        case SpliceResult::kEof:
          co_return framing.kind == Kind::kUntilClose ? BodyResult::kEof : BodyResult::kReadError;
        case SpliceResult::kReadError:
          co_return BodyResult::kReadError;
        case SpliceResult::kWriteError:
          co_return BodyResult::kWriteError;
        case SpliceResult::kUnsupported:
          break;  // copy below
      }
    }
    std::string_view avail;
    if (from_pending) {
      avail = pending;
    } else {
      auto [ec, got] = co_await ReadSome(from, asio::buffer(buf, limits_.buffer_bytes));
      if (ec) {
        // Over TLS, a close without close_notify is how many servers end such a body.
        const bool eof = ec == asio::error::eof || ec == asio::ssl::error::stream_truncated;
        if (!eof || framing.kind != Kind::kUntilClose) co_return BodyResult::kReadError;
        BodyResult flushed = co_await pass({}, true);
        co_return flushed == BodyResult::kDone ? BodyResult::kEof : flushed;
      }
      Touch();
      avail = std::string_view(buf, got);
    }
    size_t n = avail.size();
    if (framing.kind == Kind::kLength) {
      n = static_cast<size_t>(std::min<uint64_t>(remaining, avail.size()));
      remaining -= n;
    } else if (framing.kind == Kind::kChunked) {
      payload.clear();
      auto consumed = tracker.Consume(avail, rechunk ? &payload : nullptr);
      if (!consumed.ok()) co_return BodyResult::kMalformed;
      n = *consumed;
    }
    BodyResult wrote = co_await pass(rechunk ? std::string_view(payload) : avail.substr(0, n), done());
    if (wrote != BodyResult::kDone) co_return wrote;
    Touch();
    if (from_pending) {
      pending.erase(0, n);
    } else if (n < avail.size()) {
      pending.assign(avail.substr(n));  // the start of the next message
    }
  }
  co_return BodyResult::kDone;
}

asio::awaitable<Session::RequestResult> Session::SendRequest(const std::string& upstream_head,
                                                             http::BodyFraming framing,
                                                             EgressRecord& rec) {
  auto [ec, n] = co_await WriteAll(upstream_, asio::buffer(upstream_head));
  if (ec) co_return RequestResult::kUpstreamGone;
  rec.bytes_up += n;
  Touch();
  EnsureBuffers();
  StreamRewriter rewrite(grant_.request);
  BodyResult r =
      co_await ForwardBody(client_, upstream_, inbuf_, framing, up_, rec.bytes_up, &rewrite);
  error_code ignored;
  switch (r) {
    case BodyResult::kDone:
      request_done_ = true;
      co_return RequestResult::kSent;
    case BodyResult::kRefused:
      refused_in_body_ = rewrite.refused();
      upstream_.close(ignored);
      co_return RequestResult::kRefused;
    case BodyResult::kWriteError:
      co_return RequestResult::kUpstreamGone;  // the response may still explain why
    case BodyResult::kMalformed:
      upstream_.close(ignored);
      co_return RequestResult::kClientMalformed;
    default:
      upstream_.close(ignored);
      co_return RequestResult::kClientGone;
  }
}

asio::awaitable<Session::ResponseResult> Session::ForwardResponse(const http::RequestHead& head,
                                                                  bool client_close,
                                                                  EgressRecord& rec) {
  ResponseResult out;
  while (true) {
    size_t end = 0;
    size_t scanned = 0;
    while ((end = FindHeadEndFrom(respbuf_, scanned)) == 0) {
      if (respbuf_.size() >= limits_.max_response_header_bytes) {
        out.error = "response head larger than " +
                    std::to_string(limits_.max_response_header_bytes) + " bytes";
        co_return out;
      }
      const size_t chunk =
          std::min(limits_.max_response_header_bytes - respbuf_.size(), kHeadReadChunk);
      const size_t old = respbuf_.size();
      respbuf_.resize(old + chunk);
      auto [ec, n] = co_await ReadSome(upstream_, asio::buffer(respbuf_.data() + old, chunk));
      respbuf_.resize(old + n);
      if (ec) {
        out.error = ec == asio::error::eof || ec == asio::ssl::error::stream_truncated
                        ? "upstream closed the connection without a response"
                        : "upstream: " + ec.message();
        co_return out;
      }
      Touch();
    }
    auto resp = http::ParseResponseHead(std::string_view(respbuf_).substr(0, end));
    if (!resp.ok()) {
      out.error = "malformed response: " + resp.status().message();
      co_return out;
    }
    respbuf_.erase(0, end);
    if (resp->status < 200) {
      if (resp->status == 101) {
        out.error = "unexpected 101 Switching Protocols (upgrades are not forwarded)";
        co_return out;
      }
      std::string interim = http::BuildClientResponseHead(*resp, false);
      ReplaceAll(grant_.response, interim);
      if (co_await WriteClient(interim)) co_return out;
      out.sent_anything = true;
      rec.bytes_down += interim.size();
      continue;
    }
    auto framing = http::ResponseBodyFraming(*resp, head.method);
    if (!framing.ok()) {
      out.error = "malformed response: " + framing.status().message();
      co_return out;
    }
    if (!grant_.response.empty()) {
      // The value is masked in what the code reads; an encoding would hide it from the mask.
      out.error = UnmaskableResponse(*resp);
      if (!out.error.empty()) co_return out;
    }
    out.close_client = client_close || framing->kind == http::BodyFraming::Kind::kUntilClose;
    rec.http_status = resp->status;
    std::string client_head = http::BuildClientResponseHead(*resp, out.close_client);
    ReplaceAll(grant_.response, client_head);  // a granted value echoed back goes back masked
    if (co_await WriteClient(client_head)) co_return out;
    out.sent_anything = true;
    rec.bytes_down += client_head.size();
    EnsureBuffers();
    StreamRewriter rewrite(grant_.response);
    BodyResult r = co_await ForwardBody(upstream_, client_, respbuf_, *framing, down_,
                                        rec.bytes_down, &rewrite);
    if (r != BodyResult::kDone && r != BodyResult::kEof) {
      out.error = r == BodyResult::kMalformed ? "malformed chunked response body"
                                              : "response body cut short";
      co_return out;
    }
    out.ok = true;
    upstream_reusable_ = r == BodyResult::kDone && respbuf_.empty() && resp->version_minor == 1 &&
                         !http::HeaderHasToken(resp->headers, "connection", "close") &&
                         !out.close_client;
    if (!request_done_) {
      // The server answered before the whole request body came: this connection cannot be
      // reused, and the rest of the body has nowhere to go.
      out.close_client = true;
      upstream_reusable_ = false;
      error_code ignored;
      client_.cancel(ignored);
      upstream_.cancel(ignored);
    }
    co_return out;
  }
}

// ---- HTTP --------------------------------------------------------------------------------

asio::awaitable<void> Session::ServeHttp(bool first) {
  while (abort_reason_.empty()) {
    if (!first) {
      if (inbuf_.empty()) {
        SetPhase(Phase::kIdle);  // keep-alive: wait for the next request under the idle timeout
        error_code ec = co_await ReadMore(limits_.max_header_bytes);
        if (ec || inbuf_.empty()) co_return;
      }
      head_deadline_ = After(std::chrono::steady_clock::now(), limits_.header_timeout);
      SetPhase(Phase::kHead);
    }
    first = false;
    size_t scanned = 0;
    size_t head_len = 0;
    while ((head_len = FindHeadEndFrom(inbuf_, scanned)) == 0) {
      if (inbuf_.size() >= limits_.max_header_bytes) {
        proxy_.stats.bad_requests++;
        proxy_.Log("egress: request head over " + std::to_string(limits_.max_header_bytes) +
                   " bytes");
        co_await SendHttpError(
            431, "request head larger than " + std::to_string(limits_.max_header_bytes) + " bytes");
        co_return;
      }
      if (co_await ReadMore(limits_.max_header_bytes)) co_return;
    }
    auto head = http::ParseRequestHead(std::string_view(inbuf_).substr(0, head_len));
    if (!head.ok()) {
      proxy_.stats.bad_requests++;
      proxy_.Log("egress: bad request: " + head.status().message());
      co_await SendHttpError(400, "bad request: " + head.status().message());
      co_return;
    }
    if (!proxy_.options.credentials.empty() || proxy_.options.check)
      current_head_.assign(inbuf_, 0, head_len);
    inbuf_.erase(0, head_len);
    SetPhase(Phase::kActive);
    if (head->method == "CONNECT") {
      if (intercepted_) {
        proxy_.stats.bad_requests++;
        co_await SendHttpError(400, "bad request: CONNECT inside a tunnel");
        co_return;
      }
      EgressRecord rec = NewRecord(Protocol::kConnect);
      co_await ServeConnect(*head, rec);
      co_return;
    }
    EgressRecord rec = NewRecord(intercepted_ ? Protocol::kHttps : Protocol::kHttp);
    if (!co_await ServeHttpRequest(*head, rec)) co_return;
  }
}

asio::awaitable<void> Session::ServeConnect(const http::RequestHead& head, EgressRecord& rec) {
  auto authority = http::ParseAuthority(head.target, std::nullopt);
  if (!authority.ok()) {
    proxy_.stats.bad_requests++;
    rec.host = Quote(head.target);
    rec.rule_or_reason = "bad CONNECT target: " + authority.status().message();
    co_await SendHttpError(400, "bad request: " + rec.rule_or_reason);
    Finish(rec);
    co_return;
  }
  Outcome o = co_await DecideAndConnect(rec, authority->host, authority->port);
  if (o.failure != Failure::kNone) {
    if (o.failure != Failure::kAborted) {
      co_await SendHttpError(HttpStatusFor(o.failure), ClientText(o));
    }
    Finish(rec);
    co_return;
  }
  if (!co_await WriteClient("HTTP/1.1 200 Connection established\r\n\r\n")) {
    if (asio::ssl::context* tls = proxy_.InterceptFor(rec.host, rec.port)) {
      co_await ServeIntercepted(*tls, rec);
    } else {
      co_await Splice(rec);
    }
  }
  Finish(rec);
}

asio::awaitable<void> Session::ServeIntercepted(asio::ssl::context& server, EgressRecord& rec) {
  rec.rule_or_reason += " (TLS terminated for credentials)";
  if (!inbuf_.empty()) {
    // The handshake must start from the client's first TLS byte; this proxy does not replay
    // what came with the tunnel's request.
    rec.error = "the client sent data before the tunnel was established";
    co_return;
  }
  client_tls_ = std::make_unique<TlsStream>(client_, server);
  auto [cec] = co_await client_tls_->async_handshake(asio::ssl::stream_base::server, kUseTuple);
  if (cec) {
    rec.error = "TLS with the sandbox: " + cec.message() +
                " (it must trust the CA in $SSL_CERT_FILE for " + rec.host + ")";
    proxy_.Log("egress: " + rec.host + ":" + std::to_string(rec.port) + ": " + rec.error);
    client_tls_.reset();
    co_return;
  }
  Touch();
  upstream_tls_ = std::make_unique<TlsStream>(upstream_, *proxy_.upstream_tls);
  SSL* ssl = upstream_tls_->native_handle();
  // SNI, and the name the real host's certificate must carry.
  SSL_set_tlsext_host_name(ssl, rec.host.c_str());
  SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  SSL_set1_host(ssl, rec.host.c_str());
  static const unsigned char kAlpn[] = "\x08http/1.1";
  SSL_set_alpn_protos(ssl, kAlpn, sizeof kAlpn - 1);
  auto [uec] = co_await upstream_tls_->async_handshake(asio::ssl::stream_base::client, kUseTuple);
  if (uec) {
    const long verify = SSL_get_verify_result(ssl);
    rec.error = "TLS with " + rec.host + ": " +
                (verify != X509_V_OK ? std::string("certificate not trusted: ") +
                                           X509_verify_cert_error_string(verify)
                                     : uec.message());
    proxy_.Log("egress: " + rec.host + ":" + std::to_string(rec.port) + ": " + rec.error);
    upstream_tls_.reset();
    if (abort_reason_.empty()) co_await SendHttpError(502, rec.error);
    co_return;
  }
  Touch();
  intercepted_ = true;
  tunnel_host_ = rec.host;
  tunnel_port_ = rec.port;
  tunnel_rule_ = rec.rule_or_reason;
  upstream_reusable_ = true;
  co_await ServeHttp(/*first=*/false);
}

asio::awaitable<bool> Session::ServeHttpRequest(const http::RequestHead& head, EgressRecord& rec) {
  rec.http_method = head.method;
  // Inside an intercepted tunnel, requests are in origin form and go to the tunnel's host.
  auto url = !intercepted_ ? http::ParseAbsoluteHttpUrl(head.target)
             : head.target.starts_with("/")
                 ? http::ParseAbsoluteHttpUrl("http://" + tunnel_host_ + ":" +
                                              std::to_string(tunnel_port_) + head.target)
                 : Result<http::AbsoluteUrl>(Status::Error(
                       "inside a tunnel the request target must be a path (origin form)"));
  auto framing = http::RequestBodyFraming(head);
  if (!url.ok() || !framing.ok()) {
    proxy_.stats.bad_requests++;
    rec.host = url.ok() ? Quote(url->authority.host) : "";
    rec.rule_or_reason = "bad request: " + (url.ok() ? framing.status() : url.status()).message();
    rec.http_status = 400;
    co_await SendHttpError(400, rec.rule_or_reason);
    Finish(rec);
    co_return false;
  }
  rec.http_target = url->origin_form.substr(0, kMaxRecordedTarget);
  const bool client_close =
      head.version_minor == 0 || http::HeaderHasToken(head.headers, "connection", "close");

  Host host;
  Outcome o;
  if (intercepted_) {
    // Decided and connected with the tunnel; what is left is where its credentials may go.
    host.name = tunnel_host_;
    rec.host = tunnel_host_;
    rec.port = tunnel_port_;
    rec.allowed = true;
    rec.resolved_address = upstream_address_;
    rec.rule_or_reason = tunnel_rule_;
    o = PlanCredentials(rec, host, tunnel_port_, &head);
    if (o.failure == Failure::kNone && (!upstream_tls_ || !upstream_reusable_)) {
      rec.error = "the tunnel's connection to " + tunnel_host_ + " cannot take another request";
      o = {Failure::kConnectFailed, rec.error};
    }
  } else {
    o = Decide(rec, url->authority.host, url->authority.port, &host, &head);
  }
  if (o.failure == Failure::kNone && proxy_.options.check) {
    // Every request is checked, kept-alive and intercepted ones too: each one can carry data.
    Attempt attempt{host.name, url->authority.port, proxy_.options.session_id, rec.protocol, {}, {}, {}};
    const std::string url_host =
        host.name.find(':') != std::string::npos ? "[" + host.name + "]" : host.name;
    attempt.target = std::string(intercepted_ ? "https://" : "http://") + url_host + ":" +
                     std::to_string(url->authority.port) + url->origin_form;
    const size_t line_end = current_head_.find("\r\n");
    if (line_end != std::string::npos) attempt.headers = current_head_.substr(line_end + 2);
    attempt.body = co_await BodyForCheck(*framing);
    o = co_await Check(rec, attempt);
  }
  if (o.failure == Failure::kNone && !intercepted_) {
    const std::string key = host.name + ":" + std::to_string(url->authority.port);
    if (key == upstream_key_ && upstream_reusable_ && UpstreamStillUsable()) {
      rec.allowed = true;  // same destination, same checked address
      rec.resolved_address = upstream_address_;
      rec.rule_or_reason += upstream_note_;
    } else {
      o = co_await Connect(rec, host, url->authority.port);
    }
  }
  if (o.failure != Failure::kNone) {
    if (o.failure != Failure::kAborted) {
      rec.http_status = HttpStatusFor(o.failure);
      co_await SendHttpError(rec.http_status, ClientText(o));
    }
    Finish(rec);
    co_return false;
  }

  upstream_reusable_ = false;
  request_done_ = false;
  refused_in_body_.clear();
  // The granted values go in here, in their headers, and nowhere else.
  const std::string upstream_head =
      BuildGrantedRequestHead(grant_, head, *url, client_close, intercepted_ ? 443 : 80);
  auto [sent, response] = co_await (SendRequest(upstream_head, *framing, rec) &&
                                    ForwardResponse(head, client_close, rec));
  if (sent == RequestResult::kRefused) {
    // The body carried a placeholder: the request was cut before it, the upstream closed.
    rec.allowed = false;
    rec.rule_or_reason = refused_in_body_;
    rec.error.clear();
    if (!response.sent_anything && abort_reason_.empty()) {
      rec.http_status = 403;
      co_await SendHttpError(403, "denied: " + rec.rule_or_reason);
    }
    CloseUpstream();
    Finish(rec);
    co_return false;
  }
  if (!response.ok) {
    ReplaceAll(grant_.response, response.error);  // an error may quote what the server sent
    rec.error = response.error;
    if (!response.sent_anything && abort_reason_.empty()) {
      if (sent == RequestResult::kClientMalformed) {
        rec.http_status = 400;
        co_await SendHttpError(400, "bad request: malformed chunked request body");
      } else if (sent != RequestResult::kClientGone) {
        rec.http_status = 502;
        co_await SendHttpError(502, "bad response from " + rec.host + ": " + response.error);
      }
    }
  }
  // An intercepted tunnel has one upstream connection: it ends with it.
  const bool keep = response.ok && sent == RequestResult::kSent && request_done_ &&
                    !response.close_client && abort_reason_.empty() &&
                    (!intercepted_ || upstream_reusable_);
  if (!upstream_reusable_ && !intercepted_) CloseUpstream();
  Finish(rec);
  co_return keep;
}

// ---- SOCKS5 ------------------------------------------------------------------------------

asio::awaitable<void> Session::ServeSocks5() {
  socks5::Greeting greeting;
  while ((greeting = socks5::ParseGreeting(inbuf_)).status == socks5::ParseStatus::kNeedMore) {
    if (co_await ReadMore(limits_.max_header_bytes)) co_return;
  }
  if (greeting.status == socks5::ParseStatus::kBad) {
    proxy_.stats.bad_requests++;
    proxy_.Log("egress: malformed SOCKS5 greeting");
    co_return;
  }
  if (!greeting.offers_no_auth) {
    proxy_.Log("egress: SOCKS5 client offers no usable authentication method");
    co_await WriteClient(socks5::MethodReply(socks5::kMethodNoneAcceptable));
    co_return;
  }
  inbuf_.erase(0, greeting.size);
  if (co_await WriteClient(socks5::MethodReply(socks5::kMethodNoAuth))) co_return;

  socks5::Request request;
  while ((request = socks5::ParseRequest(inbuf_)).status == socks5::ParseStatus::kNeedMore) {
    if (co_await ReadMore(limits_.max_header_bytes)) co_return;
  }
  EgressRecord rec = NewRecord(Protocol::kSocks5);
  if (request.status == socks5::ParseStatus::kBad) {
    proxy_.stats.bad_requests++;
    rec.rule_or_reason = request.error == socks5::Reply::kAddressTypeNotSupported
                             ? "SOCKS5 address type not supported"
                             : "malformed SOCKS5 request";
    co_await SendSocksReply(request.error);
    Finish(rec);
    co_return;
  }
  inbuf_.erase(0, request.size);
  SetPhase(Phase::kActive);
  if (request.command != socks5::kCommandConnect) {
    auto host = ParseHost(request.host);
    rec.host = host.ok() ? host->name : Quote(request.host);
    rec.port = request.port;
    rec.rule_or_reason =
        "SOCKS5 command " + std::to_string(request.command) + " not supported (only CONNECT)";
    co_await SendSocksReply(socks5::Reply::kCommandNotSupported);
    Finish(rec);
    co_return;
  }
  if (!proxy_.options.credentials.empty()) current_head_ = request.host;  // as sent, for RefuseTunnel
  Outcome o = co_await DecideAndConnect(rec, request.host, request.port);
  if (o.failure != Failure::kNone) {
    if (o.failure != Failure::kAborted) co_await SendSocksReply(SocksReplyFor(o));
    Finish(rec);
    co_return;
  }
  if (!co_await WriteClient(socks5::BuildReply(socks5::Reply::kSucceeded))) {
    if (asio::ssl::context* tls = proxy_.InterceptFor(rec.host, rec.port)) {
      co_await ServeIntercepted(*tls, rec);
    } else {
      co_await Splice(rec);
    }
  }
  Finish(rec);
}

}  // namespace warden::egress
