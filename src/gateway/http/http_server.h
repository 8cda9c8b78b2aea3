// `warden serve`'s transport: MCP Streamable HTTP (spec revisions 2025-03-26, 2025-06-18 and
// 2025-11-25 in sessions, 2026-07-28 without: each request names its version in params._meta and
// is served by the task context of its caller and task, session/task_contexts.h) on Boost.Beast.
// One endpoint (`path`, default /mcp) takes
//   POST   JSON-RPC messages; replies as one JSON body, or as an SSE stream once a message
//          related to the request (progress, a server-to-client request) comes before the reply;
//   GET    the session's server-to-client SSE stream (one at a time per session);
//   DELETE the end of a session.
// Sessions are McpSession objects created through a SessionHost and named by `Mcp-Session-Id`.
// Every refusal is an HTTP status with a JSON body saying what was wrong; the status table is in
// docs/gateway.md ("Streamable HTTP transport").
//
// Threading: `threads` I/O threads run every connection; no I/O thread ever waits for a session
// (replies come back through Exchange callbacks from any thread and are posted to the
// connection). McpSession::Close, which blocks, runs on a separate closer thread.
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
#include "gateway/session/session.h"
#include "gateway/stages/stages.h"

namespace warden::gateway {

// A request to the admin API (every path under /api/, docs/gateway.md "Admin API"), from a
// caller the host authenticated, and its answer: a JSON body with an HTTP status.
struct AdminRequest {
  std::string method;  // "GET", "POST", "DELETE", ...
  std::string path;    // "/api/kill" (no query)
  std::string query;   // what followed '?' ("all=1"), "" when none
  std::string body;    // "" when none; otherwise already checked to be application/json
  std::string peer;    // the client's IP address
};
struct AdminReply {
  int status = 200;
  std::string body;                                          // JSON
  std::vector<std::pair<std::string, std::string>> headers;  // e.g. Allow on a 405
};

// What the HTTP server needs from the gateway (the Gateway class implements it; tests may too).
// Both functions are called on I/O threads, so they must not block (no network round trips).
class SessionHost {
 public:
  virtual ~SessionHost() = default;
  // Who calls: checks the Authorization header value (may be empty) for the peer address (an IP
  // address as text). An error Status -> 401 with `WWW-Authenticate: Bearer` and a JSON body
  // {"error": message}.
  virtual Result<identity::Caller> Authenticate(std::string_view authorization,
                                                const std::string& peer) = 0;
  // A new session for `caller` (on an initialize request without a session id). Its id() must be
  // unique, unguessable and visible ASCII. nullptr: refused (503, e.g. too many sessions).
  virtual std::shared_ptr<McpSession> CreateSession(const identity::Caller& caller) = 0;
  // A task context for MCP 2026-07-28 requests (`options.modern` is set; docs/requests.md),
  // registered like a session so that kill switches reach its calls. nullptr: this host serves
  // 2025 sessions only (2026 requests get -32022 naming the 2025 versions).
  virtual std::shared_ptr<McpSession> CreateTaskContext(const identity::Caller& caller,
                                                        SessionOptions options) {
    (void)caller, (void)options;
    return nullptr;
  }
  // A request refused before any session handled it (401, 403, 404, 400, 413, 415, ...): for
  // the audit log. `caller` is empty before authentication. Must not block (post the write).
  virtual void Refused(const identity::Caller& caller, int http_status, const std::string& what,
                       const std::string& peer) {
    (void)caller, (void)http_status, (void)what, (void)peer;
  }
  // A request under /api/ from an authenticated caller (origin checked, body at most
  // kMaxAdminBodyBytes). Called on an I/O thread, so it must not block: `done` runs once, on any
  // thread, with the answer. The host audits what it decides. Default: 404 (no admin API).
  virtual void Admin(const identity::Caller& caller, AdminRequest request,
                     std::function<void(AdminReply)> done) {
    (void)caller, (void)request;
    done(AdminReply{404, R"({"error":"this server has no admin API"})", {}});
  }
};

// Admin API bodies are small JSON objects; larger ones get 413 without being read.
inline constexpr std::size_t kMaxAdminBodyBytes = 64 << 10;

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // an IP address, or "localhost"
  uint16_t port = 8787;            // 0: the kernel picks one (tests); see HttpServer::port()
  std::string path = "/mcp";       // the MCP endpoint
  // Exact origins (scheme://host[:port]) browsers may call from. A loopback-bound server also
  // allows http(s)://localhost, 127.0.0.1 and [::1] with any port. Requests without Origin are
  // allowed (non-browser clients). Everything else: 403.
  std::vector<std::string> allowed_origins;
  // Host header values allowed besides the listener's own: localhost, 127.0.0.1, [::1], the
  // listen address and the address a connection came in on, each without a port or with the
  // listener's. An entry NAME:PORT allows that port only; NAME (or [IPV6]) any port. Any other
  // Host: 403 (DNS rebinding). Needed when clients reach the server by a DNS name.
  std::vector<std::string> allowed_hosts;
  std::size_t max_body_bytes = 4 << 20;  // larger POST bodies: 413, without reading them
  // A session with no request for this long and no open GET stream is closed by the sweeper.
  std::chrono::seconds session_idle_timeout{1800};
  // I/O threads. One by default: no I/O thread ever blocks, and two on one io_context hand each
  // connection's completions back and forth across CPUs (bench/README.md "Gateway").
  int threads = 1;
  // How often an open SSE stream gets a comment line, so idle proxies keep it open.
  std::chrono::milliseconds sse_keepalive{15000};
  // A client must send a whole request head within this time (slow-header defence); an idle
  // keep-alive connection is closed after it too.
  std::chrono::seconds header_timeout{30};
  // Resumable streams (docs/gateway.md "Resumable streams"): each SSE stream keeps its latest
  // `replay_events` events, at most `replay_bytes` bytes of them, for a client that reconnects
  // with Last-Event-ID; a session keeps its latest 32 streams.
  std::size_t replay_events = 256;
  std::size_t replay_bytes = 1 << 20;
  // On sessions of protocol 2025-11-25: a POST whose replies have not all come within this time
  // is answered as an SSE stream that starts with a priming event (an id and empty data) and
  // `sse_retry` as the client's reconnection delay, so a long call survives a dropped
  // connection. Quicker replies stay plain JSON.
  std::chrono::milliseconds sse_after{100};
  std::chrono::milliseconds sse_retry{1000};
  // The public keys of the tokens warden mints (docs/credentials.md), served without
  // credentials at GET /.well-known/jwks.json for upstreams to verify them. Unset: 404.
  std::function<std::string()> jwks;
  // The tokens revoked before their expiry (docs/credentials.md, "Revocation"), served beside
  // the JWKS at GET /.well-known/warden-revoked.json. Unset: 404.
  std::function<std::string()> revoked;
  // GET /metrics (docs/monitoring.md): called with the Authorization header (may be empty) and
  // the peer's IP address on an I/O thread, so it must not block; returns the Prometheus text
  // exposition, or an error Status: 401 with `WWW-Authenticate: Bearer` and {"error": message}.
  // Requests that carry an Origin are refused (403): no page reads the metrics. Unset: 404.
  std::function<Result<std::string>(std::string_view authorization, const std::string& peer)>
      metrics;
};

class HttpServer {
 public:
  // `host` (not owned) must outlive the server.
  HttpServer(SessionHost& host, HttpServerOptions options);
  // Stops the server if it is running.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, listens and starts the I/O threads. An error names the address and the cause (bad
  // host, port in use). Call once.
  Status Start();
  // The port listened on (the picked one when options.port was 0); 0 before Start.
  uint16_t port() const;
  // Stops accepting, closes every session (blocking until their upstreams are gone), ends every
  // connection and joins all threads. Idempotent. Must not be called from an I/O thread.
  void Stop();
  // Sessions currently open.
  std::size_t session_count() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace warden::gateway
