// The log's contract: appends form one dense, valid chain, durable when Append returns, from
// any number of threads or processes; queries, tail and export return what was written.
#include "audit/audit_log.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "audit/sha256.h"
#include "test_support.h"

namespace warden::audit {
namespace {

using nlohmann::json;
using testing::AppendN;
using testing::OpenLog;
using testing::SampleEntry;
using testing::TempDir;

TEST(AuditLog, AppendedEntriesVerify) {
  TempDir dir;
  auto log = OpenLog(dir.db());
  auto first = log->Append(SampleEntry(1));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->id, 1u);
  AppendN(*log, 9, 2);
  auto report = log->Verify();
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_TRUE(report->ok()) << report->detail;
  EXPECT_EQ(report->entries, 10u);
  auto tail = log->Tail(1);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(report->head_hash, (*tail)[0].hash);
}

TEST(AuditLog, AnEmptyLogVerifiesWithTheGenesisHash) {
  TempDir dir;
  auto log = OpenLog(dir.db());
  auto report = log->Verify();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok());
  EXPECT_EQ(report->entries, 0u);
  EXPECT_EQ(report->head_hash, kGenesisHash);
}

TEST(AuditLog, ChainStartsAtGenesisAndLinksEachEntryToThePrevious) {
  TempDir dir;
  auto log = OpenLog(dir.db());
  AppendN(*log, 5);
  auto all = log->Query({});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 5u);
  EXPECT_EQ((*all)[0].prev_hash, kGenesisHash);
  for (size_t i = 0; i < all->size(); ++i) {
    EXPECT_EQ((*all)[i].id, i + 1);
    EXPECT_EQ((*all)[i].hash, ComputeEntryHash((*all)[i]));
    if (i > 0) {
      EXPECT_EQ((*all)[i].prev_hash, (*all)[i - 1].hash);
    }
  }
}

TEST(AuditLog, AppendIgnoresCallerSuppliedChainFieldsAndFillsTheTime) {
  TempDir dir;
  auto log = OpenLog(dir.db());
  AuditEntry e = SampleEntry(1);
  e.id = 99;
  e.prev_hash = std::string(64, 'f');
  e.hash = "forged";
  auto receipt = log->Append(e);
  ASSERT_TRUE(receipt.ok());
  EXPECT_EQ(receipt->id, 1u);
  auto stored = log->Tail(1);
  EXPECT_EQ((*stored)[0].prev_hash, kGenesisHash);
  EXPECT_EQ((*stored)[0].hash, receipt->hash);
  EXPECT_EQ((*stored)[0].time, receipt->time);
  EXPECT_EQ(receipt->time.size(), 27u);
  EXPECT_TRUE(log->Verify()->ok());
}

TEST(AuditLog, SecretsInArgumentsAreRedactedBeforeTheyAreStored) {
  TempDir dir;
  auto log = OpenLog(dir.db());
  AuditEntry e = SampleEntry(1);
  e.arguments = {{"url", "https://example.com"},
                 {"headers", {{"Authorization", "Bearer abcdef0123456789"}}}};
  e.reason = "password=hunter2 was in the request";
  e.result = ResultSummary{10, std::string(64, 'b'), "ghp_0123456789abcdefghijABCDEFGHIJ012345"};
  ASSERT_TRUE(log->Append(e).ok());
  auto stored = (*log->Tail(1))[0];
  EXPECT_EQ(stored.arguments["headers"]["Authorization"], "[REDACTED]");
  EXPECT_EQ(stored.arguments["url"], "https://example.com");
  EXPECT_EQ(stored.reason, "password=[REDACTED] was in the request");
  EXPECT_EQ(stored.result->excerpt, "[REDACTED]");
  // Nothing of the secrets reached the file, in any table or page.
  std::ostringstream raw;
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(dir.db().c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  std::ifstream file(dir.db(), std::ios::binary);
  raw << file.rdbuf();
  EXPECT_EQ(raw.str().find("abcdef0123456789"), std::string::npos);
  EXPECT_EQ(raw.str().find("hunter2"), std::string::npos);
}

TEST(AuditLog, CreatesTheDatabaseOwnerOnly) {
  TempDir dir;
  auto log = OpenLog(dir.db());
  AppendN(*log, 1);
  struct stat st;
  ASSERT_EQ(stat(dir.db().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat((dir.db() + "-wal").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0077, 0u);
  ASSERT_EQ(stat((dir.path() + "/var/warden").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(stat((dir.path() + "/var").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST(AuditLog, RefusesASymlinkedDatabase) {
  TempDir dir;
  std::string target = dir.path() + "/elsewhere.db";
  std::string link = dir.path() + "/warden.db";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  AuditOptions options;
  options.path = link;
  EXPECT_FALSE(AuditLog::Open(options).ok());
}

TEST(AuditLog, ReadOnlyOpenOfAMissingFileFailsAndCreatesNothing) {
  TempDir dir;
  AuditOptions options;
  options.path = dir.db();
  options.create = false;
  auto log = AuditLog::Open(options);
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find(dir.db()), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/var"));
}

TEST(AuditLog, ReadOnlyOpenCannotAppend) {
  TempDir dir;
  { AppendN(*OpenLog(dir.db()), 2); }
  AuditOptions options;
  options.path = dir.db();
  options.create = false;
  auto log = AuditLog::Open(options);
  ASSERT_TRUE(log.ok());
  EXPECT_FALSE((*log)->Append(SampleEntry(3)).ok());
  EXPECT_EQ((*log)->Verify()->entries, 2u);
}

TEST(AuditLog, ReopeningContinuesTheChain) {
  TempDir dir;
  { AppendN(*OpenLog(dir.db()), 3); }
  auto log = OpenLog(dir.db(), SyncLevel::kFull);
  auto receipt = log->Append(SampleEntry(4));
  ASSERT_TRUE(receipt.ok());
  EXPECT_EQ(receipt->id, 4u);
  EXPECT_TRUE(log->Verify()->ok());
}

TEST(AuditLog, SixteenThreadsKeepTheChainValidAndIdsDense) {
  TempDir dir;
  auto log = OpenLog(dir.db());
  constexpr int kThreads = 16, kEach = 100;
  std::vector<std::thread> threads;
  std::vector<std::vector<uint64_t>> ids(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        auto r = log->Append(SampleEntry(t * kEach + i, "tenant" + std::to_string(t)));
        if (r.ok()) ids[t].push_back(r->id);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<uint64_t> all;
  for (const auto& v : ids) {
    EXPECT_EQ(v.size(), static_cast<size_t>(kEach));
    EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));  // one thread's entries keep their order
    all.insert(v.begin(), v.end());
  }
  ASSERT_EQ(all.size(), static_cast<size_t>(kThreads * kEach));
  EXPECT_EQ(*all.begin(), 1u);
  EXPECT_EQ(*all.rbegin(), static_cast<uint64_t>(kThreads * kEach));
  auto report = log->Verify();
  EXPECT_TRUE(report->ok()) << report->detail;
  EXPECT_EQ(report->entries, static_cast<uint64_t>(kThreads * kEach));
}

TEST(AuditLog, TwoProcessesWritingOneFileShareOneChain) {
  // Two AuditLog objects stand for two gateways (or serve and `warden kill`) on one file: the
  // head is read inside each write transaction, so neither forks the chain.
  TempDir dir;
  auto a = OpenLog(dir.db());
  auto b = OpenLog(dir.db());
  std::thread ta([&] { AppendN(*a, 200); });
  std::thread tb([&] { AppendN(*b, 200, 1000); });
  ta.join();
  tb.join();
  auto report = a->Verify();
  EXPECT_TRUE(report->ok()) << report->detail;
  EXPECT_EQ(report->entries, 400u);
}

TEST(AuditLog, GroupCommitUnderFullSyncReturnsOnlyAfterCommit) {
  TempDir dir;
  std::atomic<int> commits_started{0};
  std::atomic<bool> release{false};
  AuditOptions options;
  options.path = dir.db();
  options.sync = SyncLevel::kFull;
  std::vector<size_t> batches;
  std::mutex batches_mu;
  options.before_commit = [&](size_t n) {
    {
      std::lock_guard lock(batches_mu);
      batches.push_back(n);
    }
    // Hold the first commit until every other caller has queued behind it.
    if (commits_started.fetch_add(1) == 0) {
      while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  auto log = AuditLog::Open(options).value();
  constexpr int kThreads = 16;
  std::atomic<int> returned{0};
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    EXPECT_TRUE(log->Append(SampleEntry(0)).ok());
    returned.fetch_add(1);
  });
  while (commits_started.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::atomic<int> visible_failures{0};
  for (int t = 1; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto r = log->Append(SampleEntry(t));
      ASSERT_TRUE(r.ok());
      returned.fetch_add(1);
      // Committed means visible to any other connection the moment Append returns.
      AuditOptions reader;
      reader.path = dir.db();
      reader.create = false;
      auto other = AuditLog::Open(reader).value();
      AuditFilter f;
      f.after_id = r->id - 1;
      f.limit = 1;
      auto seen = other->Query(f);
      if (!seen.ok() || seen->size() != 1 || (*seen)[0].hash != r->hash)
        visible_failures.fetch_add(1);
    });
  }
  // Nobody may return while the first transaction has not committed.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(returned.load(), 0);
  release.store(true);
  for (auto& th : threads) th.join();
  EXPECT_EQ(returned.load(), kThreads);
  EXPECT_EQ(visible_failures.load(), 0);
  // The fifteen callers that queued behind the held commit shared the next one.
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0], 1u);
  EXPECT_EQ(batches[1], static_cast<size_t>(kThreads - 1));
  AuditStats stats = log->stats();
  EXPECT_EQ(stats.appends, static_cast<uint64_t>(kThreads));
  EXPECT_EQ(stats.commits, 2u);
  EXPECT_TRUE(log->Verify()->ok());
}

TEST(AuditLog, TheWalIsCheckpointedIntoTheDatabaseInTheBackground) {
  TempDir dir;
  auto log = OpenLog(dir.db());
  auto size = [&] { return std::filesystem::file_size(dir.db()); };
  uintmax_t before = size();
  AppendN(*log, 1500);  // several thousand WAL pages: past the checkpoint threshold
  bool grew = false;
  for (int i = 0; i < 200 && !grew; ++i) {
    grew = size() > before + 100 * 4096;
    if (!grew) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(grew) << "database file still " << size() << " bytes";
  EXPECT_TRUE(log->Verify()->ok());
}

TEST(AuditLog, AFailedCommitFailsEveryCallerInItsBatch) {
  TempDir dir;
  auto log = OpenLog(dir.db());
  AppendN(*log, 1);
  // The head vanishes: the store must refuse to start a second chain.
  testing::Tamper(dir.db(), "DELETE FROM audit_head");
  auto r = log->Append(SampleEntry(2));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("head"), std::string::npos) << r.status().message();
  EXPECT_EQ(log->stats().failures, 1u);
}

class AuditQuery : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = OpenLog(dir_.db());
    auto add = [&](std::string time, std::string tenant, std::string user, std::string agent,
                   std::string tool, std::string decision, EntryKind kind) {
      AuditEntry e;
      e.time = time, e.tenant = tenant, e.user = user, e.agent = agent, e.tool = tool;
      e.decision = decision, e.kind = kind;
      ASSERT_TRUE(log_->Append(e).ok());
    };
    add("2025-01-01T10:00:00.000000Z", "acme", "alice", "coder", "fs__read", "allow",
        EntryKind::kCall);
    add("2025-01-01T11:00:00.000000Z", "acme", "bob", "coder", "fs__write", "deny",
        EntryKind::kDecision);
    add("2025-01-01T12:00:00.000000Z", "globex", "carol", "helper", "web__fetch", "ask",
        EntryKind::kDecision);
    add("2025-01-01T13:00:00.000000Z", "acme", "alice", "reviewer", "fs__read", "allow",
        EntryKind::kCall);
    add("2025-01-01T14:00:00.000000Z", "", "admin", "", "", "kill", EntryKind::kAdmin);
  }
  std::vector<uint64_t> Ids(const AuditFilter& f) {
    auto r = log_->Query(f);
    EXPECT_TRUE(r.ok()) << r.status().message();
    std::vector<uint64_t> ids;
    for (const auto& e : *r) ids.push_back(e.id);
    return ids;
  }
  TempDir dir_;
  std::unique_ptr<AuditLog> log_;
};

TEST_F(AuditQuery, NoFilterReturnsAllInIdOrder) {
  EXPECT_EQ(Ids({}), (std::vector<uint64_t>{1, 2, 3, 4, 5}));
}

TEST_F(AuditQuery, FiltersByEachField) {
  EXPECT_EQ(Ids({.tenant = "acme"}), (std::vector<uint64_t>{1, 2, 4}));
  EXPECT_EQ(Ids({.user = "alice"}), (std::vector<uint64_t>{1, 4}));
  EXPECT_EQ(Ids({.agent = "coder"}), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(Ids({.tool = "fs__read"}), (std::vector<uint64_t>{1, 4}));
  EXPECT_EQ(Ids({.decision = "deny"}), (std::vector<uint64_t>{2}));
  EXPECT_EQ(Ids({.kind = EntryKind::kAdmin}), (std::vector<uint64_t>{5}));
  EXPECT_EQ(Ids({.kind = EntryKind::kDecision}), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(Ids({.tenant = "acme", .user = "alice", .agent = "reviewer"}),
            (std::vector<uint64_t>{4}));
  EXPECT_EQ(Ids({.tenant = "initech"}), (std::vector<uint64_t>{}));
}

TEST_F(AuditQuery, TimeRangeIncludesSinceAndExcludesUntil) {
  EXPECT_EQ(Ids({.since = "2025-01-01T11:00:00.000000Z", .until = "2025-01-01T13:00:00.000000Z"}),
            (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(Ids({.since = "2025-01-01T12:30:00.000000Z"}), (std::vector<uint64_t>{4, 5}));
}

TEST_F(AuditQuery, LimitTakesTheOldestOrWithNewestTheNewest) {
  EXPECT_EQ(Ids({.limit = 2}), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(Ids({.tenant = "acme", .limit = 2, .newest = true}), (std::vector<uint64_t>{2, 4}));
  EXPECT_EQ(Ids({.after_id = 3}), (std::vector<uint64_t>{4, 5}));
}

TEST_F(AuditQuery, TailReturnsTheLastEntriesInOrder) {
  auto tail = log_->Tail(2);
  ASSERT_TRUE(tail.ok());
  ASSERT_EQ(tail->size(), 2u);
  EXPECT_EQ((*tail)[0].id, 4u);
  EXPECT_EQ((*tail)[1].id, 5u);
  EXPECT_EQ(log_->Tail(100)->size(), 5u);
  EXPECT_TRUE(log_->Tail(0)->empty());
}

TEST(AuditExport, JsonlRoundTripsEveryLineRehashes) {
  TempDir dir;
  auto log = OpenLog(dir.db());
  AppendN(*log, 20);
  AuditEntry odd = SampleEntry(21);
  odd.arguments = {{"text", "caf\xc3\xa9 \xf0\x9f\x98\x80 \"quoted\"\n\ttab"},
                   {"ratio", 0.1},
                   {"big", 1e300},
                   {"neg", -7},
                   {"nested", {{"b", {1, 2}}, {"a", nullptr}}},
                   {"flag", true}};
  ASSERT_TRUE(log->Append(odd).ok());
  std::stringstream out;
  auto written = log->ExportJsonl({}, out);
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_EQ(*written, 21u);
  auto stored = *log->Query({});
  std::string line;
  std::string prev = kGenesisHash;
  size_t n = 0;
  while (std::getline(out, line)) {
    json j = json::parse(line);
    EXPECT_EQ(CanonicalJson(j), line);  // each line is already canonical
    std::string hash = j["hash"];
    EXPECT_EQ(j["prev_hash"], prev);
    j.erase("hash");
    EXPECT_EQ(Sha256Hex(prev + CanonicalJson(j)), hash) << "line " << n + 1;
    auto entry = FromJson(json::parse(line));
    ASSERT_TRUE(entry.ok());
    EXPECT_EQ(*entry, stored[n]);
    prev = hash;
    ++n;
  }
  EXPECT_EQ(n, 21u);
}

TEST(AuditExport, VerifyJsonlAcceptsAnExportAndNamesAnEditedLine) {
  TempDir dir;
  auto log = OpenLog(dir.db());
  AppendN(*log, 5);
  std::stringstream out;
  ASSERT_TRUE(log->ExportJsonl({}, out).ok());
  std::string text = out.str();
  std::istringstream good(text);
  auto report = VerifyJsonl(good);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << report->detail;
  EXPECT_EQ(report->entries, 5u);
  size_t at = text.find("file3.txt");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 9, "file9.txt");
  std::istringstream bad(text);
  report = VerifyJsonl(bad);
  EXPECT_EQ(report->problem, Problem::kEdited);
  EXPECT_EQ(report->first_bad_id, 3u);
}

TEST(AuditExport, FiltersApplyToTheExport) {
  TempDir dir;
  auto log = OpenLog(dir.db());
  AppendN(*log, 8);
  std::stringstream out;
  auto written = log->ExportJsonl({.decision = "deny"}, out);
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(*written, 2u);  // entries 4 and 8
  std::string line;
  while (std::getline(out, line)) EXPECT_EQ(json::parse(line)["decision"], "deny");
}

// The canonical form in docs/audit.md is reproducible outside C++: the reference verifier
// tests/audit/verify_export.py (Python, standard library) re-hashes every exported line.
TEST(AuditExport, ThePythonReferenceVerifierReproducesEveryHash) {
  if (std::system("python3 -c 'import json, hashlib' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "no python3";
  TempDir dir;
  auto log = OpenLog(dir.db());
  AppendN(*log, 10);
  AuditEntry odd = SampleEntry(11);
  odd.arguments = {{"text", "caf\xc3\xa9 \xf0\x9f\x98\x80 \x01\x1f\x7f <>&' \" \\ /"},
                   {"floats",
                    {0.1, 2.5, 2.0, -0.0, 1e-7, 0.0001, 1e14, 1e15, 1.5e15, -1234567890123456.8,
                     1e16, 1e300, 5e-324}},
                   {"ints", {0, -7, 9007199254740993LL, 18446744073709551615ULL}},
                   {"z", {{"\xc3\xa9", 1}, {"e", 2}, {"E", 3}, {"", 4}}}};
  ASSERT_TRUE(log->Append(odd).ok());
  std::string export_path = dir.path() + "/export.jsonl";
  {
    std::ofstream file(export_path);
    ASSERT_TRUE(log->ExportJsonl({}, file).ok());
  }
  std::string script = std::string(WARDEN_AUDIT_TEST_DIR) + "/verify_export.py";
  std::string out_path = dir.path() + "/out.txt";
  EXPECT_EQ(std::system(("python3 " + script + " " + export_path + " > " + out_path).c_str()), 0);
  std::ifstream out(out_path);
  std::string line;
  std::getline(out, line);
  EXPECT_EQ(line, "ok: 11 entries, head " + log->Verify()->head_hash);

  // And it catches an edit.
  testing::Tamper(dir.db(), "UPDATE audit_entries SET tool = 'x' WHERE id = 4");
  {
    std::ofstream file(export_path);
    ASSERT_TRUE(log->ExportJsonl({}, file).ok());
  }
  EXPECT_NE(std::system(("python3 " + script + " " + export_path + " > " + out_path).c_str()), 0);
}

}  // namespace
}  // namespace warden::audit
