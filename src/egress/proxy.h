// EgressProxy: the process-side half of `--net proxy`. It serves listening sockets that the
// sandbox code connects to (HTTP CONNECT, absolute-form HTTP, SOCKS5 on the same port; the first
// byte tells them apart), decides every attempt (decision hook -> allow-list -> address guard),
// connects only to the address it checked, forwards bytes, and records each attempt.
// Design, limits and known gaps: docs/egress.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "egress/allow_list.h"
#include "egress/credential_grant.h"
#include "egress/tls_intercept.h"
#include "egress/decision.h"
#include "egress/dns_stub.h"
#include "egress/egress_record.h"
#include "egress/resolve_map.h"

namespace boost::asio {
class io_context;
}

namespace warden::egress {

// Every limit holds per client connection unless noted. Exceeding one ends that connection
// only; other clients never notice. A duration of milliseconds::max() means no limit. Sizes are
// raised to at least 4 KiB (buffer_bytes) and 1 KiB (header limits).
struct ProxyLimits {
  // Request head (HTTP) or handshake (SOCKS5). Beyond it: 431, connection closed.
  size_t max_header_bytes = 16 * 1024;
  // Upstream response head. Beyond it: 502.
  size_t max_response_header_bytes = 64 * 1024;
  // Time to receive a whole request head or SOCKS5 handshake, counted from accept (for the
  // first request) or from the first byte of a later keep-alive request. Against slowloris.
  std::chrono::milliseconds header_timeout{10'000};
  // Time with no byte moving either way (also the keep-alive wait between requests).
  std::chrono::milliseconds idle_timeout{60'000};
  // Name resolution and TCP connect to the destination, all addresses tried. Beyond it:
  // 504 / SOCKS5 0x04.
  std::chrono::milliseconds connect_timeout{10'000};
  // Total life of a client connection, however busy.
  std::chrono::milliseconds max_lifetime{60 * 60 * 1000};
  // Client connections served at once. Beyond it a connection still gets its request read
  // (under the same header limits) and then 503 / SOCKS5 0x01; beyond twice it, it is closed
  // at once.
  size_t max_connections = 256;
  // Forwarding buffer, per direction: memory per connection is about 2x this.
  size_t buffer_bytes = 64 * 1024;
  // Concurrent getaddrinfo calls (proxy-wide) and lookups waiting for one.
  size_t resolver_threads = 4;
  size_t resolver_queue = 256;
  // Records kept for records()/dns_records(); later ones still reach the recorder callbacks
  // and are counted in stats().records_dropped.
  size_t max_records = 100'000;
};

struct ProxyOptions {
  AllowList allow_list;
  ResolveMap resolve;
  // Asked first for every attempt with a valid host (see decision.h). Empty: the allow-list
  // decides.
  DecisionHook hook;
  // Asked after the hook or the allow-list let an attempt through (see decision.h), and for every
  // request of a kept-alive or intercepted connection. Empty: nothing more is asked.
  AsyncCheck check;
  // The check's answer must come within this, or the attempt is refused.
  std::chrono::milliseconds check_timeout{1000};
  // How much of a plain HTTP request body the check sees: a body of known length up to this is
  // read whole before the check (and then forwarded as usual); of a longer or chunked body, what
  // has arrived with the head, up to this.
  size_t check_body_bytes = 64 * 1024;
  // Called on the proxy thread when an attempt ends (after its last byte), for every attempt.
  std::function<void(const EgressRecord&)> recorder;
  std::function<void(const DnsQueryRecord&)> dns_recorder;
  // One line per notable event (denials, malformed requests, timeouts, accept errors).
  std::function<void(std::string_view)> log;
  std::string session_id;  // copied into every Attempt and record
  // Credentials the sandbox holds as placeholders (credential_grant.h): put in by the proxy in
  // requests to their host:port, refused anywhere else.
  std::vector<EgressCredential> credentials;
  // Tunnels (CONNECT, SOCKS5) to these host:port are TLS the proxy terminates with the given
  // certificate and opens anew to the real host, so that TLS credentials can be put in
  // (tls_intercept.h). The real host's certificate must verify against `upstream_ca_file`, or
  // OpenSSL's default trust (SSL_CERT_FILE, /etc/ssl/certs) when that is empty.
  std::vector<TlsIntercept> tls_intercepts;
  std::string upstream_ca_file;
  ProxyLimits limits;
  // Forward tunnels and plain bodies with splice(2) through a pipe per direction (no copy
  // through user space; 2 more fds per direction). Falls back to copying when unavailable.
  bool zero_copy = true;
  DnsStubOptions dns;
};

// Counters since construction, with stable names.
struct ProxyStats {
  uint64_t connections_accepted = 0;
  uint64_t connections_active = 0;
  uint64_t connections_over_limit = 0;  // answered 503 / SOCKS5 0x01 or closed at once
  uint64_t attempts_allowed = 0;
  uint64_t attempts_denied = 0;
  uint64_t bad_requests = 0;  // malformed, too large
  uint64_t header_timeouts = 0;
  uint64_t idle_timeouts = 0;
  uint64_t lifetime_timeouts = 0;
  uint64_t connect_failures = 0;  // allowed, but resolution or connect failed
  uint64_t bytes_up = 0;
  uint64_t bytes_down = 0;
  uint64_t dns_queries = 0;
  uint64_t records_dropped = 0;
};

class EgressProxy {
 public:
  explicit EgressProxy(ProxyOptions options);
  // Stops (as Stop()) and releases everything.
  ~EgressProxy();
  EgressProxy(const EgressProxy&) = delete;
  EgressProxy& operator=(const EgressProxy&) = delete;

  // Serves a TCP socket that is already bound and listening, e.g. one created inside a
  // sandbox's network namespace. Takes ownership. Thread-safe; may be called while running.
  // Error when the fd is not a listening TCP socket, or when the TLS interception the options
  // ask for cannot be set up (a bad certificate or CA file): then nothing is served.
  Status AddListener(UniqueFd listening_fd);
  // Serves the DNS stub (dns_stub.h) on a bound UDP socket. Takes ownership. Thread-safe.
  Status AddDnsSocket(UniqueFd udp_fd);

  // Runs the proxy on the calling thread until Stop(). Call once, and not together with Start().
  void Run();
  // Runs the proxy on one new thread (for callers with their own event loop).
  Status Start();
  // Thread-safe and idempotent. Closes the listeners and every connection (open attempts are
  // recorded with error "proxy stopped"). After Start(), waits for the thread to end; from any
  // other thread it only requests the stop (Run() then returns promptly).
  void Stop();

  // Copies of what was recorded so far; thread-safe, complete once Run() has returned.
  std::vector<EgressRecord> records() const;
  std::vector<DnsQueryRecord> dns_records() const;
  ProxyStats stats() const;

  // The io_context the proxy runs on, for callers that want to drive it themselves
  // (io_context().run()) instead of Run()/Start(). Everything the proxy does runs on it.
  boost::asio::io_context& io_context();

  struct Impl;  // public only so that the implementation files can name it

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace warden::egress
