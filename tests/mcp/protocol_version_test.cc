// Protocol version negotiation and what each version allows.
#include "mcp/protocol_version.h"

#include <gtest/gtest.h>

namespace warden::mcp {
namespace {

TEST(ProtocolVersion, SupportedVersionsAreNewestFirst) {
  ASSERT_EQ(kSupportedVersions.size(), 3u);
  EXPECT_EQ(kSupportedVersions[0], "2025-11-25");
  EXPECT_EQ(kSupportedVersions[1], "2025-06-18");
  EXPECT_EQ(kSupportedVersions[2], "2025-03-26");
  EXPECT_EQ(LatestVersion(), "2025-11-25");
}

TEST(ProtocolVersion, NegotiateKeepsARequestedSupportedVersion) {
  for (auto v : kSupportedVersions) EXPECT_EQ(Negotiate(v), v);
}

TEST(ProtocolVersion, NegotiateOffersTheNewestForAnythingElse) {
  EXPECT_EQ(Negotiate("2024-11-05"), "2025-11-25");  // older than we speak
  EXPECT_EQ(Negotiate("2099-01-01"), "2025-11-25");  // newer than we know
  EXPECT_EQ(Negotiate(""), "2025-11-25");
  EXPECT_EQ(Negotiate("2025-06-18 "), "2025-11-25");  // exact match only
}

TEST(ProtocolVersion, IsSupported) {
  EXPECT_TRUE(IsSupportedVersion("2025-06-18"));
  EXPECT_FALSE(IsSupportedVersion("2024-11-05"));
}

TEST(ProtocolVersion, OnlyMarch2025AllowsBatches) {
  EXPECT_TRUE(AllowsBatches("2025-03-26"));
  EXPECT_FALSE(AllowsBatches("2025-06-18"));
  EXPECT_FALSE(AllowsBatches("2025-11-25"));
  EXPECT_FALSE(AllowsBatches("2024-11-05"));
  EXPECT_FALSE(AllowsBatches("bogus"));
}

}  // namespace
}  // namespace warden::mcp
