// Helpers shared by the audit tests: a temporary directory, sample entries, and raw SQL
// against the database file (how an attacker with file access would tamper with it).
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "audit/audit_log.h"

namespace warden::audit::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "warden-audit-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string db() const { return path_ + "/var/warden/warden.db"; }

 private:
  std::string path_;
};

inline AuditEntry SampleEntry(int i, const std::string& tenant = "acme") {
  AuditEntry e;
  e.tenant = tenant;
  e.user = i % 2 ? "alice" : "bob";
  e.agent = "coder";
  e.session = "s-" + std::to_string(i / 10);
  e.tool = i % 3 ? "fs__read" : "web__fetch";
  e.arguments = {{"path", "/srv/data/file" + std::to_string(i) + ".txt"}, {"n", i}};
  e.decision = i % 4 == 0 ? "deny" : "allow";
  e.rule = "rule-" + std::to_string(i % 4);
  e.reason = "matched rule-" + std::to_string(i % 4);
  e.kind = i % 4 == 0 ? EntryKind::kDecision : EntryKind::kCall;
  if (e.kind == EntryKind::kCall) e.result = ResultSummary{42, std::string(64, 'a'), "hello"};
  e.labels = {"private_output"};
  e.latency_us = static_cast<uint64_t>(100 + i);
  return e;
}

inline std::unique_ptr<AuditLog> OpenLog(const std::string& path,
                                         SyncLevel sync = SyncLevel::kNormal) {
  AuditOptions options;
  options.path = path;
  options.sync = sync;
  auto log = AuditLog::Open(options);
  EXPECT_TRUE(log.ok()) << log.status().message();
  return log.ok() ? std::move(*log) : nullptr;
}

inline void AppendN(AuditLog& log, int n, int first = 1) {
  for (int i = first; i < first + n; ++i) {
    auto r = log.Append(SampleEntry(i));
    ASSERT_TRUE(r.ok()) << r.status().message();
  }
}

// Runs `sql` on the file through its own connection, as a tamperer would.
inline void Tamper(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  std::string message = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << message << " in: " << sql;
}

}  // namespace warden::audit::testing
