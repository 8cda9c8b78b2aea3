// The gateway's MCP client side: one live MCP client session to one upstream server, over stdio
// (the server spawned inside a warden sandbox, through sandbox/launcher.h) or Streamable HTTP.
// It owns the connection's whole life: spawn or connect, the initialize handshake, request ids,
// timeouts, cancellation, and restarts with backoff when the server dies. It knows nothing of
// policy or of downstream sessions: the gateway decides, this only carries messages.
// Contract: docs/upstream.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "mcp/jsonrpc.h"
#include "sandbox/options.h"

namespace warden::upstream {

// How to reach one upstream (built by the gateway from the policy's `upstreams` entry or from
// `--upstream NAME=stdio:'CMD'` / `NAME=http://URL`).
struct Spec {
  std::string name;  // the upstream's name in the policy (for messages and logs)
  // stdio: argv of the server, run as `warden run <sandbox flags> -- argv` (sandbox.argv is
  // ignored; command is used). Empty when url is set.
  std::vector<std::string> command;
  sandbox::Options sandbox;
  // Streamable HTTP: the MCP endpoint (http[s]://host:port/path) and extra request headers.
  std::string url;
  std::map<std::string, std::string> headers;
  // https: a PEM file of CA certificates to trust instead of the system store (a private CA).
  std::string ca_file;

  // Credentials (docs/credentials.md), computed when needed rather than stored here, so that a
  // rotated secret or an expiring token is picked up:
  //  - stdio: variables for the server's environment, asked for before each start. They reach
  //    `warden run` through its environment (never its argv, which every local user can read)
  //    and the server through the sandbox's clean environment. An error ends the client (kStopped
  //    with the error as `why`): no restart can set a secret that is not there.
  std::function<Result<std::map<std::string, std::string>>()> start_env;
  //  - HTTP: headers asked for before every request warden sends on its own behalf (initialize,
  //    listings, the GET stream, DELETE), added after `headers`. A request sent with headers of
  //    its own (Client::SendWithHeaders: a call's, which the gateway builds from the same
  //    templates) gets those instead of these.
  std::function<std::map<std::string, std::string>()> request_headers;
};

// Which revision of MCP to speak to the server. kAuto probes with `server/discover` (2026-07-28's
// own method) before anything else: a DiscoverResult naming 2026-07-28 means modern, any other
// answer (an error that is not one of the new revision's own, silence for probe_timeout, an HTTP
// error without a modern JSON-RPC error) means legacy and the initialize handshake follows, as
// the revision's backward-compatibility rules say. kLegacy skips the probe; kModern fails the
// start (fatal) when the probe finds a legacy server. docs/upstream.md ("Two eras").
enum class Era { kAuto, kLegacy, kModern };

struct ClientOptions {
  // What this client says of itself in initialize (the gateway passes the downstream client's
  // capabilities and info through, so that sampling/elicitation/roots are offered upstream only
  // when the real client supports them).
  nlohmann::json client_info = {{"name", "warden"}, {"version", "0.1.0"}};
  nlohmann::json client_capabilities = nlohmann::json::object();
  std::string protocol_version = "2025-11-25";  // asked for in initialize; the answer is kept
  Era era = Era::kAuto;
  // How long the server/discover probe may go unanswered before the server counts as legacy (a
  // legacy stdio server may ignore a request that comes before initialize).
  std::chrono::milliseconds probe_timeout{5000};
  // A modern server's input_required results one call may go through before warden gives up on
  // it (a server that asks forever).
  int max_input_rounds = 8;
  std::chrono::milliseconds connect_timeout{20000};  // spawn/connect + initialize
  std::chrono::milliseconds request_timeout{60000};  // default per request
  // Restarts after the server dies: backoff doubles from initial to max; after max_restarts
  // consecutive failures (no successful initialize in between) the client stops for good.
  std::chrono::milliseconds backoff_initial{200};
  std::chrono::milliseconds backoff_max{10000};
  int max_restarts = 8;
  std::size_t max_message_bytes = 16 * 1024 * 1024;
};

enum class State {
  kStarting,    // spawning/connecting and initializing (the first time or after a restart)
  kReady,       // initialized: requests go through
  kRestarting,  // died; waiting out the backoff before starting again
  kStopped,     // Stop() was called, or restarts are exhausted
};
const char* StateName(State state);

// What the server said in its initialize result (legacy) or its DiscoverResult (modern).
struct ServerInfo {
  std::string protocol_version;  // "2026-07-28" when modern
  bool modern = false;
  nlohmann::json capabilities = nlohmann::json::object();
  nlohmann::json server_info = nlohmann::json::object();  // {name, version, ...}
  std::string instructions;
};

// Callbacks into the gateway. Called from the client's own threads, never while it holds a lock;
// they must not block for long (hand work to another thread).
struct Events {
  // A notification from the server (notifications/tools/list_changed, .../resources/updated,
  // notifications/progress, notifications/message, notifications/cancelled, ...).
  std::function<void(const mcp::Notification&)> on_notification;
  // A request from the server to the client (sampling/createMessage, elicitation/create,
  // roots/list, ping). `reply` must be called exactly once with a Response or ErrorResponse
  // whose id is the request's id; it may be called from any thread, later. When not set, the
  // client answers ping itself and everything else with -32601.
  // A modern server asks its questions in an input_required result instead: each of its
  // inputRequests comes here as such a request (with an id of the client's own making), and when
  // every one is answered the client retries the call with the answers and the server's
  // requestState, which never leaves the client. The call's Done sees only the final answer.
  std::function<void(const mcp::Request&, std::function<void(mcp::Message)> reply)> on_request;
  // The state changed. `why` says what happened ("exited with status 1", "initialize timed out").
  // After every transition to kReady the server may have new tools: the gateway lists again.
  std::function<void(State, const std::string& why)> on_state;
};

// How to send one request (Client::SendRequest).
struct SendOptions {
  std::chrono::milliseconds timeout{0};  // zero: ClientOptions::request_timeout
  // HTTP headers for this request alone (a token minted for one call), sent instead of
  // Spec::request_headers when not empty. stdio has no headers.
  std::map<std::string, std::string> headers;
  // A modern server's input_required result goes to Done as it came, for the caller to relay
  // (a 2026 client of warden answers it and retries), instead of being asked through
  // Events::on_request and retried here.
  bool relay_input_required = false;
  // The client capabilities this request declares to a modern server (its _meta), instead of
  // ClientOptions::client_capabilities: what the client behind this one request can answer.
  std::optional<nlohmann::json> client_capabilities;
};

class Client {
 public:
  // Called exactly once with the server's Response or ErrorResponse (its id is the upstream id:
  // ignore it), or with a local ErrorResponse: -32603 "upstream NAME: ..." when the server died
  // or could not be reached, -32001 "upstream NAME: request timed out after N ms", and for a
  // cancelled request -32800 "request cancelled". May be called on any thread, including inside
  // Send when the client is stopped.
  using Done = std::function<void(mcp::Message)>;

  virtual ~Client() = default;
  // A client for `spec` (stdio when spec.command is set, else HTTP). Nothing starts until Start
  // (state() is kStarting meanwhile; requests sent now wait for the handshake). Fails with a
  // message naming the bad field: no name, both or neither of command/url, bad sandbox options,
  // a URL other than http:// or https://, header names/values that could split a request, bad options.
  // Destroying the client Stops it.
  static Result<std::unique_ptr<Client>> Create(Spec spec, Events events,
                                                ClientOptions options = {});

  // Starts connecting in the background (returns at once). Restarts follow the backoff.
  virtual void Start() = 0;
  // Blocks until kReady (true) or kStopped or the timeout (false).
  virtual bool WaitReady(std::chrono::milliseconds timeout) = 0;
  // Sends a request. A request sent while starting or restarting waits for kReady (up to its
  // timeout). Returns a handle for Cancel. timeout zero: options.request_timeout.
  // To a modern server every request carries params._meta (protocol version, the client's
  // capabilities and info, the log level last set) and, on HTTP, the headers that mirror it; the
  // methods the revision removed are answered here: ping and logging/setLevel with {}, and
  // resources/(un)subscribe with {} after the subscriptions/listen stream is reopened with the
  // new set of resources.
  virtual uint64_t Send(const std::string& method, nlohmann::json params, Done done,
                        std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) = 0;
  // Send with HTTP headers for this request alone (a token minted for one call); they are sent
  // instead of Spec::request_headers. stdio has no headers: the same as Send. A client
  // without HTTP (test doubles) may ignore them.
  virtual uint64_t SendWithHeaders(const std::string& method, nlohmann::json params, Done done,
                                   std::chrono::milliseconds timeout,
                                   std::map<std::string, std::string> headers) {
    (void)headers;
    return Send(method, std::move(params), std::move(done), timeout);
  }
  // Send with every option (SendOptions). A client that is no MCP client of ours (test doubles)
  // may keep this default, which honours only the timeout and the headers.
  virtual uint64_t SendRequest(const std::string& method, nlohmann::json params, Done done,
                               SendOptions options) {
    return SendWithHeaders(method, std::move(params), std::move(done), options.timeout,
                           std::move(options.headers));
  }
  // Cancels a request in flight: sends notifications/cancelled {requestId, reason} upstream and
  // completes its Done with -32800. Nothing happens for a handle already done.
  virtual void Cancel(uint64_t handle, const std::string& reason) = 0;
  // Sends a notification (notifications/initialized is the client's own business: not needed).
  // Dropped when the client is not ready.
  virtual void Notify(const std::string& method, nlohmann::json params) = 0;
  // Ends the current server and starts a new one now, without backoff and without counting a
  // failure (a stdio server's start_env is read again: a rotated credential). Requests in flight
  // on it complete with -32603 "upstream NAME: restarted: WHY"; later ones wait for the new one.
  // Nothing happens when stopped or not started. Test doubles may ignore it.
  virtual void Restart(const std::string& why) { (void)why; }
  // Stops for good: the stdio server's sandbox is ended (no orphaned processes: the whole
  // `warden run` tree is gone when Stop returns), an HTTP session is ended with DELETE;
  // every request in flight completes with -32603 "upstream NAME: stopped". Idempotent.
  // Must not be called from an Events callback or a Done: it joins the threads that run them.
  virtual void Stop() = 0;

  virtual State state() const = 0;
  virtual ServerInfo info() const = 0;  // valid once ready; the latest initialize's
  virtual const Spec& spec() const = 0;
  // Process id of the `warden run` child for stdio (0 when not running or HTTP): for tests.
  virtual int pid() const = 0;

  // Convenience: Send and wait for the reply (always comes: the request timeout bounds it).
  // Blocks the calling thread; not for gateway threads that must stay responsive.
  mcp::Message Call(const std::string& method, nlohmann::json params,
                    std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
};

}  // namespace warden::upstream
