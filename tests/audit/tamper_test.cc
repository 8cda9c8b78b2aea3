// Attacks on the database file itself, through SQLite's own API, as someone with write access
// to ./var/warden/ would make them. Each must make Verify fail and name the first bad entry.
#include <gtest/gtest.h>

#include "audit/audit_log.h"
#include "test_support.h"

namespace warden::audit {
namespace {

using testing::AppendN;
using testing::OpenLog;
using testing::Tamper;
using testing::TempDir;

class AuditTamper : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = OpenLog(dir_.db());
    AppendN(*log_, 10);
    ASSERT_TRUE(log_->Verify()->ok());
  }
  VerifyReport Verify() {
    auto report = log_->Verify();
    EXPECT_TRUE(report.ok()) << report.status().message();
    return report.ok() ? *report : VerifyReport{};
  }
  AuditEntry Stored(uint64_t id) {
    auto entries = log_->Query({.after_id = id - 1, .limit = 1});
    EXPECT_TRUE(entries.ok() && entries->size() == 1);
    return (*entries)[0];
  }
  // Rewrites entry `id` with `edited`'s contents and a hash recomputed to match them: what a
  // tamperer who knows the format does.
  void RewriteAndRehash(AuditEntry edited) {
    edited.hash = ComputeEntryHash(edited);
    Tamper(dir_.db(), "UPDATE audit_entries SET arguments = '" + CanonicalJson(edited.arguments) +
                          "', hash = '" + edited.hash +
                          "' WHERE id = " + std::to_string(edited.id));
  }
  TempDir dir_;
  std::unique_ptr<AuditLog> log_;
};

TEST_F(AuditTamper, EditingAnArgumentIsReportedAsAnEditOfThatEntry) {
  Tamper(dir_.db(),
         "UPDATE audit_entries SET arguments = '{\"n\":3,\"path\":\"/etc/shadow\"}' WHERE id = 3");
  VerifyReport r = Verify();
  EXPECT_EQ(r.problem, Problem::kEdited);
  EXPECT_EQ(r.first_bad_id, 3u);
  EXPECT_NE(r.detail.find("entry 3"), std::string::npos) << r.detail;
  EXPECT_EQ(r.entries, 2u);
}

TEST_F(AuditTamper, TurningADenyIntoAnAllowIsAnEdit) {
  Tamper(dir_.db(), "UPDATE audit_entries SET decision = 'allow' WHERE id = 4");
  VerifyReport r = Verify();
  EXPECT_EQ(r.problem, Problem::kEdited);
  EXPECT_EQ(r.first_bad_id, 4u);
}

TEST_F(AuditTamper, DeletingAMiddleEntryIsReportedAsThatEntryDeleted) {
  Tamper(dir_.db(), "DELETE FROM audit_entries WHERE id = 5");
  VerifyReport r = Verify();
  EXPECT_EQ(r.problem, Problem::kDeleted);
  EXPECT_EQ(r.first_bad_id, 5u);
  EXPECT_NE(r.detail.find("entry 5 is missing"), std::string::npos) << r.detail;
}

TEST_F(AuditTamper, DeletingTheFirstEntryIsReported) {
  Tamper(dir_.db(), "DELETE FROM audit_entries WHERE id = 1");
  VerifyReport r = Verify();
  EXPECT_EQ(r.problem, Problem::kDeleted);
  EXPECT_EQ(r.first_bad_id, 1u);
}

TEST_F(AuditTamper, SwappingTwoEntriesIsReportedAtTheFirstSwappedPosition) {
  Tamper(dir_.db(),
         "UPDATE audit_entries SET id = 1000 WHERE id = 3;"
         "UPDATE audit_entries SET id = 3 WHERE id = 6;"
         "UPDATE audit_entries SET id = 6 WHERE id = 1000;");
  VerifyReport r = Verify();
  EXPECT_EQ(r.problem, Problem::kReordered);
  EXPECT_EQ(r.first_bad_id, 3u);
}

TEST_F(AuditTamper, SwappingTwoEntriesContentsKeepingIdsIsReported) {
  // Every column but id exchanged between rows 7 and 8.
  const char* cols[] = {"time",   "kind",      "tenant",     "user",      "agent",  "session",
                        "tool",   "arguments", "decision",   "rule",      "reason", "approvals",
                        "result", "labels",    "latency_us", "prev_hash", "hash"};
  std::string sql = "CREATE TEMP TABLE saved AS SELECT * FROM audit_entries WHERE id IN (7, 8);";
  for (const char* c : cols) {
    sql += std::string("UPDATE audit_entries SET ") + c + " = (SELECT " + c +
           " FROM saved WHERE saved.id = 15 - audit_entries.id) WHERE id IN (7, 8);";
  }
  Tamper(dir_.db(), sql);
  VerifyReport r = Verify();
  EXPECT_EQ(r.problem, Problem::kReordered);
  EXPECT_EQ(r.first_bad_id, 7u);
}

TEST_F(AuditTamper, DeletingTheTailIsCaughtByTheHeadRecord) {
  Tamper(dir_.db(), "DELETE FROM audit_entries WHERE id > 7");
  VerifyReport r = Verify();
  EXPECT_EQ(r.problem, Problem::kTruncated);
  EXPECT_EQ(r.first_bad_id, 8u);
  EXPECT_NE(r.detail.find("entries 8 to 10 are missing"), std::string::npos) << r.detail;
}

TEST_F(AuditTamper, DeletingEverythingIsCaughtByTheHeadRecord) {
  Tamper(dir_.db(), "DELETE FROM audit_entries");
  VerifyReport r = Verify();
  EXPECT_EQ(r.problem, Problem::kTruncated);
  EXPECT_EQ(r.first_bad_id, 1u);
}

TEST_F(AuditTamper, RehashingAnEditedEntryBreaksTheNextEntrysLink) {
  AuditEntry e = Stored(4);
  e.arguments["path"] = "/etc/shadow";
  RewriteAndRehash(e);
  VerifyReport r = Verify();
  EXPECT_EQ(r.problem, Problem::kRehashed);
  EXPECT_EQ(r.first_bad_id, 4u);
  EXPECT_NE(r.detail.find("entry 5"), std::string::npos) << r.detail;
}

TEST_F(AuditTamper, RehashingTheLastEntryDisagreesWithTheHead) {
  AuditEntry e = Stored(10);
  e.arguments["path"] = "/etc/shadow";
  RewriteAndRehash(e);
  VerifyReport r = Verify();
  EXPECT_EQ(r.problem, Problem::kRehashed);
  EXPECT_EQ(r.first_bad_id, 10u);
}

TEST_F(AuditTamper, TruncatingAndLoweringTheHeadCountStillFails) {
  Tamper(dir_.db(), "DELETE FROM audit_entries WHERE id > 8; UPDATE audit_head SET count = 8");
  VerifyReport r = Verify();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.first_bad_id, 8u);
}

TEST_F(AuditTamper, AnEntryAppendedAroundWardenIsReported) {
  Tamper(dir_.db(),
         "INSERT INTO audit_entries SELECT 11, time, kind, tenant, user, agent, session, tool, "
         "arguments, decision, "
         "rule, reason, approvals, result, labels, latency_us, hash, hash FROM audit_entries WHERE "
         "id = 10");
  VerifyReport r = Verify();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.first_bad_id, 11u);
}

TEST_F(AuditTamper, UnparseableContentsAreAnEdit) {
  Tamper(dir_.db(), "UPDATE audit_entries SET labels = 'not json' WHERE id = 6");
  VerifyReport r = Verify();
  EXPECT_EQ(r.problem, Problem::kEdited);
  EXPECT_EQ(r.first_bad_id, 6u);
}

TEST_F(AuditTamper, DeletingTheHeadRecordIsReported) {
  Tamper(dir_.db(), "DELETE FROM audit_head");
  VerifyReport r = Verify();
  EXPECT_EQ(r.problem, Problem::kNoHead);
}

TEST_F(AuditTamper, ReopeningDoesNotPaperOverAMissingHead) {
  Tamper(dir_.db(), "DELETE FROM audit_head");
  log_.reset();
  log_ = OpenLog(dir_.db());
  EXPECT_EQ(Verify().problem, Problem::kNoHead);
  EXPECT_FALSE(log_->Append(testing::SampleEntry(11)).ok());
}

}  // namespace
}  // namespace warden::audit
