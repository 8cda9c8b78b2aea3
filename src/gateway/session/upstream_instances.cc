#include "gateway/session/upstream_instances.h"

#include <algorithm>
#include <cstdio>
#include <future>

#include "common/guard.h"
#include "audit/sha256.h"
#include "gateway/credentials/broker.h"
#include "gateway/gateway.h"
#include "monitor/families.h"
#include "sandbox/launcher.h"

namespace warden::gateway {

using nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// How long an idle instance waits for the reaper at most beyond its `idle` time.
constexpr auto kReaperTick = 250ms;

// ---- UpstreamInstance ----

UpstreamInstance::~UpstreamInstance() { Stop(); }

Status UpstreamInstance::Create(upstream::Spec spec, upstream::ClientOptions options) {
  std::weak_ptr<UpstreamInstance> weak = weak_from_this();
  upstream::Events events;
  events.on_notification = [weak](const mcp::Notification& note) {
    if (auto self = weak.lock()) self->OnNotification(note);
  };
  events.on_request = [weak](const mcp::Request& request, std::function<void(mcp::Message)> reply) {
    if (auto self = weak.lock()) {
      self->OnRequest(request, std::move(reply));
    } else {
      reply(mcp::MakeError(request.id, mcp::kInternalError, "the upstream instance has stopped"));
    }
  };
  events.on_state = [weak](upstream::State state, const std::string& why) {
    if (auto self = weak.lock()) self->OnState(state, why);
  };
  auto client = core_.options().make_upstream(std::move(spec), std::move(events), options);
  if (!client) return client.status();
  client_ = std::move(*client);
  return Status::Ok();
}

void UpstreamInstance::OnState(upstream::State state, const std::string& why) {
  if (state == upstream::State::kReady) {
    bool announce;
    {
      std::lock_guard lock(mu_);
      announce = listed_;  // a restart: the sessions may hold the old list
      error_.clear();
      down_ = false;
    }
    auto self = shared_from_this();
    core_.Post([self, announce] { self->ListTools(announce); });
    return;
  }
  if (state != upstream::State::kRestarting && state != upstream::State::kStopped) return;
  bool quiet;
  {
    std::lock_guard lock(mu_);
    quiet = gone_;  // Stop() was called: nothing an operator needs to hear
    error_ = why;
    if (state == upstream::State::kRestarting) down_ = true;
    else gone_ = true;
  }
  if (state == upstream::State::kRestarting && !quiet)
    monitor::Metrics().upstream_restarts.Add({id_.upstream});
  // An operator must be able to see why an upstream is missing from the lists.
  if (!quiet)
    std::fprintf(stderr, "warden: upstream %s: %s%s\n", id_.upstream.c_str(), why.c_str(),
                 state == upstream::State::kRestarting ? " (restarting)" : " (given up)");
  Settle();
}

void UpstreamInstance::Settle() {
  std::vector<std::pair<std::function<void(bool)>, bool>> run;
  {
    std::lock_guard lock(mu_);
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      const bool decided = listed_ || gone_ || (down_ && !it->through_restarts);
      if (!decided) {
        ++it;
        continue;
      }
      run.emplace_back(std::move(it->then), listed_);
      it = waiters_.erase(it);
    }
  }
  for (auto& [then, listed] : run) {
    core_.Post([then = std::move(then), listed = listed] { then(listed); });
  }
}

uint64_t UpstreamInstance::WhenListed(std::chrono::milliseconds timeout, bool through_restarts,
                                      std::function<void(bool)> then) {
  uint64_t ticket;
  {
    std::unique_lock lock(mu_);
    if (listed_ || gone_ || (down_ && !through_restarts)) {
      const bool listed = listed_;
      lock.unlock();
      then(listed);
      return 0;
    }
    ticket = next_ticket_++;
    waiters_.push_back({ticket, through_restarts, std::move(then)});
  }
  std::weak_ptr<UpstreamInstance> weak = weak_from_this();
  core_.instances().At(Clock::now() + timeout, [weak, ticket] {
    if (auto self = weak.lock()) self->Abandon(ticket);
  });
  return ticket;
}

void UpstreamInstance::Abandon(uint64_t ticket) {
  std::function<void(bool)> then;
  {
    std::lock_guard lock(mu_);
    for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
      if (it->ticket != ticket) continue;
      then = std::move(it->then);
      waiters_.erase(it);
      break;
    }
  }
  if (then) core_.Post([then = std::move(then)] { then(false); });
}

std::chrono::milliseconds ListRefreshAfter(int64_t ttl_ms, std::chrono::milliseconds floor) {
  constexpr int64_t kDay = 24LL * 3600 * 1000;
  return std::chrono::milliseconds(std::clamp<int64_t>(ttl_ms, std::min<int64_t>(floor.count(), kDay), kDay));
}

void UpstreamInstance::ListTools(bool announce, bool only_if_changed) {
  if (stopped()) return;
  std::optional<int64_t> ttl_ms;
  auto listed = ListAllPages(
      id_.upstream, "tools/list", "tools",
      [this](json params) { return client_->Call("tools/list", params); }, &ttl_ms);
  std::set<std::string> shown;
  std::string error;
  json tools = json::array();
  const int64_t generation = core_.options().pin_generation ? core_.options().pin_generation() : -1;
  if (listed) {
    for (json& t : *listed) {
      if (t.is_object() && t.contains("name") && t["name"].is_string()) tools.push_back(std::move(t));
    }
    // Definitions as every client will see them: a per-user secret an upstream puts in a
    // description is neither pinned (stored, and different for every user's instance, so the
    // second user's tool would look changed) nor kept.
    if (CredentialBroker* broker = core_.options().services.credentials)
      broker->redactor().RedactJson(tools);
    auto allowed = Review(tools);
    if (allowed) shown = std::move(*allowed);
    else error = allowed.status().message();  // fail closed: nothing shown
  } else {
    error = listed.status().message();
  }
  uint64_t round;
  {
    std::lock_guard lock(mu_);
    if (only_if_changed && tools == listing_->tools && shown == listing_->shown &&
        error == error_)
      announce = false;
    listing_ = std::make_shared<const Listing>(Listing{std::move(tools), std::move(shown)});
    error_ = error;
    pin_generation_ = generation;
    listed_ = true;
    round = ++list_round_;
  }
  Settle();
  if (ttl_ms && listed) {
    // The server said how long its list holds (2026-07-28's ttlMs): list again then, unless a
    // list_changed or a restart has listed meanwhile.
    std::weak_ptr<UpstreamInstance> weak = weak_from_this();
    core_.instances().At(Clock::now() + ListRefreshAfter(*ttl_ms, core_.options().min_list_ttl),
                         [weak, round] {
      auto self = weak.lock();
      if (!self || self->stopped()) return;
      {
        std::lock_guard lock(self->mu_);
        if (self->list_round_ != round) return;
      }
      self->core_.Post([self] { self->ListTools(/*announce=*/true, /*only_if_changed=*/true); });
    });
  }
  if (announce) {
    for (auto& listener : Listeners()) listener->OnInstanceToolsChanged(*this);
  }
}

Result<json> ListAllPages(const std::string& upstream, const std::string& method,
                          const char* member, const std::function<mcp::Message(json)>& send,
                          std::optional<int64_t>* ttl_ms) {
  json all = json::array();
  json cursor;
  for (int page = 0; page < 100; ++page) {
    json params = json::object();
    if (!cursor.is_null()) params["cursor"] = cursor;
    mcp::Message reply = send(std::move(params));
    if (auto* err = std::get_if<mcp::ErrorResponse>(&reply))
      return Status::Error(method + " on upstream " + upstream + ": " + err->message);
    const json& result = std::get<mcp::Response>(reply).result;
    if (ttl_ms != nullptr && result.is_object() && result.contains("ttlMs") &&
        result["ttlMs"].is_number_integer()) {
      const int64_t ttl = result["ttlMs"].get<int64_t>();
      if (ttl >= 0 && (!*ttl_ms || ttl < **ttl_ms)) *ttl_ms = ttl;
    }
    if (result.is_object() && result.contains(member) && result[member].is_array()) {
      for (const json& item : result[member]) all.push_back(item);
    }
    if (!result.is_object() || !result.contains("nextCursor") || result["nextCursor"].is_null())
      return all;
    cursor = result["nextCursor"];
  }
  return Status::Error(method + " on upstream " + upstream + ": more than 100 pages");
}

Result<std::set<std::string>> UpstreamInstance::Review(const json& tools) {
  std::set<std::string> shown;
  if (!core_.options().pin_review) {
    for (const json& t : tools) shown.insert(t["name"].get<std::string>());
    return shown;
  }
  auto allowed = core_.options().pin_review(id_.upstream, id_.prefix, tools);
  if (!allowed) return allowed.status().Wrap("tool pins");
  shown.insert(allowed->begin(), allowed->end());
  return shown;
}

const json* UpstreamInstance::Listing::Find(const std::string& name) const {
  for (const json& t : tools)
    if (t.is_object() && t.contains("name") && t["name"] == name) return &t;
  return nullptr;
}

bool UpstreamInstance::HasListing() const {
  std::lock_guard lock(mu_);
  return listed_;
}

std::shared_ptr<const UpstreamInstance::Listing> UpstreamInstance::Listed() {
  const int64_t generation = core_.options().pin_generation ? core_.options().pin_generation() : -1;
  std::shared_ptr<const Listing> current;
  {
    std::lock_guard lock(mu_);
    if (!listed_) return nullptr;
    if (pin_generation_ == generation) return listing_;
    current = listing_;
  }
  // An approval happened since (`warden tools approve`): review again, so that approved tools
  // appear without a restart.
  auto allowed = Review(current->tools);
  auto reviewed = std::make_shared<const Listing>(
      Listing{current->tools, allowed ? std::move(*allowed) : std::set<std::string>{}});
  std::lock_guard lock(mu_);
  // A listing that came meanwhile is newer than this review of the old one: it stays.
  if (listing_ == current) {
    listing_ = reviewed;
    pin_generation_ = generation;
  }
  return listing_;
}

std::string UpstreamInstance::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

bool UpstreamInstance::stopped() const {
  std::lock_guard lock(mu_);
  return gone_;
}

void UpstreamInstance::Subscribed(const std::string& uri) {
  std::lock_guard lock(mu_);
  ++subscriptions_[uri];
}

bool UpstreamInstance::Unsubscribed(const std::string& uri) {
  std::lock_guard lock(mu_);
  auto it = subscriptions_.find(uri);
  if (it == subscriptions_.end()) return true;
  if (--it->second > 0) return false;
  subscriptions_.erase(it);
  return true;
}

size_t UpstreamInstance::holders() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& w : listeners_) n += w.expired() ? 0 : 1;
  return n;
}

std::vector<std::shared_ptr<InstanceListener>> UpstreamInstance::Listeners() {
  std::vector<std::shared_ptr<InstanceListener>> out;
  std::lock_guard lock(mu_);
  for (const auto& w : listeners_) {
    if (auto l = w.lock()) out.push_back(std::move(l));
  }
  return out;
}

void UpstreamInstance::Attach(const std::shared_ptr<InstanceListener>& listener) {
  std::lock_guard lock(mu_);
  std::erase_if(listeners_, [](const std::weak_ptr<InstanceListener>& w) { return w.expired(); });
  listeners_.push_back(listener);
}

size_t UpstreamInstance::Detach(const InstanceListener* listener) {
  std::lock_guard lock(mu_);
  std::erase_if(listeners_, [listener](const std::weak_ptr<InstanceListener>& w) {
    auto l = w.lock();
    return !l || l.get() == listener;
  });
  if (listeners_.empty()) idle_since_ = Clock::now();
  return listeners_.size();
}

void UpstreamInstance::OnNotification(const mcp::Notification& note) {
  const std::string& m = note.method;
  if (m == "notifications/tools/list_changed") {
    auto self = shared_from_this();
    core_.Post([self] { self->ListTools(/*announce=*/true); });
    return;
  }
  if (m == "notifications/message" && shared_between_users()) {
    // A log line of an instance every user shares may carry any user's data: it goes to no
    // session (docs/gateway.md, "Upstream instances").
    return;
  }
  if (m == "notifications/progress" || m == "notifications/message" ||
      m == "notifications/resources/updated" || m == "notifications/resources/list_changed" ||
      m == "notifications/prompts/list_changed") {
    for (auto& listener : Listeners()) listener->OnInstanceNotification(*this, note);
  }
  // Anything else (cancellations of requests the upstream made, unknown notifications) stops here.
}

void UpstreamInstance::OnRequest(const mcp::Request& request,
                                 std::function<void(mcp::Message)> reply) {
  if (request.method == "ping") return reply(mcp::Response{request.id, json::object()});
  if (request.method != "sampling/createMessage" && request.method != "elicitation/create" &&
      request.method != "roots/list")
    return reply(mcp::MakeError(request.id, mcp::kMethodNotFound, "Method not found: " + request.method));
  if (shared_between_users())
    return reply(mcp::MakeError(request.id, mcp::kMethodNotFound,
                                "warden does not pass " + request.method +
                                    " from a shared upstream instance to any client"));
  // The session with a request in flight here is who the upstream is serving; else any holder
  // (per_user: the same user; per_session: the only one).
  std::shared_ptr<InstanceListener> chosen;
  auto listeners = Listeners();
  for (auto& l : listeners) {
    if (l->HasRequestOn(*this)) {
      chosen = l;
      break;
    }
  }
  if (!chosen && !listeners.empty()) chosen = listeners.front();
  if (!chosen)
    return reply(mcp::MakeError(request.id, mcp::kInternalError,
                                "no session holds this upstream instance"));
  chosen->OnInstanceRequest(*this, request, std::move(reply));
}

void UpstreamInstance::Stop() {
  {
    std::lock_guard lock(mu_);
    gone_ = true;
  }
  if (client_) client_->Stop();
  Settle();
}

// ---- UpstreamInstances ----

UpstreamInstances::UpstreamInstances(GatewayCore& core) : core_(core) {
  reaper_ = std::thread([this] {
    RunGuarded("upstream reaper", "idle upstream instances are no longer stopped",
               [this] { ReaperLoop(); });
  });
  if (CredentialBroker* broker = core_.options().services.credentials)
    broker->SetOnStoreChanged([this] { CredentialsChanged(); });
}

UpstreamInstances::~UpstreamInstances() { StopAll(); }

std::string UpstreamInstances::Fingerprint(const std::string& name, const policy::Upstream& upstream,
                                           const upstream::Spec& spec) {
  json parts = {name, upstream.prefix, spec.url, spec.ca_file, spec.headers,
                policy::InstancesName(upstream.instances), upstream.protocol};
  if (!spec.command.empty()) parts.push_back(sandbox::RunArgs(spec.sandbox));
  return parts.dump();
}

UpstreamInstances::Acquired UpstreamInstances::Acquire(
    const policy::Policy& policy, const std::string& name, const policy::Upstream& up,
    const identity::Caller& caller, const std::string& session_id, const json& client_caps,
    const json& client_info, const std::string& protocol_version,
    const std::shared_ptr<InstanceListener>& listener) {
  Acquired out;
  if (!core_.options().make_upstream) {
    out.error = Status::Error("the policy names upstream servers but this gateway has no MCP client");
    return out;
  }
  upstream::Spec spec;
  spec.name = name;
  spec.command = up.command;
  spec.url = up.url;
  spec.ca_file = up.ca_file;
  if (!up.command.empty()) {
    auto box = GatewayCore::UpstreamSandbox(policy, up);
    if (!box) {
      out.error = box.status();
      return out;
    }
    spec.sandbox = std::move(*box);
  }
  UpstreamInstance::Identity identity;
  identity.upstream = name;
  identity.prefix = up.prefix;
  identity.mode = up.instances;
  identity.idle = std::chrono::milliseconds(up.idle_ms);
  switch (up.instances) {
    case policy::Instances::kShared:
      break;
    case policy::Instances::kPerUser:
      identity.owner = caller.tenant + "/" + caller.user;
      break;
    case policy::Instances::kPerSession:
      identity.owner = session_id;
      break;
  }
  // Credentials (docs/credentials.md). The instance's owner is who they are for: per_user, the
  // tenant's user; per_session, the session's caller (the loader refuses them with `shared`).
  std::string credentials_digest;
  std::function<std::string()> digest_now;
  if (up.credentials.uses_secrets || up.credentials.uses_tokens) {
    CredentialBroker* broker = core_.options().services.credentials;
    const CredentialOwner owner{caller.tenant, caller.user, ""};
    auto policy_now = std::make_shared<const policy::Policy>(policy);
    if (!up.command.empty() && !up.credentials.env.empty()) {
      // Resolved now for the digest (a rotated secret makes a new instance for new sessions),
      // and again at each start; a secret that is missing stops the instance, and its calls
      // fail naming the secret.
      digest_now = [broker, policy_now, name, owner]() -> std::string {
        if (!broker) return "";
        auto env = broker->Environment(*policy_now, name, owner);
        return env ? audit::Sha256Hex(json(*env).dump()) : "unresolved";
      };
      credentials_digest = digest_now();
      spec.start_env = [broker, policy_now, name,
                        owner]() -> Result<std::map<std::string, std::string>> {
        if (!broker) return Status::Error("the policy names secrets but this gateway has no store");
        auto env = broker->Environment(*policy_now, name, owner);
        if (!env) return env.status().Wrap("credentials");
        return env;
      };
    }
    if (!up.url.empty() && !up.credentials.header.empty()) {
      if (broker) {
        // A secret that is missing shows in the instance's requests as no header: the upstream
        // refuses them, and each call (which renders its own headers) says which secret.
        auto headers = broker->InstanceHeaders(policy, name, owner);
        credentials_digest = headers ? "resolved" : "unresolved";
      }
      spec.request_headers = [broker, policy_now, name, owner]() {
        std::map<std::string, std::string> out;
        if (!broker) return out;
        auto headers = broker->InstanceHeaders(*policy_now, name, owner);
        if (headers) out = std::move(*headers);
        return out;
      };
    }
  }
  const std::string fingerprint_base = Fingerprint(name, up, spec);
  identity.fingerprint = fingerprint_base + credentials_digest;
  const std::string key = json::array({name, identity.owner, identity.fingerprint}).dump();

  std::shared_ptr<UpstreamInstance> instance;
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      out.error = Status::Error("the gateway is stopping");
      return out;
    }
    auto it = live_.find(key);
    if (it != live_.end() && !it->second->stopped()) {
      it->second->Attach(listener);
      out.instance = it->second;
      return out;
    }
    if (it != live_.end()) {
      // Stopped for good (restarts exhausted): whoever still holds it keeps the corpse; a new
      // session gets a fresh start.
      to_stop_.push_back(it->second);
      live_.erase(it);
    }
    size_t of_upstream = 0;
    auto idlest = live_.end();
    Clock::time_point idlest_since{};
    for (auto i = live_.begin(); i != live_.end(); ++i) {
      if (i->second->name() != name) continue;
      ++of_upstream;
      if (i->second->holders() > 0) continue;
      Clock::time_point since;
      {
        std::lock_guard instance_lock(i->second->mu_);
        since = i->second->idle_since_;
      }
      if (idlest == live_.end() || since < idlest_since) {
        idlest = i;
        idlest_since = since;
      }
    }
    if (of_upstream >= up.max_instances) {
      if (idlest == live_.end()) {
        out.at_cap = true;
        out.error = Status::Error(
            "upstream " + name + " has " + std::to_string(of_upstream) +
            " live instances, its limit (upstreams." + name + ".max_instances = " +
            std::to_string(up.max_instances) + ", instances: " +
            policy::InstancesName(up.instances) + "), and every one is in use; try again later");
        return out;
      }
      // Room is made by stopping the instance idle longest (on the reaper's thread).
      to_stop_.push_back(idlest->second);
      live_.erase(idlest);
      cv_.notify_all();
    }
    instance = std::make_shared<UpstreamInstance>(core_, identity);
    if (digest_now) {
      instance->digest_now_ = std::move(digest_now);
      instance->digest_ = credentials_digest;
      instance->fingerprint_base_ = fingerprint_base;
    }
    live_[key] = instance;
  }

  json offered = json::object();
  if (up.instances != policy::Instances::kShared) {
    // A request the upstream makes of its client goes to a session of this user (or this
    // session): offered only when the client that started it can answer.
    for (const char* cap : {"sampling", "elicitation", "roots"}) {
      if (client_caps.is_object() && client_caps.contains(cap)) offered[cap] = client_caps[cap];
    }
  }
  std::string client_name = client_info.is_object() ? client_info.value("name", "") : "";
  upstream::ClientOptions options;
  options.client_capabilities = offered;
  options.client_info = {
      {"name", up.instances == policy::Instances::kPerSession && !client_name.empty()
                   ? "warden for " + client_name
                   : "warden"},
      {"version", core_.options().server_version}};
  options.protocol_version = protocol_version;
  options.era = up.protocol == "2025-11-25"   ? upstream::Era::kLegacy
                : up.protocol == "2026-07-28" ? upstream::Era::kModern
                                              : upstream::Era::kAuto;
  options.connect_timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(core_.options().upstream_ready_timeout);
  Status created = instance->Create(std::move(spec), std::move(options));
  if (!created.ok()) {
    std::lock_guard lock(mu_);
    if (auto it = live_.find(key); it != live_.end() && it->second == instance) live_.erase(it);
    out.error = created;
    return out;
  }
  instance->Attach(listener);
  instance->client().Start();
  out.instance = std::move(instance);
  return out;
}

void UpstreamInstances::Release(const std::shared_ptr<UpstreamInstance>& instance,
                                const InstanceListener* listener) {
  if (!instance) return;
  const size_t left = instance->Detach(listener);
  if (left > 0) return;
  if (instance->identity().mode != policy::Instances::kPerSession &&
      instance->identity().idle.count() > 0) {
    std::lock_guard lock(mu_);
    cv_.notify_all();  // the reaper recomputes its next wake-up
    return;
  }
  // per_session (or idle: 0): the session's end is the instance's.
  {
    std::lock_guard lock(mu_);
    for (auto it = live_.begin(); it != live_.end(); ++it) {
      if (it->second == instance) {
        live_.erase(it);
        break;
      }
    }
  }
  instance->Stop();
}

void UpstreamInstances::At(Clock::time_point when, std::function<void()> work) {
  std::lock_guard lock(mu_);
  if (stopping_) return;
  timers_.emplace(when, std::move(work));
  cv_.notify_all();
}

void UpstreamInstances::ReaperLoop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const auto now = Clock::now();
    // Due timers run on this thread, unlocked (they only hand work to the workers).
    std::vector<std::function<void()>> due;
    while (!timers_.empty() && timers_.begin()->first <= now) {
      due.push_back(std::move(timers_.begin()->second));
      timers_.erase(timers_.begin());
    }
    // Idle instances whose time is up, and instances that stopped for good that nobody holds.
    for (auto it = live_.begin(); it != live_.end();) {
      UpstreamInstance& inst = *it->second;
      bool reap = false;
      if (inst.holders() == 0) {
        std::lock_guard instance_lock(inst.mu_);
        reap = inst.gone_ || now - inst.idle_since_ >= inst.id_.idle;
      }
      if (reap) {
        to_stop_.push_back(it->second);
        it = live_.erase(it);
      } else {
        ++it;
      }
    }
    std::vector<std::shared_ptr<UpstreamInstance>> stop;
    stop.swap(to_stop_);
    if (!due.empty() || !stop.empty()) {
      lock.unlock();
      for (auto& work : due) RunGuarded("upstream timer", "a bounded wait was not ended", work);
      for (auto& inst : stop) inst->Stop();
      stop.clear();
      lock.lock();
      continue;
    }
    auto wake = now + kReaperTick;
    if (!timers_.empty() && timers_.begin()->first < wake) wake = timers_.begin()->first;
    cv_.wait_until(lock, wake);
  }
}

void UpstreamInstances::CredentialsChanged() {
  At(Clock::now(), [this] {
    struct Candidate {
      std::string key;
      std::shared_ptr<UpstreamInstance> instance;
      std::function<std::string()> digest_now;
      std::string digest;
    };
    std::vector<Candidate> candidates;
    {
      std::lock_guard lock(mu_);
      for (auto& [key, inst] : live_)
        if (inst->digest_now_) candidates.push_back({key, inst, inst->digest_now_, inst->digest_});
    }
    for (Candidate& c : candidates) {
      const std::string now = c.digest_now();  // reads the store: outside the lock
      if (now == c.digest || c.instance->stopped()) continue;
      {
        std::lock_guard lock(mu_);
        auto it = live_.find(c.key);
        if (it == live_.end() || it->second != c.instance) continue;
        // Found again under its new environment's key; a newer instance a session already
        // started under that key keeps it.
        const UpstreamInstance::Identity& id = c.instance->identity();
        const std::string key =
            json::array({id.upstream, id.owner, c.instance->fingerprint_base_ + now}).dump();
        live_.erase(it);
        if (!live_.count(key)) live_[key] = c.instance;
        else to_stop_.push_back(c.instance);  // let go when its holders are gone
        c.instance->digest_ = now;
      }
      std::fprintf(stderr, "warden: upstream %s (%s): restarting: its credentials changed\n",
                   c.instance->name().c_str(), c.instance->identity().owner.c_str());
      c.instance->client().Restart("its credentials changed");
    }
  });
}

void UpstreamInstances::StopAll() {
  // First, and without the registry's lock: it waits for a notification in progress, which
  // takes that lock.
  if (CredentialBroker* broker = core_.options().services.credentials)
    broker->SetOnStoreChanged(nullptr);
  std::vector<std::shared_ptr<UpstreamInstance>> stop;
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !reaper_.joinable()) return;
    stopping_ = true;
    for (auto& [key, inst] : live_) stop.push_back(inst);
    live_.clear();
    for (auto& inst : to_stop_) stop.push_back(inst);
    to_stop_.clear();
    timers_.clear();
    cv_.notify_all();
  }
  if (reaper_.joinable()) reaper_.join();
  for (auto& inst : stop) inst->Stop();
}

UpstreamInstances::Counts UpstreamInstances::counts() const { return counts(""); }

UpstreamInstances::Counts UpstreamInstances::counts(const std::string& upstream) const {
  Counts c;
  std::lock_guard lock(mu_);
  for (const auto& [key, inst] : live_) {
    if (!upstream.empty() && inst->name() != upstream) continue;
    ++c.live;
    if (inst->holders() > 0) ++c.held;
  }
  return c;
}

std::map<std::string, UpstreamInstances::Counts> UpstreamInstances::CountsByUpstream() const {
  std::map<std::string, Counts> out;
  std::lock_guard lock(mu_);
  for (const auto& [key, inst] : live_) {
    Counts& c = out[inst->name()];
    ++c.live;
    if (inst->holders() > 0) ++c.held;
  }
  return out;
}

}  // namespace warden::gateway
