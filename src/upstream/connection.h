// One transport-level connection to an upstream server: one spawned stdio server or one Streamable
// HTTP session. Internal to src/upstream: Client (client.cc) owns the MCP side (ids, pending
// requests, timeouts, the handshake, restarts); a Connection only moves messages and reports
// its own end. A restart is a new Connection; an old one is closed and never reused.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/status.h"
#include "mcp/jsonrpc.h"
#include "upstream/client.h"

namespace warden::upstream {

// Where a Connection reports to. Called from the connection's own threads, never while the
// connection holds a lock, and never after Close() has returned.
struct ConnectionSink {
  // A message from the server (any of the four kinds).
  std::function<void(mcp::Message)> on_message;
  // The connection is over for good (the server exited, the session expired, a message was over
  // the size limit). `why` is for the state callback ("exited with status 1: boom"); `error` for
  // the requests in flight ("server exited (status 1: boom)"). Called at most once, and not when
  // the end was asked for by Close().
  std::function<void(const std::string& why, const std::string& error)> on_dead;
  // One request could not be delivered or got no response (HTTP only: an HTTP error status, a
  // refused connection, a stream that ended without the response). `error` names the cause.
  std::function<void(int64_t id, const std::string& error)> on_request_failed;
};

class Connection {
 public:
  virtual ~Connection() = default;
  // Spawns or prepares the connection; the deadline bounds the work done here. On failure
  // nothing is left running.
  virtual Status Open(std::chrono::steady_clock::time_point deadline) = 0;
  // Sends one message. Never blocks for long on a server that does not read: failures surface
  // through the sink (on_dead for stdio, on_request_failed for an HTTP request). A no-op once
  // the connection is closing.
  virtual void Send(const mcp::Message& message) = 0;
  // Send with headers for this message alone (HTTP; stdio ignores them).
  virtual void SendWithHeaders(const mcp::Message& message,
                               const std::map<std::string, std::string>& headers) {
    (void)headers;
    Send(message);
  }
  // The initialize handshake succeeded with `protocol_version`: sends notifications/initialized
  // so that it reaches the server before any later request (HTTP: POSTs travel on separate
  // connections, so it waits, until `deadline` at most, for the server to take it; from then on
  // the MCP-Protocol-Version header is sent and the server's GET stream is opened).
  virtual void Initialized(const std::string& protocol_version,
                           std::chrono::steady_clock::time_point deadline) {
    (void)protocol_version;
    (void)deadline;
    Send(mcp::Notification{"notifications/initialized", std::nullopt});
  }
  // The client no longer waits for request `id` (cancelled or timed out): HTTP stops reading the
  // response stream opened for it.
  virtual void Abandon(int64_t id) { (void)id; }
  // Ends the connection: stdio closes the server's stdin, waits briefly, then kills the whole
  // sandbox and reaps it; HTTP sends DELETE for a session that has not expired and aborts every
  // exchange. Joins the connection's threads; no sink call happens after it returns. Must not be
  // called from a sink callback. Idempotent.
  virtual void Close() = 0;
  // The `warden run` pid for stdio while it runs, else 0.
  virtual int pid() const { return 0; }
};

// `env`: the variables Spec::start_env gave for this start.
std::unique_ptr<Connection> MakeStdioConnection(const Spec& spec, const ClientOptions& options,
                                                ConnectionSink sink,
                                                std::map<std::string, std::string> env = {});
// Fails when spec.url is not an http:// URL warden can reach.
Result<std::unique_ptr<Connection>> MakeHttpConnection(const Spec& spec,
                                                       const ClientOptions& options,
                                                       ConnectionSink sink);

}  // namespace warden::upstream
