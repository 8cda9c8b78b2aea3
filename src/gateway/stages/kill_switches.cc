#include "gateway/stages/kill_switches.h"

#include "common/guard.h"

namespace warden::gateway {

using state::KillKey;
using state::KillSwitch;

KillSwitches::KillSwitches() = default;

KillSwitches::KillSwitches(std::unique_ptr<state::KillStore> store, KillSwitchOptions options)
    : store_(std::move(store)), options_(options) {}

Result<std::unique_ptr<KillSwitches>> KillSwitches::Open(const state::DatabaseOptions& options,
                                                         KillSwitchOptions kill_options) {
  auto store = state::KillStore::Open(options);
  if (!store) return store.status();
  // Read before the first load: a change committed between the two is seen by the first poll.
  auto version = (*store)->DataVersion();
  if (!version) return version.status().Wrap(options.path);
  std::unique_ptr<KillSwitches> switches(new KillSwitches(std::move(*store), kill_options));
  WARDEN_RETURN_IF_ERROR(switches->Refresh().Wrap(options.path));
  int64_t first_version = *version;
  switches->refresher_ = std::thread([s = switches.get(), first_version] {
    RunGuarded("kill switch refresher", "switches pulled elsewhere are no longer seen",
               [&] { s->RunRefresher(first_version); });
  });
  return switches;
}

KillSwitches::~KillSwitches() {
  {
    std::lock_guard lock(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (refresher_.joinable()) refresher_.join();
}

std::vector<KillSwitch> KillSwitches::Install(Snapshot next) {
  std::vector<KillSwitch> newly;
  std::lock_guard lock(mu_);
  for (const auto& [key, entry] : next) {
    if (!pulled_.count(key)) newly.push_back(entry);
  }
  pulled_ = std::move(next);
  refresh_status_ = Status::Ok();
  failing_since_.reset();
  return newly;
}

void KillSwitches::Notify(const std::vector<KillSwitch>& newly) {
  if (newly.empty()) return;
  std::vector<Listener> listeners;
  {
    std::lock_guard lock(listeners_mu_);
    listeners = listeners_;
  }
  for (const KillSwitch& s : newly) {
    for (const Listener& listener : listeners) listener(s.scope, s.name, s.reason);
  }
}

Result<std::vector<KillSwitch>> KillSwitches::LoadLocked() {
  auto active = store_->Active();
  if (!active) return active.status();
  Snapshot next;
  for (KillSwitch& s : *active) {
    Key key{s.scope, s.name};
    next.emplace(std::move(key), std::move(s));
  }
  return Install(std::move(next));
}

Status KillSwitches::Refresh() {
  std::vector<KillSwitch> newly;
  {
    std::lock_guard lock(refresh_mu_);
    auto loaded = LoadLocked();
    if (!loaded) {
      NoteFailure(loaded.status());
      return loaded.status();
    }
    newly = std::move(*loaded);
  }
  Notify(newly);
  return Status::Ok();
}

void KillSwitches::NoteFailure(const Status& status) {
  std::lock_guard lock(mu_);
  refresh_status_ = status;
  if (!failing_since_) failing_since_ = std::chrono::steady_clock::now();
}

void KillSwitches::RunRefresher(int64_t version) {
  bool in_sync = true;
  std::unique_lock stop_lock(stop_mu_);
  while (!stop_cv_.wait_for(stop_lock, options_.poll_interval, [&] { return stop_; })) {
    stop_lock.unlock();
    // data_version moves for every commit by another connection, audit appends included; the
    // switches table is a few rows, so re-reading it then costs less than telling them apart.
    auto current = store_->DataVersion();
    if (!current) {
      NoteFailure(current.status());
      in_sync = false;
    } else if (*current != version || !in_sync) {
      in_sync = Refresh().ok();
      if (in_sync) version = *current;
    }
    stop_lock.lock();
  }
}

Status KillSwitches::Kill(KillScope scope, const std::string& name, const std::string& reason,
                          const std::string& who) {
  WARDEN_RETURN_IF_ERROR(state::ValidateKill(scope, name));
  KillSwitch entry{scope, name, reason, who, state::Now()};
  std::vector<KillSwitch> newly;
  {
    // Held across the write and the snapshot update, so a refresh that read the store before
    // this write cannot install its older snapshot after it.
    std::lock_guard refresh_lock(refresh_mu_);
    if (store_) {
      auto changed = store_->Kill(scope, name, reason, who);
      if (!changed) return changed.status();
    }
    std::lock_guard lock(mu_);
    auto [it, inserted] = pulled_.insert_or_assign(Key{scope, name}, entry);
    if (inserted) newly.push_back(it->second);
  }
  Notify(newly);
  return Status::Ok();
}

Status KillSwitches::Unkill(KillScope scope, const std::string& name, const std::string& who) {
  WARDEN_RETURN_IF_ERROR(state::ValidateKill(scope, name));
  std::lock_guard refresh_lock(refresh_mu_);
  if (store_) {
    auto changed = store_->Unkill(scope, name, who);
    if (!changed) return changed.status();
  }
  std::lock_guard lock(mu_);
  auto it = pulled_.find(Probe{scope, name});
  if (it != pulled_.end()) pulled_.erase(it);
  return Status::Ok();
}

std::optional<std::pair<std::string, std::string>> KillSwitches::Check(
    const Subject& subject) const {
  std::lock_guard lock(mu_);
  if (failing_since_ &&
      std::chrono::steady_clock::now() - *failing_since_ >= options_.fail_closed_after) {
    return std::make_pair(
        std::string("store"),
        "the kill switches cannot be read, so every call is refused: " + refresh_status_.message());
  }
  if (pulled_.empty()) return std::nullopt;
  const Probe probes[] = {{KillScope::kGlobal, ""},           {KillScope::kTenant, subject.tenant},
                          {KillScope::kUser, subject.user},     {KillScope::kAgent, subject.agent},
                          {KillScope::kSession, subject.session}, {KillScope::kTask, subject.task},
                          {KillScope::kTool, subject.tool}};
  for (const Probe& probe : probes) {
    if (probe.first != KillScope::kGlobal && probe.second.empty()) continue;
    auto it = pulled_.find(probe);
    if (it != pulled_.end()) {
      return std::make_pair(KillKey(it->first.first, it->first.second), it->second.reason);
    }
  }
  return std::nullopt;
}

std::vector<KillSwitch> KillSwitches::Active() const {
  std::vector<KillSwitch> out;
  {
    std::lock_guard lock(mu_);
    // The map's order is (scope, name): global, tenant, user, agent, session, tool.
    for (const auto& [key, entry] : pulled_) out.push_back(entry);
  }
  return out;
}

void KillSwitches::Subscribe(Listener listener) {
  std::lock_guard lock(listeners_mu_);
  listeners_.push_back(std::move(listener));
}

Status KillSwitches::RefreshStatus() const {
  std::lock_guard lock(mu_);
  return refresh_status_;
}

}  // namespace warden::gateway
