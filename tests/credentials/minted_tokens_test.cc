// credentials::MintedTokens: the live tokens warden minted and the revoked ones (what a kill
// switch revokes, who else keeps theirs, expiry, the bound).
#include "credentials/minted_tokens.h"

#include <gtest/gtest.h>

#include <string>

namespace warden::credentials {
namespace {

using Clock = std::chrono::system_clock;
using std::chrono::minutes;
const Clock::time_point kMintedAt = Clock::time_point(std::chrono::hours(24 * 365 * 56));

Token Minted(const std::string& jti, Clock::time_point expires = kMintedAt + minutes(5)) {
  return Token{"jwt-" + jti, jti, expires};
}

std::vector<std::string> RevokedIds(const MintedTokens& m, Clock::time_point now = kMintedAt) {
  std::vector<std::string> out;
  const nlohmann::json json = m.RevokedJson(now);  // kept: the loop must not outlive it
  for (const auto& r : json["revoked"]) out.push_back(r["jti"]);
  return out;
}

TEST(MintedTokens, ASwitchRevokesTheStoppedCallersTokensOnly) {
  MintedTokens m;
  m.Record(Minted("a1"), "acme", "alice", "alice-bot", kMintedAt);
  m.Record(Minted("b1"), "acme", "bob", "bob-bot", kMintedAt);
  m.Record(Minted("a2"), "acme", "alice", "alice-bot", kMintedAt);
  m.Record(Minted("g1"), "globex", "gus", "", kMintedAt);
  EXPECT_TRUE(RevokedIds(m).empty());
  EXPECT_EQ(m.Revoke(MintedTokens::Holder::kAgent, "alice-bot", kMintedAt), 2u);
  EXPECT_EQ(RevokedIds(m), (std::vector<std::string>{"a1", "a2"}));
  EXPECT_TRUE(m.IsRevoked("a1", kMintedAt));
  EXPECT_FALSE(m.IsRevoked("b1", kMintedAt));
  // Revoking again finds nothing new; a tenant switch takes the rest of acme, not globex.
  EXPECT_EQ(m.Revoke(MintedTokens::Holder::kAgent, "alice-bot", kMintedAt), 0u);
  EXPECT_EQ(m.Revoke(MintedTokens::Holder::kTenant, "acme", kMintedAt), 1u);
  EXPECT_FALSE(m.IsRevoked("g1", kMintedAt));
  EXPECT_EQ(m.Revoke(MintedTokens::Holder::kUser, "gus", kMintedAt), 1u);
  EXPECT_EQ(m.Revoke(MintedTokens::Holder::kAll, "", kMintedAt), 0u);
  auto json = m.RevokedJson(kMintedAt);
  EXPECT_EQ(json["revoked"].size(), 4u);
  EXPECT_EQ(json["time"], std::chrono::duration_cast<std::chrono::seconds>(kMintedAt.time_since_epoch()).count());
  EXPECT_EQ(json["revoked"][0]["exp"],
            std::chrono::duration_cast<std::chrono::seconds>((kMintedAt + minutes(5)).time_since_epoch()).count());
}

TEST(MintedTokens, ExpiredTokensAreNeitherRevokedNorListed) {
  MintedTokens m;
  m.Record(Minted("short", kMintedAt + minutes(1)), "acme", "alice", "bot", kMintedAt);
  m.Record(Minted("long", kMintedAt + minutes(10)), "acme", "alice", "bot", kMintedAt);
  EXPECT_EQ(m.Revoke(MintedTokens::Holder::kAgent, "bot", kMintedAt + minutes(2)), 1u);  // short expired
  EXPECT_EQ(RevokedIds(m, kMintedAt + minutes(2)), (std::vector<std::string>{"long"}));
  EXPECT_TRUE(RevokedIds(m, kMintedAt + minutes(11)).empty());
  EXPECT_FALSE(m.IsRevoked("long", kMintedAt + minutes(11)));
}

TEST(MintedTokens, TheLiveListIsBounded) {
  MintedTokens m(/*max_live=*/3);
  for (int i = 0; i < 5; ++i) m.Record(Minted("t" + std::to_string(i)), "acme", "alice", "bot", kMintedAt);
  EXPECT_EQ(m.dropped(), 2u);
  // The two oldest were forgotten: only the three newest can be revoked.
  EXPECT_EQ(m.Revoke(MintedTokens::Holder::kAll, "", kMintedAt), 3u);
  EXPECT_EQ(RevokedIds(m), (std::vector<std::string>{"t2", "t3", "t4"}));
}

}  // namespace
}  // namespace warden::credentials
