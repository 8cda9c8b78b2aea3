// The trifecta's state for every live session, task and caller (docs/trifecta.md): policy/
// trifecta.h's FlowState per key, the calls in flight, and the store that keeps what each
// finished call brought in, so that a restart (or, later, another gateway) sees it too.
// Thread-safe; one lock per tracker, held for microseconds (never across I/O but the one row a
// finished call appends, and a key's first load).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "policy/trifecta.h"

namespace warden::state {
class TrifectaStore;
}

namespace warden::gateway {

// The keys a call's trifecta state lives under (docs/trifecta.md, "Whose state"): its MCP session
// and its task id (_meta["warden/task"], scoped to the caller so that nobody reaches another
// caller's state), both when it has both (the call is checked against what either has seen, and
// what it brings goes to both); with neither, the caller alone, over trifecta.caller_window.
struct FlowKey {
  std::vector<std::string> keys;
  bool per_caller = false;  // the conservative fallback: forgotten after the window
};
// How long a key's legs last without a new one: a caller key's (trifecta.caller_window), a named
// task's (trifecta.task_window); 0 never. A session's last as long as the store keeps them.
struct FlowWindows {
  uint64_t caller_ms = 0;
  uint64_t task_ms = 0;
};
FlowKey FlowKeyFor(const std::string& tenant, const std::string& user, const std::string& agent,
                   const std::string& session, const std::string& task);

// The task id a request names in params._meta["warden/task"]: "" when it names none; an error
// when it is not a string of 1 to 256 bytes without control characters.
Result<std::string> TaskFromMeta(const nlohmann::json& params);

class FlowTracker {
 public:
  // `store` may be null: state in memory only (tests, and gateways without a database).
  explicit FlowTracker(state::TrifectaStore* store, size_t max_keys_in_memory = 10000);

  // What Begin hands back: the call is in flight under `key` until Finish.
  struct Ticket {
    std::vector<std::string> keys;
    uint64_t id = 0;
    policy::LabelSet legs = 0;  // the untrusted and private legs it may bring
  };

  // Decides the call against its keys' state and the other calls in flight under them, and
  // registers it in flight with the legs it may bring. Errors: the key's state could not be loaded
  // (the caller fails closed).
  Result<policy::TrifectaCheck> Begin(const FlowKey& key, const FlowWindows& windows,
                                      const policy::TrifectaSettings& settings,
                                      const policy::FlowSpec* flow, policy::LabelSet labels,
                                      const std::string& tool, const nlohmann::json& arguments,
                                      Ticket* ticket);
  // A call in flight sends again (web__fetch following a redirect to another host): decides
  // `arguments` against its keys' state now and the other calls in flight, as Begin would, but
  // without registering anything. Errors: the ticket's keys are not in flight here (fail closed).
  Result<policy::TrifectaCheck> Recheck(const Ticket& ticket,
                                        const policy::TrifectaSettings& settings,
                                        const policy::FlowSpec* flow, policy::LabelSet labels,
                                        const nlohmann::json& arguments);
  // A sandbox the call started connects (CheckSandboxEgress): decided against its keys' state now
  // and the other calls in flight. Errors: as Recheck.
  Result<policy::TrifectaCheck> CheckEgress(const Ticket& ticket,
                                            const policy::TrifectaSettings& settings, bool approved,
                                            std::string_view destination,
                                            const std::vector<std::string_view>& parts);
  // The call ended: takes it out of flight and adds what it brought (empty facts: it did not run),
  // storing them. Errors: the row could not be stored (the state in memory has it anyway).
  Status Finish(const Ticket& ticket, const policy::FlowFacts& facts);
  // The task ended (task__end): what `keys` were exposed to is forgotten, in memory and in the
  // store. Calls in flight under them stay in flight (what they bring is added when they finish).
  // Errors: the store could not delete (the memory is cleared anyway).
  Status Forget(const std::vector<std::string>& keys);

  // The state of `key` as this tracker holds it (tests, `warden policy`'s explanations).
  std::optional<policy::FlowState> Snapshot(const std::string& key);
  size_t keys_in_memory();

 private:
  struct Running {
    policy::LabelSet legs = 0;
    std::string tool;
  };
  struct Entry {
    policy::FlowState state;
    std::map<uint64_t, Running> running;
    std::string last_leg;  // RFC 3339: when the newest facts came (the windows)
    std::list<std::string>::iterator lru;
  };
  // The entry of `key`, loaded from the store when this process has not seen it; keys in `keep`
  // (the call's other keys, whose entries the caller holds pointers to) are never evicted. Its
  // legs are forgotten first when none came within `window_ms` (0: never).
  Result<Entry*> Load(const std::string& key, uint64_t window_ms,
                      const std::vector<std::string>& keep);
  // The entries of a ticket's keys (mu_ held). Error: the call is not in flight under one.
  Result<std::vector<Entry*>> EntriesOf(const Ticket& ticket);
  static policy::FlowView StatesOf(const std::vector<Entry*>& entries);
  // The legs of the calls running under `entries`, but call `except` (0: none).
  static policy::InFlightLegs InFlight(const std::vector<Entry*>& entries, uint64_t except);
  void Touch(Entry* entry);
  void Evict(const std::vector<std::string>& keep);

  state::TrifectaStore* store_;
  const size_t max_keys_;
  std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> lru_;  // most recently used first
  uint64_t next_id_ = 1;
};

// What the trifecta stage leaves in CallContext::state for the trifecta_record stage: the call is
// in flight under ticket.key until that final stage adds what it returned.
struct TrifectaCall {
  FlowTracker* tracker = nullptr;
  FlowTracker::Ticket ticket;
  policy::LabelSet labels = 0;
  const policy::FlowSpec* flow = nullptr;  // the deciding rule's, inside call.policy
  policy::TrifectaSettings settings;       // the call's, for Recheck
  // The trifecta sent the call to a person (so, if it runs, one approved it with the legs shown).
  bool asked = false;
};

// ToolEnv::trifecta_recheck for `call`: Recheck on the call's ticket, labels, rule and settings;
// a reason when the answer is not allow (ask included: a call already running cannot wait for a
// person) or the state cannot be read. Used while the call runs, so `call.flow` stays valid.
std::function<std::optional<std::string>(const nlohmann::json& arguments)> TrifectaRecheck(
    const TrifectaCall& call);

// ToolEnv::trifecta_egress for `call`: CheckEgress on the call's ticket and settings, approved
// when the trifecta asked a person about the call; a reason when the answer is not allow (ask
// included: a running sandbox cannot wait for a person) or the state cannot be read.
std::function<std::optional<std::string>(std::string_view destination,
                                         const std::vector<std::string_view>& parts)>
TrifectaEgressCheck(const TrifectaCall& call);

}  // namespace warden::gateway
