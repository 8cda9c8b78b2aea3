// One downstream MCP session: the lifecycle (initialize, then requests), method dispatch, the
// upstream connections this session holds, and the mapping of pipeline outcomes onto MCP results
// and JSON-RPC errors. Transport-independent: the stdio server and the Streamable HTTP server
// hand it parsed messages and give it somewhere to send what goes back. Parsing and serialising
// are src/mcp's; this class only decides what to answer.
//
// Threading: Handle may be called from any thread. Requests that take time (tools/call, anything
// forwarded upstream) run on the gateway's worker pool and answer through their Exchange later;
// cheap ones (ping, initialize) answer before Handle returns. Nothing holds a worker while a
// call waits: for an upstream to start or to answer, for the client to answer a relayed
// request, or for a stage that parked it. (Merged listings, resources/list and prompts/list,
// still page through the upstreams on a worker, bounded by upstream_ready_timeout.)
// Contract: docs/gateway.md.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/stages/kill_switches.h"
#include "gateway/stages/stages.h"
#include "mcp/jsonrpc.h"
#include "mcp/modern.h"

namespace warden::gateway {

class GatewayCore;
class SessionUpstreams;

// initialize refused because an upstream has as many live instances as its policy allows
// (upstream_instances.h); error.data is {"retryAfter": SECONDS}. HTTP answers it with 503 and
// Retry-After.
inline constexpr int kUpstreamBusy = -32004;

// Where a session's outgoing messages go.
using MessageSink = std::function<void(const mcp::Message&)>;

// One client request being served.
struct Exchange {
  // Messages that belong to this request and go out before its reply: progress notifications
  // and the server-to-client requests (sampling, elicitation, roots) made while serving it.
  // Streamable HTTP: the POST's SSE stream. Empty: they go to the session's stream instead.
  MessageSink related;
  // The reply (Response or ErrorResponse), called exactly once for a request, from any thread.
  // Not called for notifications and client responses.
  std::function<void(mcp::Message)> reply;
  // Told the request's cancel token once it is in flight (may be unset): a transport whose
  // client going away cancels the request (2026-07-28: closing the stream) keeps it.
  std::function<void(std::shared_ptr<CancelToken>)> on_start;
  // Set while the request waits for its client to answer a question (a 2026 call parked for its
  // retry): an upstream's next question is then not taken to be this request's (may be unset).
  std::shared_ptr<std::atomic<bool>> waiting_for_client;
  // What this one request declared its client can answer (a 2026 request's _meta); null for a
  // request of a 2025 session, whose client declared it at initialize.
  nlohmann::json client_capabilities;
};

struct SessionOptions {
  std::string session_id;  // empty: a random 128-bit hex id
  std::string transport = "stdio";  // "stdio" or "http", for audit entries and messages
  // MCP 2026-07-28 (docs/requests.md): this object is not a protocol session but the context of
  // one principal's task, holding what is node-local about it (its upstream instances, the calls
  // parked waiting for the client's input). Its requests come through HandleModern; its calls
  // carry no session, only `task` ("" the principal's default task).
  bool modern = false;
  std::string task;
  // The scope the task's requests narrow themselves to (_meta["warden/scope"]), "" none.
  std::string requested_scope;
};

class RequestStateSealer;

class McpSession : public std::enable_shared_from_this<McpSession> {
 public:
  // `core` (not owned) must outlive the session. `caller` is who this session speaks for, as the
  // transport authenticated it.
  McpSession(GatewayCore& core, identity::Caller caller, SessionOptions options = {});
  ~McpSession();
  McpSession(const McpSession&) = delete;
  McpSession& operator=(const McpSession&) = delete;

  // Handles one message from the client. See Exchange. Never throws.
  void Handle(mcp::Message message, Exchange exchange);
  // MCP 2026-07-28: one stateless request of this task context (options.modern), whose protocol
  // version and HTTP headers the transport has checked. server/discover, every method a 2025
  // session has except the removed ones (-32601), and the retry of a call that answered
  // input_required (params.requestState, params.inputResponses). Every result carries
  // resultType; lists carry ttlMs and cacheScope. Never throws.
  // `meta`: the request's envelope when the edge has taken it off already (mcp::TakeRequestMeta;
  // else it is taken here).
  void HandleModern(mcp::Request request, Exchange exchange,
                    std::optional<mcp::RequestMeta> meta = std::nullopt);
  bool modern() const { return options_.modern; }
  // The calls parked waiting for a retry (memory accounting and tests).
  size_t parked_count() const;
  // Whether a request is in flight or a call parked: a task context that is busy is not idle.
  bool busy() const;

  // Where messages that belong to no request go (notifications such as list_changed,
  // resources/updated and log messages; requests an upstream makes outside any call). Over
  // stdio: stdout; over HTTP: the GET SSE stream while one is open. Without a stream, such
  // notifications are dropped and such requests are answered upstream with an error.
  void AttachStream(MessageSink sink);
  void DetachStream();

  // Ends the session: calls in flight are cancelled (their sandboxes ended, upstream told), every
  // upstream this session started is stopped (no orphaned processes), later messages get
  // -32600 "session closed". Idempotent; blocks until the upstreams are gone.
  void Close();
  // Records a message the transport refused before this session saw it (malformed JSON, wrong
  // JSON-RPC shape) in the audit log.
  void AuditProtocolError(const mcp::ErrorResponse& error);
  // Blocks until no request of this session is in flight (stdio at end of input).
  void Drain();

  // Cancels this session's calls in flight that a newly pulled kill switch covers: all of them
  // for the global switch or the session's own tenant or agent, else the calls of tool `name`.
  // task__end: cancels this session's calls in flight of `call`'s principal and task (of its
  // session, for a call in no named task), `call` itself excepted; how many. A task context of
  // that principal and task is marked ended: its registry closes it once nothing of it is live,
  // and the task's next request gets a new one.
  size_t CancelTaskCalls(const CallContext& call, const std::string& reason);
  bool ended() const { return ended_.load(); }
  void CancelMatching(KillScope scope, const std::string& name, const std::string& reason);

  bool initialized() const { return initialized_.load(); }
  bool closed() const { return closed_.load(); }
  bool AllowsBatches() const;  // after an initialize that negotiated 2025-03-26
  std::string protocol_version() const;
  const std::string& id() const { return options_.session_id; }
  const identity::Caller& caller() const { return caller_; }
  std::chrono::steady_clock::time_point last_activity() const;

 private:
  // One request of this session being served.
  struct InFlight {
    mcp::Id id;
    std::string method;
    std::string tool;      // the tool name, for tools/call
    std::string upstream;  // the upstream serving it, when forwarded
    MessageSink related;
    std::shared_ptr<CancelToken> cancel = std::make_shared<CancelToken>();
    // The pipeline's view of it once decided: progress on its way out passes its stages.
    std::weak_ptr<CallContext> call;
    std::shared_ptr<std::atomic<bool>> waiting_for_client;  // see Exchange
    nlohmann::json client_capabilities;                      // see Exchange
  };
  void HandleRequest(std::shared_ptr<const mcp::Request> request, Exchange exchange);
  // What goes back to the client passes the credential broker's redactor last.
  void RedactForClient(Exchange& exchange);
  // Takes the upstream instances (Initialize, and a task context's first request); an error
  // reply (busy, failed) when they could not be had.
  std::optional<mcp::Message> StartUpstreams(const mcp::Request& request,
                                             const nlohmann::json& client_caps,
                                             const nlohmann::json& client_info,
                                             const std::string& version);
  nlohmann::json Capabilities() const;
  nlohmann::json ModernCapabilities() const;
  // The session id the calls carry: "" for a task context (it is no protocol session).
  std::string call_session() const { return options_.modern ? std::string() : options_.session_id; }
  // 2026-07-28 (session_modern.cc).
  struct Parked;
  mcp::Message Discover(const mcp::Request& request);
  // `caps`: what the request declared its client can answer; `log_level`: the lowest level of log
  // messages it wants on its stream ("" none). Both from its _meta.
  void StartModernCall(mcp::Request request, Exchange exchange, nlohmann::json caps,
                       const std::string& log_level);
  void ResumeModernCall(const mcp::Request& request, Exchange exchange, nlohmann::json caps,
                        const std::string& log_level);
  // Ends the current round of `parked` with input_required (posted: asks that come together go
  // out together).
  void EndRound(const std::shared_ptr<Parked>& parked);
  // A 2026 upstream's input_required, relayed. Where the upstream's reply arrives
  // (SessionUpstreams), its requestState is set aside and a stash key put in its place, so that
  // the response stages never rewrite it (an opaque state can look like a token to the
  // redactor); an error when it is not a string of at most kMaxInnerRequestState bytes.
  Status StashUpstreamState(nlohmann::json& result);
  // When the call's answer leaves (session_modern.cc): the stashed state sealed inside warden's
  // own, kind "upstream", bound to `original`; any other message as it is.
  mcp::Message WrapUpstreamInput(const mcp::Request& original, mcp::Message message);
  void RefuseState(const mcp::Request& request, const Exchange& exchange, const std::string& why);
  // Close: the parked calls' timers are cancelled (a pending timer holds the worker pool).
  void DropParked();
  // subscriptions/listen: a stream of the notifications the client opted in to, open until the
  // client closes it (or cancels it on stdio) or the context ends (then answered, gracefully).
  struct Listener;
  void Listen(const mcp::Request& request, Exchange exchange);
  // A notification of a task context goes to its listeners that asked for it, tagged with their
  // subscription id; false when none did.
  bool DeliverToListeners(const mcp::Message& message);
  void EndListeners();
 public:
  // stdio: notifications/cancelled naming a subscriptions/listen request ends that subscription.
  void CancelListen(const nlohmann::json& request_id);
 private:
  void HandleNotification(const mcp::Notification& note);
  void HandleClientReply(const mcp::Message& message);
  mcp::Message Initialize(const mcp::Request& request);
  // Work on one request: answers through `reply`, exactly once, on any thread (CallTool answers
  // from the thread that delivers the upstream's reply).
  using Reply = std::function<void(mcp::Message)>;
  using Work = std::function<void(const mcp::Request&, InFlight&, Reply)>;
  // Runs `work` on the worker pool; the request stays in flight until it replies.
  void Run(std::shared_ptr<const mcp::Request> request, Exchange exchange, Work work);
  void ListTools(const mcp::Request& request, InFlight& flight, Reply reply);
  void CallTool(const mcp::Request& request, InFlight& flight, Reply reply);
  // The answer to a request once the pipeline has decided (and run) it: the result the response
  // path left, or the refusal in the terms of the method (a tool error the model reads for
  // tools/call; a JSON-RPC error otherwise).
  static mcp::Message ReplyFor(const mcp::Id& id, const CallContext& call,
                               const StageOutcome& outcome);
  void Forward(const mcp::Request& request, InFlight& flight, Reply reply);
  void Touch();

  // For SessionUpstreams.
  friend class SessionUpstreams;
  // Sends to the session's stream; false when none is attached.
  bool SendToStream(const mcp::Message& message);
  // Where a message an upstream sends while serving one of our requests goes: the related sink
  // of a request in flight to `upstream`, else the session's stream, else nullptr.
  MessageSink RelatedSinkFor(const std::string& upstream);
  // Whether a request of this session is in flight to `upstream`.
  bool HasRequestTo(const std::string& upstream);
  nlohmann::json client_capabilities() const;
  // Runs `call` (a forwarded non-tool request, or a request from an upstream) through the
  // pipeline with `send` as its execution, and answers `request` through `reply` (once, on any
  // thread). `send` gets a callback for the reply and must call it exactly once, on any thread;
  // it runs only when every stage let the call through. `flight` (may be null) learns the call.
  using Send = std::function<void(std::function<void(mcp::Message)>)>;
  void Decided(const mcp::Request& request, InFlight* flight, std::shared_ptr<CallContext> call,
               Send send, Reply reply);

  GatewayCore& core_;
  identity::Caller caller_;
  SessionOptions options_;
  std::atomic<bool> initialized_{false}, client_ready_{false}, closed_{false}, ended_{false};
  mutable std::mutex mu_;
  std::string protocol_version_;
  nlohmann::json client_capabilities_ = nlohmann::json::object();
  nlohmann::json client_info_ = nlohmann::json::object();
  MessageSink stream_;
  std::map<std::string, std::shared_ptr<InFlight>> in_flight_;  // by request id text
  std::condition_variable drained_;
  std::chrono::steady_clock::time_point last_activity_;
  std::shared_ptr<SessionUpstreams> upstreams_;
  std::map<std::string, std::shared_ptr<Parked>> parked_;  // by handle, under mu_
  // Stash key -> an upstream's requestState (nullopt: it gave none), until its answer leaves;
  // at most kMaxStashed, the oldest dropped first (a call whose answer never left), under mu_.
  std::map<std::string, std::pair<uint64_t, std::optional<std::string>>> stashed_;
  uint64_t stash_seq_ = 0;
  std::atomic<uint64_t> modern_seq_{0};
  std::mutex start_mu_;  // a task context's first request starts its upstreams once
  std::vector<std::shared_ptr<Listener>> listeners_;  // under mu_
};

}  // namespace warden::gateway
