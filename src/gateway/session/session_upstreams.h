// The upstream servers one downstream session uses: for each upstream of the policy, the
// instance (upstream_instances.h) its instance model gives this session, shared with the other
// sessions of the same user (per_user, the default), of everybody (shared), or nobody
// (per_session). The session keeps what is its own: the progress tokens of its calls, the
// resources it subscribed to, the answers it owes an upstream that asked its client something,
// and which upstream owns which URI and prompt in its listings.
//
// Tools, prompts and resources are merged across upstreams; tools and prompts are renamed
// PREFIX__NAME, resource URIs are kept and routed by the listing that produced them.
// Contract: docs/gateway.md ("Upstreams", "Upstream instances").
#pragma once

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "gateway/session/session.h"
#include "gateway/session/upstream_instances.h"
#include "policy/model.h"
#include "policy/policy.h"
#include "upstream/client.h"

namespace warden::gateway {

class SessionUpstreams : public std::enable_shared_from_this<SessionUpstreams>,
                         public InstanceListener {
 public:
  SessionUpstreams(GatewayCore& core, McpSession& session) : core_(core), session_(session) {}
  ~SessionUpstreams() override;

  // Takes (starting when needed, in the background) the instance of every upstream of `policy`.
  // `client_caps` are the downstream client's: sampling, elicitation and roots are offered
  // upstream only when the real client has them (and never by a shared instance). On failure
  // nothing is held; `at_cap()` says whether an upstream's max_instances was the reason.
  Status Start(const policy::Policy& policy, const nlohmann::json& client_caps,
               const nlohmann::json& client_info, const std::string& protocol_version);
  bool at_cap() const { return at_cap_; }
  bool Any() const { return !entries_.empty(); }

  // The tool definitions to list (exposed names, pinned and approved ones only), once every
  // upstream is listed or has failed or the gateway's upstream_ready_timeout passed; `done` runs
  // once, on this thread or a worker. Cancelled through `flight`: then at once.
  void Tools(McpSession::InFlight& flight, std::function<void(std::vector<nlohmann::json>)> done);
  // Fills call.server and call.forward (and call.tool_definition) when an upstream serves
  // call.tool, then runs `then` (once, on this thread or a worker). A call to an upstream that has
  // not listed its tools yet waits for it, through restarts, up to upstream_ready_timeout, holding
  // no thread; past that the call fails naming the upstream and why it is not ready.
  void Route(const std::shared_ptr<CallContext>& call, const nlohmann::json& params,
             McpSession::InFlight& flight, std::function<void()> then);
  // resources/*, prompts/*, completion/complete, logging/setLevel: answers through `reply`, once,
  // on any thread. What goes to an upstream goes through the pipeline (McpSession::Decided).
  void Forward(const mcp::Request& request, McpSession::InFlight& flight,
               const identity::Caller& caller, const std::string& session_id,
               std::function<void(mcp::Message)> reply);
  // A notification from the client for every upstream (roots/list_changed).
  void NotifyAll(const std::string& method, const nlohmann::json& params);
  // The client answered a request an upstream made through us.
  void ClientReplied(const mcp::Message& message);
  // Lets go of every instance (a per_session one is stopped, blocking until its process is gone)
  // and fails what waits on the client. Idempotent.
  void StopAll();

  // InstanceListener.
  void OnInstanceNotification(UpstreamInstance& instance, const mcp::Notification& note) override;
  void OnInstanceToolsChanged(UpstreamInstance& instance) override;
  bool HasRequestOn(const UpstreamInstance& instance) override;
  void OnInstanceRequest(UpstreamInstance& instance, const mcp::Request& request,
                         std::function<void(mcp::Message)> reply) override;

 private:
  struct Entry {
    std::string name, prefix;
    std::shared_ptr<UpstreamInstance> instance;
    upstream::Client& client() { return instance->client(); }
  };
  struct Progress {
    nlohmann::json token;  // the client's own token
    MessageSink sink;
    std::weak_ptr<CallContext> call;  // its stages see each notification on the way out
  };
  // A request an upstream made of the client, waiting for the client's answer.
  struct Asked {
    std::function<void(mcp::Message)> done;
    std::shared_ptr<boost::asio::steady_timer> timer;  // fails it after kClientAnswerTimeout
  };

  Entry* EntryOf(const UpstreamInstance& instance);
  // Waits (holding no thread) until each of `entries` is listed or decided, as WhenListed says;
  // `done` once. Cancelled through `flight`.
  void WaitListed(const std::vector<Entry*>& entries, bool through_restarts,
                  McpSession::InFlight& flight, std::function<void()> done);
  void RouteNow(CallContext& call, const nlohmann::json& params, McpSession::InFlight& flight,
                const std::vector<Entry*>& candidates);
  // Sends; `done` gets the reply exactly once, on the upstream client's thread (or this one when
  // the session has ended). Cancellable through `flight`; progress tokens rewritten to reach
  // `related`. `flight` must stay alive until `done` has run.
  void SendAsync(Entry& entry, const std::string& method, nlohmann::json params,
                 McpSession::InFlight* flight, std::function<void(mcp::Message)> done);
  // A 2026-07-28 upstream's input_required, relayed to a 2026 client: each question it asks is
  // decided by the pipeline first, as a 2025 upstream's request of its client is
  // (OnInstanceRequest); `done` gets `reply` when every one may be asked, else the refusal.
  void VetQuestions(Entry& entry, mcp::Message reply, std::function<void(mcp::Message)> done);
  // A tools/call reply as the execute stage wants it.
  static Result<CallResult> ToolResultOf(const std::string& upstream, const mcp::Message& reply);
  // Collects every page of a list method from one upstream; `done` once, on any thread.
  void ListAllAsync(Entry& entry, const std::string& method, const char* member,
                    std::function<void(Result<nlohmann::json>)> done);
  std::vector<Entry*> AllEntries();
  // resources/list, resources/templates/list, prompts/list: merged across the upstreams the
  // caller may read from, once every upstream is listed or has failed (waiting holds no thread).
  void MergedList(const mcp::Request& request, McpSession::InFlight& flight,
                  const policy::CallContext& who, std::function<void(mcp::Message)> reply);
  // Relays `request` (sampling, elicitation, roots) to the client; `done` gets its answer once,
  // on any thread (an error when the client cannot take it, does not answer in time, or the
  // session ends).
  void AskClient(Entry& entry, const mcp::Request& request, std::function<void(mcp::Message)> done);

 public:
  // The same, through `sink` (a request's related stream, or the session's): how warden itself
  // asks the client (the approval stage's in-band elicitation). The client's capabilities are
  // checked as for relayed requests.
  void AskClientOn(MessageSink sink, const mcp::Request& request,
                   std::function<void(mcp::Message)> done);

 private:
  // The upstream a URI belongs to, from this session's listings; nullptr when none says.
  Entry* OwnerOfUri(const std::string& uri);
  // `then` with OwnerOfUri, else the only upstream with resources, else the owner after listing
  // every upstream's resources and templates (nullptr: none); once, on any thread.
  void WithOwnerOfUri(const std::string& uri, McpSession::InFlight& flight,
                      std::function<void(Entry*)> then);
  void AddTemplateOwner(std::string prefix, Entry* owner);
  Entry* ByExposedPrompt(const std::string& name, std::string* upstream_name);
  std::shared_ptr<CallContext> ContextFor(const identity::Caller& caller,
                                          const std::string& session_id, Entry& entry,
                                          const std::string& method, const nlohmann::json& params);
  // resources/subscribe and resources/unsubscribe, counted against the instance's other holders.
  void Subscription(const mcp::Request& request, McpSession::InFlight& flight,
                    std::shared_ptr<CallContext> call, Entry& owner, const std::string& uri,
                    std::function<void(mcp::Message)> reply);

  GatewayCore& core_;
  McpSession& session_;
  std::vector<std::unique_ptr<Entry>> entries_;
  std::atomic<bool> stopped_{false};
  bool at_cap_ = false;

  std::mutex mu_;
  std::map<std::string, Progress> progress_;  // rewritten token -> the client's
  std::map<std::string, Asked> asked_;        // the id we gave the client -> who waits
  std::map<std::string, Entry*> uri_owner_;   // from resources/list
  std::vector<std::pair<std::string, Entry*>> template_owner_;  // uriTemplate prefix -> owner
  std::map<std::string, std::pair<Entry*, std::string>> prompt_owner_;  // exposed -> upstream name
  std::map<Entry*, std::set<std::string>> subscribed_;  // URIs this session subscribed to
};

}  // namespace warden::gateway
