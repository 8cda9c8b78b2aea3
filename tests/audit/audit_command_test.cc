// `warden audit verify|tail|query|export` against a temporary database (cli_runner.h drives it).
#include <gtest/gtest.h>

#include <sstream>

#include "audit/sha256.h"
#include "cli_runner.h"
#include "test_support.h"

namespace warden::audit {
namespace {

using nlohmann::json;
using testing::TempDir;

using testing::CliRun;
using testing::RunCli;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class AuditCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto log = testing::OpenLog(dir_.db());
    auto add = [&](std::string time, std::string tenant, std::string tool, std::string decision,
                   EntryKind kind) {
      AuditEntry e = testing::SampleEntry(0, tenant);
      e.time = time, e.tool = tool, e.decision = decision, e.kind = kind;
      auto r = log->Append(e);
      ASSERT_TRUE(r.ok());
      head_ = r->hash;
    };
    add("2025-03-01T10:00:00.000000Z", "acme", "fs__read", "allow", EntryKind::kCall);
    add("2025-03-01T11:00:00.000000Z", "acme", "fs__write", "deny", EntryKind::kDecision);
    add("2025-03-02T10:00:00.000000Z", "globex", "fs__read", "allow", EntryKind::kCall);
    add("2025-03-03T10:00:00.000000Z", "acme", "web__fetch", "ask", EntryKind::kDecision);
    add("2025-03-04T10:00:00.000000Z", "", "", "kill", EntryKind::kAdmin);
  }
  TempDir dir_;
  std::string head_;
};

TEST_F(AuditCommandTest, VerifyPrintsTheCountAndHeadAndExitsZero) {
  CliRun r = RunCli({"audit", "verify", "--db", dir_.db()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "ok: 5 entries, head " + head_ + "\n");
}

TEST_F(AuditCommandTest, VerifyNamesTheFirstBadEntryAndExitsOne) {
  testing::Tamper(dir_.db(), "UPDATE audit_entries SET decision = 'allow' WHERE id = 2");
  CliRun r = RunCli({"audit", "verify", "--db", dir_.db()});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("FAIL at entry 2 (edited)"), std::string::npos) << r.out;
}

TEST_F(AuditCommandTest, VerifyJsonReportsTheProblem) {
  testing::Tamper(dir_.db(), "DELETE FROM audit_entries WHERE id = 3");
  CliRun r = RunCli({"audit", "verify", "--db", dir_.db(), "--json"});
  EXPECT_EQ(r.code, 1);
  json j = json::parse(r.out);
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["problem"], "deleted");
  EXPECT_EQ(j["first_bad_id"], 3);
}

TEST_F(AuditCommandTest, AMissingDatabaseIsAnErrorAndIsNotCreated) {
  std::string missing = dir_.path() + "/none/warden.db";
  CliRun r = RunCli({"audit", "verify", "--db", missing});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/none"));
}

TEST_F(AuditCommandTest, TailShowsTheLastEntriesOldestFirst) {
  CliRun r = RunCli({"audit", "tail", "-n", "2", "--db", dir_.db()});
  EXPECT_EQ(r.code, 0) << r.err;
  auto lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].rfind("4  2025-03-03T10:00:00.000000Z  decision  ask  acme/", 0), 0u)
      << lines[0];
  EXPECT_EQ(lines[1].rfind("5  2025-03-04T10:00:00.000000Z  admin  kill", 0), 0u) << lines[1];
}

TEST_F(AuditCommandTest, TailJsonIsAnArrayOfEntriesWithHashes) {
  CliRun r = RunCli({"audit", "tail", "--json", "--db", dir_.db()});
  EXPECT_EQ(r.code, 0);
  json j = json::parse(r.out);
  ASSERT_EQ(j.size(), 5u);
  EXPECT_EQ(j[4]["hash"], head_);
  EXPECT_EQ(j[0]["prev_hash"], kGenesisHash);
}

TEST_F(AuditCommandTest, QueryAppliesEveryFilter) {
  auto ids = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"audit", "query", "--json", "--db", dir_.db()});
    CliRun r = RunCli(args);
    EXPECT_EQ(r.code, 0) << r.err;
    std::vector<int> out;
    for (const auto& e : json::parse(r.out)) out.push_back(e["id"]);
    return out;
  };
  EXPECT_EQ(ids({}), (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_EQ(ids({"--tenant", "acme"}), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(ids({"--tool", "fs__read"}), (std::vector<int>{1, 3}));
  EXPECT_EQ(ids({"--decision", "deny"}), (std::vector<int>{2}));
  EXPECT_EQ(ids({"--kind", "admin"}), (std::vector<int>{5}));
  EXPECT_EQ(ids({"--user", "bob", "--agent", "coder"}), (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_EQ(ids({"--since", "2025-03-01T10:30:00Z", "--until", "2025-03-03"}),
            (std::vector<int>{2, 3}));
  EXPECT_EQ(ids({"--tenant", "acme", "--limit", "2"}), (std::vector<int>{1, 2}));
  EXPECT_EQ(ids({"--tenant", "acme", "--limit", "2", "--newest"}), (std::vector<int>{2, 4}));
}

TEST_F(AuditCommandTest, QueryTextOutputHasOneLinePerEntry) {
  CliRun r = RunCli({"audit", "query", "--tenant", "globex", "--db", dir_.db()});
  EXPECT_EQ(r.code, 0);
  auto lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("globex/"), std::string::npos);
  EXPECT_NE(lines[0].find("fs__read"), std::string::npos);
}

TEST_F(AuditCommandTest, ABadTimeIsAnError) {
  CliRun r = RunCli({"audit", "query", "--since", "last tuesday", "--db", dir_.db()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--since"), std::string::npos) << r.err;
}

TEST_F(AuditCommandTest, ExportWritesCanonicalLinesThatRehash) {
  CliRun r = RunCli({"audit", "export", "--format", "jsonl", "--db", dir_.db()});
  EXPECT_EQ(r.code, 0) << r.err;
  auto lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 5u);
  std::string prev = kGenesisHash;
  for (const auto& line : lines) {
    json j = json::parse(line);
    std::string hash = j["hash"];
    j.erase("hash");
    EXPECT_EQ(Sha256Hex(prev + CanonicalJson(j)), hash);
    prev = hash;
  }
  EXPECT_EQ(prev, head_);
  std::istringstream in(r.out);
  EXPECT_TRUE(VerifyJsonl(in)->ok());
}

TEST_F(AuditCommandTest, ExportTakesFilters) {
  CliRun r = RunCli({"audit", "export", "--format", "jsonl", "--tenant", "acme", "--decision",
                     "allow", "--db", dir_.db()});
  EXPECT_EQ(r.code, 0);
  auto lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(json::parse(lines[0])["id"], 1);
}

TEST_F(AuditCommandTest, ExportRefusesAnUnknownFormat) {
  CliRun r = RunCli({"audit", "export", "--format", "csv", "--db", dir_.db()});
  EXPECT_NE(r.code, 0);
}

TEST_F(AuditCommandTest, DefaultDatabaseIsUnderVarWarden) {
  // Run from the temp directory: the default path is ./var/warden/warden.db there.
  auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir_.path());
  CliRun r = RunCli({"audit", "verify"});
  std::filesystem::current_path(cwd);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "ok: 5 entries, head " + head_ + "\n");
}

}  // namespace
}  // namespace warden::audit
