// The MCP side of an upstream client: ids, pending requests, timeouts, cancellation, the initialize
// handshake and the restart loop. Transports are behind Connection (connection.h).
//
// Threads: a supervisor (connect, handshake, wait for the end, back off, again) and a timer
// (request deadlines), plus the connection's own. One mutex guards the state below; every
// callback (Done, Events) is called after it is released.
#include "upstream/client.h"

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <future>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "common/guard.h"
#include "common/http_token.h"
#include "mcp/modern.h"
#include "mcp/protocol_version.h"
#include "sandbox/options.h"
#include "upstream/connection.h"
#include "upstream/http_url.h"

namespace warden::upstream {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kTimedOut = -32001;
constexpr int kCancelled = -32800;
constexpr std::size_t kMaxSubscriptions = 4096;  // resources on one listen stream
constexpr milliseconds kListenBackoffInitial{500};
constexpr milliseconds kListenBackoffMax{30000};

// The requests a modern server may answer with input_required (2026-07-28, "Multi Round-Trip
// Requests"): only these are kept for a retry.
bool MayAskForInput(const std::string& method) {
  return method == "tools/call" || method == "prompts/get" || method == "resources/read";
}

bool IsInputRequired(const mcp::Message& message) {
  const auto* r = std::get_if<mcp::Response>(&message);
  if (r == nullptr || !r->result.is_object()) return false;
  auto it = r->result.find("resultType");
  return it != r->result.end() && it->is_string() && *it == "input_required";
}

std::string Millis(milliseconds ms) { return std::to_string(ms.count()) + " ms"; }

std::string SupportedVersions() {
  std::string out;
  for (std::string_view v : mcp::kSupportedVersions)
    out += (out.empty() ? "" : ", ") + std::string(v);
  return out;
}

// One request the client is waiting on (or waiting to send, while not ready).
struct Pending {
  std::string method;
  std::optional<nlohmann::json> params;  // kept only until sent
  Client::Done done;
  milliseconds timeout{0};
  Clock::time_point deadline;
  bool sent = false;
  uint64_t generation = 0;  // the connection it was sent on
  bool internal = false;    // initialize: its deadline is the handshake's, not the timer's
  std::map<std::string, std::string> headers;  // HTTP headers for this request alone
  // A modern server's multi round-trip: the id Send returned (a retry has a new wire id), the
  // params as the caller gave them (kept for the retries of MayAskForInput methods only), the
  // input_required rounds so far, and whether the client is gathering answers right now.
  int64_t handle = 0;
  std::optional<nlohmann::json> retry_params;
  int rounds = 0;
  bool awaiting_input = false;
  bool relay_input = false;                     // SendOptions::relay_input_required
  std::optional<nlohmann::json> capabilities;  // SendOptions::client_capabilities
};

// The answers to one input_required, gathered from the gateway (any thread, any order).
struct InputRound {
  std::mutex mu;
  std::size_t remaining = 0;
  bool failed = false;
  nlohmann::json responses = nlohmann::json::object();
  std::optional<std::string> request_state;
};

// Lets a callback that may outlive the client (a question's reply, answered later by the gateway)
// reach it only while it lives.
struct Life {
  std::mutex mu;
  class ClientImpl* self = nullptr;
};

// Sends with the request's own headers when it has any.
void SendOn(Connection& conn, const mcp::Message& message,
            const std::map<std::string, std::string>& headers) {
  if (headers.empty()) {
    conn.Send(message);
  } else {
    conn.SendWithHeaders(message, headers);
  }
}

// A one-shot slot for the handshake's reply.
struct Slot {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<mcp::Message> message;
  void Set(mcp::Message m) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!message) message = std::move(m);
    }
    cv.notify_all();
  }
};

struct StartOutcome {
  bool ok = false;
  bool fatal = false;  // restarting cannot help (the server speaks no version warden does)
  std::string why;
};

class ClientImpl final : public Client {
 public:
  ClientImpl(Spec spec, Events events, ClientOptions options)
      : spec_(std::move(spec)), events_(std::move(events)), options_(std::move(options)) {
    life_->self = this;
    timer_ = std::thread(
        [this] { RunGuarded("upstream timer", "request timeouts stop", [this] { TimerLoop(); }); });
  }
  ~ClientImpl() override { Stop(); }

  void Start() override;
  bool WaitReady(milliseconds timeout) override;
  uint64_t Send(const std::string& method, nlohmann::json params, Done done,
                milliseconds timeout) override {
    return SendWithHeaders(method, std::move(params), std::move(done), timeout, {});
  }
  uint64_t SendWithHeaders(const std::string& method, nlohmann::json params, Done done,
                           milliseconds timeout,
                           std::map<std::string, std::string> headers) override {
    SendOptions options;
    options.timeout = timeout;
    options.headers = std::move(headers);
    return SendRequest(method, std::move(params), std::move(done), std::move(options));
  }
  uint64_t SendRequest(const std::string& method, nlohmann::json params, Done done,
                       SendOptions options) override;
  void Cancel(uint64_t handle, const std::string& reason) override;
  void Notify(const std::string& method, nlohmann::json params) override;
  void Restart(const std::string& why) override;
  void Stop() override;

  State state() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return state_;
  }
  ServerInfo info() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return info_;
  }
  const Spec& spec() const override { return spec_; }
  int pid() const override {
    std::shared_ptr<Connection> conn;
    {
      std::lock_guard<std::mutex> lock(mu_);
      conn = conn_;
    }
    return conn ? conn->pid() : 0;
  }

 private:
  void Supervise();
  StartOutcome StartOnce();
  StartOutcome Handshake(const std::shared_ptr<Connection>& conn, uint64_t generation,
                         Clock::time_point deadline);
  // Sends a request of the client's own (the handshake's) on `conn` and waits for its reply
  // until `until`; nullopt when none came.
  std::optional<mcp::Message> AwaitInternal(const std::shared_ptr<Connection>& conn,
                                            uint64_t generation, const std::string& method,
                                            nlohmann::json params, Clock::time_point until);
  enum class Probed { kModern, kLegacy, kFailed };
  Probed Probe(const std::shared_ptr<Connection>& conn, uint64_t generation,
               Clock::time_point deadline, StartOutcome& failed);

  // Modern servers (mu_ held): params._meta of every request; the request for pending `id` as it
  // goes on the wire; the answer to a method the revision removed (nullopt: not one).
  nlohmann::json DecorateLocked(std::optional<nlohmann::json> params,
                                const std::optional<nlohmann::json>& capabilities = std::nullopt) const;
  mcp::Request WireLocked(int64_t id, Pending& p);
  std::optional<mcp::Message> AnswerLocally(int64_t id, const std::string& method,
                                            const std::optional<nlohmann::json>& params,
                                            bool& listen_changed);
  // Tells the server that request `id` is no longer wanted: notifications/cancelled (legacy, and
  // modern stdio) and the HTTP response stream closed (which is the signal to a modern server).
  void CancelOnWire(Connection& conn, int64_t id, const std::string& reason, bool modern);
  // The subscriptions/listen stream of a modern server: (re)opened with what the server offers
  // and the resources subscribed to; the old one ends once the new one is sent.
  void OpenListen();
  void OnListenEnded(uint64_t generation, int64_t id, const mcp::Message& reply);
  // A modern server's input_required for pending `id` (kept, awaiting_input set).
  void OnInputRequired(int64_t id, const nlohmann::json& result, int rounds);
  void AnswerInput(int64_t id, const std::shared_ptr<InputRound>& round, const std::string& key,
                   const mcp::Message& reply);
  void RetryWithInput(int64_t id, const std::shared_ptr<InputRound>& round);
  void FailInput(int64_t id, int code, const std::string& what);
  void CloseCurrent();
  void GoReady();
  void SetState(State state, const std::string& why);
  void GiveUp(const std::string& why);
  void TimerLoop();

  // From the connection's threads.
  void OnMessage(uint64_t generation, mcp::Message message);
  void OnServerRequest(uint64_t generation, mcp::Request request);
  void OnDead(uint64_t generation, const std::string& why, const std::string& error);
  void OnRequestFailed(uint64_t generation, int64_t id, const std::string& error);

  // Removes and returns pending request `id` (mu_ held).
  std::optional<Pending> TakeLocked(int64_t id);
  mcp::ErrorResponse Error(int64_t id, int code, const std::string& what) const {
    return mcp::MakeError(mcp::Id(id), code, "upstream " + spec_.name + ": " + what);
  }

  const Spec spec_;
  const Events events_;
  const ClientOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;        // state, deaths, stop: the supervisor and WaitReady wait here
  std::condition_variable timer_cv_;  // deadlines changed, or the timer must end
  State state_ = State::kStarting;
  bool started_ = false;
  bool stopping_ = false;
  bool gave_up_ = false;  // restarts exhausted or a fatal start: kStopped for good
  bool timer_stop_ = false;
  std::shared_ptr<Connection> conn_;
  uint64_t generation_ = 0;       // of conn_
  bool ready_ = false;            // conn_ is initialized: requests go straight out
  bool restart_requested_ = false;  // Restart(): the next end is not a failure
  uint64_t dead_generation_ = 0;  // the last connection that reported its end
  std::string dead_why_;
  int64_t next_id_ = 1;
  std::map<int64_t, Pending> pending_;
  std::set<std::pair<Clock::time_point, int64_t>> deadlines_;
  ServerInfo info_;
  // Modern servers (2026-07-28).
  bool modern_ = false;                 // the current server: probed, found modern
  std::string log_level_;               // logging/setLevel's, sent in each request's _meta
  std::set<std::string> subscriptions_;  // resources/subscribe's, on the listen stream
  int64_t listen_id_ = 0;               // the open subscriptions/listen request, 0: none
  bool listen_refused_ = false;         // the server answered it with an error: not again
  bool skip_probe_ = false;             // a server died of the probe once: legacy from now on
  milliseconds listen_backoff_ = kListenBackoffInitial;
  std::optional<Clock::time_point> listen_retry_at_;  // the timer reopens it then
  std::map<int64_t, int64_t> aliases_;  // a retried call's handle -> its current wire id
  std::shared_ptr<Life> life_ = std::make_shared<Life>();

  std::mutex stop_mu_;  // Stop is idempotent and may race itself
  std::thread supervisor_;
  std::thread timer_;
};

void ClientImpl::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_ || stopping_) return;
  started_ = true;
  supervisor_ = std::thread([this] {
    RunGuarded("upstream supervisor", "the upstream is not restarted", [this] { Supervise(); });
  });
}

bool ClientImpl::WaitReady(milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout,
               [this] { return state_ == State::kReady || state_ == State::kStopped; });
  return state_ == State::kReady;
}

uint64_t ClientImpl::SendRequest(const std::string& method, nlohmann::json params, Done done,
                                 SendOptions options) {
  milliseconds timeout = options.timeout;
  if (timeout.count() <= 0) timeout = options_.request_timeout;
  std::shared_ptr<Connection> conn;
  int64_t id;
  mcp::Request request;
  std::map<std::string, std::string> headers_of_sent;
  bool stopped = false;
  bool earliest = false;
  std::optional<mcp::Message> local;
  bool listen_changed = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_id_++;
    stopped = stopping_ || gave_up_;
    if (!stopped && ready_ && modern_ && mcp::RemovedInModern(method)) {
      std::optional<nlohmann::json> given;
      if (!params.is_null()) given = params;
      local = AnswerLocally(id, method, given, listen_changed);
    }
    if (!stopped && !local) {
      const auto deadline = Clock::now() + timeout;
      // The timer thread sleeps until the earliest deadline: wake it only when this one is
      // earlier (one wake-up per call otherwise, for nothing: bench/README.md "Gateway").
      earliest = deadlines_.empty() || deadline < deadlines_.begin()->first;
      Pending p;
      p.method = method;
      if (!params.is_null()) p.params = std::move(params);
      p.done = std::move(done);
      p.headers = std::move(options.headers);
      p.relay_input = options.relay_input_required;
      p.capabilities = std::move(options.client_capabilities);
      p.timeout = timeout;
      p.deadline = deadline;
      p.handle = id;
      if (ready_ && conn_) {
        p.sent = true;
        p.generation = generation_;
        conn = conn_;
        request = WireLocked(id, p);
        headers_of_sent = p.headers;
      }
      deadlines_.emplace(p.deadline, id);
      pending_.emplace(id, std::move(p));
    }
  }
  if (stopped) {
    done(Error(id, mcp::kInternalError, "stopped"));
    return static_cast<uint64_t>(id);
  }
  if (local) {
    if (listen_changed) OpenListen();
    done(std::move(*local));
    return static_cast<uint64_t>(id);
  }
  if (earliest) timer_cv_.notify_one();
  if (conn) SendOn(*conn, request, headers_of_sent);
  return static_cast<uint64_t>(id);
}

void ClientImpl::Cancel(uint64_t handle, const std::string& reason) {
  auto id = static_cast<int64_t>(handle);
  std::shared_ptr<Connection> conn;
  std::optional<Pending> p;
  bool modern;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto alias = aliases_.find(id); alias != aliases_.end()) id = alias->second;
    p = TakeLocked(id);
    if (!p) return;
    // A call gathering answers has nothing out on the wire.
    if (p->sent && !p->awaiting_input && conn_ && p->generation == generation_) conn = conn_;
    modern = modern_;
  }
  if (conn) CancelOnWire(*conn, id, reason, modern);
  p->done(mcp::MakeError(mcp::Id(id), kCancelled, "request cancelled"));
}

void ClientImpl::CancelOnWire(Connection& conn, int64_t id, const std::string& reason,
                              bool modern) {
  // A modern server over HTTP takes the closed response stream as the cancellation and expects
  // no notification; over stdio the notification is the only way.
  if (!modern || spec_.url.empty()) {
    nlohmann::json params = {{"requestId", id}};
    if (!reason.empty()) params["reason"] = reason;
    conn.Send(mcp::Notification{"notifications/cancelled", std::move(params)});
  }
  conn.Abandon(id);
}

void ClientImpl::Notify(const std::string& method, nlohmann::json params) {
  std::shared_ptr<Connection> conn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A modern server takes no notifications from its client but cancellations, which are
    // Cancel's: roots and the rest are asked for in input_required instead.
    if (ready_ && !modern_) conn = conn_;
  }
  // Not ready: dropped. Notifications are one-way; a restarted server starts from scratch anyway.
  if (!conn) return;
  mcp::Notification n{method, std::nullopt};
  if (!params.is_null()) n.params = std::move(params);
  conn->Send(n);
}

void ClientImpl::Restart(const std::string& why) {
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || gave_up_ || !supervisor_.joinable()) return;
    restart_requested_ = true;
    generation = generation_;
  }
  OnDead(generation, "restarted: " + why, "restarted: " + why);
}

void ClientImpl::Stop() {
  std::lock_guard<std::mutex> stop_lock(stop_mu_);
  {
    // From now on an answer the gateway gives to a modern server's question reaches nobody.
    std::lock_guard<std::mutex> lock(life_->mu);
    life_->self = nullptr;
  }
  std::map<int64_t, Pending> failed;
  bool was_started;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    was_started = started_;
    failed.swap(pending_);
    deadlines_.clear();
  }
  cv_.notify_all();
  for (auto& [id, p] : failed) p.done(Error(id, mcp::kInternalError, "stopped"));
  // The supervisor owns the connection: it closes it (kills the sandbox / ends the session).
  if (supervisor_.joinable()) supervisor_.join();
  if (!was_started) SetState(State::kStopped, "stopped");
  {
    std::lock_guard<std::mutex> lock(mu_);
    timer_stop_ = true;
  }
  timer_cv_.notify_all();
  if (timer_.joinable()) timer_.join();
}

std::optional<Pending> ClientImpl::TakeLocked(int64_t id) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return std::nullopt;
  Pending p = std::move(it->second);
  pending_.erase(it);
  if (!p.internal) deadlines_.erase({p.deadline, id});
  if (p.handle != 0 && p.handle != id) aliases_.erase(p.handle);
  return p;
}

void ClientImpl::SetState(State state, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_ = state;
  }
  // The callback first: whoever WaitReady wakes can rely on the gateway having seen the change.
  if (events_.on_state) events_.on_state(state, why);
  cv_.notify_all();
}

void ClientImpl::Supervise() {
  int failures = 0;
  milliseconds backoff = options_.backoff_initial;
  std::string why = "starting";
  for (;;) {
    SetState(State::kStarting, why);
    StartOutcome outcome = StartOnce();
    if (outcome.ok) {
      failures = 0;
      backoff = options_.backoff_initial;
      GoReady();
      uint64_t generation;
      {
        std::unique_lock<std::mutex> lock(mu_);
        generation = generation_;
        cv_.wait(lock, [&] { return stopping_ || dead_generation_ == generation; });
        why = dead_why_;
      }
    } else {
      why = outcome.why;
    }
    CloseCurrent();
    bool requested = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) break;
      requested = std::exchange(restart_requested_, false);
    }
    if (requested && outcome.ok) continue;  // Restart(): at once, not a failure
    if (outcome.fatal) return GiveUp(why);
    if (++failures > options_.max_restarts)
      return GiveUp(why + " (gave up after " + std::to_string(options_.max_restarts) +
                    " restarts)");
    SetState(State::kRestarting, why);
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, backoff, [this] { return stopping_; })) break;
    }
    backoff = std::min(backoff * 2, options_.backoff_max);
  }
  SetState(State::kStopped, "stopped");
}

StartOutcome ClientImpl::StartOnce() {
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return {false, false, "stopped"};
    generation = ++generation_;
  }
  ConnectionSink sink;
  sink.on_message = [this, generation](mcp::Message m) { OnMessage(generation, std::move(m)); };
  sink.on_dead = [this, generation](const std::string& why, const std::string& error) {
    OnDead(generation, why, error);
  };
  sink.on_request_failed = [this, generation](int64_t id, const std::string& error) {
    OnRequestFailed(generation, id, error);
  };
  std::shared_ptr<Connection> conn;
  if (!spec_.command.empty()) {
    std::map<std::string, std::string> env;
    if (spec_.start_env) {
      // Resolved per start: a rotated secret reaches the next process. A secret that cannot be
      // had ends the client (fatal): restarting would only fail the same way.
      auto resolved = spec_.start_env();
      if (!resolved) return {false, true, resolved.status().message()};
      env = std::move(*resolved);
    }
    conn = MakeStdioConnection(spec_, options_, std::move(sink), std::move(env));
  } else {
    auto made = MakeHttpConnection(spec_, options_, std::move(sink));
    if (!made) return {false, true, made.status().message()};
    conn = std::move(*made);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return {false, false, "stopped"};
    conn_ = conn;
    ready_ = false;
    modern_ = false;  // each server process is probed anew (a restart may run another binary)
    listen_id_ = 0;
    listen_refused_ = false;
    listen_retry_at_.reset();
  }
  const auto deadline = Clock::now() + options_.connect_timeout;
  Status opened = conn->Open(deadline);
  if (!opened.ok()) return {false, false, "could not start: " + opened.message()};
  return Handshake(conn, generation, deadline);
}

std::optional<mcp::Message> ClientImpl::AwaitInternal(const std::shared_ptr<Connection>& conn,
                                                      uint64_t generation,
                                                      const std::string& method,
                                                      nlohmann::json params,
                                                      Clock::time_point until) {
  auto slot = std::make_shared<Slot>();
  int64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return std::nullopt;
    id = next_id_++;
    Pending p;
    p.method = method;
    p.done = [slot](mcp::Message m) { slot->Set(std::move(m)); };
    p.sent = true;
    p.generation = generation;
    p.internal = true;
    p.handle = id;
    pending_.emplace(id, std::move(p));
  }
  conn->Send(mcp::Request{mcp::Id(id), method, std::move(params)});
  std::optional<mcp::Message> reply;
  {
    std::unique_lock<std::mutex> lock(slot->mu);
    slot->cv.wait_until(lock, until, [&] { return slot->message.has_value(); });
    reply = slot->message;
  }
  if (!reply) {
    std::lock_guard<std::mutex> lock(mu_);
    TakeLocked(id);
  }
  return reply;
}

ClientImpl::Probed ClientImpl::Probe(const std::shared_ptr<Connection>& conn, uint64_t generation,
                                     Clock::time_point deadline, StartOutcome& failed) {
  nlohmann::json params;
  {
    std::lock_guard<std::mutex> lock(mu_);
    params = DecorateLocked(std::nullopt);
  }
  const auto until = std::min(deadline, Clock::now() + options_.probe_timeout);
  std::optional<mcp::Message> reply =
      AwaitInternal(conn, generation, "server/discover", std::move(params), until);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      failed = {false, false, "stopped"};
      return Probed::kFailed;
    }
    // The server died under the probe (a stdio server that exits on an unknown method, say):
    // that says nothing of its era, and the restart probes again.
    if (dead_generation_ == generation) {
      skip_probe_ = true;  // the next start goes straight to initialize
      failed = {false, false, dead_why_ + " (on warden's server/discover probe)"};
      return Probed::kFailed;
    }
  }
  if (!reply) return Probed::kLegacy;  // silence: a legacy server ignoring a pre-initialize call
  if (auto* error = std::get_if<mcp::ErrorResponse>(&*reply)) {
    if (!mcp::IsModernErrorCode(error->code)) return Probed::kLegacy;
    // A modern error: the server is modern. It may still speak a legacy version warden speaks
    // too (a dual-era server declining 2026-07-28), which initialize then reaches.
    if (error->code == mcp::kUnsupportedProtocolVersion && error->data &&
        error->data->is_object() && error->data->contains("supported") &&
        (*error->data)["supported"].is_array()) {
      for (const auto& v : (*error->data)["supported"])
        if (v.is_string() && mcp::IsSupportedVersion(v.get<std::string>())) return Probed::kLegacy;
    }
    failed = {false, true,
              "the server refused warden's server/discover: " + error->message + " (code " +
                  std::to_string(error->code) + ")"};
    return Probed::kFailed;
  }
  const nlohmann::json& result = std::get<mcp::Response>(*reply).result;
  bool modern = false;
  if (result.is_object() && result.contains("supportedVersions") &&
      result["supportedVersions"].is_array())
    for (const auto& v : result["supportedVersions"])
      modern = modern || (v.is_string() && mcp::IsModernVersion(v.get<std::string>()));
  if (!modern) return Probed::kLegacy;
  ServerInfo info;
  info.protocol_version = std::string(mcp::kModernVersion);
  info.modern = true;
  if (result.contains("capabilities") && result["capabilities"].is_object())
    info.capabilities = result["capabilities"];
  if (result.contains("instructions") && result["instructions"].is_string())
    info.instructions = result["instructions"].get<std::string>();
  // serverInfo travels in the result's _meta in this revision; older drafts had it beside.
  if (result.contains("serverInfo") && result["serverInfo"].is_object())
    info.server_info = result["serverInfo"];
  if (result.contains("_meta") && result["_meta"].is_object() &&
      result["_meta"].contains(mcp::kMetaServerInfo) &&
      result["_meta"][mcp::kMetaServerInfo].is_object())
    info.server_info = result["_meta"][mcp::kMetaServerInfo];
  std::lock_guard<std::mutex> lock(mu_);
  info_ = std::move(info);
  modern_ = true;
  return Probed::kModern;
}

StartOutcome ClientImpl::Handshake(const std::shared_ptr<Connection>& conn, uint64_t generation,
                                   Clock::time_point deadline) {
  bool probe;
  {
    std::lock_guard<std::mutex> lock(mu_);
    probe = options_.era == Era::kModern || (options_.era == Era::kAuto && !skip_probe_);
  }
  if (probe) {
    StartOutcome failed;
    switch (Probe(conn, generation, deadline, failed)) {
      case Probed::kModern:
        return {true, false, ""};  // no initialize, no session, no GET stream
      case Probed::kFailed:
        return failed;
      case Probed::kLegacy:
        if (options_.era == Era::kModern)
          return {false, true,
                  "the server does not speak MCP 2026-07-28 (it did not answer server/discover "
                  "as a modern server does), and this upstream is set to speak nothing else"};
        break;
    }
  }
  nlohmann::json params = {{"protocolVersion", options_.protocol_version},
                           {"capabilities", options_.client_capabilities},
                           {"clientInfo", options_.client_info}};
  std::optional<mcp::Message> reply =
      AwaitInternal(conn, generation, "initialize", std::move(params), deadline);
  if (!reply) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return {false, false, "stopped"};
    }
    return {false, false, "initialize timed out after " + Millis(options_.connect_timeout)};
  }
  if (auto* error = std::get_if<mcp::ErrorResponse>(&*reply)) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return {false, false, "stopped"};
    // A death during the handshake fails the initialize with the death's message; say the death.
    if (dead_generation_ == generation) return {false, false, dead_why_};
    std::string message = error->message;
    const std::string ours = "upstream " + spec_.name + ": ";  // a local failure (HTTP)
    if (message.rfind(ours, 0) == 0)
      return {false, false, "initialize failed: " + message.substr(ours.size())};
    return {false, false,
            "initialize failed: " + message + " (code " + std::to_string(error->code) + ")"};
  }
  const nlohmann::json& result = std::get<mcp::Response>(*reply).result;
  if (!result.is_object() || !result.contains("protocolVersion") ||
      !result["protocolVersion"].is_string())
    return {false, true, "initialize result has no protocolVersion string"};
  ServerInfo info;
  info.protocol_version = result["protocolVersion"].get<std::string>();
  if (!mcp::IsSupportedVersion(info.protocol_version))
    return {false, true,
            "the server answered protocol version '" + info.protocol_version +
                "', which warden does not speak (it speaks " + SupportedVersions() + ")"};
  if (result.contains("capabilities") && result["capabilities"].is_object())
    info.capabilities = result["capabilities"];
  if (result.contains("serverInfo") && result["serverInfo"].is_object())
    info.server_info = result["serverInfo"];
  if (result.contains("instructions") && result["instructions"].is_string())
    info.instructions = result["instructions"].get<std::string>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    info_ = std::move(info);
  }
  conn->Initialized(info_.protocol_version, deadline);
  return {true, false, ""};
}

void ClientImpl::GoReady() {
  std::shared_ptr<Connection> conn;
  std::vector<std::pair<mcp::Message, std::map<std::string, std::string>>> queued;
  std::vector<std::pair<Client::Done, mcp::Message>> answered;  // removed methods, modern
  bool listen_changed = false;
  std::string name;
  bool modern;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || !conn_) return;
    ready_ = true;
    conn = conn_;
    modern = modern_;
    for (auto it = pending_.begin(); it != pending_.end();) {
      auto& [id, p] = *it;
      if (p.sent) {
        ++it;
        continue;
      }
      if (modern_) {
        auto local = AnswerLocally(id, p.method, p.params, listen_changed);
        if (local) {
          answered.emplace_back(std::move(p.done), std::move(*local));
          if (!p.internal) deadlines_.erase({p.deadline, id});
          it = pending_.erase(it);
          continue;
        }
      }
      p.sent = true;
      p.generation = generation_;
      queued.emplace_back(WireLocked(id, p), p.headers);
      ++it;
    }
    name = info_.server_info.value("name", std::string("?"));
  }
  SetState(State::kReady, (modern ? "discovered " : "initialized ") + name + " (protocol " +
                              info().protocol_version + ")");
  for (const auto& [m, headers] : queued) SendOn(*conn, m, headers);
  for (auto& [done, reply] : answered) done(std::move(reply));
  if (modern) OpenListen();
}

nlohmann::json ClientImpl::DecorateLocked(std::optional<nlohmann::json> params,
                                          const std::optional<nlohmann::json>& capabilities) const {
  nlohmann::json out = params && params->is_object() ? std::move(*params) : nlohmann::json::object();
  nlohmann::json& meta = out["_meta"];
  if (!meta.is_object()) meta = nlohmann::json::object();
  // warden's own values, whatever the caller's params held under these keys: the server must
  // see what warden (its client) can do, not what a downstream client claimed.
  meta[mcp::kMetaProtocolVersion] = std::string(mcp::kModernVersion);
  meta[mcp::kMetaClientCapabilities] =
      capabilities && capabilities->is_object() ? *capabilities : options_.client_capabilities;
  meta[mcp::kMetaClientInfo] = options_.client_info;
  if (log_level_.empty())
    meta.erase(mcp::kMetaLogLevel);
  else
    meta[mcp::kMetaLogLevel] = log_level_;
  return out;
}

mcp::Request ClientImpl::WireLocked(int64_t id, Pending& p) {
  std::optional<nlohmann::json> params = std::move(p.params);
  p.params.reset();
  if (!modern_) {
    // A legacy server knows no multi round-trips: answers a 2026 client sent along are not its.
    if (params && params->is_object() && MayAskForInput(p.method)) {
      params->erase("inputResponses");
      params->erase("requestState");
    }
    return mcp::Request{mcp::Id(id), p.method, std::move(params)};
  }
  if (MayAskForInput(p.method) && !p.retry_params && !p.relay_input)
    p.retry_params = params ? *params : nlohmann::json::object();
  return mcp::Request{mcp::Id(id), p.method, DecorateLocked(std::move(params), p.capabilities)};
}

std::optional<mcp::Message> ClientImpl::AnswerLocally(int64_t id, const std::string& method,
                                                      const std::optional<nlohmann::json>& params,
                                                      bool& listen_changed) {
  if (!mcp::RemovedInModern(method) || method == "initialize") return std::nullopt;
  const auto ok = mcp::Message(mcp::Response{mcp::Id(id), nlohmann::json::object()});
  if (method == "ping") return ok;
  if (method == "logging/setLevel") {
    if (!params || !params->is_object() || !params->contains("level") ||
        !(*params)["level"].is_string())
      return mcp::MakeError(mcp::Id(id), mcp::kInvalidParams, "params.level must be a string");
    log_level_ = (*params)["level"].get<std::string>();
    return ok;
  }
  // resources/subscribe and resources/unsubscribe: the set on the listen stream.
  if (!params || !params->is_object() || !params->contains("uri") || !(*params)["uri"].is_string())
    return mcp::MakeError(mcp::Id(id), mcp::kInvalidParams, "params.uri must be a string");
  const std::string uri = (*params)["uri"].get<std::string>();
  if (method == "resources/subscribe") {
    if (subscriptions_.size() >= kMaxSubscriptions && !subscriptions_.count(uri))
      return Error(id, mcp::kInvalidParams,
                   "more than " + std::to_string(kMaxSubscriptions) + " resources subscribed");
    listen_changed = subscriptions_.insert(uri).second;
  } else {
    listen_changed = subscriptions_.erase(uri) > 0;
  }
  if (listen_changed) listen_refused_ = false;
  return ok;
}

void ClientImpl::OpenListen() {
  std::shared_ptr<Connection> conn;
  mcp::Request request;
  int64_t old = 0;
  bool open = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || !ready_ || !modern_ || !conn_) return;
    const nlohmann::json& caps = info_.capabilities;
    auto offers = [&](const char* feature, const char* flag) {
      return caps.contains(feature) && caps[feature].is_object() &&
             caps[feature].value(flag, false) == true;
    };
    nlohmann::json filter = nlohmann::json::object();
    if (offers("tools", "listChanged")) filter["toolsListChanged"] = true;
    if (offers("prompts", "listChanged")) filter["promptsListChanged"] = true;
    if (offers("resources", "listChanged")) filter["resourcesListChanged"] = true;
    if (offers("resources", "subscribe") && !subscriptions_.empty())
      filter["resourceSubscriptions"] = nlohmann::json(subscriptions_);
    old = std::exchange(listen_id_, 0);
    listen_retry_at_.reset();
    conn = conn_;
    if (!filter.empty() && !listen_refused_) {
      const int64_t id = next_id_++;
      const uint64_t generation = generation_;
      Pending p;
      p.method = "subscriptions/listen";
      p.sent = true;
      p.generation = generation;
      p.internal = true;  // no deadline: it lasts as long as the server keeps it
      p.handle = id;
      std::weak_ptr<Life> life = life_;
      p.done = [life, generation, id](mcp::Message reply) {
        if (auto l = life.lock()) {
          std::lock_guard<std::mutex> guard(l->mu);
          if (l->self) l->self->OnListenEnded(generation, id, reply);
        }
      };
      pending_.emplace(id, std::move(p));
      listen_id_ = id;
      request = mcp::Request{mcp::Id(id), "subscriptions/listen",
                             DecorateLocked(nlohmann::json{{"notifications", std::move(filter)}})};
      open = true;
    }
  }
  if (open) conn->Send(request);
  if (old != 0) {
    // The new stream is asked for first, so that no change falls between the two.
    bool had;
    bool modern;
    {
      std::lock_guard<std::mutex> lock(mu_);
      had = TakeLocked(old).has_value();
      modern = modern_;
    }
    if (had) CancelOnWire(*conn, old, "replaced", modern);
  }
}

void ClientImpl::OnListenEnded(uint64_t generation, int64_t id, const mcp::Message& reply) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || id != listen_id_ || generation != generation_ || !ready_) return;
    listen_id_ = 0;
    const auto* error = std::get_if<mcp::ErrorResponse>(&reply);
    const std::string ours = "upstream " + spec_.name + ": ";
    if (error != nullptr && error->message.rfind(ours, 0) != 0) {
      // The server itself refused the stream: asking again would be refused again. A new
      // subscription tries once more.
      listen_refused_ = true;
      return;
    }
    // The server ended it (a graceful end, or the stream broke): open it again, backing off.
    listen_retry_at_ = Clock::now() + listen_backoff_;
    listen_backoff_ = std::min(listen_backoff_ * 2, kListenBackoffMax);
  }
  timer_cv_.notify_all();
}

void ClientImpl::CloseCurrent() {
  std::shared_ptr<Connection> conn;
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(mu_);
    conn.swap(conn_);
    ready_ = false;
    generation = generation_;
  }
  if (conn) conn->Close();
  // Whatever was still out on that connection has no one left to answer it.
  std::vector<std::pair<int64_t, Pending>> orphaned;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.sent && it->second.generation == generation) {
        if (!it->second.internal) deadlines_.erase({it->second.deadline, it->first});
        orphaned.emplace_back(it->first, std::move(it->second));
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& [id, p] : orphaned) p.done(Error(id, mcp::kInternalError, "connection closed"));
}

void ClientImpl::GiveUp(const std::string& why) {
  std::map<int64_t, Pending> failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    failed.swap(pending_);
    deadlines_.clear();
    gave_up_ = true;  // before the callbacks: a Send from one of them fails at once
  }
  for (auto& [id, p] : failed) p.done(Error(id, mcp::kInternalError, "stopped: " + why));
  SetState(State::kStopped, why);
}

void ClientImpl::TimerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!timer_stop_) {
    if (listen_retry_at_ && Clock::now() >= *listen_retry_at_) {
      listen_retry_at_.reset();
      lock.unlock();
      OpenListen();
      lock.lock();
      continue;
    }
    if (deadlines_.empty()) {
      if (listen_retry_at_)
        timer_cv_.wait_until(lock, *listen_retry_at_);
      else
        timer_cv_.wait(lock);
      continue;
    }
    const auto [when, id] = *deadlines_.begin();
    if (Clock::now() < when) {
      timer_cv_.wait_until(lock, listen_retry_at_ ? std::min(when, *listen_retry_at_) : when);
      continue;
    }
    std::optional<Pending> p = TakeLocked(id);
    if (!p) continue;
    std::shared_ptr<Connection> conn;
    if (p->sent && !p->awaiting_input && conn_ && p->generation == generation_) conn = conn_;
    const bool modern = modern_;
    lock.unlock();
    if (conn) CancelOnWire(*conn, id, "timed out after " + Millis(p->timeout), modern);
    p->done(Error(id, kTimedOut, "request timed out after " + Millis(p->timeout)));
    lock.lock();
  }
}

void ClientImpl::OnMessage(uint64_t generation, mcp::Message message) {
  if (auto* request = std::get_if<mcp::Request>(&message))
    return OnServerRequest(generation, std::move(*request));
  if (auto* notification = std::get_if<mcp::Notification>(&message)) {
    if (notification->method == "notifications/subscriptions/acknowledged") {
      // The listen stream is up: the next break backs off from the start again.
      std::lock_guard<std::mutex> lock(mu_);
      listen_backoff_ = kListenBackoffInitial;
      return;
    }
    if (events_.on_notification) events_.on_notification(*notification);
    return;
  }
  std::optional<mcp::Id> id;
  if (auto* r = std::get_if<mcp::Response>(&message)) id = r->id;
  if (auto* e = std::get_if<mcp::ErrorResponse>(&message)) id = e->id;
  // Our ids are integers; anything else is not an answer to us.
  if (!id || !id->AsInt64()) return;
  std::optional<Pending> p;
  int rounds = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(*id->AsInt64());
    if (it == pending_.end() || !it->second.sent || it->second.awaiting_input ||
        it->second.generation != generation)
      return;
    if (modern_ && it->second.retry_params && IsInputRequired(message)) {
      // Kept (with its deadline) while the answers are gathered.
      it->second.awaiting_input = true;
      rounds = ++it->second.rounds;
    } else {
      p = TakeLocked(*id->AsInt64());
    }
  }
  if (!p) return OnInputRequired(*id->AsInt64(), std::get<mcp::Response>(message).result, rounds);
  p->done(std::move(message));
}

void ClientImpl::OnInputRequired(int64_t id, const nlohmann::json& result, int rounds) {
  if (rounds > options_.max_input_rounds)
    return FailInput(id, mcp::kInternalError,
                     "the server asked for input " + std::to_string(rounds) +
                         " times for one call; warden gives up after " +
                         std::to_string(options_.max_input_rounds));
  mcp::InputRequired asked;
  if (auto bad = mcp::ReadInputRequired(result, asked)) return FailInput(id, mcp::kInternalError, *bad);
  auto round = std::make_shared<InputRound>();
  round->request_state = std::move(asked.request_state);
  std::vector<std::pair<std::string, mcp::Request>> questions = std::move(asked.questions);
  for (size_t index = 0; index < questions.size(); ++index) {
    // An id of the client's own: the gateway forwards the question with its own ids anyway.
    questions[index].second.id =
        mcp::Id("warden-input-" + std::to_string(id) + "-" + std::to_string(index));
  }
  if (questions.empty()) return RetryWithInput(id, round);
  if (!events_.on_request)
    return FailInput(id, mcp::kMethodNotFound, "the server asked for input, which nobody here can give");
  round->remaining = questions.size();
  std::weak_ptr<Life> life = life_;
  for (auto& [key, question] : questions) {
    auto once = std::make_shared<std::atomic<bool>>(false);
    auto reply = [life, round, key = key, id, once](mcp::Message m) {
      if (once->exchange(true)) return;
      if (auto l = life.lock()) {
        std::lock_guard<std::mutex> guard(l->mu);
        if (l->self) l->self->AnswerInput(id, round, key, m);
      }
    };
    events_.on_request(question, std::move(reply));
  }
}

void ClientImpl::AnswerInput(int64_t id, const std::shared_ptr<InputRound>& round,
                             const std::string& key, const mcp::Message& reply) {
  bool complete = false;
  std::optional<mcp::ErrorResponse> refused;
  {
    std::lock_guard<std::mutex> lock(round->mu);
    if (round->failed) return;
    if (const auto* error = std::get_if<mcp::ErrorResponse>(&reply)) {
      round->failed = true;
      refused = *error;
    } else if (const auto* ok = std::get_if<mcp::Response>(&reply)) {
      round->responses[key] = ok->result;
      complete = --round->remaining == 0;
    } else {
      round->failed = true;
      refused = mcp::MakeError(std::nullopt, mcp::kInternalError, "no answer");
    }
  }
  if (refused)
    return FailInput(id, refused->code,
                     "the client did not answer the server's question '" + key + "': " +
                         refused->message);
  if (complete) RetryWithInput(id, round);
}

void ClientImpl::RetryWithInput(int64_t id, const std::shared_ptr<InputRound>& round) {
  std::shared_ptr<Connection> conn;
  mcp::Request request;
  std::map<std::string, std::string> headers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(id);
    if (it == pending_.end() || !it->second.awaiting_input) return;  // cancelled or timed out
    std::optional<Pending> taken = TakeLocked(id);
    Pending p = std::move(*taken);
    nlohmann::json params = *p.retry_params;
    params.erase("inputResponses");
    params.erase("requestState");
    {
      std::lock_guard<std::mutex> guard(round->mu);
      if (!round->responses.empty()) params["inputResponses"] = round->responses;
      if (round->request_state) params["requestState"] = *round->request_state;
    }
    // A retry is a request of its own (a new id), the same call for the caller (same handle,
    // same deadline).
    const int64_t next = next_id_++;
    p.awaiting_input = false;
    p.params = std::move(params);
    p.sent = false;
    if (p.handle != next) aliases_[p.handle] = next;
    deadlines_.emplace(p.deadline, next);
    // A server that restarted meanwhile takes the retry as well: the state is in the request.
    if (ready_ && conn_ && modern_) {
      p.sent = true;
      p.generation = generation_;
      conn = conn_;
      request = WireLocked(next, p);
      headers = p.headers;
    }
    pending_.emplace(next, std::move(p));
  }
  timer_cv_.notify_one();
  if (conn) SendOn(*conn, request, headers);
}

void ClientImpl::FailInput(int64_t id, int code, const std::string& what) {
  std::optional<Pending> p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(id);
    if (it == pending_.end() || !it->second.awaiting_input) return;
    p = TakeLocked(id);
  }
  p->done(Error(id, code, what));
}

void ClientImpl::OnServerRequest(uint64_t generation, mcp::Request request) {
  std::weak_ptr<Connection> weak;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (generation != generation_) return;
    weak = conn_;
  }
  // The reply goes back on the connection the request came from, if it still exists; it may
  // outlive this client (the gateway answers later), so it holds no pointer to it.
  auto once = std::make_shared<std::atomic<bool>>(false);
  auto reply = [weak, once](mcp::Message m) {
    if (once->exchange(true)) return;
    if (auto conn = weak.lock()) conn->Send(m);
  };
  if (events_.on_request) return events_.on_request(request, std::move(reply));
  if (request.method == "ping") return reply(mcp::Response{request.id, nlohmann::json::object()});
  reply(mcp::MakeError(request.id, mcp::kMethodNotFound, "method not found: " + request.method));
}

void ClientImpl::OnDead(uint64_t generation, const std::string& why, const std::string& error) {
  std::vector<std::pair<int64_t, Pending>> failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (generation != generation_ || dead_generation_ == generation) return;
    dead_generation_ = generation;
    dead_why_ = why;
    ready_ = false;  // from now on Send queues until the restart is ready
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.sent && it->second.generation == generation) {
        if (!it->second.internal) deadlines_.erase({it->second.deadline, it->first});
        failed.emplace_back(it->first, std::move(it->second));
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }
  cv_.notify_all();
  for (auto& [id, p] : failed) p.done(Error(id, mcp::kInternalError, error));
}

void ClientImpl::OnRequestFailed(uint64_t generation, int64_t id, const std::string& error) {
  std::optional<Pending> p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(id);
    if (it == pending_.end() || !it->second.sent || it->second.generation != generation) return;
    p = TakeLocked(id);
  }
  p->done(Error(id, mcp::kInternalError, error));
}

// Extra HTTP headers go on the wire as given: refuse what would split a request (CR, LF) or
// override what the transport itself must control.
Status ValidateHeaders(const std::map<std::string, std::string>& headers) {
  static const std::set<std::string> kOwned = {
      "host",          "content-length", "content-type", "transfer-encoding",
      "connection",    "accept",         "mcp-session-id", "mcp-protocol-version",
      "last-event-id", "mcp-method",     "mcp-name"};
  for (const auto& [name, value] : headers) {
    if (!IsHttpToken(name)) return Status::Error("header name '" + name + "' is not an HTTP token");
    if (value.find_first_of(std::string("\r\n\0", 3)) != std::string::npos)
      return Status::Error("header '" + name + "' has a CR, LF or NUL in its value");
    std::string lower = name;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (kOwned.count(lower) || lower.rfind("mcp-param-", 0) == 0)
      return Status::Error("header '" + name + "' is set by the transport and cannot be given");
  }
  return Status::Ok();
}

Status ValidateOptions(const Spec& spec, const ClientOptions& o) {
  const std::string who = "upstream '" + spec.name + "'";
  if (spec.name.empty()) return Status::Error("upstream: the name is empty");
  if (spec.command.empty() == spec.url.empty())
    return Status::Error(who +
                         ": give exactly one of a command (stdio) or a url (Streamable HTTP)");
  if (!spec.command.empty()) {
    if (spec.command.front().empty())
      return Status::Error(who + ": the command's program is empty");
    sandbox::Options sandbox = spec.sandbox;
    sandbox.argv = spec.command;
    WARDEN_RETURN_IF_ERROR(sandbox::Validate(sandbox).Wrap(who + ": sandbox"));
  } else {
    auto url = ParseHttpUrl(spec.url);
    if (!url) return url.status().Wrap(who);
    WARDEN_RETURN_IF_ERROR(ValidateHeaders(spec.headers).Wrap(who));
  }
  if (o.connect_timeout.count() <= 0)
    return Status::Error(who + ": connect_timeout must be positive");
  if (o.request_timeout.count() <= 0)
    return Status::Error(who + ": request_timeout must be positive");
  if (o.backoff_initial.count() <= 0 || o.backoff_max < o.backoff_initial)
    return Status::Error(who + ": backoff needs 0 < backoff_initial <= backoff_max");
  if (o.max_restarts < 0) return Status::Error(who + ": max_restarts must be >= 0");
  if (o.max_message_bytes < 1024)
    return Status::Error(who + ": max_message_bytes must be at least 1024");
  if (!o.client_capabilities.is_object())
    return Status::Error(who + ": client_capabilities must be an object");
  if (!o.client_info.is_object()) return Status::Error(who + ": client_info must be an object");
  return Status::Ok();
}

}  // namespace

const char* StateName(State state) {
  switch (state) {
    case State::kStarting:
      return "starting";
    case State::kReady:
      return "ready";
    case State::kRestarting:
      return "restarting";
    case State::kStopped:
      return "stopped";
  }
  return "?";
}

Result<std::unique_ptr<Client>> Client::Create(Spec spec, Events events, ClientOptions options) {
  WARDEN_RETURN_IF_ERROR(ValidateOptions(spec, options));
  return std::unique_ptr<Client>(
      new ClientImpl(std::move(spec), std::move(events), std::move(options)));
}

mcp::Message Client::Call(const std::string& method, nlohmann::json params, milliseconds timeout) {
  auto promise = std::make_shared<std::promise<mcp::Message>>();
  std::future<mcp::Message> reply = promise->get_future();
  Send(
      method, std::move(params), [promise](mcp::Message m) { promise->set_value(std::move(m)); },
      timeout);
  return reply.get();
}

}  // namespace warden::upstream
