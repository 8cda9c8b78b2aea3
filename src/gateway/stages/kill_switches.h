// Kill switches: calls refused because an operator pulled a switch for everything, a tenant, a
// user, an agent, a session or a tool. Check runs on every tool call, so it reads an in-memory snapshot and never
// SQL. Constructed on the durable store (state::KillStore, the warden database), a background
// thread keeps that snapshot current: it polls the file's PRAGMA data_version every
// poll_interval and re-reads the switches when another connection (`warden kill` in another
// process, another gateway) committed, so a switch pulled anywhere is in force for new calls
// within poll_interval plus one read (well under a second). Constructed without a store, it is an
// in-memory set (tests, single-process tools). Thread-safe. Contract: docs/state.md.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"
#include "state/database.h"
#include "state/kill_store.h"

namespace warden::gateway {

using state::KillScope;

struct KillSwitchOptions {
  // How often the refresher checks the database for changes made by other connections.
  std::chrono::milliseconds poll_interval{200};
  // When every refresh has failed for this long, Check refuses every call (switch "store"):
  // a switch pulled while the gateway cannot read the store must not go unnoticed. Fail closed.
  std::chrono::milliseconds fail_closed_after{5000};
};

class KillSwitches {
 public:
  // In memory: nothing is stored, nothing is refreshed.
  KillSwitches();
  // On the durable store at options.path (created when missing): reads the switches in force
  // before returning, then starts the refresher. Errors: the store cannot be opened or read.
  static Result<std::unique_ptr<KillSwitches>> Open(const state::DatabaseOptions& options,
                                                    KillSwitchOptions kill_options = {});
  ~KillSwitches();  // stops the refresher
  KillSwitches(const KillSwitches&) = delete;
  KillSwitches& operator=(const KillSwitches&) = delete;

  // Pulls the switch for `name` in `scope` (name empty for kGlobal). `reason` is shown to agents;
  // `who` is recorded. Written through to the store before it returns; in force here at once.
  // Errors: a name state::ValidateKill refuses, the store's failures (then nothing changed).
  Status Kill(KillScope scope, const std::string& name, const std::string& reason,
              const std::string& who = "");
  Status Unkill(KillScope scope, const std::string& name, const std::string& who = "");

  // Who and what a call is, as the switches see it. An empty field matches no switch.
  struct Subject {
    std::string_view tenant, user, agent, session, tool, task;
  };
  // A switch that stops this call, as {switch, reason} ("tool:sandbox__exec", "..."), checked in
  // the order global, tenant, user, agent, session, tool; nullopt when none does. Cheap: one lock
  // and up to six map look-ups.
  std::optional<std::pair<std::string, std::string>> Check(const Subject& subject) const;
  // The same without a user or a session.
  std::optional<std::pair<std::string, std::string>> Check(const std::string& tenant,
                                                           const std::string& agent,
                                                           const std::string& tool) const {
    return Check(Subject{tenant, "", agent, "", tool});
  }

  // The switches in force in the snapshot, by scope then name.
  std::vector<state::KillSwitch> Active() const;

  // `listener(scope, name, reason)` is called each time a switch newly comes into force (not when
  // a pulled switch is pulled again): on the thread that called Kill, or on the refresher's
  // thread for switches pulled elsewhere. The snapshot already holds the switch when it runs.
  // The session layer uses it to cancel the in-flight calls (and their sandboxes) of that
  // tenant, user, agent, session or tool, or of everything for kGlobal. Listeners must be quick and must not
  // call Subscribe; they may call Check.
  using Listener =
      std::function<void(KillScope, const std::string& name, const std::string& reason)>;
  void Subscribe(Listener listener);

  // Ok, or why the latest refresh from the store failed.
  Status RefreshStatus() const;

 private:
  // Snapshot keys also compare with (scope, string_view) probes, so Check allocates nothing.
  using Key = std::pair<KillScope, std::string>;
  using Probe = std::pair<KillScope, std::string_view>;
  struct KeyLess {
    using is_transparent = void;
    static Probe View(const Key& k) { return {k.first, k.second}; }
    static Probe View(const Probe& p) { return p; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return View(a) < View(b);
    }
  };
  using Snapshot = std::map<Key, state::KillSwitch, KeyLess>;

  KillSwitches(std::unique_ptr<state::KillStore> store, KillSwitchOptions options);
  // Reads the store, replaces the snapshot, then tells listeners about new switches.
  Status Refresh();
  // With refresh_mu_ held: reads the store and installs it; returns the switches that are new.
  Result<std::vector<state::KillSwitch>> LoadLocked();
  // Replaces the snapshot; returns the switches `next` has and the old one did not.
  std::vector<state::KillSwitch> Install(Snapshot next);
  void Notify(const std::vector<state::KillSwitch>& newly);
  void NoteFailure(const Status& status);
  void RunRefresher(int64_t version);

  const std::unique_ptr<state::KillStore> store_;  // null in memory
  const KillSwitchOptions options_;

  std::mutex refresh_mu_;  // one Refresh (store read + Install) at a time, so diffs are in order

  mutable std::mutex mu_;  // guards the members below
  Snapshot pulled_;
  Status refresh_status_;
  // Since when every refresh has failed (nullopt when the latest one succeeded).
  std::optional<std::chrono::steady_clock::time_point> failing_since_;

  std::mutex listeners_mu_;
  std::vector<Listener> listeners_;

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread refresher_;  // last: starts once the members above exist
};

}  // namespace warden::gateway
