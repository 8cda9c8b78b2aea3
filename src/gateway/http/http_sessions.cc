#include "gateway/http/http_sessions.h"

#include <algorithm>

#include "gateway/http/http_rules.h"

namespace warden::gateway::http {

void SessionRegistry::Add(std::shared_ptr<McpSession> session) {
  std::lock_guard lock(mu_);
  std::string id = session->id();
  sessions_[id] =
      Entry{.session = std::move(session), .last_request = std::chrono::steady_clock::now()};
}

std::shared_ptr<McpSession> SessionRegistry::Find(const std::string& id, const identity::Caller& caller) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.session->closed() ||
      !SamePrincipal(it->second.session->caller(), caller)) {
    return nullptr;
  }
  it->second.last_request = std::chrono::steady_clock::now();
  return it->second.session;
}

void SessionRegistry::EndStreamLocked(Entry& entry) {
  // Every resumed stream of the session ends with it too.
  for (auto& [number, replay] : entry.replays) {
    if (replay.reader.end) replay.reader.end();
    replay.reader = StreamReader{};
  }
  if (entry.stream_token == 0) return;
  entry.session->DetachStream();
  if (entry.end_stream) entry.end_stream();
  entry.stream_token = 0;
  entry.end_stream = nullptr;
}

std::shared_ptr<McpSession> SessionRegistry::Remove(const std::string& id, const identity::Caller& caller) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || !SamePrincipal(it->second.session->caller(), caller)) {
    return nullptr;
  }
  EndStreamLocked(it->second);
  std::shared_ptr<McpSession> session = std::move(it->second.session);
  sessions_.erase(it);
  // A session the gateway closed on its own is gone all the same: the client gets 404.
  return session->closed() ? nullptr : session;
}

std::shared_ptr<McpSession> SessionRegistry::RemoveAny(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return nullptr;
  EndStreamLocked(it->second);
  std::shared_ptr<McpSession> session = std::move(it->second.session);
  sessions_.erase(it);
  return session;
}

void SessionRegistry::BeginPost(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it != sessions_.end()) ++it->second.posts_in_flight;
}

void SessionRegistry::EndPost(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  it->second.posts_in_flight = std::max(0, it->second.posts_in_flight - 1);
  it->second.last_request = std::chrono::steady_clock::now();
}

bool SessionRegistry::OpenStream(const std::string& id, std::uint64_t token, MessageSink sink,
                                 std::function<void()> end_stream) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.stream_token != 0) return false;
  // Attached under the lock so that CloseStream of an older stream can never detach this one.
  it->second.session->AttachStream(std::move(sink));
  it->second.stream_token = token;
  it->second.end_stream = std::move(end_stream);
  return true;
}

void SessionRegistry::CloseStream(const std::string& id, std::uint64_t token) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.stream_token != token) return;
  it->second.session->DetachStream();
  it->second.stream_token = 0;
  it->second.end_stream = nullptr;
  it->second.last_request = std::chrono::steady_clock::now();
}

std::vector<std::shared_ptr<McpSession>> SessionRegistry::TakeIdle(
    std::chrono::steady_clock::time_point now, std::chrono::steady_clock::duration timeout) {
  std::vector<std::shared_ptr<McpSession>> idle;
  std::lock_guard lock(mu_);
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    Entry& e = it->second;
    bool closed = e.session->closed();
    bool quiet = e.posts_in_flight == 0 && e.stream_token == 0 && now - e.last_request > timeout &&
                 now - e.session->last_activity() > timeout;
    if (closed || quiet) {
      EndStreamLocked(e);
      idle.push_back(std::move(e.session));
      it = sessions_.erase(it);
    } else {
      ++it;
    }
  }
  return idle;
}

std::vector<std::shared_ptr<McpSession>> SessionRegistry::TakeAll() {
  std::vector<std::shared_ptr<McpSession>> all;
  std::lock_guard lock(mu_);
  for (auto& [id, e] : sessions_) {
    EndStreamLocked(e);
    all.push_back(std::move(e.session));
  }
  sessions_.clear();
  return all;
}

void SessionRegistry::BeginReplay(const std::string& id, std::uint64_t stream, bool post,
                                  std::size_t pending, std::uint64_t reader_token) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  auto& replays = it->second.replays;
  // Bounded: the oldest complete stream goes first, else the oldest.
  while (replays.size() >= kMaxReplayStreams) {
    auto victim = std::find_if(replays.begin(), replays.end(),
                               [](const auto& r) { return r.second.complete; });
    if (victim == replays.end()) victim = replays.begin();
    if (victim->second.reader.end) victim->second.reader.end();
    replays.erase(victim);
  }
  auto [r, added] = replays.try_emplace(stream, replay_events_, replay_bytes_);
  r->second.post = post;
  r->second.pending = pending;
  r->second.complete = post && pending == 0;
  r->second.reader = StreamReader{.token = reader_token, .deliver = nullptr, .end = nullptr};
}

std::optional<SessionRegistry::Recorded> SessionRegistry::Record(const std::string& id,
                                                                 std::uint64_t stream,
                                                                 std::string data, bool reply,
                                                                 std::uint64_t reader_token) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return std::nullopt;
  auto r = it->second.replays.find(stream);
  if (r == it->second.replays.end()) return std::nullopt;
  Replay& replay = r->second;
  Recorded out;
  out.event_id = EventId(stream, replay.buffer.Append(data));
  out.mine = replay.reader.token != 0 && replay.reader.token == reader_token;
  if (replay.post && reply && replay.pending > 0 && --replay.pending == 0) replay.complete = true;
  if (!out.mine && replay.reader.token != 0) {
    if (replay.reader.deliver) replay.reader.deliver(out.event_id, std::move(data));
    if (replay.complete && replay.reader.end) {
      replay.reader.end();
      replay.reader = StreamReader{};
    }
  }
  return out;
}

void SessionRegistry::DetachReader(const std::string& id, std::uint64_t stream,
                                   std::uint64_t reader_token) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  auto r = it->second.replays.find(stream);
  if (r != it->second.replays.end() && r->second.reader.token == reader_token) {
    r->second.reader = StreamReader{};
  }
}

Result<SessionRegistry::Resumed> SessionRegistry::Resume(const std::string& id,
                                                         std::uint64_t stream, std::uint64_t seq,
                                                         StreamReader reader) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return Status::Error("unknown session");
  auto r = it->second.replays.find(stream);
  const std::string wanted = EventId(stream, seq);
  if (r == it->second.replays.end()) {
    return Status::Error("Last-Event-ID '" + wanted +
                         "' names no stream of this session that can be resumed (never sent, or "
                         "too old: each session keeps its latest " +
                         std::to_string(kMaxReplayStreams) + " streams)");
  }
  Replay& replay = r->second;
  auto events = replay.buffer.After(seq);
  if (!events) {
    return Status::Error("Last-Event-ID '" + wanted +
                         "' cannot be resumed: " +
                         (seq > replay.buffer.last()
                              ? std::string("this stream never sent that event")
                              : "the events after it are no longer kept (each stream keeps its "
                                "latest " +
                                    std::to_string(replay_events_) + " events, " +
                                    std::to_string(replay_bytes_) + " bytes)"));
  }
  Resumed out;
  out.post = replay.post;
  out.complete = replay.complete;
  for (auto& [n, data] : *events) out.events.emplace_back(EventId(stream, n), std::move(data));
  if (!replay.complete) {
    // The new reader takes over; a previous resumed reader gets no more (a GET stream's
    // earlier connection has already lost the session's stream slot).
    if (replay.reader.end) replay.reader.end();
    replay.reader = std::move(reader);
    if (!replay.post) replay.reader.deliver = nullptr, replay.reader.end = nullptr;
  }
  return out;
}

std::size_t SessionRegistry::size() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

}  // namespace warden::gateway::http
