#include "gateway/http_sessions.h"

#include <algorithm>

#include "gateway/http_rules.h"

namespace warden::gateway::http {

void SessionRegistry::Add(std::shared_ptr<McpSession> session) {
  std::lock_guard lock(mu_);
  std::string id = session->id();
  sessions_[id] =
      Entry{.session = std::move(session), .last_request = std::chrono::steady_clock::now()};
}

std::shared_ptr<McpSession> SessionRegistry::Find(const std::string& id, const Caller& caller) {
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
  if (entry.stream_token == 0) return;
  entry.session->DetachStream();
  if (entry.end_stream) entry.end_stream();
  entry.stream_token = 0;
  entry.end_stream = nullptr;
}

std::shared_ptr<McpSession> SessionRegistry::Remove(const std::string& id, const Caller& caller) {
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

std::size_t SessionRegistry::size() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

}  // namespace warden::gateway::http
