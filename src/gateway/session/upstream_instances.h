// Live upstream connections (for a stdio upstream: its sandboxed process), shared by the sessions
// the policy's instance model puts together: `instances: shared` (one for everybody), `per_user`
// (the default: one per tenant and user) or `per_session` (one per MCP session, stopped with it).
// An instance is started by the first session that needs it, held by every session that uses it,
// stopped `idle` after the last one let go (per_session: at once), and counted against the
// upstream's `max_instances`; a session that would need one more is refused (initialize answers
// -32004 naming the cap; HTTP says 503 with Retry-After).
//
// What the instance owns is what is the same for every session holding it: the MCP client, the
// tool listing and its pin review, the count of resource subscriptions. What a session sees
// (progress of its own calls, resource updates it subscribed to, requests the upstream makes of
// a client) is routed by the session, which is an InstanceListener. Contract: docs/gateway.md,
// "Upstream instances".
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "gateway/stages/stages.h"
#include "mcp/jsonrpc.h"
#include "policy/model.h"
#include "upstream/client.h"

namespace warden::gateway {

class GatewayCore;
class UpstreamInstance;

// Every page of a list method (following nextCursor, at most 100 pages) of upstream `upstream`,
// each page's request sent with `send`. `ttl_ms`, when given, gets the least ttlMs a page
// carried (a 2026-07-28 server says how long its list may be kept), or stays nullopt.
Result<nlohmann::json> ListAllPages(const std::string& upstream, const std::string& method,
                                    const char* member,
                                    const std::function<mcp::Message(nlohmann::json)>& send,
                                    std::optional<int64_t>* ttl_ms = nullptr);

// How long warden keeps an upstream's tool list that came with `ttl_ms` before listing again:
// at least `floor` (GatewayOptions::min_list_ttl), at most a day.
std::chrono::milliseconds ListRefreshAfter(int64_t ttl_ms, std::chrono::milliseconds floor);

// A session holding an instance. Called on the instance's client threads or on workers, never
// under the instance's lock; none of these may block for long.
class InstanceListener {
 public:
  virtual ~InstanceListener() = default;
  // notifications/progress, .../message, .../resources/updated, .../resources/list_changed,
  // .../prompts/list_changed: the listener keeps what is its own (its progress tokens, the URIs
  // it subscribed to).
  virtual void OnInstanceNotification(UpstreamInstance& instance, const mcp::Notification& note) = 0;
  // The instance listed its tools again after a restart or a list_changed.
  virtual void OnInstanceToolsChanged(UpstreamInstance& instance) = 0;
  // Whether a request of this listener is in flight on `instance` (who a request the upstream
  // makes of its client belongs to).
  virtual bool HasRequestOn(const UpstreamInstance& instance) = 0;
  // A request the upstream makes of its client (sampling, elicitation, roots); `reply` exactly once.
  virtual void OnInstanceRequest(UpstreamInstance& instance, const mcp::Request& request,
                                 std::function<void(mcp::Message)> reply) = 0;
};

class UpstreamInstance : public std::enable_shared_from_this<UpstreamInstance> {
 public:
  struct Identity {
    std::string upstream;  // the policy's name
    std::string prefix;
    policy::Instances mode = policy::Instances::kPerUser;
    std::string owner;        // "" (shared), "TENANT/USER" (per_user), the session id (per_session)
    std::string fingerprint;  // what was started: a reload that changes it starts new instances
    std::chrono::milliseconds idle{300000};
  };
  UpstreamInstance(GatewayCore& core, Identity identity) : core_(core), id_(std::move(identity)) {}
  ~UpstreamInstance();
  UpstreamInstance(const UpstreamInstance&) = delete;
  UpstreamInstance& operator=(const UpstreamInstance&) = delete;

  const Identity& identity() const { return id_; }
  const std::string& name() const { return id_.upstream; }
  const std::string& prefix() const { return id_.prefix; }
  bool shared_between_users() const { return id_.mode == policy::Instances::kShared; }
  upstream::Client& client() { return *client_; }

  // Calls `then(true)` once the tools have been listed, or `then(false)` when the instance stops
  // for good, `timeout` passes first, Abandon(ticket) is called, or (unless `through_restarts`)
  // when it went down before its first listing. Exactly once, never under a lock: on this thread
  // when already decided, else on a worker. Returns the ticket for Abandon.
  uint64_t WhenListed(std::chrono::milliseconds timeout, bool through_restarts,
                      std::function<void(bool)> then);
  void Abandon(uint64_t ticket);

  // The listed tools (upstream definitions, objects with a string "name") and the names pin
  // review lets through (reviewed again when an approval happened since); null before the
  // first listing. A snapshot shared with the instance, never copied per call: a new listing
  // or review replaces it whole.
  struct Listing {
    nlohmann::json tools = nlohmann::json::array();
    std::set<std::string> shown;
    // The definition of the tool named `name`, or null when the listing has none.
    const nlohmann::json* Find(const std::string& name) const;
  };
  std::shared_ptr<const Listing> Listed();
  // Whether Listed() has a listing to give (without the pin review's check).
  bool HasListing() const;
  // Why the last listing failed, or why the instance is down; "" when neither.
  std::string error() const;
  bool stopped() const;

  // Resource subscriptions, counted over the sessions holding the instance: Unsubscribed is true
  // when nobody else still holds `uri` (then the upstream is told).
  void Subscribed(const std::string& uri);
  bool Unsubscribed(const std::string& uri);

  size_t holders() const;

 private:
  friend class UpstreamInstances;
  struct Waiter {
    uint64_t ticket = 0;
    bool through_restarts = false;
    std::function<void(bool)> then;
  };

  Status Create(upstream::Spec spec, upstream::ClientOptions options);
  void OnState(upstream::State state, const std::string& why);
  void OnNotification(const mcp::Notification& note);
  void OnRequest(const mcp::Request& request, std::function<void(mcp::Message)> reply);
  // Lists the tools. `announce`: tell the sessions (only when the list changed, for
  // `only_if_changed`: a refresh when the server's ttlMs ran out).
  void ListTools(bool announce, bool only_if_changed = false);
  Result<std::set<std::string>> Review(const nlohmann::json& tools);
  // Runs (on workers) the waiters the current state decides; under mu_ collects, outside runs.
  void Settle();
  std::vector<std::shared_ptr<InstanceListener>> Listeners();
  void Attach(const std::shared_ptr<InstanceListener>& listener);
  size_t Detach(const InstanceListener* listener);  // how many are left
  // Stops the client (blocks until its process is gone) and fails every waiter.
  void Stop();

  GatewayCore& core_;
  const Identity id_;
  std::unique_ptr<upstream::Client> client_;

  mutable std::mutex mu_;
  bool listed_ = false;  // tools listed since the first start
  bool down_ = false;    // died and waiting to restart
  bool gone_ = false;    // stopped for good
  std::string error_;
  std::shared_ptr<const Listing> listing_ = std::make_shared<Listing>();
  int64_t pin_generation_ = -1;
  uint64_t list_round_ = 0;  // ListTools calls so far: a ttlMs refresh timer of an older one is stale
  std::vector<Waiter> waiters_;
  uint64_t next_ticket_ = 1;
  std::vector<std::weak_ptr<InstanceListener>> listeners_;
  std::map<std::string, int> subscriptions_;
  std::chrono::steady_clock::time_point idle_since_ = std::chrono::steady_clock::now();

  // A stdio server whose environment holds secrets (set by Acquire, then the registry's lock):
  // the digest of that environment it was started with, how to compute it now, and the
  // fingerprint without it (for the registry's key once it changes).
  std::function<std::string()> digest_now_;
  std::string digest_;
  std::string fingerprint_base_;
};

// The registry of live instances, one per gateway (GatewayCore::instances()). Thread-safe.
class UpstreamInstances {
 public:
  explicit UpstreamInstances(GatewayCore& core);
  ~UpstreamInstances();  // StopAll

  struct Acquired {
    std::shared_ptr<UpstreamInstance> instance;  // null on failure
    Status error;
    bool at_cap = false;  // refused because the upstream has max_instances live ones
  };
  // The instance `listener` (session `session_id` of `caller`) uses for upstream `name`: the live
  // one of the same owner and fingerprint, else a new one (started in the background). Past the
  // cap, the instance idle longest is stopped to make room; when none is idle, refused.
  Acquired Acquire(const policy::Policy& policy, const std::string& name,
                   const policy::Upstream& upstream, const identity::Caller& caller,
                   const std::string& session_id, const nlohmann::json& client_caps,
                   const nlohmann::json& client_info, const std::string& protocol_version,
                   const std::shared_ptr<InstanceListener>& listener);
  // `listener` lets go. A per_session instance stops now (blocking until its process is gone);
  // any other is stopped by the reaper once idle for its `idle` time.
  void Release(const std::shared_ptr<UpstreamInstance>& instance, const InstanceListener* listener);
  // Runs `work` on the registry's thread at `when` (or at stop, never). For waits with a bound.
  void At(std::chrono::steady_clock::time_point when, std::function<void()> work);
  // Stops every instance and the reaper. Idempotent.
  void StopAll();
  // The secret store changed in another process: every live stdio instance whose environment
  // (its user's secrets) is now different is restarted with the new one, on the registry's
  // thread. Calls in flight on it fail saying so. docs/credentials.md, "Rotation".
  void CredentialsChanged();

  struct Counts {
    size_t live = 0;  // instances running (or starting)
    size_t held = 0;  // of which some session holds
  };
  Counts counts() const;
  Counts counts(const std::string& upstream) const;
  // Every upstream with a live instance, and its counts (warden_upstream_instances).
  std::map<std::string, Counts> CountsByUpstream() const;

 private:
  void ReaperLoop();
  static std::string Fingerprint(const std::string& name, const policy::Upstream& upstream,
                                 const upstream::Spec& spec);

  GatewayCore& core_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  // by (upstream, owner, fingerprint)
  std::map<std::string, std::shared_ptr<UpstreamInstance>> live_;
  std::vector<std::shared_ptr<UpstreamInstance>> to_stop_;
  std::multimap<std::chrono::steady_clock::time_point, std::function<void()>> timers_;
  std::thread reaper_;
};

}  // namespace warden::gateway
