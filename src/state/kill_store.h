// Kill switches, durably: an operator stops everything, a tenant, a user, an agent, a session or a
// tool, from the CLI (`warden kill`), the API, or code. Two tables in the warden database (docs/state.md):
// state_kill_switches (what is in force) and state_kill_history (every kill and unkill: who, when,
// why). The gateway does not read this per call: gateway::KillSwitches keeps an in-memory
// snapshot and refreshes it when the file changes.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "state/database.h"

namespace warden::state {

// Broad to narrow; the order in which a call's switches are looked up and listed.
// kTask: every call that names the task (_meta["warden/task"]) of that id, whoever makes it; the
// task of MCP 2026-07-28 requests, which have no session (docs/requests.md).
enum class KillScope { kGlobal, kTenant, kUser, kAgent, kSession, kTool, kTask };

// "global", "tenant", "user", "agent", "session", "tool".
std::string_view ToString(KillScope scope);
// The CLI's words: "all" or "global", "tenant", "user", "agent", "session", "tool"; an error
// naming the bad word.
Result<KillScope> ParseKillScope(std::string_view text);
// The switch's key, as denials name it: "global", "tenant:acme", "user:alice", "agent:coder",
// "session:3f2a...", "tool:files__write_file".
std::string KillKey(KillScope scope, const std::string& name);
// A global switch has no name; the others need one: an exact tenant, user, agent, session id or
// full tool name (SERVER__TOOL). Names are at most 256 bytes, without control characters, and without `*` or
// `?`: they are not patterns, and a pattern that silently matched nothing would leave the
// operator believing a tool was stopped.
Status ValidateKill(KillScope scope, const std::string& name);

// A switch in force.
struct KillSwitch {
  KillScope scope = KillScope::kGlobal;
  std::string name;    // "" for global
  std::string reason;  // shown to agents in the denial
  std::string who;     // who pulled it ("" when not said)
  std::string since;   // RFC 3339 UTC, when it was (last) pulled
};

// One kill or unkill, as the history keeps it.
struct KillEvent {
  int64_t id = 0;
  std::string time;
  std::string action;  // "kill" or "unkill"
  KillScope scope = KillScope::kGlobal;
  std::string name, reason, who;
};

class KillStore {
 public:
  // Opens the database (see DatabaseOptions); with options.create, creates the tables. A
  // read-only store (create = false) reads a file without the tables as holding no switches;
  // for a store that created them, tables gone missing are an error (KillSwitches fails closed).
  static Result<std::unique_ptr<KillStore>> Open(const DatabaseOptions& options);

  // Pulls the switch (again, with the new reason, when it is already pulled) and records the
  // event, in one transaction. Returns true when the switch was not in force before.
  // Errors: a name ValidateKill refuses, a read-only store, SQLite failures.
  Result<bool> Kill(KillScope scope, const std::string& name, const std::string& reason,
                    const std::string& who);
  // Releases the switch and records the event (also when it was not pulled: the attempt is
  // history too). Returns true when it was in force.
  Result<bool> Unkill(KillScope scope, const std::string& name, const std::string& who);

  // The switches in force, ordered by scope then name, from one snapshot.
  Result<std::vector<KillSwitch>> Active();
  // The newest `limit` events (all when 0), oldest first.
  Result<std::vector<KillEvent>> History(size_t limit = 0);

  // SQLite's PRAGMA data_version for this connection: it changes whenever another connection,
  // in this process or another, has committed to the file. A few microseconds: what the
  // gateway polls before re-reading the switches.
  Result<int64_t> DataVersion();

  const std::string& path() const { return options_.path; }

 private:
  KillStore(DatabaseOptions options, Db db) : options_(std::move(options)), db_(std::move(db)) {}
  Result<bool> Record(const char* action, KillScope scope, const std::string& name,
                      const std::string& reason, const std::string& who);
  template <typename T>
  Result<std::vector<T>> MissingTable(const char* table, std::vector<T>& empty) const;

  DatabaseOptions options_;
  std::mutex mu_;  // one statement at a time on db_
  Db db_;
};

}  // namespace warden::state
