// Internal to the Streamable HTTP server (http_server.cc, http_connection.cc): the table of open
// sessions and the state every connection shares with the server. Not part of the public API.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "gateway/http/console.h"
#include "gateway/http/http_replay.h"
#include "gateway/http/http_server.h"
#include "gateway/session/session.h"
#include "gateway/session/task_contexts.h"

namespace warden::gateway::http {

// The open sessions, by id, with what the HTTP layer knows of each. Thread-safe.
class SessionRegistry {
 public:
  // Each SSE stream keeps up to `replay_events` events and `replay_bytes` bytes for resumption.
  SessionRegistry(std::size_t replay_events = 256, std::size_t replay_bytes = 1 << 20)
      : replay_events_(replay_events), replay_bytes_(replay_bytes) {}

  void Add(std::shared_ptr<McpSession> session);

  // The session `id` when it is open and belongs to `caller` (SamePrincipal), else nullptr: an
  // unknown id, a closed session and another principal's session are indistinguishable, so a
  // caller can never learn that someone else's session exists. Counts as activity.
  std::shared_ptr<McpSession> Find(const std::string& id, const identity::Caller& caller);

  // Removes and returns the session like Find would return it (nullptr otherwise). Its open GET
  // stream, if any, is told to end. The caller closes the session.
  std::shared_ptr<McpSession> Remove(const std::string& id, const identity::Caller& caller);
  // Removes `id` whoever owns it (a failed initialize). The caller closes the session.
  std::shared_ptr<McpSession> RemoveAny(const std::string& id);

  // A POST that carries requests begins / has had all its replies (or was given up). Sessions
  // with requests in flight are never idle.
  void BeginPost(const std::string& id);
  void EndPost(const std::string& id);

  // Attaches `sink` as the session's stream, named by `token` (unique, not 0), and records
  // `end_stream` (how to end that stream from any thread; it must only post). False when the
  // session already has a stream open (409) or is gone.
  bool OpenStream(const std::string& id, std::uint64_t token, MessageSink sink,
                  std::function<void()> end_stream);
  // Detaches the stream `token` if it is still the session's stream (a newer one is left alone).
  void CloseStream(const std::string& id, std::uint64_t token);

  // Removes and returns the sessions idle for longer than `timeout` at `now`: no request since,
  // none in flight, no open stream, and the session's own last_activity older too.
  std::vector<std::shared_ptr<McpSession>> TakeIdle(std::chrono::steady_clock::time_point now,
                                                    std::chrono::steady_clock::duration timeout);
  // Removes and returns every session (Stop), ending their streams.
  std::vector<std::shared_ptr<McpSession>> TakeAll();

  std::size_t size() const;

  // ---- Resumable SSE streams (http_replay.h) ----

  // Who writes a stream's events to a client: a connection, named by `token`. Both functions
  // may be called under the registry's lock: they must only post to the connection.
  struct StreamReader {
    std::uint64_t token = 0;
    std::function<void(std::string event_id, std::string data)> deliver;
    std::function<void()> end;  // the stream is complete: no more events
  };
  // Starts recording stream `stream` of session `id`: a POST stream that ends after `pending`
  // replies, or the GET stream (post false; never complete). `reader_token` is the connection
  // that opened it. The session keeps the latest kMaxReplayStreams streams.
  void BeginReplay(const std::string& id, std::uint64_t stream, bool post, std::size_t pending,
                   std::uint64_t reader_token);
  struct Recorded {
    std::string event_id;
    bool mine = false;  // the caller (reader_token) is the stream's reader: it writes the event
  };
  // Records `data` as the next event of the stream (a `reply` counts down a POST stream's
  // pending replies). When another reader is attached (a resumed stream), the event goes to it,
  // and the stream's end too once the last reply is in. nullopt: no such session or stream.
  std::optional<Recorded> Record(const std::string& id, std::uint64_t stream, std::string data,
                                 bool reply, std::uint64_t reader_token);
  // The reader's connection is gone: later events are only recorded.
  void DetachReader(const std::string& id, std::uint64_t stream, std::uint64_t reader_token);
  struct Resumed {
    bool post = false;      // a POST stream (else the session's GET stream)
    bool complete = false;  // a POST stream whose replies are all in: end after the replay
    std::vector<std::pair<std::string, std::string>> events;  // {event id, data} to replay
  };
  // A client resumes stream `stream` of session `id` (already found for its caller) after event
  // `seq`. For a POST stream `reader` becomes its reader (the previous one gets nothing more).
  // Errors: the stream is not this session's, or the events after `seq` are no longer kept.
  Result<Resumed> Resume(const std::string& id, std::uint64_t stream, std::uint64_t seq,
                         StreamReader reader);

  static constexpr std::size_t kMaxReplayStreams = 32;

 private:
  struct Replay {
    Replay(std::size_t events, std::size_t bytes) : buffer(events, bytes) {}
    ReplayBuffer buffer;
    bool post = false;
    std::size_t pending = 0;
    bool complete = false;
    StreamReader reader;
  };
  struct Entry {
    std::shared_ptr<McpSession> session;
    std::chrono::steady_clock::time_point last_request;
    int posts_in_flight = 0;
    std::uint64_t stream_token = 0;  // 0: no GET stream open
    std::function<void()> end_stream;
    std::map<std::uint64_t, Replay> replays;  // by stream number: oldest first
  };
  // Ends the entry's stream (posts to its connection; never blocks). Requires mu_.
  static void EndStreamLocked(Entry& entry);

  const std::size_t replay_events_, replay_bytes_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> sessions_;
};

// Lets threads outside the server post work to I/O executors only while the server runs: after
// Shut, Post refuses, so a reply that arrives during or after Stop is dropped instead of being
// posted to an io_context that is going away.
class Gate {
 public:
  // Runs `post()` (which must only enqueue, never run the work inline) if the gate is open.
  template <typename F>
  bool Post(F&& post) {
    std::lock_guard lock(mu_);
    if (shut_) return false;
    post();
    return true;
  }
  void Shut() {
    std::lock_guard lock(mu_);
    shut_ = true;
  }

 private:
  std::mutex mu_;
  bool shut_ = false;
};

// What every connection shares with the server. Held by shared_ptr, so a connection never
// outlives it.
struct ServerShared {
  ServerShared(SessionHost& h, HttpServerOptions o) : host(h), options(std::move(o)) {}

  SessionHost& host;
  const HttpServerOptions options;
  bool loopback = false;  // bound to a loopback address (set by Start)
  // What a Host header may name without options.allowed_hosts (http_rules.h HostAllowed): the
  // loopback names and the listen address, and the port listened on (both set by Start).
  std::vector<std::string> own_host_names;
  std::uint16_t port = 0;
  SessionRegistry sessions{options.replay_events, options.replay_bytes};
  // The task contexts of 2026-07-28 requests (set by Start).
  std::unique_ptr<TaskContexts> tasks;
  ConsoleSessions console;  // the approvals console's logins (console.h)
  Gate gate;
  std::atomic<bool> stopping{false};
  std::atomic<std::uint64_t> next_stream{1};  // SSE event ids are "STREAM-SEQ" (http_replay.h)
  // Runs a blocking job (McpSession::Close) off the I/O threads; set by the server.
  std::function<void(std::function<void()>)> run_blocking;
};

}  // namespace warden::gateway::http
