// state::SeenDomainStore: the first_domain detector's memory across restarts (a row per tenant,
// agent and domain, kept once; the newest N back, oldest first; bad rows and read-only stores
// refused).
#include "state/seen_domains.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "test_support.h"

namespace warden::state {
namespace {

using testing::TempDb;

std::vector<std::string> Names(const std::vector<SeenDomain>& rows) {
  std::vector<std::string> out;
  for (const SeenDomain& r : rows) out.push_back(r.tenant + "/" + r.agent + "/" + r.domain);
  return out;
}

TEST(SeenDomainStore, KeepsEachUseOnceAndSurvivesAReopen) {
  TempDb db;
  {
    auto store = SeenDomainStore::Open({.path = db.path()});
    ASSERT_TRUE(store) << store.status().message();
    ASSERT_TRUE((*store)->Add("acme", "", "github.com").ok());
    ASSERT_TRUE((*store)->Add("acme", "bot", "github.com").ok());
    ASSERT_TRUE((*store)->Add("acme", "bot", "github.com").ok());  // again: no second row
    ASSERT_TRUE((*store)->Add("globex", "", "python.org").ok());
  }
  auto reopened = SeenDomainStore::Open({.path = db.path()});
  ASSERT_TRUE(reopened) << reopened.status().message();
  auto rows = (*reopened)->Recent(100);
  ASSERT_TRUE(rows) << rows.status().message();
  std::vector<std::string> names = Names(*rows);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"acme//github.com", "acme/bot/github.com",
                                             "globex//python.org"}));
  for (const SeenDomain& r : *rows) EXPECT_FALSE(r.first_seen.empty());
  auto one = (*reopened)->Recent(1);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->size(), 1u);
}

TEST(SeenDomainStore, RefusesBadRowsAndWritesToAReadOnlyStore) {
  TempDb db;
  auto store = SeenDomainStore::Open({.path = db.path()});
  ASSERT_TRUE(store);
  EXPECT_EQ((*store)->Add("acme", "bot", "").message(), "seen domain: empty domain");
  EXPECT_NE((*store)->Add(std::string(2000, 'a'), "bot", "x.com").message().find("1024 bytes"),
            std::string::npos);
  auto read_only = SeenDomainStore::Open({.path = db.path(), .create = false});
  ASSERT_TRUE(read_only) << read_only.status().message();
  EXPECT_FALSE((*read_only)->Add("acme", "bot", "x.com").ok());
  auto rows = (*read_only)->Recent(10);
  ASSERT_TRUE(rows);
  EXPECT_TRUE(rows->empty());
}

}  // namespace
}  // namespace warden::state
