// McpSession's MCP 2026-07-28 side (docs/requests.md): a task context serving stateless requests,
// and the calls parked between an input_required answer and the client's retry.
#include <algorithm>
#include <cstdio>
#include <set>

#include "common/random_hex.h"
#include "gateway/credentials/broker.h"
#include "gateway/gateway.h"
#include "gateway/session/request_state.h"
#include "gateway/session/session.h"
#include "gateway/session/session_upstreams.h"
#include "identity/identity.h"
#include "mcp/modern.h"
#include "mcp/protocol_version.h"

namespace warden::gateway {

using nlohmann::json;

namespace {

// How long a parked call waits for the client's retry: the time an upstream's question to the
// client is kept open (session_upstreams.cc), so the two end together.
constexpr auto kParkedFor = std::chrono::minutes(5);
// Parked calls per task context; past it a new question fails (the call gets the error).
constexpr size_t kMaxParkedPerTask = 64;
// Asks that come within this time go out in one input_required answer.
constexpr auto kRoundGather = std::chrono::milliseconds(20);
// How long a client may cache a list or the discovery result (ttlMs). Lists are filtered by
// policy per caller, hence cacheScope "private"; a stale list is never a hole: every call is
// decided again.
constexpr int64_t kListTtlMs = 60000;


// The RFC 5424 severities MCP uses, least severe first; -1 for anything else.
int LogLevelRank(const std::string& level) {
  static constexpr std::string_view kLevels[] = {"debug", "info",     "notice", "warning",
                                                 "error", "critical", "alert",  "emergency"};
  for (int i = 0; i < 8; ++i)
    if (level == kLevels[i]) return i;
  return -1;
}

std::string PrincipalOf(const identity::Caller& c) { return c.tenant + "/" + c.user + "/" + c.agent; }

// The results the revision makes cacheable (ttlMs and cacheScope required).
bool IsList(const std::string& method) {
  return method == "tools/list" || method == "resources/list" ||
         method == "resources/templates/list" || method == "prompts/list" ||
         method == "resources/read";
}

// What every 2026 answer gets on its way out: resultType, and the caching fields of lists.
std::function<void(mcp::Message)> ModernReply(std::string method,
                                              std::function<void(mcp::Message)> reply) {
  return [method = std::move(method), reply = std::move(reply)](mcp::Message m) {
    if (auto* ok = std::get_if<mcp::Response>(&m); ok && ok->result.is_object()) {
      mcp::MarkComplete(ok->result);
      if (IsList(method) && ok->result["resultType"] == "complete") {
        ok->result["ttlMs"] = kListTtlMs;
        ok->result["cacheScope"] = "private";
      }
    }
    if (reply) reply(std::move(m));
  };
}

}  // namespace

// A 2026 call that asked its client something: between its input_required answer and the
// client's retry it waits here, on this node, named by `handle` in the request state.
struct McpSession::Parked {
  std::mutex mu;
  std::string handle;  // pk_local_HEX, given when the call first parks
  std::string method;
  // The request as first sent, for the digest a retry must match (computed when the call first
  // parks: most calls never do).
  std::shared_ptr<const mcp::Request> original;
  std::string digest;
  // The request answering now (the first, then each retry); empty between rounds.
  Exchange current;
  mcp::Id current_id;
  // The questions not yet answered, by key (the id warden gave the question).
  std::vector<std::pair<std::string, json>> asked;
  std::optional<mcp::Message> final;  // came while no request was attached
  std::string state_id;               // the one request state that may resume it next
  bool round_posted = false;
  bool done = false;
  std::shared_ptr<boost::asio::steady_timer> expiry, round_timer;
  json caps = json::object();  // what the request answering now declared it can answer
  int log_level = -1;          // the lowest log level it asked for (_meta logLevel); -1: none
  std::shared_ptr<CancelToken> cancel;  // the call's, once in flight
  // True from the round's input_required until the retry has answered every question.
  std::shared_ptr<std::atomic<bool>> waiting = std::make_shared<std::atomic<bool>>(false);
};

size_t McpSession::parked_count() const {
  std::lock_guard lock(mu_);
  return parked_.size();
}

json McpSession::ModernCapabilities() const {
  // Changes reach a 2026 client on a subscriptions/listen stream; log messages do not yet
  // (logging).
  json capabilities = {{"tools", {{"listChanged", true}}}};
  if (upstreams_ && upstreams_->Any()) {
    capabilities["resources"] = {{"subscribe", true}, {"listChanged", true}};
    capabilities["prompts"] = {{"listChanged", true}};
    capabilities["completions"] = json::object();
  }
  return capabilities;
}

struct McpSession::Listener {
  json id;  // the listen request's JSON-RPC id: the subscription id
  mcp::Id request_id;
  MessageSink sink;
  std::function<void(mcp::Message)> reply;
  bool tools = false, prompts = false, resources = false;
  std::set<std::string> uris;  // resources/updated for these (subscribed upstream)
};

void McpSession::Listen(const mcp::Request& request, Exchange exchange) {
  const json* params = request.params && request.params->is_object() ? &*request.params : nullptr;
  const json* filter = params && params->contains("notifications") ? &(*params)["notifications"] : nullptr;
  auto refuse = [&](const std::string& why) {
    core_.AuditRefusal(caller_, "", request.method, why);
    if (exchange.reply) exchange.reply(mcp::MakeError(request.id, mcp::kInvalidParams, why));
  };
  if (filter == nullptr || !filter->is_object())
    return refuse("subscriptions/listen needs params.notifications (an object)");
  auto listener = std::make_shared<Listener>();
  listener->id = request.id.ToJson();
  listener->request_id = request.id;
  json agreed = json::object();
  for (auto [field, flag] : {std::pair{"toolsListChanged", &Listener::tools},
                             std::pair{"promptsListChanged", &Listener::prompts},
                             std::pair{"resourcesListChanged", &Listener::resources}}) {
    if (!filter->contains(field)) continue;
    if (!(*filter)[field].is_boolean())
      return refuse(std::string("params.notifications.") + field + " must be a boolean");
    (*listener).*flag = (*filter)[field].get<bool>();
    if ((*listener).*flag) agreed[field] = true;
  }
  std::vector<std::string> wanted;
  if (filter->contains("resourceSubscriptions")) {
    const json& uris = (*filter)["resourceSubscriptions"];
    if (!uris.is_array() || uris.size() > 256)
      return refuse("params.notifications.resourceSubscriptions must be an array of at most 256 URIs");
    for (const json& uri : uris) {
      if (!uri.is_string() || uri.get_ref<const std::string&>().empty())
        return refuse("params.notifications.resourceSubscriptions must hold URI strings");
      wanted.push_back(uri.get<std::string>());
    }
  }
  if (!exchange.related || !exchange.reply)
    return refuse("subscriptions/listen needs a stream to deliver on");
  listener->sink = std::move(exchange.related);
  listener->reply = std::move(exchange.reply);
  // The client closing the stream (HTTP) ends the subscription.
  auto token = std::make_shared<CancelToken>();
  std::weak_ptr<McpSession> weak = weak_from_this();
  token->OnCancel([weak, id = listener->id] {
    if (auto self = weak.lock()) self->CancelListen(id);
  });
  if (exchange.on_start) exchange.on_start(token);
  // Each resource is subscribed upstream as a 2025 session subscribes it (through the pipeline:
  // the policy decides `UPSTREAM__resources/subscribe`); the acknowledgement, sent once every
  // answer is in, names those that were, and nothing is delivered before it.
  struct Pending {
    std::mutex mu;
    size_t left;
    json agreed;
    std::vector<std::string> wanted, uris;
  };
  auto pending = std::make_shared<Pending>();
  pending->left = wanted.size();
  pending->wanted = wanted;
  pending->agreed = std::move(agreed);
  auto acknowledge = [weak, listener, pending, token] {
    auto self = weak.lock();
    if (!self) return;
    {
      std::lock_guard lock(self->mu_);
      listener->uris.insert(pending->uris.begin(), pending->uris.end());
      self->listeners_.push_back(listener);
    }
    // The client went away while the resources were being subscribed: ended at once (which
    // also unsubscribes them), never left behind holding the task busy.
    if (token->cancelled()) return self->CancelListen(listener->id);
    json agreed = pending->agreed;
    // In the order asked for (the answers came in any order).
    json uris = json::array();
    for (const std::string& uri : pending->wanted)
      if (std::find(pending->uris.begin(), pending->uris.end(), uri) != pending->uris.end())
        uris.push_back(uri);
    if (!uris.empty()) agreed["resourceSubscriptions"] = std::move(uris);
    listener->sink(mcp::Notification{
        "notifications/subscriptions/acknowledged",
        json{{"notifications", std::move(agreed)},
             {"_meta", {{"io.modelcontextprotocol/subscriptionId", listener->id}}}}});
  };
  if (wanted.empty()) return acknowledge();
  for (const std::string& uri : wanted) {
    Exchange sub;
    sub.reply = [pending, uri, acknowledge](mcp::Message m) {
      bool last;
      {
        std::lock_guard lock(pending->mu);
        if (std::holds_alternative<mcp::Response>(m)) pending->uris.push_back(uri);
        last = --pending->left == 0;
      }
      if (last) acknowledge();
    };
    HandleRequest(std::make_shared<const mcp::Request>(mcp::Request{
                      mcp::Id("listen-" + listener->request_id.ToString() + "-" + uri),
                      "resources/subscribe", json{{"uri", uri}}}),
                  std::move(sub));
  }
}

bool McpSession::DeliverToListeners(const mcp::Message& message) {
  const auto* note = std::get_if<mcp::Notification>(&message);
  if (note == nullptr) return false;
  std::vector<std::shared_ptr<Listener>> to;
  {
    std::lock_guard lock(mu_);
    for (auto& l : listeners_) {
      if ((note->method == "notifications/tools/list_changed" && l->tools) ||
          (note->method == "notifications/prompts/list_changed" && l->prompts) ||
          (note->method == "notifications/resources/list_changed" && l->resources) ||
          (note->method == "notifications/resources/updated" && note->params &&
           note->params->is_object() && note->params->contains("uri") &&
           (*note->params)["uri"].is_string() &&
           l->uris.count((*note->params)["uri"].get<std::string>())))
        to.push_back(l);
    }
  }
  for (auto& l : to) {
    json params = note->params && note->params->is_object() ? *note->params : json::object();
    if (!params.contains("_meta") || !params["_meta"].is_object()) params["_meta"] = json::object();
    params["_meta"]["io.modelcontextprotocol/subscriptionId"] = l->id;
    l->sink(mcp::Notification{note->method, std::move(params)});
  }
  return !to.empty();
}

void McpSession::CancelListen(const json& request_id) {
  std::set<std::string> dropped;
  {
    std::lock_guard lock(mu_);
    std::erase_if(listeners_, [&](const std::shared_ptr<Listener>& l) {
      if (l->id != request_id) return false;
      dropped.insert(l->uris.begin(), l->uris.end());
      return true;
    });
    // Still wanted by another subscription of this task: kept.
    for (const auto& l : listeners_)
      for (const std::string& uri : l->uris) dropped.erase(uri);
  }
  if (closed_.load()) return;
  for (const std::string& uri : dropped)
    HandleRequest(std::make_shared<const mcp::Request>(mcp::Request{
                      mcp::Id("unlisten-" + uri), "resources/unsubscribe", json{{"uri", uri}}}),
                  Exchange{});
}

void McpSession::EndListeners() {
  std::vector<std::shared_ptr<Listener>> ending;
  {
    std::lock_guard lock(mu_);
    ending.swap(listeners_);
  }
  // Ended by warden (the context closes): the listen request is answered, gracefully.
  for (auto& l : ending)
    l->reply(mcp::Response{l->request_id,
                           json{{"resultType", "complete"},
                                {"_meta", {{"io.modelcontextprotocol/subscriptionId", l->id}}}}});
}

void McpSession::DropParked() {
  std::map<std::string, std::shared_ptr<Parked>> parked;
  {
    std::lock_guard lock(mu_);
    parked.swap(parked_);
  }
  for (auto& [handle, p] : parked) {
    std::lock_guard lock(p->mu);
    p->done = true;
    p->state_id.clear();
    if (p->expiry) p->expiry->cancel();
    if (p->round_timer) p->round_timer->cancel();
  }
}

bool McpSession::busy() const {
  std::lock_guard lock(mu_);
  return !in_flight_.empty() || !parked_.empty() || !listeners_.empty();
}

void McpSession::HandleModern(mcp::Request request, Exchange exchange,
                              std::optional<mcp::RequestMeta> read) {
  Touch();
  RedactForClient(exchange);
  auto reply_now = [&](mcp::Message m) {
    if (const auto* err = std::get_if<mcp::ErrorResponse>(&m))
      core_.AuditRefusal(caller_, "", request.method, err->message);
    if (exchange.reply) exchange.reply(std::move(m));
  };
  if (closed_.load())
    return reply_now(mcp::MakeError(request.id, mcp::kInvalidRequest, "the task has ended"));
  // The client's envelope belongs to its hop to warden: it is taken off the request once (by
  // the edge that parsed it when that edge has read it already, as HTTP does to check the mirror
  // headers), so that what the pipeline and the upstreams see of the call is without it (a 2026
  // upstream gets warden's own envelope from the upstream client, a 2025 one none). What it
  // says goes with the call on its own.
  mcp::RequestMeta meta;
  if (read) {
    meta = std::move(*read);
  } else if (auto bad = mcp::TakeRequestMeta(request, meta)) {
    return reply_now(mcp::MakeError(request.id, mcp::kInvalidParams, *bad));
  }
  if (!mcp::IsModernVersion(meta.protocol_version))
    return reply_now(mcp::UnsupportedVersion(request.id, meta.protocol_version));
  if (mcp::RemovedInModern(request.method))
    return reply_now(mcp::MakeError(request.id, mcp::kMethodNotFound,
                                    "Method not found: " + request.method +
                                        " (removed in protocol version 2026-07-28)"));
  if (!initialized_.load()) {
    // The context's first request takes the upstream instances (a failed start is tried again
    // by the next request); the others do not wait on the lock.
    std::lock_guard start(start_mu_);
    if (!initialized_.load()) {
      if (!options_.requested_scope.empty()) {
        std::shared_ptr<const policy::Policy> policy = core_.policy().Current();
        if (!policy) return reply_now(mcp::MakeError(request.id, mcp::kInternalError, "no policy is in force"));
        auto scope = identity::NarrowScope(*policy, caller_, options_.requested_scope);
        if (!scope) return reply_now(mcp::MakeError(request.id, mcp::kInvalidParams, scope.status().message()));
        caller_.scope = *scope;
      }
      // warden speaks 2025-11-25 to its upstreams, offering every question a client may be
      // asked: a task context relays each one as input_required, to a request that declared the
      // capability (or answers that request -32021).
      const json offered = {{"sampling", json::object()},
                            {"elicitation", json::object()},
                            {"roots", {{"listChanged", true}}}};
      if (auto refused = StartUpstreams(request, offered, meta.client_info,
                                        std::string(mcp::LatestVersion())))
        return reply_now(std::move(*refused));
      initialized_ = true;
      client_ready_ = true;
    }
    // Later requests keep what they say of their client to themselves (each call's questions
    // are checked against its own request's capabilities): nothing per request is copied here.
  }
  if (request.method == "server/discover") return reply_now(Discover(request));
  if (request.method == "subscriptions/listen") return Listen(request, std::move(exchange));
  const json* params = request.params && request.params->is_object() ? &*request.params : nullptr;
  if (params && params->contains("requestState"))
    return ResumeModernCall(request, std::move(exchange), std::move(meta.client_capabilities),
                            meta.log_level);
  // Answers without a state resume nothing of warden's: the request is a new call, and the
  // answers go along to the upstream (a 2026 upstream may take answers it asked for with no
  // state of its own; a 2025 one never sees them: the upstream client drops them).
  StartModernCall(std::move(request), std::move(exchange), std::move(meta.client_capabilities),
                  meta.log_level);
}

mcp::Message McpSession::Discover(const mcp::Request& request) {
  json versions = json::array({std::string(mcp::kModernVersion)});
  for (std::string_view v : mcp::kSupportedVersions) versions.push_back(std::string(v));
  json result = {
      {"resultType", "complete"},
      {"supportedVersions", std::move(versions)},
      {"capabilities", ModernCapabilities()},
      {"_meta",
       {{mcp::kMetaServerInfo, {{"name", "warden"}, {"version", core_.options().server_version}}}}},
      {"instructions",
       "warden decides every tool call by policy and records it in an audit log. Denied calls say "
       "why."},
      {"ttlMs", kListTtlMs},
      {"cacheScope", "private"},
  };
  return mcp::Response{request.id, std::move(result)};
}

void McpSession::StartModernCall(mcp::Request request, Exchange exchange, json caps,
                                 const std::string& log_level) {
  // Most calls never park: the record is cheap until they do (no handle, no digest yet), and it
  // holds the one copy of the request the pipeline reads.
  auto parked = std::make_shared<Parked>();
  parked->caps = std::move(caps);
  parked->log_level = LogLevelRank(log_level);
  parked->method = request.method;
  parked->current_id = request.id;
  parked->current.related = std::move(exchange.related);
  parked->current.reply = ModernReply(request.method, std::move(exchange.reply));
  parked->original = std::make_shared<const mcp::Request>(std::move(request));
  std::weak_ptr<McpSession> weak = weak_from_this();
  Exchange inner;
  inner.waiting_for_client = parked->waiting;
  inner.client_capabilities = parked->caps;
  inner.on_start = [parked, outer = std::move(exchange.on_start)](std::shared_ptr<CancelToken> t) {
    {
      std::lock_guard lock(parked->mu);
      parked->cancel = t;
    }
    if (outer) outer(std::move(t));
  };
  // What the call sends before its result: a question for the client (elicitation, sampling,
  // roots; warden's own in-band approval or an upstream's) parks the call and ends this round
  // with input_required; anything else (progress) goes to the request answering now.
  inner.related = [weak, parked](const mcp::Message& m) {
    auto self = weak.lock();
    if (!self) return;
    if (const auto* question = std::get_if<mcp::Request>(&m)) {
      const std::string key =
          question->id.AsString() ? *question->id.AsString() : question->id.ToString();
      // The request answering now must have declared what the question needs; if not, it is
      // answered -32021 naming the capability, and the question fails.
      const char* needs = question->method == "sampling/createMessage" ? "sampling"
                          : question->method == "elicitation/create"   ? "elicitation"
                          : question->method == "roots/list"           ? "roots"
                                                                       : nullptr;
      json caps;
      {
        std::lock_guard lock(parked->mu);
        caps = parked->caps;
      }
      if (needs == nullptr || !caps.is_object() || !caps.contains(needs)) {
        std::function<void(mcp::Message)> reply;
        mcp::Id id;
        {
          std::lock_guard lock(parked->mu);
          reply = std::move(parked->current.reply);
          id = parked->current_id;
          parked->current = {};
        }
        self->HandleClientReply(mcp::MakeError(
            mcp::Id(key), mcp::kMethodNotFound,
            std::string("the client does not support ") + (needs ? needs : question->method)));
        if (reply) {
          mcp::ErrorResponse error = mcp::MakeError(
              id, mcp::kMissingRequiredClientCapability,
              std::string("this request needs the client capability '") +
                  (needs ? needs : question->method) + "', which its _meta does not declare");
          error.data = json{{"requiredCapabilities", {{needs ? needs : "unknown", json::object()}}}};
          reply(std::move(error));
        }
        return;
      }
      bool post = false;
      {
        std::lock_guard lock(parked->mu);
        if (parked->done) return;
        parked->asked.emplace_back(key, json{{"method", question->method},
                                        {"params", question->params.value_or(json::object())}});
        post = !parked->round_posted;
        parked->round_posted = true;
      }
      if (post) {
        // Posted after a moment, so that questions asked together go out together. The timer
        // is held by the call (a timer dropped is a timer cancelled).
        auto timer = self->core_.PostAfter(kRoundGather, [weak, parked] {
          if (auto s = weak.lock()) s->EndRound(parked);
        });
        std::lock_guard lock(parked->mu);
        parked->round_timer = std::move(timer);
      }
      return;
    }
    MessageSink related;
    {
      std::lock_guard lock(parked->mu);
      related = parked->current.related;
      // A log message only at or above the level the request asked for, and none unasked.
      if (const auto* note = std::get_if<mcp::Notification>(&m);
          note && note->method == "notifications/message") {
        const json* p = note->params && note->params->is_object() ? &*note->params : nullptr;
        const int level = p && p->contains("level") && (*p)["level"].is_string()
                              ? LogLevelRank((*p)["level"].get<std::string>())
                              : -1;
        if (parked->log_level < 0 || level < parked->log_level) return;
      }
    }
    if (related) related(m);
  };
  inner.reply = [weak, parked](mcp::Message m) {
    std::function<void(mcp::Message)> reply;
    mcp::Id id;
    if (auto self = weak.lock()) m = self->WrapUpstreamInput(*parked->original, std::move(m));
    {
      std::lock_guard lock(parked->mu);
      parked->done = true;
      if (parked->current.reply) {
        reply = std::move(parked->current.reply);
        id = parked->current_id;
        parked->current = {};
      } else {
        parked->final = std::move(m);  // for the retry to come
        return;
      }
      if (parked->expiry) parked->expiry->cancel();
    }
    // A call that never parked has no handle and is in no table.
    if (auto self = parked->handle.empty() ? nullptr : weak.lock()) {
      std::lock_guard lock(self->mu_);
      self->parked_.erase(parked->handle);
    }
    // The answer names the request answering now (a retry has its own id).
    if (auto* ok = std::get_if<mcp::Response>(&m)) ok->id = id;
    if (auto* err = std::get_if<mcp::ErrorResponse>(&m)) err->id = id;
    reply(std::move(m));
  };
  HandleRequest(parked->original, std::move(inner));
}

void McpSession::EndRound(const std::shared_ptr<Parked>& parked) {
  std::function<void(mcp::Message)> reply;
  mcp::Id id;
  json result;
  {
    std::lock_guard lock(parked->mu);
    parked->round_posted = false;
    if (parked->done || !parked->current.reply || parked->asked.empty()) return;
    if (parked->digest.empty()) parked->digest = CallDigest(*parked->original);
    if (parked->handle.empty()) parked->handle = "pk_local_" + RandomHex(16);
    RequestState state;
    state.id = RandomHex(16);
    state.principal = PrincipalOf(caller_);
    state.task = options_.task;
    state.method = parked->method;
    state.call = parked->digest;
    state.expires_ms = RequestStateSealer::NowMs() +
                       std::chrono::duration_cast<std::chrono::milliseconds>(kParkedFor).count();
    state.kind = "parked";
    state.ref = parked->handle;
    const std::string sealed = core_.request_states().Seal(state);
    json requests = json::object();
    for (const auto& [key, question] : parked->asked) requests[key] = question;
    reply = std::move(parked->current.reply);
    id = parked->current_id;
    parked->current = {};
    if (sealed.empty()) {
      result = json();  // the cipher failed: answered as an error below
    } else {
      parked->state_id = state.id;
      parked->waiting->store(true);
      result = {{"resultType", "input_required"},
                {"inputRequests", std::move(requests)},
                {"requestState", sealed}};
    }
  }
  if (result.is_null())
    return reply(mcp::MakeError(id, mcp::kInternalError, "warden could not seal the request state"));
  bool fresh = false, full = false;
  {
    std::lock_guard lock(mu_);
    if (!parked_.count(parked->handle)) {
      full = parked_.size() >= kMaxParkedPerTask;
      if (!full) {
        parked_[parked->handle] = parked;
        fresh = true;
      }
    }
  }
  if (full) {
    // Too many calls of this task wait for their client: this one is not kept.
    return reply(mcp::MakeError(id, mcp::kInternalError,
                                "too many calls of this task wait for input (at most " +
                                    std::to_string(kMaxParkedPerTask) + "); answer those first"));
  }
  if (fresh) {
    // Unanswered past the state's expiry: each question fails, which ends the call; nobody
    // waits for its result any more.
    std::weak_ptr<McpSession> weak = weak_from_this();
    auto timer = core_.PostAfter(
        std::chrono::duration_cast<std::chrono::milliseconds>(kParkedFor), [weak, parked] {
          auto self = weak.lock();
          if (!self) return;
          std::vector<std::string> keys;
          {
            std::lock_guard lock(parked->mu);
            parked->state_id.clear();
            parked->current = {};
            for (const auto& [key, question] : parked->asked) keys.push_back(key);
            parked->asked.clear();
          }
          {
            std::lock_guard lock(self->mu_);
            self->parked_.erase(parked->handle);
          }
          for (const std::string& key : keys)
            self->HandleClientReply(mcp::MakeError(mcp::Id(key), -32001,
                                                   "the client did not retry in time"));
        });
    std::lock_guard lock(parked->mu);
    parked->expiry = timer;
  }
  reply(mcp::Response{id, std::move(result)});
}

constexpr char kStashPrefix[] = "warden-stash:";
constexpr size_t kMaxStashed = 256;

Status McpSession::StashUpstreamState(json& result) {
  std::optional<std::string> inner;
  if (auto it = result.find("requestState"); it != result.end()) {
    if (!it->is_string() || it->get_ref<const std::string&>().size() > kMaxInnerRequestState)
      return Status::Error("its requestState is not a string of at most " +
                           std::to_string(kMaxInnerRequestState) + " bytes");
    inner = it->get<std::string>();
  }
  const std::string key = kStashPrefix + RandomHex(16);
  {
    std::lock_guard lock(mu_);
    if (stashed_.size() >= kMaxStashed) {
      auto oldest = std::min_element(stashed_.begin(), stashed_.end(), [](const auto& a, const auto& b) {
        return a.second.first < b.second.first;
      });
      stashed_.erase(oldest);
    }
    stashed_[key] = {++stash_seq_, std::move(inner)};
  }
  result["requestState"] = key;
  return Status::Ok();
}

mcp::Message McpSession::WrapUpstreamInput(const mcp::Request& original, mcp::Message message) {
  auto* ok = std::get_if<mcp::Response>(&message);
  if (ok == nullptr || !ok->result.is_object() ||
      ok->result.value("resultType", "") != "input_required")
    return message;
  json& result = ok->result;
  // Only a relayed upstream answers input_required through the pipeline, and its state was
  // stashed on arrival: anything else is not passed on (fail closed).
  const std::string key = result.value("requestState", "");
  std::optional<std::optional<std::string>> inner;
  {
    std::lock_guard lock(mu_);
    if (auto it = stashed_.find(key); it != stashed_.end()) {
      inner = std::move(it->second.second);
      stashed_.erase(it);
    }
  }
  if (!inner)
    return mcp::MakeError(ok->id, mcp::kInternalError,
                          "an input_required result without the state warden set aside for it");
  RequestState state;
  state.id = RandomHex(16);
  state.principal = PrincipalOf(caller_);
  state.task = options_.task;
  state.method = original.method;
  state.call = CallDigest(original);
  state.expires_ms = RequestStateSealer::NowMs() +
                     std::chrono::duration_cast<std::chrono::milliseconds>(kParkedFor).count();
  state.kind = "upstream";
  state.inner = std::move(*inner);
  const std::string sealed = core_.request_states().Seal(state);
  if (sealed.empty() || sealed.size() > 64 * 1024)
    return mcp::MakeError(ok->id, mcp::kInternalError, "warden could not seal the request state");
  // Always warden's state, even when the upstream gave none: the retry must come from this
  // principal and task, for this call, in time.
  result["requestState"] = sealed;
  return message;
}

void McpSession::RefuseState(const mcp::Request& request, const Exchange& exchange,
                             const std::string& why) {
  core_.AuditRefusal(caller_, "", request.method, "requestState refused: " + why);
  if (exchange.reply) exchange.reply(mcp::MakeError(request.id, mcp::kInvalidParams, why));
}

void McpSession::ResumeModernCall(const mcp::Request& request, Exchange exchange, json caps,
                                  const std::string& log_level) {
  const json& params = *request.params;
  auto state_text = params.find("requestState");
  if (state_text == params.end() || !state_text->is_string())
    return RefuseState(request, exchange,
                       "params.requestState must be the string warden returned with "
                       "input_required (inputResponses alone resume nothing)");
  auto responses = params.find("inputResponses");
  if (responses != params.end() && !responses->is_object())
    return RefuseState(request, exchange, "params.inputResponses must be an object");
  auto opened = core_.request_states().Open(state_text->get<std::string>());
  if (!opened) return RefuseState(request, exchange, opened.status().message());
  const RequestState& state = *opened;
  if (state.expires_ms < RequestStateSealer::NowMs())
    return RefuseState(request, exchange, "requestState has expired; send the request again");
  if (state.principal != PrincipalOf(caller_))
    return RefuseState(request, exchange, "requestState was issued to another caller");
  if (state.task != options_.task)
    return RefuseState(request, exchange, "requestState belongs to another task");
  if (state.method != request.method)
    return RefuseState(request, exchange, "requestState was issued for " + state.method);
  if (state.call != CallDigest(request))
    return RefuseState(request, exchange,
                       "requestState was issued for another call (its parameters differ)");
  if (state.kind == "upstream") {
    // A relayed upstream's input_required: the retry is a new call, carrying the upstream's own
    // state (unwrapped) and the client's answers, through the whole pipeline again.
    switch (core_.used_states().MarkUsed(state.id, state.expires_ms, RequestStateSealer::NowMs())) {
      case UsedStates::Use::kFirst:
        break;
      case UsedStates::Use::kAlreadyUsed:
        return RefuseState(request, exchange,
                           "requestState was already used (each one resumes a call once)");
      case UsedStates::Use::kFull:
        return RefuseState(request, exchange,
                           "too many request states are in use on this gateway; send the request "
                           "again later");
    }
    mcp::Request retry = request;
    retry.params->erase("requestState");
    if (state.inner) (*retry.params)["requestState"] = *state.inner;
    return StartModernCall(std::move(retry), std::move(exchange), std::move(caps), log_level);
  }
  if (state.kind != "parked")
    return RefuseState(request, exchange, "requestState is of a kind this gateway does not resume");
  std::shared_ptr<Parked> parked;
  {
    std::lock_guard lock(mu_);
    if (auto it = parked_.find(state.ref); it != parked_.end()) parked = it->second;
  }
  if (!parked)
    return RefuseState(request, exchange,
                       "requestState names a call that has ended; send the request again");
  std::vector<std::pair<std::string, json>> answers;
  std::optional<mcp::Message> final;
  std::function<void(mcp::Message)> reply = ModernReply(request.method, std::move(exchange.reply));
  bool missing = false;
  std::shared_ptr<CancelToken> cancel;
  {
    std::lock_guard lock(parked->mu);
    if (parked->state_id.empty() || parked->state_id != state.id) {
      // Unlocked: RefuseState audits (a blocking write).
    } else {
      parked->state_id.clear();  // single use
      if (parked->final) {
        final = std::move(parked->final);
        parked->final.reset();
      } else {
        parked->current.reply = std::move(reply);
        parked->current.related = std::move(exchange.related);
        parked->current_id = request.id;
        parked->caps = std::move(caps);
        parked->log_level = LogLevelRank(log_level);
        cancel = parked->cancel;
        std::vector<std::pair<std::string, json>> still;
        for (auto& [key, question] : parked->asked) {
          if (responses != params.end() && responses->contains(key))
            answers.emplace_back(key, (*responses)[key]);
          else
            still.emplace_back(key, std::move(question));
        }
        parked->asked = std::move(still);
        missing = !parked->asked.empty();
        if (!missing) parked->waiting->store(false);
      }
      state_text = params.end();  // marks: accepted
    }
  }
  if (state_text != params.end()) {
    exchange.reply = std::move(reply);
    return RefuseState(request, exchange,
                       "requestState was already used (each one resumes a call once)");
  }
  if (final) {
    {
      std::lock_guard lock(mu_);
      parked_.erase(parked->handle);
    }
    if (auto* ok = std::get_if<mcp::Response>(&*final)) ok->id = request.id;
    if (auto* err = std::get_if<mcp::ErrorResponse>(&*final)) err->id = request.id;
    return reply(std::move(*final));
  }
  // The retry's stream now carries the call: its closing cancels it.
  if (cancel && exchange.on_start) exchange.on_start(cancel);
  for (auto& [key, answer] : answers) {
    // Handed over as the client's answer to the question warden sent (a client's result; an
    // object that is a JSON-RPC error stands for the client refusing).
    if (answer.is_object() && answer.contains("error") && answer["error"].is_object()) {
      const json& e = answer["error"];
      HandleClientReply(mcp::MakeError(
          mcp::Id(key), e.contains("code") && e["code"].is_number_integer() ? e["code"].get<int>() : mcp::kInternalError,
          e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>()
                                                            : "the client refused"));
    } else {
      HandleClientReply(mcp::Response{mcp::Id(key), answer});
    }
  }
  // A question left unanswered is asked again.
  if (missing) EndRound(parked);
}

}  // namespace warden::gateway
