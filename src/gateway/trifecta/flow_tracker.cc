#include "gateway/trifecta/flow_tracker.h"

#include <algorithm>

#include "audit/time_format.h"
#include "state/trifecta_store.h"

namespace warden::gateway {
namespace {

// One part of a key, with '%' and '/' escaped: names from a JWT's claims may hold either, and
// ("a/b", "c") must not be the same caller as ("a", "b/c").
std::string Part(const std::string& name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    if (c == '%') {
      out += "%25";
    } else if (c == '/') {
      out += "%2F";
    } else {
      out += c;
    }
  }
  return out;
}

std::string CallerPart(const std::string& tenant, const std::string& user,
                       const std::string& agent) {
  return Part(tenant) + "/" + Part(user) + "/" + Part(agent);
}

state::TrifectaRow ToRow(const policy::FlowFacts& facts) {
  state::TrifectaRow row;
  row.call = facts.source.call;
  row.tool = facts.source.tool;
  row.legs = facts.legs;
  row.prints = facts.prints;
  row.untrusted_tokens = facts.untrusted_tokens;
  row.trusted_tokens = facts.trusted_tokens;
  return row;
}

policy::FlowFacts FromRow(const state::TrifectaRow& row) {
  policy::FlowFacts facts;
  facts.source = {row.call, row.tool};
  facts.legs = row.legs & (policy::kUntrustedOutput | policy::kPrivateOutput);
  facts.prints = row.prints;
  facts.untrusted_tokens = row.untrusted_tokens;
  facts.trusted_tokens = row.trusted_tokens;
  return facts;
}

}  // namespace

FlowKey FlowKeyFor(const std::string& tenant, const std::string& user, const std::string& agent,
                   const std::string& session, const std::string& task) {
  FlowKey out;
  if (!session.empty()) out.keys.push_back("session:" + session);
  if (!task.empty())
    out.keys.push_back("task:" + CallerPart(tenant, user, agent) + "/" + Part(task));
  if (out.keys.empty()) {
    out.keys.push_back("caller:" + CallerPart(tenant, user, agent));
    out.per_caller = true;
  }
  return out;
}

Result<std::string> TaskFromMeta(const nlohmann::json& params) {
  if (!params.is_object()) return std::string();
  auto meta = params.find("_meta");
  if (meta == params.end() || !meta->is_object()) return std::string();
  auto task = meta->find("warden/task");
  if (task == meta->end()) return std::string();
  if (!task->is_string())
    return Status::Error("_meta.warden/task must be a string (the task this call belongs to)");
  const std::string& s = task->get_ref<const std::string&>();
  if (s.empty() || s.size() > 256)
    return Status::Error("_meta.warden/task must be 1 to 256 bytes long");
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f)
      return Status::Error("_meta.warden/task must not hold control characters");
  return s;
}

FlowTracker::FlowTracker(state::TrifectaStore* store, size_t max_keys_in_memory)
    : store_(store), max_keys_(max_keys_in_memory) {}

void FlowTracker::Touch(Entry* entry) { lru_.splice(lru_.begin(), lru_, entry->lru); }

void FlowTracker::Evict(const std::vector<std::string>& keep) {
  // Only keys the store holds may leave memory, and only those with nothing in flight.
  if (store_ == nullptr) return;
  for (auto it = lru_.end(); entries_.size() > max_keys_ && it != lru_.begin();) {
    --it;
    if (std::find(keep.begin(), keep.end(), *it) != keep.end()) continue;
    auto e = entries_.find(*it);
    if (e != entries_.end() && e->second.running.empty()) {
      entries_.erase(e);
      it = lru_.erase(it);
    }
  }
}

Result<FlowTracker::Entry*> FlowTracker::Load(const std::string& key, uint64_t window_ms,
                                              const std::vector<std::string>& keep) {
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    Entry entry;
    if (store_ != nullptr) {
      auto rows = store_->Load(key);
      if (!rows) return rows.status();
      for (const state::TrifectaRow& row : *rows) {
        entry.state.Add(FromRow(row));
        if (row.time > entry.last_leg) entry.last_leg = row.time;
      }
    }
    lru_.push_front(key);
    entry.lru = lru_.begin();
    it = entries_.emplace(key, std::move(entry)).first;
    Evict(keep);
  } else {
    Touch(&it->second);
  }
  Entry* entry = &it->second;
  // A caller without a session or task, or a named task: what it was exposed to is forgotten
  // after its window without a new leg.
  if (window_ms > 0 && !entry->last_leg.empty()) {
    const std::string cutoff =
        audit::FormatTime(std::chrono::system_clock::now() - std::chrono::milliseconds(window_ms));
    if (entry->last_leg < cutoff) {
      if (store_ != nullptr) WARDEN_RETURN_IF_ERROR(store_->Forget(key));
      entry->state = policy::FlowState();
      entry->last_leg.clear();
    }
  }
  return entry;
}

Result<policy::TrifectaCheck> FlowTracker::Begin(const FlowKey& key, const FlowWindows& windows,
                                                 const policy::TrifectaSettings& settings,
                                                 const policy::FlowSpec* flow,
                                                 policy::LabelSet labels, const std::string& tool,
                                                 const nlohmann::json& arguments, Ticket* ticket) {
  std::lock_guard lock(mu_);
  std::vector<Entry*> entries;
  std::vector<const policy::FlowState*> states;
  for (const std::string& k : key.keys) {
    const uint64_t window = k.rfind("caller:", 0) == 0 ? windows.caller_ms
                            : k.rfind("task:", 0) == 0 ? windows.task_ms
                                                       : 0;
    auto entry = Load(k, window, key.keys);
    if (!entry) return entry.status();
    entries.push_back(*entry);
    states.push_back(&(*entry)->state);
  }
  policy::TrifectaCheck check = policy::CheckCall(policy::FlowView(std::move(states)),
                                                  InFlight(entries, 0), settings, flow, labels,
                                                  arguments);
  ticket->keys = key.keys;
  ticket->id = next_id_++;
  // Field lists imply their labels (the loader adds them), so the labels say it all.
  ticket->legs = labels & (policy::kUntrustedOutput | policy::kPrivateOutput);
  for (Entry* e : entries) e->running[ticket->id] = {ticket->legs, tool};
  return check;
}

policy::InFlightLegs FlowTracker::InFlight(const std::vector<Entry*>& entries, uint64_t except) {
  policy::InFlightLegs in_flight;
  for (const Entry* e : entries) {
    for (const auto& [id, running] : e->running) {
      if (id == except) continue;
      in_flight.legs |= running.legs;
      if ((running.legs & policy::kUntrustedOutput) && !in_flight.untrusted)
        in_flight.untrusted = policy::FlowSource{0, running.tool};
      if ((running.legs & policy::kPrivateOutput) && !in_flight.private_data)
        in_flight.private_data = policy::FlowSource{0, running.tool};
    }
  }
  return in_flight;
}

Result<std::vector<FlowTracker::Entry*>> FlowTracker::EntriesOf(const Ticket& ticket) {
  std::vector<Entry*> entries;
  for (const std::string& k : ticket.keys) {
    auto it = entries_.find(k);
    // Keys with calls in flight are never evicted: a missing one is a ticket of another tracker.
    if (it == entries_.end() || !it->second.running.contains(ticket.id))
      return Status::Error("the call is not in flight under " + k);
    entries.push_back(&it->second);
  }
  return entries;
}

policy::FlowView FlowTracker::StatesOf(const std::vector<Entry*>& entries) {
  std::vector<const policy::FlowState*> states;
  for (const Entry* e : entries) states.push_back(&e->state);
  return policy::FlowView(std::move(states));
}

Result<policy::TrifectaCheck> FlowTracker::Recheck(const Ticket& ticket,
                                                   const policy::TrifectaSettings& settings,
                                                   const policy::FlowSpec* flow,
                                                   policy::LabelSet labels,
                                                   const nlohmann::json& arguments) {
  std::lock_guard lock(mu_);
  auto entries = EntriesOf(ticket);
  if (!entries) return entries.status();
  return policy::CheckCall(StatesOf(*entries), InFlight(*entries, ticket.id), settings, flow,
                           labels, arguments);
}

Result<policy::TrifectaCheck> FlowTracker::CheckEgress(const Ticket& ticket,
                                                       const policy::TrifectaSettings& settings,
                                                       bool approved, std::string_view destination,
                                                       const std::vector<std::string_view>& parts) {
  std::lock_guard lock(mu_);
  auto entries = EntriesOf(ticket);
  if (!entries) return entries.status();
  return policy::CheckSandboxEgress(StatesOf(*entries), InFlight(*entries, ticket.id), settings,
                                    approved, destination, parts);
}

Status FlowTracker::Finish(const Ticket& ticket, const policy::FlowFacts& facts) {
  std::lock_guard lock(mu_);
  Status out = Status::Ok();
  state::TrifectaRow row;
  if (!facts.empty()) {
    row = ToRow(facts);
    row.time = audit::NowRfc3339();
  }
  for (const std::string& key : ticket.keys) {
    auto it = entries_.find(key);
    if (it == entries_.end()) continue;  // cannot happen: keys with calls in flight stay
    Entry& e = it->second;
    e.running.erase(ticket.id);
    if (facts.empty()) continue;
    e.state.Add(facts);
    e.last_leg = row.time;
    // Under the lock: rows of one key go in the order their calls finished.
    if (store_ != nullptr) {
      Status stored = store_->Append(key, row);
      if (!stored.ok() && out.ok()) out = stored;
    }
  }
  return out;
}

Status FlowTracker::Forget(const std::vector<std::string>& keys) {
  std::lock_guard lock(mu_);
  Status out = Status::Ok();
  for (const std::string& key : keys) {
    if (auto it = entries_.find(key); it != entries_.end()) {
      it->second.state = policy::FlowState();
      it->second.last_leg.clear();
    }
    if (store_ != nullptr) {
      Status forgot = store_->Forget(key);
      if (!forgot.ok() && out.ok()) out = forgot;
    }
  }
  return out;
}

std::optional<policy::FlowState> FlowTracker::Snapshot(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second.state;
}

size_t FlowTracker::keys_in_memory() {
  std::lock_guard lock(mu_);
  return entries_.size();
}

std::function<std::optional<std::string>(const nlohmann::json& arguments)> TrifectaRecheck(
    const TrifectaCall& call) {
  return [call](const nlohmann::json& arguments) -> std::optional<std::string> {
    auto check =
        call.tracker->Recheck(call.ticket, call.settings, call.flow, call.labels, arguments);
    if (!check)  // fail closed, as the stage does
      return "the session's trifecta state could not be read: " + check.status().message();
    if (check->effect == policy::Effect::kAllow) return std::nullopt;
    std::string why = "trifecta: " + check->reason;
    if (check->effect == policy::Effect::kAsk)
      why += " (a person would have to approve it, and a call already running cannot wait for "
             "one: ask for it as a call of its own)";
    return why;
  };
}

std::function<std::optional<std::string>(std::string_view destination,
                                         const std::vector<std::string_view>& parts)>
TrifectaEgressCheck(const TrifectaCall& call) {
  return [call](std::string_view destination,
                const std::vector<std::string_view>& parts) -> std::optional<std::string> {
    auto check = call.tracker->CheckEgress(call.ticket, call.settings, call.asked, destination, parts);
    if (!check)
      return "the session's trifecta state could not be read: " + check.status().message();
    if (check->effect == policy::Effect::kAllow) return std::nullopt;
    std::string why = "trifecta: " + check->reason;
    if (check->effect == policy::Effect::kAsk)
      why += " (a person would have to approve it, and a running sandbox cannot wait for one)";
    return why;
  };
}

}  // namespace warden::gateway
