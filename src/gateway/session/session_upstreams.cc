#include "gateway/session/session_upstreams.h"
#include "gateway/trifecta/flow_tracker.h"

#include <chrono>
#include <cstdio>
#include <mutex>

#include "gateway/credentials/broker.h"
#include "gateway/gateway.h"
#include "mcp/modern.h"

namespace warden::gateway {

using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// How long a request an upstream makes of the client (sampling: a model call; elicitation: a
// human) may take before the upstream gets an error.
constexpr auto kClientAnswerTimeout = 300s;

mcp::Message LocalError(const mcp::Id& id, int code, std::string message) {
  return mcp::MakeError(id, code, std::move(message));
}

// The part of a URI template before its first expression: enough to route a read of a URI that
// no listing named to the server whose templates could have produced it.
std::string TemplatePrefix(const std::string& tmpl) { return tmpl.substr(0, tmpl.find('{')); }

// Progress tokens and the ids of requests made of the client: unique in the process, since
// several sessions share an instance and each keeps only its own.
std::atomic<uint64_t> g_counter{0};
std::string NextToken() { return "warden-" + std::to_string(g_counter.fetch_add(1)); }

}  // namespace

SessionUpstreams::~SessionUpstreams() { StopAll(); }

Status SessionUpstreams::Start(const policy::Policy& policy, const json& client_caps,
                               const json& client_info, const std::string& protocol_version) {
  if (policy.upstreams.empty()) return Status::Ok();
  std::shared_ptr<InstanceListener> self = shared_from_this();
  for (const auto& [name, up] : policy.upstreams) {
    auto acquired = core_.instances().Acquire(policy, name, up, session_.caller(), session_.id(),
                                              client_caps, client_info, protocol_version, self);
    if (!acquired.instance) {
      at_cap_ = acquired.at_cap;
      StopAll();  // lets go of those already taken
      return acquired.error.Wrap("upstream " + name);
    }
    auto entry = std::make_unique<Entry>();
    entry->name = name;
    entry->prefix = up.prefix;
    entry->instance = std::move(acquired.instance);
    entries_.push_back(std::move(entry));
  }
  return Status::Ok();
}

SessionUpstreams::Entry* SessionUpstreams::EntryOf(const UpstreamInstance& instance) {
  for (auto& entry : entries_) {
    if (entry->instance.get() == &instance) return entry.get();
  }
  return nullptr;
}

void SessionUpstreams::WaitListed(const std::vector<Entry*>& entries, bool through_restarts,
                                  McpSession::InFlight& flight, std::function<void()> done) {
  if (entries.empty()) return done();
  struct Wait {
    std::mutex mu;
    size_t left;
    std::function<void()> done;
    std::vector<std::pair<std::shared_ptr<UpstreamInstance>, uint64_t>> tickets;
  };
  auto wait = std::make_shared<Wait>();
  wait->left = entries.size();
  wait->done = std::move(done);
  auto one_done = [wait](bool) {
    std::function<void()> done;
    {
      std::lock_guard lock(wait->mu);
      if (--wait->left > 0) return;
      done = std::move(wait->done);
    }
    if (done) done();
  };
  const auto timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(core_.options().upstream_ready_timeout);
  for (Entry* entry : entries) {
    uint64_t ticket = entry->instance->WhenListed(timeout, through_restarts, one_done);
    if (ticket == 0) continue;
    std::lock_guard lock(wait->mu);
    wait->tickets.emplace_back(entry->instance, ticket);
  }
  // A cancelled request (the client cancelled, the session closes, a kill switch) stops waiting.
  flight.cancel->OnCancel([wait] {
    std::vector<std::pair<std::shared_ptr<UpstreamInstance>, uint64_t>> tickets;
    {
      std::lock_guard lock(wait->mu);
      tickets = wait->tickets;
    }
    for (auto& [instance, ticket] : tickets) instance->Abandon(ticket);
  });
}

void SessionUpstreams::Tools(McpSession::InFlight& flight,
                             std::function<void(std::vector<json>)> done) {
  std::vector<Entry*> all;
  for (auto& entry : entries_) all.push_back(entry.get());
  auto self = shared_from_this();
  McpSession::InFlight* f = &flight;
  WaitListed(all, /*through_restarts=*/false, flight, [self, f, done = std::move(done)] {
    f->cancel->OnCancel({});
    std::vector<json> out;
    for (auto& entry : self->entries_) {
      auto listing = entry->instance->Listed();
      if (!listing) continue;
      for (const json& t : listing->tools) {
        const std::string name = t["name"].get<std::string>();
        if (!listing->shown.count(name)) continue;
        json exposed = t;
        exposed["name"] = ExposedName(entry->prefix, name);
        out.push_back(std::move(exposed));
      }
    }
    done(std::move(out));
  });
}

void SessionUpstreams::Route(const std::shared_ptr<CallContext>& call, const json& params,
                             McpSession::InFlight& flight, std::function<void()> then) {
  // The upstreams whose prefix the name carries (every one with an empty prefix could serve it).
  std::vector<Entry*> candidates, waiting;
  for (auto& entry : entries_) {
    if (!entry->prefix.empty() &&
        !(call->tool.size() > entry->prefix.size() + 2 &&
          call->tool.compare(0, entry->prefix.size() + 2, entry->prefix + "__") == 0))
      continue;
    candidates.push_back(entry.get());
    if (!entry->instance->HasListing()) waiting.push_back(entry.get());
  }
  if (waiting.empty()) {
    RouteNow(*call, params, flight, candidates);
    return then();
  }
  // Not listed yet (starting, or restarting before its first listing): wait without a thread.
  auto self = shared_from_this();
  McpSession::InFlight* f = &flight;
  WaitListed(waiting, /*through_restarts=*/true, flight,
             [self, call, params, f, candidates, then = std::move(then)] {
               f->cancel->OnCancel({});
               self->RouteNow(*call, params, *f, candidates);
               then();
             });
}

void SessionUpstreams::RouteNow(CallContext& call, const json& params, McpSession::InFlight& flight,
                                const std::vector<Entry*>& candidates) {
  Entry* not_ready = nullptr;
  for (Entry* entry : candidates) {
    const std::string upstream_name =
        entry->prefix.empty() ? call.tool : call.tool.substr(entry->prefix.size() + 2);
    auto listing = entry->instance->Listed();
    if (!listing) {
      if (!not_ready) not_ready = entry;
      continue;
    }
    const json* definition = listing->Find(upstream_name);
    if (definition == nullptr) continue;
    call.server = entry->name;
    flight.upstream = entry->name;
    // A tool whose definition changed since it was pinned stays unexecutable: without `forward`
    // the execute stage answers it as an unknown tool, as tools/list hides it.
    if (!listing->shown.count(upstream_name)) return;
    call.tool_definition = *definition;
    // What the upstream lists for the tool now (null once it is gone or no longer the pinned
    // one): a call that waited for a person runs only if the tool is still what they saw.
    call.definition_now = [self = shared_from_this(), e = entry, upstream_name]() -> json {
      auto now = e->instance->Listed();
      if (!now || !now->shown.count(upstream_name)) return nullptr;
      const json* definition = now->Find(upstream_name);
      return definition ? *definition : json(nullptr);
    };
    Entry* e = entry;
    McpSession::InFlight* f = &flight;
    json forwarded = params;
    forwarded["name"] = upstream_name;
    call.forward = [self = shared_from_this(), e, f, forwarded](CallContext& c,
                                                                CallContext::ForwardDone done) {
      json p = forwarded;
      p["arguments"] = c.arguments;
      self->SendAsync(*e, "tools/call", std::move(p), f,
                      [name = e->name, done = std::move(done)](mcp::Message reply) {
                        done(ToolResultOf(name, reply));
                      });
    };
    return;
  }
  if (!not_ready) return;  // nobody serves it: the execute stage says unknown tool
  // The upstream the name points to never became ready in time: the call fails (audited, after
  // the policy decided it) naming it, rather than pretending the tool does not exist.
  call.server = not_ready->name;
  flight.upstream = not_ready->name;
  std::string why = not_ready->instance->error();
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(core_.options().upstream_ready_timeout)
          .count();
  std::string message = "upstream " + not_ready->name + " is not ready";
  message += why.empty() ? " (still starting after " + std::to_string(waited) + " ms)" : ": " + why;
  call.forward = [message](CallContext&, CallContext::ForwardDone done) {
    done(Status::Error(message));
  };
}

Result<CallResult> SessionUpstreams::ToolResultOf(const std::string& upstream,
                                                  const mcp::Message& reply) {
  if (auto* err = std::get_if<mcp::ErrorResponse>(&reply)) {
    // A 2026 upstream's own protocol errors (-32021 MissingRequiredClientCapability: the request
    // did not declare what the tool needs) are about the request, not the tool: the client gets
    // them as they are, with their data.
    if (mcp::IsModernErrorCode(err->code)) {
      CallResult r;
      r.rpc_error = true;
      r.is_error = true;
      r.value = {{"code", err->code}, {"message", err->message}};
      if (err->data) r.value["data"] = *err->data;
      return r;
    }
    // The upstream refused the arguments or the name: the agent sees it as a tool error.
    if (err->code == mcp::kInvalidParams)
      return CallResult::FromText("upstream " + upstream + " refused the call: " + err->message,
                                  true);
    return Status::Error("upstream " + upstream + ": " + err->message);
  }
  CallResult r;
  r.value = std::get<mcp::Response>(reply).result;
  if (!r.value.is_object()) r.value = json::object();
  const auto is_error = r.value.find("isError");
  r.is_error = is_error != r.value.end() && is_error->is_boolean() && is_error->get<bool>();
  return r;
}

void SessionUpstreams::SendAsync(Entry& entry, const std::string& method, json params,
                                 McpSession::InFlight* flight,
                                 std::function<void(mcp::Message)> done) {
  if (stopped_.load()) return done(LocalError(0, mcp::kInternalError, "the session has ended"));
  std::string token;
  if (flight && params.is_object() && params.contains("_meta") && params["_meta"].is_object() &&
      params["_meta"].contains("progressToken")) {
    // Two sessions (or two calls) may use the same token: the upstream sees one of ours.
    token = NextToken();
    {
      std::lock_guard lock(mu_);
      progress_[token] = {params["_meta"]["progressToken"],
                          flight->related ? flight->related : MessageSink{}, flight->call};
    }
    params["_meta"]["progressToken"] = token;
  }
  upstream::Client* client = &entry.client();
  // The credentials stage's headers for this call (a token minted for it), when it chose any.
  std::map<std::string, std::string> headers;
  bool has_headers = false;
  if (flight) {
    if (std::shared_ptr<CallContext> call = flight->call.lock()) {
      if (const auto* chosen = call->state.Find<UpstreamCallHeaders>(); chosen && chosen->set) {
        headers = chosen->headers;
        has_headers = true;
      }
    }
  }
  // The reply may come before the cancel action is registered below (on another thread, or on
  // this one inside Send): the action must then not be registered at all, since it would outlive
  // the request. Recursive: a cancel action run at once may complete the request on this thread.
  struct Sent {
    std::recursive_mutex mu;
    bool finished = false;
  };
  auto sent = std::make_shared<Sent>();
  auto on_reply = [self = shared_from_this(), flight, token, sent,
                   done = std::move(done)](mcp::Message reply) mutable {
    {
      std::lock_guard lock(sent->mu);
      if (sent->finished) return;
      sent->finished = true;
      if (flight) flight->cancel->OnCancel({});
    }
    if (!token.empty()) {
      std::lock_guard lock(self->mu_);
      self->progress_.erase(token);
    }
    done(std::move(reply));
  };
  std::function<void(mcp::Message)> reply_to = std::move(on_reply);
  upstream::SendOptions options;
  if (has_headers) options.headers = std::move(headers);
  const bool may_ask = method == "tools/call" || method == "prompts/get" || method == "resources/read";
  if (may_ask) {
    // A 2026 upstream is told, per request, what the client behind this call can answer: a 2026
    // request's own declaration, else the 2025 session's. A shared instance is offered nothing
    // (its questions could not be told apart between users).
    json session_caps;
    const bool per_request = flight && !flight->client_capabilities.is_null();
    if (!per_request) session_caps = session_.client_capabilities();
    const json& declared = per_request ? flight->client_capabilities : session_caps;
    json caps = json::object();
    if (!entry.instance->shared_between_users() && declared.is_object())
      for (const char* cap : {"sampling", "elicitation", "roots"})
        if (auto it = declared.find(cap); it != declared.end()) caps[cap] = *it;
    // A 2026 request's call tells a 2025 upstream too, in the revision's own _meta key: its
    // initialize was offered every kind, and this one request may answer fewer (a 2026 upstream
    // gets the same value from the upstream client, which writes warden's envelope).
    if (session_.modern() && params.is_object()) params["_meta"][mcp::kMetaClientCapabilities] = caps;
    options.client_capabilities = std::move(caps);
  }
  if (session_.modern() && may_ask) {
    // A 2026 upstream's questions go back to the 2026 client as input_required, which it
    // answers in its retry (docs/requests.md, "An upstream's input_required").
    options.relay_input_required = true;
    reply_to = [self = shared_from_this(), entry = &entry,
                done = std::move(reply_to)](mcp::Message reply) mutable {
      auto* ok = std::get_if<mcp::Response>(&reply);
      if (!ok || !ok->result.is_object()) return done(std::move(reply));
      if (auto type = ok->result.find("resultType");
          type == ok->result.end() || *type != "input_required")
        return done(std::move(reply));
      // Set aside here, before the response stages see the upstream's opaque state.
      Status stashed = self->session_.StashUpstreamState(ok->result);
      if (!stashed.ok())
        return done(LocalError(0, mcp::kInternalError, "upstream " + entry->name + ": " + stashed.message()));
      self->VetQuestions(*entry, std::move(reply), std::move(done));
    };
  }
  const uint64_t handle = client->SendRequest(method, std::move(params), std::move(reply_to),
                                              std::move(options));
  if (flight) {
    std::lock_guard lock(sent->mu);
    if (!sent->finished) {
      flight->cancel->OnCancel(
          [client, handle, cancel = flight->cancel] { client->Cancel(handle, cancel->reason()); });
    }
  }
}

void SessionUpstreams::VetQuestions(Entry& entry, mcp::Message reply,
                                    std::function<void(mcp::Message)> done) {
  mcp::InputRequired asked;
  if (auto bad = mcp::ReadInputRequired(std::get<mcp::Response>(reply).result, asked))
    return done(LocalError(0, mcp::kInternalError, "upstream " + entry.name + ": " + *bad));
  if (asked.questions.empty()) return done(std::move(reply));
  std::vector<mcp::Request> questions;
  for (auto& [key, question] : asked.questions) questions.push_back(std::move(question));
  struct Tally {
    std::mutex mu;
    size_t left = 0;
    std::optional<std::string> refused;
    mcp::Message reply;
    std::function<void(mcp::Message)> done;
  };
  auto tally = std::make_shared<Tally>();
  tally->left = questions.size();
  tally->reply = std::move(reply);
  tally->done = std::move(done);
  auto self = shared_from_this();
  for (mcp::Request& question : questions) {
    core_.Post([self, entry = &entry, question = std::move(question), tally]() {
      json params = question.params.value_or(json::object());
      auto call = self->ContextFor(self->session_.caller(), self->session_.call_session(), *entry,
                                   question.method, params);
      // Allowed means: it may be asked. The asking is the client's, in its retry.
      auto may_ask = [id = question.id](std::function<void(mcp::Message)> asked) {
        asked(mcp::Response{id, json::object()});
      };
      self->session_.Decided(
          question, nullptr, std::move(call), std::move(may_ask),
          [tally, key = *question.id.AsString(), name = entry->name](mcp::Message decided) {
            std::function<void(mcp::Message)> done;
            mcp::Message out;
            {
              std::lock_guard lock(tally->mu);
              if (const auto* e = std::get_if<mcp::ErrorResponse>(&decided); e && !tally->refused)
                tally->refused = "upstream " + name + " asked the client '" + key +
                                 "', which warden refused: " + e->message;
              if (--tally->left > 0) return;
              done = std::move(tally->done);
              out = tally->refused ? mcp::Message(LocalError(0, mcp::kInvalidRequest, *tally->refused))
                                   : std::move(tally->reply);
            }
            done(std::move(out));
          });
    });
  }
}

std::shared_ptr<CallContext> SessionUpstreams::ContextFor(const identity::Caller& caller,
                                                          const std::string& session_id,
                                                          Entry& entry, const std::string& method,
                                                          const json& params) {
  auto call = std::make_shared<CallContext>();
  call->tenant = caller.tenant;
  call->user = caller.user;
  call->agent = caller.agent;
  call->scope = caller.scope;
  call->session = session_id;
  call->server = entry.name;
  call->tool = MethodToolName(entry.name, method);
  call->method = method;
  call->arguments = params.is_object() ? params : json::object();
  if (auto task = TaskFromMeta(params); task.ok()) call->task = *task;  // else: per session/caller
  // A task context's calls belong to its task, whatever the upstream's request says.
  if (session_.modern()) call->task = session_.options_.task;
  return call;
}

SessionUpstreams::Entry* SessionUpstreams::OwnerOfUri(const std::string& uri) {
  std::lock_guard lock(mu_);
  if (auto it = uri_owner_.find(uri); it != uri_owner_.end()) return it->second;
  Entry* best = nullptr;
  size_t best_len = 0;
  for (auto& [prefix, owner] : template_owner_) {
    if (uri.compare(0, prefix.size(), prefix) == 0 && prefix.size() >= best_len) {
      best = owner;
      best_len = prefix.size();
    }
  }
  if (best) return best;
  return nullptr;
}

void SessionUpstreams::AddTemplateOwner(std::string prefix, Entry* owner) {
  // Called under mu_. Every listing repeats the templates: keep each (prefix, owner) once, so a
  // long session that lists often does not grow the table.
  for (const auto& [p, o] : template_owner_)
    if (p == prefix && o == owner) return;
  template_owner_.emplace_back(std::move(prefix), owner);
}

SessionUpstreams::Entry* SessionUpstreams::ByExposedPrompt(const std::string& name,
                                                           std::string* upstream_name) {
  {
    std::lock_guard lock(mu_);
    if (auto it = prompt_owner_.find(name); it != prompt_owner_.end()) {
      *upstream_name = it->second.second;
      return it->second.first;
    }
  }
  for (auto& entry : entries_) {
    if (entry->prefix.empty()) {
      *upstream_name = name;
      return entry.get();
    }
    if (name.size() > entry->prefix.size() + 2 &&
        name.compare(0, entry->prefix.size() + 2, entry->prefix + "__") == 0) {
      *upstream_name = name.substr(entry->prefix.size() + 2);
      return entry.get();
    }
  }
  return nullptr;
}

void SessionUpstreams::ListAllAsync(Entry& entry, const std::string& method, const char* member,
                                    std::function<void(Result<json>)> done) {
  // One page at a time (following nextCursor, at most 100 pages), holding no thread between.
  struct Pages {
    json all = json::array();
    int page = 0;
    std::function<void(json cursor)> next;
  };
  auto pages = std::make_shared<Pages>();
  auto self = shared_from_this();
  Entry* e = &entry;
  // `next` holds the pages weakly (no cycle); the request in flight holds them.
  std::weak_ptr<Pages> weak = pages;
  pages->next = [self, e, method, member, weak, done = std::move(done)](json cursor) {
    auto held = weak.lock();
    if (!held) return;
    json params = json::object();
    if (!cursor.is_null()) params["cursor"] = std::move(cursor);
    self->SendAsync(
        *e, method, std::move(params), nullptr,
        [e, method, member, pages = held, done](mcp::Message reply) {
          if (auto* err = std::get_if<mcp::ErrorResponse>(&reply))
            return done(Status::Error(method + " on upstream " + e->name + ": " + err->message));
          const json& result = std::get<mcp::Response>(reply).result;
          if (result.is_object() && result.contains(member) && result[member].is_array()) {
            for (const json& item : result[member]) pages->all.push_back(item);
          }
          if (!result.is_object() || !result.contains("nextCursor") ||
              result["nextCursor"].is_null() || ++pages->page >= 100)
            return done(std::move(pages->all));
          pages->next(result["nextCursor"]);
        });
  };
  pages->next(json());
}

std::vector<SessionUpstreams::Entry*> SessionUpstreams::AllEntries() {
  std::vector<Entry*> all;
  for (auto& entry : entries_) all.push_back(entry.get());
  return all;
}

void SessionUpstreams::MergedList(const mcp::Request& request, McpSession::InFlight& flight,
                                  const policy::CallContext& who,
                                  std::function<void(mcp::Message)> reply) {
  const std::string m = request.method;
  const bool prompts = m == "prompts/list";
  const char* member = prompts                 ? "prompts"
                       : m == "resources/list" ? "resources"
                                               : "resourceTemplates";
  const char* cap = prompts ? "prompts" : "resources";
  const char* gate = prompts ? "prompts/get" : "resources/read";
  auto self = shared_from_this();
  McpSession::InFlight* f = &flight;
  // Waits for upstreams still starting without a thread; then lists every one the caller may
  // read from, at once, and merges them in the policy's order.
  WaitListed(AllEntries(), /*through_restarts=*/false, flight,
             [self, f, m, prompts, member, cap, gate, who, id = request.id,
              reply = std::move(reply)]() mutable {
               f->cancel->OnCancel({});
               std::shared_ptr<const policy::Policy> policy = self->core_.policy().Current();
               std::vector<Entry*> sources;
               for (auto& entry : self->entries_) {
                 if (!policy || entry->client().state() != upstream::State::kReady) continue;
                 if (!entry->client().info().capabilities.contains(cap)) continue;
                 if (!policy::Visible(*policy, who, MethodToolName(entry->name, gate), {}))
                   continue;
                 sources.push_back(entry.get());
               }
               struct Merge {
                 std::mutex mu;
                 std::vector<Result<json>> items;
                 size_t left;
               };
               auto merge = std::make_shared<Merge>();
               merge->items.assign(sources.size(), Status::Error("not listed"));
               merge->left = sources.size();
               auto finish = [self, merge, sources, prompts, member, id, reply = std::move(reply)] {
                 json merged = json::array();
                 {
                   std::lock_guard lock(self->mu_);
                   for (size_t k = 0; k < sources.size(); ++k) {
                     Entry* entry = sources[k];
                     if (!merge->items[k])
                       continue;  // one failing upstream does not hide the others
                     for (json& item : *merge->items[k]) {
                       if (!item.is_object()) continue;
                       if (prompts && item.contains("name") && item["name"].is_string()) {
                         std::string upstream_name = item["name"].get<std::string>();
                         std::string exposed = ExposedName(entry->prefix, upstream_name);
                         self->prompt_owner_[exposed] = {entry, upstream_name};
                         item["name"] = exposed;
                       } else if (item.contains("uri") && item["uri"].is_string()) {
                         self->uri_owner_[item["uri"].get<std::string>()] = entry;
                       } else if (item.contains("uriTemplate") && item["uriTemplate"].is_string()) {
                         self->AddTemplateOwner(
                             TemplatePrefix(item["uriTemplate"].get<std::string>()), entry);
                       }
                       merged.push_back(std::move(item));
                     }
                   }
                 }
                 reply(mcp::Response{id, {{member, std::move(merged)}}});
               };
               if (sources.empty()) return finish();
               auto shared_finish = std::make_shared<decltype(finish)>(std::move(finish));
               for (size_t k = 0; k < sources.size(); ++k) {
                 self->ListAllAsync(*sources[k], m, member,
                                    [merge, k, shared_finish](Result<json> items) {
                                      {
                                        std::lock_guard lock(merge->mu);
                                        merge->items[k] = std::move(items);
                                        if (--merge->left > 0) return;
                                      }
                                      (*shared_finish)();
                                    });
               }
             });
}

void SessionUpstreams::WithOwnerOfUri(const std::string& uri, McpSession::InFlight& flight,
                                      std::function<void(Entry*)> then) {
  if (Entry* owner = OwnerOfUri(uri)) return then(owner);
  // Not seen in a listing of this session: a client may read a URI it knows without listing
  // first. One upstream with resources is the only one that can know; with several, list them.
  auto self = shared_from_this();
  McpSession::InFlight* f = &flight;
  WaitListed(
      AllEntries(), /*through_restarts=*/false, flight,
      [self, f, uri, then = std::move(then)]() mutable {
        f->cancel->OnCancel({});
        std::vector<Entry*> with_resources;
        for (auto& entry : self->entries_) {
          if (entry->client().state() != upstream::State::kReady) continue;
          if (entry->client().info().capabilities.contains("resources"))
            with_resources.push_back(entry.get());
        }
        if (with_resources.size() == 1) return then(with_resources.front());
        if (with_resources.empty()) return then(nullptr);
        struct Left {
          std::mutex mu;
          size_t count;
        };
        auto left = std::make_shared<Left>();
        left->count = with_resources.size() * 2;
        auto shared_then = std::make_shared<std::function<void(Entry*)>>(std::move(then));
        for (Entry* entry : with_resources) {
          for (auto [method, member] :
               {std::pair{"resources/list", "resources"},
                std::pair{"resources/templates/list", "resourceTemplates"}}) {
            self->ListAllAsync(
                *entry, method, member, [self, entry, left, uri, shared_then](Result<json> items) {
                  {
                    std::lock_guard lock(self->mu_);
                    if (items) {
                      for (const json& item : *items) {
                        if (!item.is_object()) continue;
                        if (item.contains("uri") && item["uri"].is_string())
                          self->uri_owner_[item["uri"].get<std::string>()] = entry;
                        else if (item.contains("uriTemplate") && item["uriTemplate"].is_string())
                          self->AddTemplateOwner(
                              TemplatePrefix(item["uriTemplate"].get<std::string>()), entry);
                      }
                    }
                  }
                  {
                    std::lock_guard lock(left->mu);
                    if (--left->count > 0) return;
                  }
                  (*shared_then)(self->OwnerOfUri(uri));
                });
          }
        }
      });
}

void SessionUpstreams::Forward(const mcp::Request& request, McpSession::InFlight& flight,
                               const identity::Caller& caller, const std::string& session_id,
                               std::function<void(mcp::Message)> reply) {
  const std::string& m = request.method;
  json params = request.params && request.params->is_object() ? *request.params : json::object();
  std::shared_ptr<const policy::Policy> policy = core_.policy().Current();
  if (!policy) return reply(LocalError(request.id, mcp::kInternalError, "no policy is in force"));
  policy::CallContext who{caller.tenant, caller.user, caller.agent, caller.scope};

  // Lists: merged across upstreams the caller may read from; one page.
  if (m == "resources/list" || m == "resources/templates/list" || m == "prompts/list")
    return MergedList(request, flight, who, std::move(reply));

  auto self = shared_from_this();
  McpSession::InFlight* f = &flight;
  if (m == "logging/setLevel") {
    WaitListed(AllEntries(), /*through_restarts=*/false, flight,
               [self, f, request, params, caller, session_id, reply = std::move(reply)]() mutable {
                 f->cancel->OnCancel({});
                 std::vector<Entry*> targets;
                 for (auto& entry : self->entries_) {
                   // The log of a shared instance goes to no session (upstream_instances.h): its
                   // level is not one session's to set.
                   if (entry->instance->shared_between_users()) continue;
                   if (entry->client().state() != upstream::State::kReady) continue;
                   if (!entry->client().info().capabilities.contains("logging")) continue;
                   targets.push_back(entry.get());
                 }
                 if (targets.empty()) return reply(mcp::Response{request.id, json::object()});
                 // Each upstream's setLevel is its own decision (one audit entry each); the client
                 // gets one answer once all are done, whatever each said.
                 struct Left {
                   std::atomic<size_t> count;
                   std::function<void(mcp::Message)> reply;
                 };
                 auto left = std::make_shared<Left>();
                 left->count = targets.size();
                 left->reply = std::move(reply);
                 for (Entry* e : targets) {
                   self->session_.Decided(
                       request, nullptr,
                       self->ContextFor(caller, session_id, *e, request.method, params),
                       [self, e, request, params, f](std::function<void(mcp::Message)> done) {
                         self->SendAsync(*e, request.method, params, f, std::move(done));
                       },
                       [left, id = request.id](mcp::Message) {
                         if (left->count.fetch_sub(1) == 1)
                           left->reply(mcp::Response{id, json::object()});
                       });
                 }
               });
    return;
  }

  // The rest goes to one upstream, found from this session's listings.
  auto to_owner = [self, f, request, params, caller, session_id](
                      Entry* owner, json forwarded, std::function<void(mcp::Message)> reply) {
    const std::string& method = request.method;
    f->upstream = owner->name;
    auto call = self->ContextFor(caller, session_id, *owner, method, params);
    if (method == "resources/subscribe" || method == "resources/unsubscribe")
      return self->Subscription(request, *f, std::move(call), *owner,
                                params["uri"].get<std::string>(), std::move(reply));
    self->session_.Decided(
        request, f, std::move(call),
        [self, owner, method, forwarded, f](std::function<void(mcp::Message)> done) {
          self->SendAsync(*owner, method, forwarded, f, std::move(done));
        },
        std::move(reply));
  };
  const json ref = params.value("ref", json::object());
  const std::string ref_type = ref.is_object() ? ref.value("type", "") : "";
  std::string uri;
  if (m == "resources/read" || m == "resources/subscribe" || m == "resources/unsubscribe") {
    if (!params.contains("uri") || !params["uri"].is_string())
      return reply(LocalError(request.id, mcp::kInvalidParams, m + " needs params.uri (a string)"));
    uri = params["uri"].get<std::string>();
  } else if (m == "completion/complete" && ref_type == "ref/resource" && ref.contains("uri") &&
             ref["uri"].is_string()) {
    uri = ref["uri"].get<std::string>();
  }
  if (!uri.empty()) {
    const bool resource = m != "completion/complete";
    WithOwnerOfUri(
        uri, flight,
        [to_owner, params, uri, resource, id = request.id,
         reply = std::move(reply)](Entry* owner) mutable {
          if (owner) return to_owner(owner, params, std::move(reply));
          if (resource)
            return reply(LocalError(id, mcp::kResourceNotFound, "Resource not found: " + uri));
          reply(LocalError(id, mcp::kInvalidParams, "unknown completion reference"));
        });
    return;
  }
  json forwarded = params;
  if (m == "prompts/get") {
    if (!params.contains("name") || !params["name"].is_string())
      return reply(
          LocalError(request.id, mcp::kInvalidParams, "prompts/get needs params.name (a string)"));
    std::string upstream_name;
    Entry* owner = ByExposedPrompt(params["name"].get<std::string>(), &upstream_name);
    if (!owner)
      return reply(LocalError(request.id, mcp::kInvalidParams,
                              "unknown prompt: " + params["name"].get<std::string>()));
    forwarded["name"] = upstream_name;
    return to_owner(owner, std::move(forwarded), std::move(reply));
  }
  if (m == "completion/complete") {
    if (ref_type != "ref/prompt" || !ref.contains("name") || !ref["name"].is_string()) {
      if (ref_type == "ref/resource")
        return reply(LocalError(request.id, mcp::kInvalidParams, "unknown completion reference"));
      return reply(
          LocalError(request.id, mcp::kInvalidParams,
                     "completion/complete needs params.ref of type ref/prompt or ref/resource"));
    }
    std::string upstream_name;
    Entry* owner = ByExposedPrompt(ref["name"].get<std::string>(), &upstream_name);
    if (!owner)
      return reply(LocalError(request.id, mcp::kInvalidParams, "unknown completion reference"));
    forwarded["ref"]["name"] = upstream_name;
    return to_owner(owner, std::move(forwarded), std::move(reply));
  }
  reply(LocalError(request.id, mcp::kMethodNotFound, "Method not found: " + m));
}

void SessionUpstreams::Subscription(const mcp::Request& request, McpSession::InFlight& flight,
                                    std::shared_ptr<CallContext> call, Entry& owner,
                                    const std::string& uri,
                                    std::function<void(mcp::Message)> reply) {
  const json params = request.params.value_or(json::object());
  McpSession::InFlight* f = &flight;
  Entry* e = &owner;
  const std::string method = request.method;
  if (method == "resources/subscribe") {
    auto self = shared_from_this();
    session_.Decided(
        request, &flight, std::move(call),
        [self, e, method, params, f](std::function<void(mcp::Message)> done) {
          self->SendAsync(*e, method, params, f, std::move(done));
        },
        [self, e, uri, reply = std::move(reply)](mcp::Message answer) {
          if (std::holds_alternative<mcp::Response>(answer)) {
            bool first;
            {
              std::lock_guard lock(self->mu_);
              first = self->subscribed_[e].insert(uri).second;
            }
            if (first) e->instance->Subscribed(uri);
          }
          reply(std::move(answer));
        });
    return;
  }
  bool held;
  {
    std::lock_guard lock(mu_);
    held = subscribed_[&owner].erase(uri) > 0;
  }
  // The upstream is told only when no other session holding the instance still wants it.
  const bool last = !held || owner.instance->Unsubscribed(uri);
  session_.Decided(
      request, &flight, std::move(call),
      [self = shared_from_this(), e, method, params, f, last,
       id = request.id](std::function<void(mcp::Message)> done) {
        if (last) return self->SendAsync(*e, method, params, f, std::move(done));
        done(mcp::Response{id, json::object()});
      },
      std::move(reply));
}

void SessionUpstreams::OnInstanceToolsChanged(UpstreamInstance&) {
  if (stopped_.load()) return;
  session_.SendToStream(mcp::Notification{"notifications/tools/list_changed", std::nullopt});
}

bool SessionUpstreams::HasRequestOn(const UpstreamInstance& instance) {
  return session_.HasRequestTo(instance.name());
}

void SessionUpstreams::OnInstanceNotification(UpstreamInstance& instance,
                                              const mcp::Notification& note) {
  if (stopped_.load()) return;
  Entry* entry = EntryOf(instance);
  if (!entry) return;
  const std::string& m = note.method;
  if (m == "notifications/progress") {
    if (!note.params || !note.params->is_object() || !note.params->contains("progressToken"))
      return;
    const json& t = (*note.params)["progressToken"];
    if (!t.is_string()) return;
    Progress p;
    {
      std::lock_guard lock(mu_);
      auto it = progress_.find(t.get<std::string>());
      if (it == progress_.end()) return;  // another session's, or the call has ended
      p = it->second;
    }
    json params = *note.params;
    params["progressToken"] = p.token;
    mcp::Notification out{m, std::move(params)};
    // On its way out, through the stages of the call it belongs to (which may rewrite or drop it).
    if (auto call = p.call.lock(); call && !core_.pipeline().Streamed(*call, out)) return;
    if (p.sink) {
      p.sink(out);
    } else {
      session_.SendToStream(out);
    }
    return;
  }
  if (m == "notifications/message") {
    json params = note.params.value_or(json::object());
    if (params.is_object() && !params.contains("logger")) params["logger"] = entry->name;
    if (session_.modern()) {
      // 2026-07-28 has no session stream: a log message goes with the request it serves, which
      // passes it on only at the level its _meta asked for (session_modern.cc).
      if (MessageSink sink = session_.RelatedSinkFor(entry->name))
        sink(mcp::Notification{m, std::move(params)});
      return;
    }
    session_.SendToStream(mcp::Notification{m, std::move(params)});
    return;
  }
  if (m == "notifications/resources/updated") {
    // Only to the sessions that subscribed to it: the instance may be another session's too.
    if (!note.params || !note.params->is_object() || !note.params->contains("uri") ||
        !(*note.params)["uri"].is_string())
      return;
    {
      std::lock_guard lock(mu_);
      auto it = subscribed_.find(entry);
      if (it == subscribed_.end() || !it->second.count((*note.params)["uri"].get<std::string>()))
        return;
    }
    session_.SendToStream(note);
    return;
  }
  if (m == "notifications/resources/list_changed" || m == "notifications/prompts/list_changed")
    session_.SendToStream(note);
}

void SessionUpstreams::OnInstanceRequest(UpstreamInstance& instance, const mcp::Request& request,
                                         std::function<void(mcp::Message)> reply) {
  Entry* entry = EntryOf(instance);
  if (!entry || stopped_.load())
    return reply(LocalError(request.id, mcp::kInternalError, "the session has ended"));
  // Decided on a worker (the policy and the audit write), not on the upstream's reader thread;
  // the wait for the client's answer holds no thread.
  auto self = shared_from_this();
  core_.Post([self, entry, request, reply = std::move(reply)]() mutable {
    json params = request.params.value_or(json::object());
    auto call = self->ContextFor(self->session_.caller(), self->session_.call_session(), *entry,
                                 request.method, params);
    self->session_.Decided(
        request, nullptr, std::move(call),
        [self, entry, request](std::function<void(mcp::Message)> done) {
          self->AskClient(*entry, request, std::move(done));
        },
        std::move(reply));
  });
}

void SessionUpstreams::AskClient(Entry& entry, const mcp::Request& request,
                                 std::function<void(mcp::Message)> done) {
  AskClientOn(session_.RelatedSinkFor(entry.name), request, std::move(done));
}

void SessionUpstreams::AskClientOn(MessageSink sink, const mcp::Request& request,
                                   std::function<void(mcp::Message)> done) {
  // A task context's requests declare their capabilities one by one: it checks them itself
  // when it relays the question (session_modern.cc).
  const json caps = session_.modern() ? json{{"sampling", json::object()},
                                             {"elicitation", json::object()},
                                             {"roots", json::object()}}
                                      : session_.client_capabilities();
  const char* needs = request.method == "sampling/createMessage" ? "sampling"
                      : request.method == "elicitation/create"   ? "elicitation"
                                                                 : "roots";
  if (!caps.is_object() || !caps.contains(needs))
    return done(LocalError(request.id, mcp::kMethodNotFound,
                           std::string("the client does not support ") + needs));
  if (!sink)
    return done(LocalError(request.id, mcp::kInternalError,
                           "no open channel to the client for " + request.method));
  const std::string id = NextToken();
  // Unanswered: the upstream gets an error in the end, and nothing waits on a thread meanwhile.
  auto self = shared_from_this();
  auto timer = core_.PostAfter(
      std::chrono::duration_cast<std::chrono::milliseconds>(kClientAnswerTimeout),
      [self, id, rid = request.id, method = request.method] {
        std::function<void(mcp::Message)> late;
        {
          std::lock_guard lock(self->mu_);
          auto it = self->asked_.find(id);
          if (it == self->asked_.end()) return;
          late = std::move(it->second.done);
          self->asked_.erase(it);
        }
        late(LocalError(rid, -32001, "the client did not answer " + method + " in time"));
      });
  {
    std::lock_guard lock(mu_);
    if (stopped_.load()) {
      timer->cancel();
      return done(LocalError(request.id, mcp::kInternalError, "the session has ended"));
    }
    asked_[id] = Asked{std::move(done), timer};
  }
  sink(mcp::Request{id, request.method, request.params});
}

void SessionUpstreams::ClientReplied(const mcp::Message& message) {
  std::optional<mcp::Id> id;
  if (auto* ok = std::get_if<mcp::Response>(&message)) id = ok->id;
  if (auto* err = std::get_if<mcp::ErrorResponse>(&message)) id = err->id;
  if (!id || !id->AsString()) return;
  Asked asked;
  {
    std::lock_guard lock(mu_);
    auto it = asked_.find(*id->AsString());
    if (it == asked_.end()) return;  // not ours, or too late
    asked = std::move(it->second);
    asked_.erase(it);
  }
  asked.timer->cancel();
  asked.done(message);
}

void SessionUpstreams::NotifyAll(const std::string& method, const json& params) {
  for (auto& entry : entries_) {
    // A shared instance was offered no roots: no client's list is its business.
    if (entry->instance->shared_between_users()) continue;
    entry->client().Notify(method, params);
  }
}

void SessionUpstreams::StopAll() {
  if (stopped_.exchange(true)) return;
  std::map<std::string, Asked> asked;
  std::map<Entry*, std::set<std::string>> subscribed;
  {
    std::lock_guard lock(mu_);
    asked.swap(asked_);
    subscribed.swap(subscribed_);
  }
  for (auto& [id, waiter] : asked) {
    waiter.timer->cancel();
    waiter.done(LocalError(mcp::Id(id), mcp::kInternalError, "the session has ended"));
  }
  for (auto& entry : entries_) {
    // What this session subscribed to and nobody else holds is unsubscribed upstream (the
    // instance may live on for other sessions, or idle).
    for (const std::string& uri : subscribed[entry.get()]) {
      if (entry->instance->Unsubscribed(uri) &&
          entry->instance->identity().mode != policy::Instances::kPerSession)
        entry->client().Send("resources/unsubscribe", {{"uri", uri}}, [](mcp::Message) {});
    }
    core_.instances().Release(entry->instance, this);
  }
}

}  // namespace warden::gateway
