// The lethal trifecta's session state, durably: for each key ("session:3f2a...",
// "task:acme/alice/bot/T1", "caller:acme/alice/bot") the calls that brought untrusted content or
// private data into it, with the hashes the decision needs (fingerprints of private data,
// destination tokens). One append-only table in the warden database, state_trifecta
// (docs/state.md, docs/trifecta.md). The gateway keeps the live state in memory
// (policy::FlowState) and appends here what each finished call added, so that a restart does not
// forget that a session has read a secret; it loads a key's rows when it first meets the key.
// This header does not depend on the policy library: the gateway converts its FlowFacts.
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "state/database.h"

namespace warden::state {

// Keys are at most this long (and non-empty, without NUL bytes).
inline constexpr size_t kMaxTrifectaKeyBytes = 512;
// Hashes per vector of one row. The caller bounds what it keeps per session (well below this);
// the store refuses more rather than cut a row silently.
inline constexpr size_t kMaxTrifectaHashes = 65536;

// One finished call that brought something into a key's state.
struct TrifectaRow {
  uint64_t call = 0;  // the call's audit entry id (0: not known)
  std::string tool;   // the tool's full name
  uint8_t legs = 0;   // bit 0 untrusted, bit 1 private
  std::vector<uint64_t> prints, untrusted_tokens, trusted_tokens;  // hashes
  std::string time;  // RFC 3339 UTC (state::Now()); filled by Append when empty
  bool operator==(const TrifectaRow&) const = default;
};

class TrifectaStore {
 public:
  // Opens the database (see DatabaseOptions); with options.create, creates the table. A
  // read-only store (create = false) reads a file without the table as holding no rows (and
  // starts reading them once a writer has created it); for a store that created it, a table gone
  // missing is an error. sync_full: synchronous=FULL on this connection, else NORMAL (in WAL:
  // durable against a crash of warden, not against a power loss), because a row is written on
  // the path of a tool call (the policy's `storage.sync: full` chooses FULL).
  static Result<std::unique_ptr<TrifectaStore>> Open(const DatabaseOptions& options,
                                                     bool sync_full = false);

  // Appends one row to `key`: one INSERT, no read. Errors: a bad key (empty, longer than
  // kMaxTrifectaKeyBytes, a NUL byte), a vector of more than kMaxTrifectaHashes hashes, a
  // read-only store, SQLite failures.
  Status Append(const std::string& key, const TrifectaRow& row);
  // The key's rows, oldest first (none for a key never appended to). A stored hash vector whose
  // length is not a whole number of hashes is an error naming the key and the row's id: a damaged
  // database must not silently lose hashes.
  Result<std::vector<TrifectaRow>> Load(const std::string& key);
  // Deletes the key's rows (the session ended, or an operator reset it).
  Status Forget(const std::string& key);
  // Deletes every key whose newest row's time is before `before` (RFC 3339; compared as text,
  // which orders the fixed-width UTC times Now() gives), all of its rows; returns how many rows
  // went. A key with any row at or after `before` keeps all of its rows. An empty `before` is an
  // error (it would purge nothing, and is a caller's mistake).
  Result<uint64_t> PurgeBefore(const std::string& before);

  // SQLite's PRAGMA data_version for this connection: it changes whenever another connection,
  // in this process or another, has committed to the file (as KillStore::DataVersion).
  Result<int64_t> DataVersion();

  const std::string& path() const { return options_.path; }

 private:
  TrifectaStore(DatabaseOptions options, Db db)
      : options_(std::move(options)), db_(std::move(db)) {}
  // Prepares the statements that read (and, unless read-only, write). Holds mu_ or runs in Open.
  Status PrepareStatements();
  Status Writable() const;

  DatabaseOptions options_;
  std::mutex mu_;  // one statement at a time on db_ (opened SQLITE_OPEN_NOMUTEX)
  // Declared before the statements, so that they are finalized before the connection closes.
  Db db_;
  // Prepared once and reused (reset and bindings cleared after each use): Append runs on the
  // path of a tool call. load_ stays null on a read-only store until the table exists.
  Stmt append_, load_, forget_, purge_, data_version_;
};

}  // namespace warden::state
