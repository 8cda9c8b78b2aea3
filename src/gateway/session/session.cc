#include "gateway/session/session.h"
#include "gateway/trifecta/flow_tracker.h"

#include <condition_variable>
#include <cstdio>
#include <future>
#include <set>
#include <vector>

#include "common/random_hex.h"
#include "gateway/credentials/broker.h"
#include "gateway/gateway.h"
#include "gateway/session/session_upstreams.h"
#include "identity/identity.h"
#include "mcp/protocol_version.h"

namespace warden::gateway {

using nlohmann::json;

namespace {


// Code for a request refused by policy that is not a tool call (resources/read, prompts/get...):
// MCP defines none, so warden uses one of the implementation-defined server errors.
constexpr int kDeniedByPolicy = -32003;
constexpr int kUpstreamBusyRetrySeconds = 5;

}  // namespace

McpSession::McpSession(GatewayCore& core, identity::Caller caller, SessionOptions options)
    : core_(core), caller_(std::move(caller)), options_(std::move(options)) {
  if (options_.session_id.empty()) options_.session_id = RandomHex(16);
  last_activity_ = std::chrono::steady_clock::now();
}

McpSession::~McpSession() { Close(); }

bool McpSession::AllowsBatches() const {
  std::lock_guard lock(mu_);
  return initialized_.load() && mcp::AllowsBatches(protocol_version_);
}

std::string McpSession::protocol_version() const {
  std::lock_guard lock(mu_);
  return protocol_version_;
}

std::chrono::steady_clock::time_point McpSession::last_activity() const {
  std::lock_guard lock(mu_);
  return last_activity_;
}

void McpSession::Touch() {
  std::lock_guard lock(mu_);
  last_activity_ = std::chrono::steady_clock::now();
}

void McpSession::AttachStream(MessageSink sink) {
  if (CredentialBroker* broker = core_.options().services.credentials; broker && sink) {
    sink = [broker, sink = std::move(sink)](const mcp::Message& message) {
      mcp::Message copy = message;
      RedactMessage(broker->redactor(), copy);
      sink(copy);
    };
  }
  std::lock_guard lock(mu_);
  stream_ = std::move(sink);
}

void McpSession::DetachStream() {
  std::lock_guard lock(mu_);
  stream_ = nullptr;
}

bool McpSession::SendToStream(const mcp::Message& message) {
  if (options_.modern) return DeliverToListeners(message);
  MessageSink sink;
  {
    std::lock_guard lock(mu_);
    sink = stream_;
  }
  if (!sink) return false;
  sink(message);
  return true;
}

void McpSession::RedactForClient(Exchange& exchange) {
  // Whatever goes back to the client passes the redactor last (docs/credentials.md): results,
  // errors, list answers, progress, server-to-client requests. The pipeline's redact stage has
  // done the same for what the audit log records; this catches what never was a call (a tool
  // description an upstream wrote, a notification).
  CredentialBroker* broker = core_.options().services.credentials;
  if (broker == nullptr) return;
  if (exchange.reply) {
    exchange.reply = [broker, reply = std::move(exchange.reply)](mcp::Message m) {
      RedactMessage(broker->redactor(), m);
      reply(std::move(m));
    };
  }
  if (exchange.related) {
    exchange.related = [broker, related = std::move(exchange.related)](const mcp::Message& m) {
      mcp::Message copy = m;
      RedactMessage(broker->redactor(), copy);
      related(copy);
    };
  }
}

void McpSession::Handle(mcp::Message message, Exchange exchange) {
  Touch();
  RedactForClient(exchange);
  if (auto* request = std::get_if<mcp::Request>(&message)) {
    if (closed_.load()) {
      if (exchange.reply)
        exchange.reply(mcp::MakeError(request->id, mcp::kInvalidRequest, "session closed"));
      return;
    }
    HandleRequest(std::make_shared<const mcp::Request>(std::move(*request)), std::move(exchange));
    return;
  }
  if (closed_.load()) return;
  if (auto* note = std::get_if<mcp::Notification>(&message)) {
    HandleNotification(*note);
    return;
  }
  HandleClientReply(message);
}

void McpSession::HandleNotification(const mcp::Notification& note) {
  if (note.method == "notifications/initialized") {
    if (initialized_.load()) client_ready_ = true;
    return;
  }
  if (note.method == "notifications/cancelled") {
    if (!note.params || !note.params->is_object() || !note.params->contains("requestId")) return;
    const json& rid = (*note.params)["requestId"];
    std::string key = rid.is_string()           ? mcp::Id(rid.get<std::string>()).ToString()
                      : rid.is_number_integer() ? mcp::Id(rid.get<int64_t>()).ToString()
                                                : "";
    std::string reason = note.params->value("reason", std::string("cancelled by the client"));
    std::shared_ptr<InFlight> flight;
    {
      std::lock_guard lock(mu_);
      auto it = in_flight_.find(key);
      if (it != in_flight_.end()) flight = it->second;
    }
    if (flight) flight->cancel->Cancel(reason);
    return;
  }
  if (note.method == "notifications/roots/list_changed") {
    if (upstreams_) upstreams_->NotifyAll(note.method, note.params.value_or(json::object()));
    return;
  }
  // Other notifications (progress for a request warden sent, unknown ones) need nothing.
}

void McpSession::HandleClientReply(const mcp::Message& message) {
  if (upstreams_) upstreams_->ClientReplied(message);
}

void McpSession::HandleRequest(std::shared_ptr<const mcp::Request> shared, Exchange exchange) {
  // Shared, not copied: the worker that runs the call reads it (and a 2026 call's parked record
  // holds the same one).
  const mcp::Request& request = *shared;
  const std::string& m = request.method;
  auto reply_now = [&](mcp::Message reply) {
    // Refused before the pipeline: still one audit entry (the pipeline writes its own).
    if (const auto* err = std::get_if<mcp::ErrorResponse>(&reply))
      core_.AuditRefusal(caller_, call_session(), m, err->message);
    if (exchange.reply) exchange.reply(std::move(reply));
  };
  if (m == "ping") return reply_now(mcp::Response{request.id, json::object()});
  if (m == "initialize") return reply_now(Initialize(request));
  if (!initialized_.load())
    return reply_now(mcp::MakeError(request.id, mcp::kInvalidRequest,
                                    "server not initialized: send initialize before " + m));
  if (m == "tools/list")
    return Run(std::move(shared), std::move(exchange),
               [this](const mcp::Request& r, InFlight& f, Reply reply) {
                 ListTools(r, f, std::move(reply));
               });
  if (m == "tools/call")
    return Run(std::move(shared), std::move(exchange),
               [this](const mcp::Request& r, InFlight& f, Reply reply) {
                 CallTool(r, f, std::move(reply));
               });
  if (m == "resources/list" || m == "resources/templates/list" || m == "prompts/list" ||
      m == "resources/read" || m == "resources/subscribe" || m == "resources/unsubscribe" ||
      m == "prompts/get" || m == "completion/complete" || m == "logging/setLevel")
    return Run(std::move(shared), std::move(exchange),
               [this](const mcp::Request& r, InFlight& f, Reply reply) {
                 Forward(r, f, std::move(reply));
               });
  return reply_now(mcp::MakeError(request.id, mcp::kMethodNotFound, "Method not found: " + m));
}

std::optional<mcp::Message> McpSession::StartUpstreams(const mcp::Request& request,
                                                       const json& client_caps,
                                                       const json& client_info,
                                                       const std::string& version) {
  std::shared_ptr<const policy::Policy> policy = core_.policy().Current();
  if (!policy) return mcp::MakeError(request.id, mcp::kInternalError, "no policy is in force");
  // The session's upstreams start now, in the background: tools/list waits for them.
  auto upstreams = std::make_shared<SessionUpstreams>(core_, *this);
  Status started = upstreams->Start(*policy, client_caps, client_info, version);
  if (!started.ok() && upstreams->at_cap()) {
    // Retry-After for HTTP (the transport answers 503); a stdio client reads the message.
    return mcp::ErrorResponse{request.id, kUpstreamBusy,
                              "warden cannot open this session now: " + started.message(),
                              json{{"retryAfter", kUpstreamBusyRetrySeconds}}};
  }
  if (!started.ok())
    return mcp::MakeError(request.id, mcp::kInternalError,
                          "could not start the upstream servers: " + started.message());
  std::lock_guard lock(mu_);
  protocol_version_ = version;
  client_capabilities_ = client_caps;
  client_info_ = client_info;
  upstreams_ = std::move(upstreams);
  return std::nullopt;
}

json McpSession::Capabilities() const {
  json capabilities = {{"tools", {{"listChanged", true}}}};
  if (upstreams_ && upstreams_->Any()) {
    capabilities["resources"] = {{"subscribe", true}, {"listChanged", true}};
    capabilities["prompts"] = {{"listChanged", true}};
    capabilities["completions"] = json::object();
    capabilities["logging"] = json::object();
  }
  return capabilities;
}

mcp::Message McpSession::Initialize(const mcp::Request& request) {
  if (initialized_.load())
    return mcp::MakeError(request.id, mcp::kInvalidRequest,
                          "initialize was already answered in this session");
  const json* params = request.params ? &*request.params : nullptr;
  if (params == nullptr || !params->is_object() || !params->contains("protocolVersion") ||
      !(*params)["protocolVersion"].is_string())
    return mcp::MakeError(request.id, mcp::kInvalidParams,
                          "initialize needs params.protocolVersion (a string)");
  std::string version(mcp::Negotiate((*params)["protocolVersion"].get<std::string>()));
  json client_caps = params->contains("capabilities") && (*params)["capabilities"].is_object()
                         ? (*params)["capabilities"]
                         : json::object();
  json client_info = params->contains("clientInfo") && (*params)["clientInfo"].is_object()
                         ? (*params)["clientInfo"]
                         : json::object();
  std::shared_ptr<const policy::Policy> policy = core_.policy().Current();
  if (!policy) return mcp::MakeError(request.id, mcp::kInternalError, "no policy is in force");
  // A session may narrow itself to a task scope (never widen): _meta["warden/scope"].
  if (params->contains("_meta") && (*params)["_meta"].is_object() &&
      (*params)["_meta"].contains("warden/scope")) {
    const json& requested = (*params)["_meta"]["warden/scope"];
    if (!requested.is_string())
      return mcp::MakeError(request.id, mcp::kInvalidParams, "_meta.warden/scope must be a string");
    auto scope = identity::NarrowScope(*policy, caller_, requested.get<std::string>());
    if (!scope) return mcp::MakeError(request.id, mcp::kInvalidParams, scope.status().message());
    caller_.scope = *scope;
  }

  if (auto refused = StartUpstreams(request, client_caps, client_info, version)) return *refused;
  initialized_ = true;

  json result = {
      {"protocolVersion", version},
      {"capabilities", Capabilities()},
      {"serverInfo", {{"name", "warden"}, {"version", core_.options().server_version}}},
      {"instructions",
       "warden decides every tool call by policy and records it in an audit log. Denied calls say "
       "why."},
  };
  return mcp::Response{request.id, std::move(result)};
}

void McpSession::Run(std::shared_ptr<const mcp::Request> shared, Exchange exchange, Work work) {
  const mcp::Request& request = *shared;
  auto flight = std::make_shared<InFlight>();
  flight->id = request.id;
  flight->method = request.method;
  flight->related = exchange.related;
  flight->waiting_for_client = exchange.waiting_for_client;
  flight->client_capabilities = std::move(exchange.client_capabilities);
  // A task context serves requests from many connections, whose ids may repeat: its own key.
  const std::string key = options_.modern
                              ? request.id.ToString() + "#" + std::to_string(++modern_seq_)
                              : request.id.ToString();
  {
    std::lock_guard lock(mu_);
    if (in_flight_.count(key)) {
      if (exchange.reply)
        exchange.reply(mcp::MakeError(request.id, mcp::kInvalidRequest,
                                      "request id " + key + " is already in flight"));
      return;
    }
    in_flight_[key] = flight;
  }
  if (exchange.on_start) exchange.on_start(flight->cancel);
  auto self = shared_from_this();
  core_.Post([self, shared = std::move(shared), exchange = std::move(exchange), flight, key,
              work = std::move(work)]() mutable {
    // `flight` stays alive until the reply: the work may hold a reference to it past return.
    work(*shared, *flight,
         [self, flight, key, reply = std::move(exchange.reply)](mcp::Message message) {
           {
             std::lock_guard lock(self->mu_);
             self->in_flight_.erase(key);
           }
           self->drained_.notify_all();
           if (reply) reply(std::move(message));
         });
  });
}

void McpSession::AuditProtocolError(const mcp::ErrorResponse& error) {
  core_.AuditRefusal(caller_, call_session(), "jsonrpc", error.message);
}

void McpSession::Drain() {
  std::unique_lock lock(mu_);
  drained_.wait(lock, [this] { return in_flight_.empty(); });
}

void McpSession::Close() {
  if (closed_.exchange(true)) return;
  std::vector<std::shared_ptr<InFlight>> flights;
  std::shared_ptr<SessionUpstreams> upstreams;
  {
    std::lock_guard lock(mu_);
    for (auto& [key, flight] : in_flight_) flights.push_back(flight);
    stream_ = nullptr;
  }
  for (auto& flight : flights) flight->cancel->Cancel("the session was closed");
  // Calls hold a pointer to the upstreams while they run: wait for them before stopping.
  {
    std::unique_lock lock(mu_);
    drained_.wait_for(lock, std::chrono::seconds(10), [this] { return in_flight_.empty(); });
    upstreams = std::move(upstreams_);
  }
  if (upstreams) upstreams->StopAll();
  DropParked();
  EndListeners();
  core_.Unregister(this);
}

size_t McpSession::CancelTaskCalls(const CallContext& ended, const std::string& reason) {
  if (options_.modern && ended.task == options_.task && ended.tenant == caller_.tenant &&
      ended.user == caller_.user && ended.agent == caller_.agent)
    ended_ = true;
  std::vector<std::shared_ptr<InFlight>> hit;
  {
    std::lock_guard lock(mu_);
    for (auto& [key, flight] : in_flight_) {
      std::shared_ptr<CallContext> call = flight->call.lock();
      if (!call || call.get() == &ended) continue;
      const bool same_principal = call->tenant == ended.tenant && call->user == ended.user &&
                                  call->agent == ended.agent;
      const bool same_task = ended.task.empty()
                                 ? call->task.empty() && call->session == ended.session
                                 : call->task == ended.task;
      if (same_principal && same_task) hit.push_back(flight);
    }
  }
  for (auto& flight : hit) flight->cancel->Cancel(reason);
  return hit.size();
}

void McpSession::CancelMatching(KillScope scope, const std::string& name,
                                const std::string& reason) {
  const bool whole = scope == KillScope::kGlobal ||
                     (scope == KillScope::kTenant && name == caller_.tenant) ||
                     (scope == KillScope::kUser && name == caller_.user) ||
                     (scope == KillScope::kAgent && name == caller_.agent) ||
                     (scope == KillScope::kSession && name == options_.session_id) ||
                     (scope == KillScope::kTask && options_.modern && name == options_.task);
  std::vector<std::shared_ptr<InFlight>> hit;
  {
    std::lock_guard lock(mu_);
    for (auto& [key, flight] : in_flight_) {
      std::shared_ptr<CallContext> call =
          scope == KillScope::kTask ? flight->call.lock() : nullptr;
      if (whole || (scope == KillScope::kTool && flight->tool == name) ||
          (call && call->task == name))
        hit.push_back(flight);
    }
  }
  for (auto& flight : hit) flight->cancel->Cancel(reason);
}

MessageSink McpSession::RelatedSinkFor(const std::string& upstream) {
  std::lock_guard lock(mu_);
  // A 2025 upstream does not say which of our requests its question serves: a request to it
  // that is not itself waiting for the client's answer (a 2026 call parked for its retry asks
  // nothing more until then), else any request to it.
  MessageSink fallback;
  for (auto& [key, flight] : in_flight_) {
    if (flight->upstream != upstream || !flight->related) continue;
    if (!flight->waiting_for_client || !flight->waiting_for_client->load()) return flight->related;
    if (!fallback) fallback = flight->related;
  }
  if (fallback) return fallback;
  if (stream_) return stream_;
  return nullptr;
}

bool McpSession::HasRequestTo(const std::string& upstream) {
  std::lock_guard lock(mu_);
  // A request parked until its client retries asks nothing meanwhile (see RelatedSinkFor).
  for (auto& [key, flight] : in_flight_) {
    if (flight->upstream == upstream &&
        !(flight->waiting_for_client && flight->waiting_for_client->load()))
      return true;
  }
  return false;
}

json McpSession::client_capabilities() const {
  std::lock_guard lock(mu_);
  return client_capabilities_;
}

// ---- tools ----

void McpSession::ListTools(const mcp::Request& request, InFlight& flight, Reply reply) {
  auto self = shared_from_this();
  auto answer = [self, id = request.id,
                 reply = std::move(reply)](std::vector<json> upstream_tools) {
    json list = json::array();
    std::shared_ptr<const policy::Policy> policy = self->core_.policy().Current();
    if (policy) {
      const identity::Caller& c = self->caller_;
      policy::CallContext who{c.tenant, c.user, c.agent, c.scope};
      for (const BuiltinTool& tool : self->core_.tools().list()) {
        if (policy::Visible(*policy, who, tool.name, {})) list.push_back(tool.definition);
      }
      for (json& tool : upstream_tools) {
        if (policy::Visible(*policy, who, tool["name"].get<std::string>(), {}))
          list.push_back(std::move(tool));
      }
    }
    // One page holds every tool: a cursor is never issued, and one sent anyway is ignored.
    reply(mcp::Response{id, {{"tools", std::move(list)}}});
  };
  if (!upstreams_) return answer({});
  // Waits for upstreams still starting without holding this worker.
  upstreams_->Tools(flight, std::move(answer));
}

void McpSession::CallTool(const mcp::Request& request, InFlight& flight, Reply reply) {
  const json* params = request.params ? &*request.params : nullptr;
  if (params == nullptr || !params->is_object() || !params->contains("name") ||
      !(*params)["name"].is_string())
    return reply(
        mcp::MakeError(request.id, mcp::kInvalidParams, "tools/call needs params.name (a string)"));
  // Shared: when an upstream serves the tool the pipeline finishes on the upstream's thread.
  auto call = std::make_shared<CallContext>();
  call->tenant = caller_.tenant;
  call->user = caller_.user;
  call->agent = caller_.agent;
  call->scope = caller_.scope;
  call->session = call_session();
  call->tool = (*params)["name"].get<std::string>();
  call->request_id = request.id.ToJson();
  call->cancel = flight.cancel;
  flight.tool = call->tool;
  flight.call = call;
  if (params->contains("arguments")) {
    const json& args = (*params)["arguments"];
    if (!args.is_object())
      return reply(mcp::MakeError(request.id, mcp::kInvalidParams,
                                  "tools/call params.arguments must be an object"));
    call->arguments = args;
  }
  auto task = TaskFromMeta(*params);
  if (!task) return reply(mcp::MakeError(request.id, mcp::kInvalidParams, task.status().message()));
  call->task = *task;
  if (params->contains("_meta") && (*params)["_meta"].is_object() &&
      (*params)["_meta"].contains("progressToken")) {
    const json& token = (*params)["_meta"]["progressToken"];
    if (token.is_string() || token.is_number_integer()) call->progress_token = token;
  }
  // Messages a stage sends for this call (the approval stage's keep-alive progress) go where the
  // request's related messages go, else to the session's stream.
  call->notify = [weak = weak_from_this(), related = flight.related](mcp::Notification note) {
    if (related) return related(note);
    if (auto self = weak.lock()) self->SendToStream(note);
  };
  if (upstreams_) {
    MessageSink sink = flight.related;
    if (!sink)
      sink = [weak = weak_from_this()](const mcp::Message& m) {
        if (auto self = weak.lock()) self->SendToStream(m);
      };
    call->ask_client = [weak = std::weak_ptr<SessionUpstreams>(upstreams_), sink](
                           const std::string& method, json params, CallContext::ClientAnswer done) {
      auto upstreams = weak.lock();
      if (!upstreams)
        return done(
            mcp::MakeError(mcp::Id(int64_t{0}), mcp::kInternalError, "the session has ended"));
      upstreams->AskClientOn(sink, mcp::Request{mcp::Id(int64_t{0}), method, std::move(params)},
                             std::move(done));
    };
  }
  auto decide = [self = shared_from_this(), call, id = request.id, reply = std::move(reply)] {
    self->core_.pipeline().RunAsync(*call, [call, id, reply](const StageOutcome& outcome) {
      reply(ReplyFor(id, *call, outcome));
    });
  };
  if (const BuiltinTool* tool = core_.tools().Find(call->tool)) {
    call->server = tool->server;
  } else if (upstreams_) {
    // Waits (bounded, holding no thread) for an upstream that is still starting.
    return upstreams_->Route(call, *params, flight, std::move(decide));
  }
  decide();
}

mcp::Message McpSession::ReplyFor(const mcp::Id& id, const CallContext& call,
                                  const StageOutcome& outcome) {
  const bool tool = call.method == "tools/call";
  switch (outcome.result) {
    case StageResult::kContinue: {
      if (!call.result)
        return mcp::MakeError(id, mcp::kInternalError, "the call ended without a result");
      const CallResult& r = *call.result;
      if (!r.rpc_error) return mcp::Response{id, r.value};
      mcp::ErrorResponse error{id, mcp::kInternalError, "", std::nullopt};
      if (r.value.is_object()) {
        if (r.value.contains("code") && r.value["code"].is_number_integer())
          error.code = r.value["code"].get<int>();
        if (r.value.contains("message") && r.value["message"].is_string())
          error.message = r.value["message"].get<std::string>();
        if (r.value.contains("data")) error.data = r.value["data"];
      }
      return error;
    }
    case StageResult::kPause:
      return mcp::MakeError(id, mcp::kInternalError, "paused calls are not supported yet");
    case StageResult::kDeny:
      break;
  }
  const std::string where = call.verdict_stage.empty() ? "" : " (" + call.verdict_stage + ")";
  switch (outcome.refusal) {
    case Refusal::kUnknownTool:
      // A hidden method is answered as one the caller cannot reach, naming nothing else.
      return mcp::MakeError(id, mcp::kInvalidParams,
                            tool ? outcome.reason : "not available to this caller: " + call.method);
    case Refusal::kInvalidArguments:
      // MCP 2025-11-25: input validation errors are tool execution errors, so the model can retry.
      if (tool) return mcp::Response{id, CallResult::FromText(outcome.reason, true).value};
      return mcp::MakeError(id, mcp::kInvalidParams, outcome.reason);
    case Refusal::kDenied: {
      std::string text =
          std::string(tool ? "warden denied this call: " : "warden denied this request: ") +
          outcome.reason;
      if (!outcome.rule.empty()) text += " [rule: " + outcome.rule + "]";
      if (tool) return mcp::Response{id, CallResult::FromText(text, true).value};
      return mcp::MakeError(id, kDeniedByPolicy, text);
    }
    case Refusal::kInternal:
    case Refusal::kNone:
      break;
  }
  if (tool)
    return mcp::MakeError(id, mcp::kInternalError,
                          "warden could not complete the call" + where + ": " + outcome.reason);
  return mcp::MakeError(id, mcp::kInternalError,
                        "warden could not complete " + call.method + ": " + outcome.reason);
}

// ---- everything else an upstream serves ----

void McpSession::Forward(const mcp::Request& request, InFlight& flight, Reply reply) {
  if (!upstreams_ || !upstreams_->Any()) {
    // Built-ins only: empty lists, and nothing to read.
    const std::string& m = request.method;
    if (m == "resources/list")
      return reply(mcp::Response{request.id, {{"resources", json::array()}}});
    if (m == "resources/templates/list")
      return reply(mcp::Response{request.id, {{"resourceTemplates", json::array()}}});
    if (m == "prompts/list") return reply(mcp::Response{request.id, {{"prompts", json::array()}}});
    if (m == "logging/setLevel") return reply(mcp::Response{request.id, json::object()});
    if (m == "resources/read" || m == "resources/subscribe" || m == "resources/unsubscribe")
      return reply(mcp::MakeError(request.id, mcp::kResourceNotFound, "Resource not found"));
    if (m == "completion/complete")
      return reply(mcp::Response{request.id, {{"completion", {{"values", json::array()}}}}});
    return reply(mcp::MakeError(request.id, mcp::kInvalidParams, "unknown prompt"));
  }
  upstreams_->Forward(request, flight, caller_, call_session(), std::move(reply));
}

namespace {

// What came back from an upstream or the client, as the pipeline holds it.
CallResult ResultOfReply(const mcp::Message& message) {
  if (const auto* ok = std::get_if<mcp::Response>(&message)) {
    CallResult r;
    r.value = ok->result;
    return r;
  }
  if (const auto* err = std::get_if<mcp::ErrorResponse>(&message))
    return CallResult::FromError(err->code, err->message, err->data.value_or(json()));
  return CallResult::FromError(mcp::kInternalError, "no reply");
}

}  // namespace

// Runs a forwarded, non-tool request through the pipeline. Shared with SessionUpstreams.
void McpSession::Decided(const mcp::Request& request, InFlight* flight,
                         std::shared_ptr<CallContext> call, Send send, Reply reply) {
  call->method = request.method;
  if (flight) {
    call->cancel = flight->cancel;
    flight->call = call;
  }
  call->forward = [send = std::move(send)](CallContext&, CallContext::ForwardDone done) {
    send([done = std::move(done)](mcp::Message message) { done(ResultOfReply(message)); });
  };
  core_.pipeline().RunAsync(
      *call, [call, id = request.id, reply = std::move(reply)](const StageOutcome& outcome) {
        reply(ReplyFor(id, *call, outcome));
      });
}

}  // namespace warden::gateway
