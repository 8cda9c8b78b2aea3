// The audit log in SQLite: WAL mode, one table of entries (audit_entries), one head record
// (audit_head). docs/audit.md documents the schema for people who read the file directly.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "audit/options.h"
#include "audit/store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace warden::audit {

class SqliteAuditStore final : public AuditStore {
 public:
  // Opens (and with options.create, creates) the database at options.path: WAL mode,
  // synchronous NORMAL or FULL after options.sync, the audit tables. Refuses a path whose last
  // component is a symbolic link.
  static Result<std::unique_ptr<SqliteAuditStore>> Open(const AuditOptions& options);
  ~SqliteAuditStore() override;

  Status AppendBatch(std::span<AuditEntry* const> batch) override;
  Status Scan(const AuditFilter& filter, const RowVisitor& visit) override;
  Status ScanChain(std::optional<ChainHead>* head, const RowVisitor& visit) override;

 private:
  struct Connection;
  explicit SqliteAuditStore(AuditOptions options);
  Status WriteBatch(std::span<AuditEntry* const> batch);
  // A fresh read-only connection: reads run beside appends (WAL) and beside each other.
  Result<std::unique_ptr<Connection>> OpenReader() const;

  // Copies the WAL back into the database on its own thread and connection, so that the
  // checkpoint's fsyncs (milliseconds) are not paid inside some caller's Append.
  class Checkpointer;
  static int OnWalCommit(void* store, sqlite3* db, const char* name, int wal_pages);

  AuditOptions options_;
  std::mutex write_mu_;                         // guards writer_
  std::unique_ptr<Connection> writer_;          // null when !options_.create
  std::unique_ptr<Checkpointer> checkpointer_;  // destroyed before writer_
};

}  // namespace warden::audit
