// state::TrifectaStore: the lethal trifecta's per-key rows, durably (round trips, order, keys kept
// apart, Forget, PurgeBefore, reopening, read-only files without the table, bounds, a damaged
// blob, and appends from several threads at once).
#include "state/trifecta_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "state/kill_store.h"
#include "test_support.h"

namespace warden::state {
namespace {

using testing::TempDb;

std::unique_ptr<TrifectaStore> OpenTrifecta(const std::string& path, bool sync_full = false) {
  auto store = TrifectaStore::Open({.path = path}, sync_full);
  EXPECT_TRUE(store) << store.status().message();
  return store ? std::move(*store) : nullptr;
}

// `count` hashes that use all 8 bytes (so that a byte-order mistake shows), from `seed`.
std::vector<uint64_t> TrifectaHashes(size_t count, uint64_t seed) {
  std::vector<uint64_t> out;
  out.reserve(count);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < count; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out.push_back(x);
  }
  return out;
}

// prefix + n. Appended rather than `"prefix" + std::to_string(n)`, which GCC 12 at -O3 warns
// about (a false -Wrestrict in libstdc++'s operator+, GCC bug 105329).
std::string TrifectaName(const char* prefix, uint64_t n) {
  std::string out(prefix);
  out += std::to_string(n);
  return out;
}

TrifectaRow TrifectaCall(uint64_t call, const std::string& tool, uint8_t legs) {
  TrifectaRow row;
  row.call = call;
  row.tool = tool;
  row.legs = legs;
  row.prints = TrifectaHashes(3, call);
  row.untrusted_tokens = TrifectaHashes(2, call + 1000);
  row.trusted_tokens = {0, 1, 0xffffffffffffffffull, 0x0102030405060708ull};
  row.time = "2025-01-02T03:04:05.000001Z";
  return row;
}

// Runs `sql` on the file through a connection of its own, as a hand edit (or damage) would.
int TrifectaHandEdit(const std::string& path, const std::string& sql) {
  sqlite3* raw = nullptr;
  if (sqlite3_open(path.c_str(), &raw) != SQLITE_OK) return -1;
  int rc = sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) rc = sqlite3_extended_errcode(raw);
  sqlite3_close(raw);
  return rc;
}

TEST(TrifectaStoreTest, RowsRoundTripWithEveryFieldInOrder) {
  TempDb tmp;
  auto store = OpenTrifecta(tmp.path());
  ASSERT_TRUE(store);
  TrifectaRow full = TrifectaCall(41, "mail__read_inbox", 1);
  TrifectaRow empty;  // no hashes at all, no call id, no tool
  empty.time = "2025-01-02T03:04:06.000000Z";
  TrifectaRow big = TrifectaCall(0xfffffffffffffff0ull, "files__read_file", 3);
  big.prints = TrifectaHashes(kMaxTrifectaHashes, 7);
  big.untrusted_tokens = TrifectaHashes(kMaxTrifectaHashes, 8);
  big.trusted_tokens = TrifectaHashes(kMaxTrifectaHashes, 9);
  TrifectaRow unstamped = TrifectaCall(43, "web__fetch", 1);
  unstamped.time.clear();

  const std::string key = "session:3f2a9c";
  for (const TrifectaRow* row : {&full, &empty, &big, &unstamped}) {
    Status st = store->Append(key, *row);
    ASSERT_TRUE(st.ok()) << st.message();
  }
  auto rows = store->Load(key);
  ASSERT_TRUE(rows) << rows.status().message();
  ASSERT_EQ(rows->size(), 4u);
  EXPECT_EQ((*rows)[0], full);
  EXPECT_EQ((*rows)[1], empty);
  EXPECT_TRUE((*rows)[1].prints.empty() && (*rows)[1].trusted_tokens.empty());
  EXPECT_EQ((*rows)[2], big);
  EXPECT_EQ((*rows)[2].prints.size(), kMaxTrifectaHashes);
  EXPECT_EQ((*rows)[2].call, 0xfffffffffffffff0ull);
  // Append stamps a row that has no time with Now().
  EXPECT_EQ((*rows)[3].time.size(), 27u);  // 2025-01-02T03:04:05.123456Z
  EXPECT_EQ((*rows)[3].time.back(), 'Z');
  unstamped.time = (*rows)[3].time;
  EXPECT_EQ((*rows)[3], unstamped);
}

TEST(TrifectaStoreTest, HashesAreLittleEndianPackedBlobs) {
  TempDb tmp;
  auto store = OpenTrifecta(tmp.path());
  ASSERT_TRUE(store);
  TrifectaRow row;
  row.prints = {0x0102030405060708ull};
  ASSERT_TRUE(store->Append("task:acme/alice/bot/T1", row).ok());
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(tmp.path().c_str(), &raw), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(raw, "SELECT hex(prints), length(trusted) FROM state_trifecta", -1,
                               &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), "0807060504030201");
  EXPECT_EQ(sqlite3_column_int(stmt, 1), 0);
  sqlite3_finalize(stmt);
  sqlite3_close(raw);
}

TEST(TrifectaStoreTest, KeysAreKeptApartAndForgetDropsOnlyItsOwn) {
  TempDb tmp;
  auto store = OpenTrifecta(tmp.path());
  ASSERT_TRUE(store);
  const std::string a = "session:aaaa", b = "caller:acme/alice/bot";
  // Interleaved: each key's rows must still come back in its own order.
  for (uint64_t i = 1; i <= 6; ++i) {
    ASSERT_TRUE(store->Append(i % 2 ? a : b, TrifectaCall(i, TrifectaName("t", i), 1)).ok());
  }
  auto rows_a = store->Load(a);
  auto rows_b = store->Load(b);
  ASSERT_TRUE(rows_a && rows_b);
  ASSERT_EQ(rows_a->size(), 3u);
  ASSERT_EQ(rows_b->size(), 3u);
  EXPECT_EQ((*rows_a)[0].call, 1u);
  EXPECT_EQ((*rows_a)[1].call, 3u);
  EXPECT_EQ((*rows_a)[2].call, 5u);
  EXPECT_EQ((*rows_b)[0].call, 2u);
  EXPECT_EQ((*rows_b)[2].call, 6u);
  auto none = store->Load("session:never");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());

  ASSERT_TRUE(store->Forget(a).ok());
  EXPECT_TRUE(store->Load(a)->empty());
  EXPECT_EQ(store->Load(b)->size(), 3u);
  EXPECT_TRUE(store->Forget("session:never").ok());
  // A forgotten key starts again from nothing.
  ASSERT_TRUE(store->Append(a, TrifectaCall(7, "t7", 2)).ok());
  ASSERT_EQ(store->Load(a)->size(), 1u);
  EXPECT_EQ((*store->Load(a))[0].call, 7u);
}

TEST(TrifectaStoreTest, PurgeBeforeRemovesKeysWhoseNewestRowIsOldAndKeepsRecentOnesWhole) {
  TempDb tmp;
  auto store = OpenTrifecta(tmp.path());
  ASSERT_TRUE(store);
  auto at = [](uint64_t call, const char* time) {
    TrifectaRow row = TrifectaCall(call, "tool", 1);
    row.time = time;
    return row;
  };
  // old: every row old. mixed: an old row, then a recent one. recent: one recent row.
  ASSERT_TRUE(store->Append("session:old", at(1, "2025-01-01T00:00:00.000000Z")).ok());
  ASSERT_TRUE(store->Append("session:old", at(2, "2025-01-01T12:00:00.000000Z")).ok());
  ASSERT_TRUE(store->Append("session:mixed", at(3, "2025-01-01T00:00:00.000000Z")).ok());
  ASSERT_TRUE(store->Append("session:mixed", at(4, "2025-01-03T00:00:00.000000Z")).ok());
  ASSERT_TRUE(store->Append("session:recent", at(5, "2025-01-02T00:00:00.000000Z")).ok());

  auto purged = store->PurgeBefore("2025-01-02T00:00:00.000000Z");
  ASSERT_TRUE(purged) << purged.status().message();
  EXPECT_EQ(*purged, 2u);
  EXPECT_TRUE(store->Load("session:old")->empty());
  EXPECT_EQ(store->Load("session:mixed")->size(), 2u);   // its old row stays with its key
  EXPECT_EQ(store->Load("session:recent")->size(), 1u);  // exactly at `before`: kept

  auto again = store->PurgeBefore("2025-01-02T00:00:00.000000Z");
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, 0u);
  EXPECT_FALSE(store->PurgeBefore(""));
  auto all = store->PurgeBefore("2026-01-01T00:00:00.000000Z");
  ASSERT_TRUE(all);
  EXPECT_EQ(*all, 3u);
  EXPECT_TRUE(store->Load("session:mixed")->empty());
}

TEST(TrifectaStoreTest, RowsSurviveReopening) {
  TempDb tmp;
  const TrifectaRow row = TrifectaCall(9, "db__query", 2);
  {
    auto store = OpenTrifecta(tmp.path(), /*sync_full=*/true);
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->Append("session:s1", row).ok());
  }
  {
    auto writer = OpenTrifecta(tmp.path());  // the table exists already
    ASSERT_TRUE(writer);
    auto rows = writer->Load("session:s1");
    ASSERT_TRUE(rows) << rows.status().message();
    ASSERT_EQ(rows->size(), 1u);
    EXPECT_EQ((*rows)[0], row);
    ASSERT_TRUE(writer->Append("session:s1", row).ok());
  }
  auto reader = TrifectaStore::Open({.path = tmp.path(), .create = false});
  ASSERT_TRUE(reader) << reader.status().message();
  auto rows = (*reader)->Load("session:s1");
  ASSERT_TRUE(rows) << rows.status().message();
  EXPECT_EQ(rows->size(), 2u);
}

TEST(TrifectaStoreTest, ReadOnlyStoreOnAFileWithoutTheTableReadsNothingAndNeverWrites) {
  TempDb tmp;
  auto missing = TrifectaStore::Open({.path = tmp.path(), .create = false});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find(tmp.path()), std::string::npos);

  ASSERT_TRUE(KillStore::Open({.path = tmp.path()}));  // a warden file without state_trifecta
  auto reader = TrifectaStore::Open({.path = tmp.path(), .create = false});
  ASSERT_TRUE(reader) << reader.status().message();
  auto rows = (*reader)->Load("session:s1");
  ASSERT_TRUE(rows) << rows.status().message();
  EXPECT_TRUE(rows->empty());
  EXPECT_TRUE((*reader)->DataVersion());
  Status appended = (*reader)->Append("session:s1", TrifectaCall(1, "t", 1));
  EXPECT_FALSE(appended.ok());
  EXPECT_NE(appended.message().find("read-only"), std::string::npos);
  EXPECT_FALSE((*reader)->Forget("session:s1").ok());
  EXPECT_FALSE((*reader)->PurgeBefore("2030-01-01T00:00:00.000000Z"));

  // A gateway sets the table up later: the reader sees its rows without reopening.
  auto writer = OpenTrifecta(tmp.path());
  ASSERT_TRUE(writer);
  ASSERT_TRUE(writer->Append("session:s1", TrifectaCall(1, "t", 1)).ok());
  rows = (*reader)->Load("session:s1");
  ASSERT_TRUE(rows) << rows.status().message();
  EXPECT_EQ(rows->size(), 1u);
}

TEST(TrifectaStoreTest, AStoreWhoseTableWasDroppedFailsInsteadOfReadingNothing) {
  TempDb tmp;
  auto store = OpenTrifecta(tmp.path());
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->Append("session:s1", TrifectaCall(1, "t", 1)).ok());
  ASSERT_EQ(TrifectaHandEdit(tmp.path(), "DROP TABLE state_trifecta"), SQLITE_OK);
  EXPECT_FALSE(store->Load("session:s1"));
  EXPECT_FALSE(store->Append("session:s1", TrifectaCall(2, "t", 1)).ok());
}

TEST(TrifectaStoreTest, BadKeysAreRefused) {
  TempDb tmp;
  auto store = OpenTrifecta(tmp.path());
  ASSERT_TRUE(store);
  const TrifectaRow row = TrifectaCall(1, "t", 1);
  const std::string longest = "session:" + std::string(kMaxTrifectaKeyBytes - 8, 'a');
  EXPECT_TRUE(store->Append(longest, row).ok());
  EXPECT_EQ(store->Load(longest)->size(), 1u);

  const std::string too_long = longest + "a";
  const std::string with_nul = std::string("session:ab\0cd", 13);
  for (const std::string& key : {std::string(), too_long, with_nul}) {
    Status appended = store->Append(key, row);
    ASSERT_FALSE(appended.ok()) << key.size();
    EXPECT_NE(appended.message().find("key"), std::string::npos) << appended.message();
    EXPECT_FALSE(store->Load(key));
    EXPECT_FALSE(store->Forget(key).ok());
  }
  EXPECT_NE(store->Append("", row).message().find("empty"), std::string::npos);
  EXPECT_NE(store->Append(too_long, row).message().find("longer than 512"), std::string::npos);
  EXPECT_NE(store->Append(with_nul, row).message().find("NUL"), std::string::npos);
}

TEST(TrifectaStoreTest, OversizedVectorsAreRefusedAndNothingIsWritten) {
  TempDb tmp;
  auto store = OpenTrifecta(tmp.path());
  ASSERT_TRUE(store);
  const std::string key = "session:big";
  for (int which = 0; which < 3; ++which) {
    TrifectaRow row = TrifectaCall(1, "t", 3);
    std::vector<uint64_t>& vec = which == 0   ? row.prints
                                 : which == 1 ? row.untrusted_tokens
                                              : row.trusted_tokens;
    vec = TrifectaHashes(kMaxTrifectaHashes + 1, 5);
    Status st = store->Append(key, row);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("65537 hashes, more than 65536"), std::string::npos)
        << st.message();
    EXPECT_NE(st.message().find(key), std::string::npos) << st.message();
  }
  EXPECT_TRUE(store->Load(key)->empty());
}

TEST(TrifectaStoreTest, ADamagedBlobIsAnErrorNamingTheKeyAndRow) {
  TempDb tmp;
  auto store = OpenTrifecta(tmp.path());
  ASSERT_TRUE(store);
  const std::string key = "session:damaged";
  ASSERT_TRUE(store->Append(key, TrifectaCall(1, "t", 1)).ok());
  ASSERT_TRUE(store->Append(key, TrifectaCall(2, "t", 1)).ok());
  ASSERT_TRUE(store->Append("session:fine", TrifectaCall(3, "t", 1)).ok());
  ASSERT_EQ(TrifectaHandEdit(tmp.path(),
                             "UPDATE state_trifecta SET untrusted = x'01020304050607' "
                             "WHERE call = 2"),
            SQLITE_OK);
  auto rows = store->Load(key);
  ASSERT_FALSE(rows);
  const std::string message = rows.status().message();
  EXPECT_NE(message.find("'session:damaged'"), std::string::npos) << message;
  EXPECT_NE(message.find("row 2 "), std::string::npos) << message;
  EXPECT_NE(message.find("untrusted is 7 bytes"), std::string::npos) << message;
  EXPECT_EQ(store->Load("session:fine")->size(), 1u);
  // The table is STRICT: a hash vector that is not a blob cannot be written by hand either.
  EXPECT_NE(TrifectaHandEdit(tmp.path(), "UPDATE state_trifecta SET prints = 'abcdefgh'"),
            SQLITE_OK);
}

TEST(TrifectaStoreTest, ConcurrentAppendsFromFourThreadsAreAllKept) {
  TempDb tmp;
  auto store = OpenTrifecta(tmp.path());
  ASSERT_TRUE(store);
  constexpr int kThreads = 4;
  constexpr uint64_t kPerThread = 200;
  const std::string shared = "session:shared";
  std::atomic<bool> go{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go) std::this_thread::yield();
      for (uint64_t i = 0; i < kPerThread; ++i) {
        const uint64_t call = static_cast<uint64_t>(t) * 1000000 + i;
        TrifectaRow row = TrifectaCall(call, TrifectaName("t", t), 1);
        if (!store->Append(shared, row).ok()) ++failures;
        if (!store->Append(TrifectaName("session:t", t), row).ok()) ++failures;
      }
    });
  }
  go = true;
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);

  auto rows = store->Load(shared);
  ASSERT_TRUE(rows) << rows.status().message();
  ASSERT_EQ(rows->size(), kThreads * kPerThread);
  // Every thread's rows are there, each intact, in the order that thread appended them.
  std::vector<uint64_t> next(kThreads, 0);
  for (const TrifectaRow& row : *rows) {
    const uint64_t t = row.call / 1000000;
    ASSERT_LT(t, static_cast<uint64_t>(kThreads));
    EXPECT_EQ(row.call % 1000000, next[t]++);
    EXPECT_EQ(row, TrifectaCall(row.call, TrifectaName("t", t), 1));
  }
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(next[t], kPerThread);
    EXPECT_EQ(store->Load(TrifectaName("session:t", t))->size(), kPerThread);
  }
}

TEST(TrifectaStoreTest, DataVersionMovesWhenAnotherConnectionCommits) {
  TempDb tmp;
  auto watcher = OpenTrifecta(tmp.path());
  auto writer = OpenTrifecta(tmp.path());
  ASSERT_TRUE(watcher && writer);
  auto before = watcher->DataVersion();
  ASSERT_TRUE(before) << before.status().message();
  EXPECT_EQ(*watcher->DataVersion(), *before);
  ASSERT_TRUE(writer->Append("session:s1", TrifectaCall(1, "t", 1)).ok());
  auto after = watcher->DataVersion();
  ASSERT_TRUE(after);
  EXPECT_NE(*after, *before);
}

}  // namespace
}  // namespace warden::state
