// EgressProxy: listeners, the DNS stub's socket, lifecycle, records. The per-connection
// protocol work is in session.cc.
#include "egress/proxy.h"

#include <sys/socket.h>

#include <cstring>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "egress/proxy_impl.h"

namespace warden::egress {

namespace {

constexpr auto kUseTuple = asio::as_tuple(asio::use_awaitable);

// Checks that `fd` is a socket of `type` (and listening, for TCP) and says which family it has.
Result<int> SocketFamily(int fd, int type, bool listening) {
  int value = 0;
  socklen_t len = sizeof value;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &value, &len) != 0) {
    return Status::FromErrno("getsockopt(SO_TYPE) on the proxy socket", errno);
  }
  if (value != type) {
    return Status::Error(type == SOCK_STREAM ? "proxy socket is not a TCP socket"
                                             : "DNS socket is not a UDP socket");
  }
  if (listening) {
    len = sizeof value;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &value, &len) != 0 || value == 0) {
      return Status::Error("proxy socket is not listening (call listen() first)");
    }
  }
  sockaddr_storage addr{};
  len = sizeof addr;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Status::FromErrno("getsockname on the proxy socket", errno);
  }
  if (addr.ss_family != AF_INET && addr.ss_family != AF_INET6) {
    return Status::Error("proxy socket is not an IPv4 or IPv6 socket");
  }
  return static_cast<int>(addr.ss_family);
}

void RethrowNothing(std::exception_ptr) {}

}  // namespace

namespace {

// Sizes below these would make no progress (a zero-byte buffer reads nothing, forever).
ProxyOptions WithSaneSizes(ProxyOptions o) {
  o.limits.buffer_bytes = std::max<size_t>(o.limits.buffer_bytes, 4096);
  o.limits.max_header_bytes = std::max<size_t>(o.limits.max_header_bytes, 1024);
  o.limits.max_response_header_bytes = std::max<size_t>(o.limits.max_response_header_bytes, 1024);
  return o;
}

}  // namespace

EgressProxy::Impl::Impl(ProxyOptions opts)
    : options(WithSaneSizes(std::move(opts))),
      guard(options.allow_list, options.resolve),
      dns(options.allow_list, options.dns),
      work(asio::make_work_guard(io)),
      resolver(std::make_unique<ResolverPool>(options.limits.resolver_threads,
                                              options.limits.resolver_queue)) {
  gate->io = &io;
  if (!options.tls_intercepts.empty()) SetUpTls();
}

namespace {

// ALPN on intercepted tunnels: HTTP/1.1 only (the proxy reads requests one by one); a client
// that offers nothing else gets no ALPN answer and falls back to it, as ALPN allows.
int SelectHttp11(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                 unsigned int inlen, void*) {
  for (unsigned int i = 0; i < inlen;) {
    const unsigned int n = in[i];
    if (i + 1 + n > inlen) break;
    if (n == 8 && std::memcmp(in + i + 1, "http/1.1", 8) == 0) {
      *out = in + i + 1;
      *outlen = static_cast<unsigned char>(n);
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + n;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

constexpr auto kTlsOptions = asio::ssl::context::default_workarounds |
                             asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3 |
                             asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1;

}  // namespace

void EgressProxy::Impl::SetUpTls() {
  std::string step;
  try {
    step = "the client context for the real hosts";
    upstream_tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
    upstream_tls->set_options(kTlsOptions);
    if (options.upstream_ca_file.empty()) {
      upstream_tls->set_default_verify_paths();
    } else {
      step = "the CA file " + options.upstream_ca_file;
      upstream_tls->load_verify_file(options.upstream_ca_file);
    }
    upstream_tls->set_verify_mode(asio::ssl::verify_peer);
    for (const TlsIntercept& t : options.tls_intercepts) {
      step = "the certificate for " + t.host + ":" + std::to_string(t.port);
      auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
      ctx->set_options(kTlsOptions);
      ctx->use_certificate_chain(asio::buffer(t.cert_pem));
      ctx->use_private_key(asio::buffer(t.key_pem), asio::ssl::context::pem);
      SSL_CTX_set_alpn_select_cb(ctx->native_handle(), SelectHttp11, nullptr);
      intercept_contexts.emplace_back(t.host + ":" + std::to_string(t.port), std::move(ctx));
    }
  } catch (const std::exception& e) {
    tls_error = "TLS interception: " + step + ": " + e.what();
    intercept_contexts.clear();
    upstream_tls.reset();
  }
}

asio::ssl::context* EgressProxy::Impl::InterceptFor(const std::string& host, uint16_t port) {
  if (intercept_contexts.empty()) return nullptr;
  const std::string key = host + ":" + std::to_string(port);
  for (auto& [k, ctx] : intercept_contexts) {
    if (k == key) return ctx.get();
  }
  return nullptr;
}

void EgressProxy::Impl::Log(const std::string& line) const {
  if (options.log) options.log(line);
}

void EgressProxy::Impl::Record(EgressRecord record) {
  (record.allowed ? stats.attempts_allowed : stats.attempts_denied)++;
  stats.bytes_up += record.bytes_up;
  stats.bytes_down += record.bytes_down;
  if (options.recorder) {
    try {
      options.recorder(record);
    } catch (const std::exception& e) {
      Log(std::string("egress recorder threw: ") + e.what());
    }
  }
  std::lock_guard lock(records_mu);
  if (records.size() < options.limits.max_records) {
    records.push_back(std::move(record));
  } else {
    stats.records_dropped++;
  }
}

void EgressProxy::Impl::RecordDns(DnsQueryRecord record) {
  stats.dns_queries++;
  if (options.dns_recorder) {
    try {
      options.dns_recorder(record);
    } catch (const std::exception& e) {
      Log(std::string("egress DNS recorder threw: ") + e.what());
    }
  }
  std::lock_guard lock(records_mu);
  if (dns_records.size() < options.limits.max_records) {
    dns_records.push_back(std::move(record));
  } else {
    stats.records_dropped++;
  }
}

asio::awaitable<void> EgressProxy::Impl::AcceptLoop(tcp::acceptor& acceptor) {
  while (!stopping) {
    auto [ec, socket] = co_await acceptor.async_accept(kUseTuple);
    if (stopping || ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor) {
      co_return;
    }
    if (ec) {
      // Out of descriptors or memory: say so and back off rather than spin.
      Log("egress: accept failed: " + ec.message());
      asio::steady_timer pause(io, std::chrono::milliseconds(100));
      co_await pause.async_wait(kUseTuple);
      continue;
    }
    stats.connections_accepted++;
    const size_t cap = options.limits.max_connections;
    bool over_limit = active >= cap;
    if (over_limit) {
      stats.connections_over_limit++;
      if (over_limit_active >= cap) {
        Log("egress: connection closed at once: " + std::to_string(active) +
            " connections active and as many being refused");
        continue;  // `socket` closes here
      }
      Log("egress: connection over the limit of " + std::to_string(cap) + " will be refused");
    }
    auto session = std::make_shared<Session>(*this, std::move(socket), over_limit);
    asio::co_spawn(io, session->Run(), RethrowNothing);
  }
}

asio::awaitable<void> EgressProxy::Impl::DnsLoop(asio::ip::udp::socket& socket) {
  char buf[1500];
  asio::ip::udp::endpoint from;
  while (!stopping) {
    auto [ec, n] = co_await socket.async_receive_from(asio::buffer(buf), from, kUseTuple);
    if (stopping || ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor) {
      co_return;
    }
    if (ec) continue;  // e.g. ECONNREFUSED reported for an earlier send: not fatal
    DnsQueryRecord record;
    auto reply = dns.Answer(std::string_view(buf, n), &record);
    if (!reply) continue;  // malformed: ignored
    RecordDns(std::move(record));
    boost::system::error_code send_ec;
    // A datagram either fits the socket buffer now or is dropped, as DNS over UDP allows.
    socket.send_to(asio::buffer(*reply), from, 0, send_ec);
  }
}

void EgressProxy::Impl::SessionEnded(Session* session, bool over_limit) {
  sessions.erase(session);
  (over_limit ? over_limit_active : active)--;
  stats.connections_active = active;
  if (stopping && sessions.empty() && stop_failsafe) stop_failsafe->cancel();
}

void EgressProxy::Impl::StopOnLoop() {
  if (stopping) return;
  stopping = true;
  boost::system::error_code ignored;
  for (auto& a : acceptors) a->close(ignored);
  for (auto& s : dns_sockets) s->close(ignored);
  // Copy: Abort() makes sessions finish, and finishing removes them from the set.
  std::vector<std::shared_ptr<Session>> live;
  for (Session* s : sessions) live.push_back(s->shared_from_this());
  for (auto& s : live) s->Abort("proxy stopped");
  work.reset();
  if (sessions.empty()) return;
  // Everything above ends promptly; should anything not, the loop stops anyway.
  stop_failsafe = std::make_unique<asio::steady_timer>(io, std::chrono::seconds(2));
  stop_failsafe->async_wait([this](const boost::system::error_code& ec) {
    if (!ec) io.stop();
  });
}

EgressProxy::EgressProxy(ProxyOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

EgressProxy::~EgressProxy() {
  Stop();
  if (!impl_->started.load()) {
    // Never run, or run by the caller: make sure nothing is left pending on the loop.
    impl_->io.restart();
    impl_->io.run_for(std::chrono::seconds(3));
  }
  {
    std::lock_guard lock(impl_->gate->mu);
    impl_->gate->io = nullptr;
  }
}

Status EgressProxy::AddListener(UniqueFd listening_fd) {
  if (!impl_->tls_error.empty()) return Status::Error(impl_->tls_error);
  auto family = SocketFamily(listening_fd.get(), SOCK_STREAM, /*listening=*/true);
  if (!family.ok()) return family.status();
  auto acceptor = std::make_unique<tcp::acceptor>(impl_->io);
  boost::system::error_code ec;
  acceptor->assign(*family == AF_INET ? tcp::v4() : tcp::v6(), listening_fd.get(), ec);
  if (ec) return Status::Error("cannot serve the proxy socket: " + ec.message());
  listening_fd.release();
  Impl* impl = impl_.get();
  asio::post(impl->io, [impl, a = std::move(acceptor)]() mutable {
    if (impl->stopping) return;
    impl->acceptors.push_back(std::move(a));
    asio::co_spawn(impl->io, impl->AcceptLoop(*impl->acceptors.back()), RethrowNothing);
  });
  return Status::Ok();
}

Status EgressProxy::AddDnsSocket(UniqueFd udp_fd) {
  auto family = SocketFamily(udp_fd.get(), SOCK_DGRAM, /*listening=*/false);
  if (!family.ok()) return family.status();
  auto socket = std::make_unique<asio::ip::udp::socket>(impl_->io);
  boost::system::error_code ec;
  socket->assign(*family == AF_INET ? asio::ip::udp::v4() : asio::ip::udp::v6(), udp_fd.get(), ec);
  if (ec) return Status::Error("cannot serve the DNS socket: " + ec.message());
  udp_fd.release();
  Impl* impl = impl_.get();
  asio::post(impl->io, [impl, s = std::move(socket)]() mutable {
    if (impl->stopping) return;
    impl->dns_sockets.push_back(std::move(s));
    asio::co_spawn(impl->io, impl->DnsLoop(*impl->dns_sockets.back()), RethrowNothing);
  });
  return Status::Ok();
}

void EgressProxy::Run() {
  if (impl_->stop_requested.load()) return;
  try {
    impl_->io.run();
  } catch (const std::exception& e) {
    impl_->Log(std::string("egress: proxy loop failed: ") + e.what());
  }
}

Status EgressProxy::Start() {
  if (impl_->started.exchange(true)) return Status::Error("egress proxy already started");
  try {
    impl_->thread = std::thread([this] { Run(); });
  } catch (const std::system_error& e) {
    impl_->started = false;
    return Status::Error(std::string("cannot start the egress proxy thread: ") + e.what());
  }
  return Status::Ok();
}

void EgressProxy::Stop() {
  if (!impl_->stop_requested.exchange(true)) {
    Impl* impl = impl_.get();
    asio::post(impl->io, [impl] { impl->StopOnLoop(); });
  }
  if (impl_->thread.joinable() && impl_->thread.get_id() != std::this_thread::get_id()) {
    impl_->thread.join();
  }
}

std::vector<EgressRecord> EgressProxy::records() const {
  std::lock_guard lock(impl_->records_mu);
  return impl_->records;
}

std::vector<DnsQueryRecord> EgressProxy::dns_records() const {
  std::lock_guard lock(impl_->records_mu);
  return impl_->dns_records;
}

ProxyStats EgressProxy::stats() const {
  const auto& s = impl_->stats;
  ProxyStats out;
  out.connections_accepted = s.connections_accepted;
  out.connections_active = s.connections_active;
  out.connections_over_limit = s.connections_over_limit;
  out.attempts_allowed = s.attempts_allowed;
  out.attempts_denied = s.attempts_denied;
  out.bad_requests = s.bad_requests;
  out.header_timeouts = s.header_timeouts;
  out.idle_timeouts = s.idle_timeouts;
  out.lifetime_timeouts = s.lifetime_timeouts;
  out.connect_failures = s.connect_failures;
  out.bytes_up = s.bytes_up;
  out.bytes_down = s.bytes_down;
  out.dns_queries = s.dns_queries;
  out.records_dropped = s.records_dropped;
  return out;
}

boost::asio::io_context& EgressProxy::io_context() { return impl_->io; }

}  // namespace warden::egress
