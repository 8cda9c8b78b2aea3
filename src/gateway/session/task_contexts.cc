#include "gateway/session/task_contexts.h"

#include "gateway/trifecta/flow_tracker.h"

namespace warden::gateway {

using nlohmann::json;

namespace {

// Length-prefixed parts, so that no value can make two keys equal.
void Put(std::string& key, const std::string& part) {
  key += std::to_string(part.size());
  key += ':';
  key += part;
}

std::string PrincipalKey(const identity::Caller& c) {
  std::string key;
  Put(key, c.tenant);
  Put(key, c.user);
  Put(key, c.agent);
  Put(key, c.scope);
  return key;
}

}  // namespace

TaskContexts::TaskContexts(std::string transport, Make make,
                           std::function<void(std::shared_ptr<McpSession>)> close,
                           size_t max_per_principal)
    : transport_(std::move(transport)),
      make_(std::move(make)), close_(std::move(close)), max_per_principal_(max_per_principal) {}

Result<std::shared_ptr<McpSession>> TaskContexts::For(const identity::Caller& caller,
                                                      const mcp::Request& request) {
  static const json kNone = json::object();
  const json& params = request.params ? *request.params : kNone;
  auto task = TaskFromMeta(params);
  if (!task) return task.status();
  std::string scope;
  if (params.is_object() && params.contains("_meta") && params["_meta"].is_object() &&
      params["_meta"].contains("warden/scope")) {
    const json& s = params["_meta"]["warden/scope"];
    if (!s.is_string() || s.get_ref<const std::string&>().empty())
      return Status::Error("_meta.warden/scope must be a non-empty string");
    scope = s.get<std::string>();
  }
  const std::string principal = PrincipalKey(caller);
  std::string key = principal;
  Put(key, scope);
  Put(key, *task);
  std::vector<std::shared_ptr<McpSession>> evicted;  // closed outside the lock, whatever happens
  auto find_or_make = [&]() -> Result<std::shared_ptr<McpSession>> {
    std::lock_guard lock(mu_);
    if (auto it = contexts_.find(key); it != contexts_.end() && !it->second->closed()) {
      // Ended by task__end: the task starts afresh in a new context once nothing of the old one
      // is live (until then, the old one serves it: its calls are being cancelled).
      if (!it->second->ended() || it->second->busy()) return it->second;
      evicted.push_back(std::move(it->second));
      contexts_.erase(it);
    }
    // Room for one more of this principal: the least recently used of its idle contexts goes;
    // when every one is busy (calls in flight, parked or listening), the new task is refused
    // rather than another one's calls cancelled.
    size_t mine = 0;
    auto oldest = contexts_.end();
    for (auto it = contexts_.lower_bound(principal);
         it != contexts_.end() && it->first.compare(0, principal.size(), principal) == 0; ++it) {
      ++mine;
      if (it->second->busy()) continue;
      if (oldest == contexts_.end() ||
          it->second->last_activity() < oldest->second->last_activity())
        oldest = it;
    }
    if (mine >= max_per_principal_) {
      if (oldest == contexts_.end())
        return Status::Error("this caller has " + std::to_string(mine) +
                             " tasks with calls in flight, the most one caller may have; let one "
                             "finish first");
      evicted.push_back(oldest->second);
      contexts_.erase(oldest);
    }
    auto context = make_(caller, SessionOptions{.transport = transport_, .modern = true,
                                                .task = *task, .requested_scope = scope});
    if (!context) return Status::Error(kNotServed);
    contexts_[key] = context;
    return context;
  };
  Result<std::shared_ptr<McpSession>> context = find_or_make();
  for (auto& old : evicted) close_(std::move(old));
  return context;
}

namespace {
constexpr auto kEndedGrace = std::chrono::seconds(1);
}  // namespace

std::vector<std::shared_ptr<McpSession>> TaskContexts::TakeIdle(
    std::chrono::steady_clock::duration idle) {
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<McpSession>> out;
  std::lock_guard lock(mu_);
  for (auto it = contexts_.begin(); it != contexts_.end();) {
    // A context with a call in flight, or parked for its client's retry, is not idle.
    // An ended one (task__end) goes without waiting out the idle time, but not in the moment
    // after a request reached it (For may just have handed it out while it wound down).
    const auto quiet = now - it->second->last_activity();
    if (it->second->closed() ||
        (((it->second->ended() && quiet >= kEndedGrace) || quiet >= idle) &&
         !it->second->busy())) {
      out.push_back(std::move(it->second));
      it = contexts_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::vector<std::shared_ptr<McpSession>> TaskContexts::TakeAll() {
  std::vector<std::shared_ptr<McpSession>> out;
  std::lock_guard lock(mu_);
  for (auto& [key, context] : contexts_) out.push_back(std::move(context));
  contexts_.clear();
  return out;
}

std::vector<std::shared_ptr<McpSession>> TaskContexts::All() const {
  std::vector<std::shared_ptr<McpSession>> out;
  std::lock_guard lock(mu_);
  for (const auto& [key, context] : contexts_) out.push_back(context);
  return out;
}

size_t TaskContexts::size() const {
  std::lock_guard lock(mu_);
  return contexts_.size();
}

}  // namespace warden::gateway
