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
                           std::map<std::string, std::string> headers) override;
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

uint64_t ClientImpl::SendWithHeaders(const std::string& method, nlohmann::json params, Done done,
                                     milliseconds timeout,
                                     std::map<std::string, std::string> headers) {
  if (timeout.count() <= 0) timeout = options_.request_timeout;
  std::shared_ptr<Connection> conn;
  int64_t id;
  mcp::Request request;
  std::map<std::string, std::string> headers_of_sent;
  bool stopped = false;
  bool earliest = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_id_++;
    stopped = stopping_ || gave_up_;
    if (!stopped) {
      const auto deadline = Clock::now() + timeout;
      // The timer thread sleeps until the earliest deadline: wake it only when this one is
      // earlier (one wake-up per call otherwise, for nothing: bench/README.md "Gateway").
      earliest = deadlines_.empty() || deadline < deadlines_.begin()->first;
      Pending p;
      p.method = method;
      if (!params.is_null()) p.params = std::move(params);
      p.done = std::move(done);
      p.headers = std::move(headers);
      p.timeout = timeout;
      p.deadline = deadline;
      if (ready_ && conn_) {
        p.sent = true;
        p.generation = generation_;
        conn = conn_;
        request = mcp::Request{mcp::Id(id), method, std::move(p.params)};
        p.params.reset();
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
  if (earliest) timer_cv_.notify_one();
  if (conn) SendOn(*conn, request, headers_of_sent);
  return static_cast<uint64_t>(id);
}

void ClientImpl::Cancel(uint64_t handle, const std::string& reason) {
  const auto id = static_cast<int64_t>(handle);
  std::shared_ptr<Connection> conn;
  std::optional<Pending> p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    p = TakeLocked(id);
    if (!p) return;
    if (p->sent && conn_ && p->generation == generation_) conn = conn_;
  }
  if (conn) {
    nlohmann::json params = {{"requestId", id}};
    if (!reason.empty()) params["reason"] = reason;
    conn->Send(mcp::Notification{"notifications/cancelled", std::move(params)});
    conn->Abandon(id);
  }
  p->done(mcp::MakeError(mcp::Id(id), kCancelled, "request cancelled"));
}

void ClientImpl::Notify(const std::string& method, nlohmann::json params) {
  std::shared_ptr<Connection> conn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ready_) conn = conn_;
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
  }
  const auto deadline = Clock::now() + options_.connect_timeout;
  Status opened = conn->Open(deadline);
  if (!opened.ok()) return {false, false, "could not start: " + opened.message()};
  return Handshake(conn, generation, deadline);
}

StartOutcome ClientImpl::Handshake(const std::shared_ptr<Connection>& conn, uint64_t generation,
                                   Clock::time_point deadline) {
  auto slot = std::make_shared<Slot>();
  int64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return {false, false, "stopped"};
    id = next_id_++;
    Pending p;
    p.method = "initialize";
    p.done = [slot](mcp::Message m) { slot->Set(std::move(m)); };
    p.sent = true;
    p.generation = generation;
    p.internal = true;
    pending_.emplace(id, std::move(p));
  }
  nlohmann::json params = {{"protocolVersion", options_.protocol_version},
                           {"capabilities", options_.client_capabilities},
                           {"clientInfo", options_.client_info}};
  conn->Send(mcp::Request{mcp::Id(id), "initialize", std::move(params)});
  std::optional<mcp::Message> reply;
  {
    std::unique_lock<std::mutex> lock(slot->mu);
    slot->cv.wait_until(lock, deadline, [&] { return slot->message.has_value(); });
    reply = slot->message;
  }
  if (!reply) {
    std::lock_guard<std::mutex> lock(mu_);
    TakeLocked(id);
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
  std::string name;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || !conn_) return;
    ready_ = true;
    conn = conn_;
    for (auto& [id, p] : pending_) {
      if (p.sent) continue;
      p.sent = true;
      p.generation = generation_;
      queued.emplace_back(mcp::Request{mcp::Id(id), p.method, std::move(p.params)}, p.headers);
      p.params.reset();
    }
    name = info_.server_info.value("name", std::string("?"));
  }
  SetState(State::kReady, "initialized " + name + " (protocol " + info().protocol_version + ")");
  for (const auto& [m, headers] : queued) SendOn(*conn, m, headers);
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
    if (deadlines_.empty()) {
      timer_cv_.wait(lock);
      continue;
    }
    const auto [when, id] = *deadlines_.begin();
    if (Clock::now() < when) {
      timer_cv_.wait_until(lock, when);
      continue;
    }
    std::optional<Pending> p = TakeLocked(id);
    if (!p) continue;
    std::shared_ptr<Connection> conn;
    if (p->sent && conn_ && p->generation == generation_) conn = conn_;
    lock.unlock();
    if (conn) {
      conn->Send(mcp::Notification{
          "notifications/cancelled",
          nlohmann::json{{"requestId", id}, {"reason", "timed out after " + Millis(p->timeout)}}});
      conn->Abandon(id);
    }
    p->done(Error(id, kTimedOut, "request timed out after " + Millis(p->timeout)));
    lock.lock();
  }
}

void ClientImpl::OnMessage(uint64_t generation, mcp::Message message) {
  if (auto* request = std::get_if<mcp::Request>(&message))
    return OnServerRequest(generation, std::move(*request));
  if (auto* notification = std::get_if<mcp::Notification>(&message)) {
    if (events_.on_notification) events_.on_notification(*notification);
    return;
  }
  std::optional<mcp::Id> id;
  if (auto* r = std::get_if<mcp::Response>(&message)) id = r->id;
  if (auto* e = std::get_if<mcp::ErrorResponse>(&message)) id = e->id;
  // Our ids are integers; anything else is not an answer to us.
  if (!id || !id->AsInt64()) return;
  std::optional<Pending> p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(*id->AsInt64());
    if (it == pending_.end() || !it->second.sent || it->second.generation != generation) return;
    p = TakeLocked(*id->AsInt64());
  }
  p->done(std::move(message));
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
      "host",   "content-length", "content-type",         "transfer-encoding", "connection",
      "accept", "mcp-session-id", "mcp-protocol-version", "last-event-id"};
  for (const auto& [name, value] : headers) {
    const bool token = !name.empty() && std::all_of(name.begin(), name.end(), [](unsigned char c) {
      return std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) !=
                                    std::string_view::npos;
    });
    if (!token) return Status::Error("header name '" + name + "' is not an HTTP token");
    if (value.find_first_of(std::string("\r\n\0", 3)) != std::string::npos)
      return Status::Error("header '" + name + "' has a CR, LF or NUL in its value");
    std::string lower = name;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (kOwned.count(lower))
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
