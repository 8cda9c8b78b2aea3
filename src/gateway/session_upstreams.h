// The upstream servers one downstream session holds. Each session has its own connections: an
// upstream's state (subscriptions, log level, roots, whatever the server keeps per client) never
// crosses from one agent's session to another's, requests an upstream makes to its client
// (sampling, elicitation, roots) have exactly one session to go to, and closing the session ends
// them (no orphaned processes). The cost is one upstream process per session and upstream.
//
// Tools, prompts and resources are merged across upstreams; tools and prompts are renamed
// PREFIX__NAME, resource URIs are kept and routed by the listing that produced them.
// Contract: docs/gateway.md ("Upstreams").
#pragma once

#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "gateway/session.h"
#include "policy/model.h"
#include "upstream/client.h"

namespace warden::gateway {

class SessionUpstreams : public std::enable_shared_from_this<SessionUpstreams> {
 public:
  SessionUpstreams(GatewayCore& core, McpSession& session) : core_(core), session_(session) {}
  ~SessionUpstreams();

  // Creates and starts a client for every upstream of `policy` (in the background).
  // `client_caps` are the downstream client's: sampling, elicitation and roots are offered
  // upstream only when the real client has them.
  Status Start(const policy::Policy& policy, const nlohmann::json& client_caps,
               const nlohmann::json& client_info, const std::string& protocol_version);
  bool Any() const { return !entries_.empty(); }

  // The tool definitions to list (exposed names, pinned and approved ones only); waits for each
  // upstream to be ready and listed, up to the gateway's upstream_ready_timeout.
  std::vector<nlohmann::json> Tools();
  // Fills call.server and call.forward when an upstream serves call.tool.
  void Route(CallContext& call, const nlohmann::json& params, McpSession::InFlight& flight);
  // resources/*, prompts/*, completion/complete, logging/setLevel.
  mcp::Message Forward(const mcp::Request& request, McpSession::InFlight& flight,
                       const Caller& caller, const std::string& session_id);
  // A notification from the client for every upstream (roots/list_changed).
  void NotifyAll(const std::string& method, const nlohmann::json& params);
  // The client answered a request an upstream made through us.
  void ClientReplied(const mcp::Message& message);
  // Stops every upstream (blocking until their processes are gone) and fails what waits on the
  // client. Idempotent.
  void StopAll();

 private:
  struct Entry {
    std::string name, prefix;
    std::unique_ptr<upstream::Client> client;
    std::mutex mu;
    std::condition_variable cv;
    bool listed = false;      // tools listed since the last start
    bool gone = false;        // stopped for good
    bool down = false;        // died and waiting to restart: lists do not wait for it
    std::string error;        // why listing failed
    nlohmann::json tools = nlohmann::json::array();  // upstream definitions
    std::set<std::string> shown;                       // upstream names pinning lets through
    int64_t pin_generation = -1;                       // the approvals `shown` reflects
  };
  struct Progress {
    nlohmann::json token;  // the client's own token
    MessageSink sink;
  };

  void OnNotification(Entry& entry, const mcp::Notification& note);
  void OnRequest(Entry& entry, const mcp::Request& request, std::function<void(mcp::Message)> reply);
  void OnState(Entry& entry, upstream::State state, const std::string& why);
  void ListToolsOf(Entry& entry, bool announce);
  bool WaitListed(Entry& entry);
  // Reviews the entry's tools against the pins again when an approval happened since.
  void RefreshPins(Entry& entry);
  // The pin review of `tools`: the names to show, or an error (then nothing is shown).
  Result<std::set<std::string>> Review(Entry& entry, const nlohmann::json& tools);
  int64_t PinGeneration() const;
  // Sends; `done` gets the reply exactly once, on the upstream client's thread (or this one when
  // the session has ended). Cancellable through `flight`; progress tokens rewritten to reach
  // `related`. `flight` must stay alive until `done` has run.
  void SendAsync(Entry& entry, const std::string& method, nlohmann::json params,
                 McpSession::InFlight* flight, std::function<void(mcp::Message)> done);
  // A tools/call reply as the execute stage wants it.
  static Result<ToolResult> ToolResultOf(const std::string& upstream, const mcp::Message& reply);
  // SendAsync, waiting on this thread.
  mcp::Message SendAndWait(Entry& entry, const std::string& method, nlohmann::json params,
                           McpSession::InFlight* flight);
  // Collects every page of a list method from one upstream.
  Result<nlohmann::json> ListAll(Entry& entry, const std::string& method, const char* member);
  mcp::Message AskClient(Entry& entry, const mcp::Request& request);
  // The upstream a URI belongs to, from this session's listings; nullptr when none says.
  Entry* OwnerOfUri(const std::string& uri);
  // OwnerOfUri, else the only upstream with resources, else after listing every upstream's
  // resources and templates.
  Entry* FindOwnerOfUri(const std::string& uri);
  void AddTemplateOwner(std::string prefix, Entry* owner);
  Entry* ByExposedPrompt(const std::string& name, std::string* upstream_name);
  CallContext ContextFor(const Caller& caller, const std::string& session_id, Entry& entry,
                         const std::string& method, const nlohmann::json& params);

  GatewayCore& core_;
  McpSession& session_;
  std::vector<std::unique_ptr<Entry>> entries_;
  std::atomic<bool> stopped_{false};
  std::atomic<uint64_t> counter_{0};

  std::mutex mu_;
  std::map<std::string, Progress> progress_;  // rewritten token -> the client's
  std::map<std::string, std::shared_ptr<std::promise<mcp::Message>>> asked_;  // id -> waiter
  std::map<std::string, Entry*> uri_owner_;        // from resources/list
  std::vector<std::pair<std::string, Entry*>> template_owner_;  // uriTemplate prefix -> owner
  std::map<std::string, std::pair<Entry*, std::string>> prompt_owner_;  // exposed -> upstream name
};

}  // namespace warden::gateway
