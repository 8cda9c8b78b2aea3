#include "egress/allow_list.h"

#include <gtest/gtest.h>

namespace warden::egress {
namespace {

AllowList MustParse(const std::vector<std::string>& entries) {
  auto list = AllowList::Parse(entries);
  EXPECT_TRUE(list.ok()) << list.status().message();
  return list.ok() ? *list : AllowList();
}

std::string ParseError(const std::string& entry) {
  auto rule = AllowList::ParseEntry(entry);
  EXPECT_FALSE(rule.ok()) << "entry " << entry << " was accepted";
  return rule.ok() ? "" : rule.status().message();
}

TEST(AllowList, WildcardAllowsSubdomainsButNotTheApexNorLookalikes) {
  AllowList list = MustParse({"*.example.test"});
  EXPECT_TRUE(list.Permits("a.example.test", 443).allowed);
  EXPECT_TRUE(list.Permits("deep.a.example.test", 80).allowed);
  EXPECT_EQ(list.Permits("a.example.test", 443).rule_or_reason, "*.example.test");
  EXPECT_FALSE(list.Permits("example.test", 443).allowed);
  EXPECT_FALSE(list.Permits("evilexample.test", 443).allowed);
  EXPECT_FALSE(list.Permits("a.example.test.evil", 443).allowed);
  EXPECT_FALSE(list.Permits("example.test.", 443).allowed);
}

TEST(AllowList, ExactEntryAllowsOnlyThatHost) {
  AllowList list = MustParse({"example.test"});
  EXPECT_TRUE(list.Permits("example.test", 443).allowed);
  EXPECT_FALSE(list.Permits("a.example.test", 443).allowed);
  EXPECT_FALSE(list.Permits("example.test.evil", 443).allowed);
}

TEST(AllowList, MatchingIsCaseInsensitiveAndIgnoresTrailingDot) {
  AllowList list = MustParse({"Example.TEST."});
  EXPECT_TRUE(list.Permits("EXAMPLE.test", 80).allowed);
  EXPECT_TRUE(list.Permits("example.test.", 80).allowed);
  EXPECT_EQ(list.Permits("example.test", 80).rule_or_reason, "example.test");
}

TEST(AllowList, DefaultPortsAre80And443) {
  AllowList list = MustParse({"example.test"});
  EXPECT_TRUE(list.Permits("example.test", 80).allowed);
  EXPECT_TRUE(list.Permits("example.test", 443).allowed);
  Verdict v = list.Permits("example.test", 22);
  EXPECT_FALSE(v.allowed);
  EXPECT_NE(v.rule_or_reason.find("port 22 is not allowed"), std::string::npos) << v.rule_or_reason;
}

TEST(AllowList, ExplicitPortReplacesTheDefaults) {
  AllowList list = MustParse({"example.test:8443", "*.svc.test:5432"});
  EXPECT_TRUE(list.Permits("example.test", 8443).allowed);
  EXPECT_FALSE(list.Permits("example.test", 443).allowed);
  EXPECT_TRUE(list.Permits("db.svc.test", 5432).allowed);
  EXPECT_EQ(list.Permits("db.svc.test", 5432).rule_or_reason, "*.svc.test:5432");
}

TEST(AllowList, DenialNamesTheHost) {
  AllowList list = MustParse({"example.test"});
  EXPECT_EQ(list.Permits("evil.test", 443).rule_or_reason,
            "host evil.test is not on the allow-list");
}

TEST(AllowList, IpLiteralEntriesMatchAnySpellingOfTheAddress) {
  AllowList list = MustParse({"10.1.2.3", "[::1]:8080", "2001:db8::5"});
  EXPECT_TRUE(list.Permits("10.1.2.3", 443).allowed);
  EXPECT_TRUE(list.Permits("0x0a010203", 443).allowed);
  EXPECT_TRUE(list.Permits("[::1]", 8080).allowed);
  EXPECT_TRUE(list.Permits("::1", 8080).allowed);
  EXPECT_EQ(list.Permits("::1", 8080).rule_or_reason, "[::1]:8080");
  EXPECT_FALSE(list.Permits("::1", 80).allowed);
  EXPECT_TRUE(list.Permits("2001:db8:0::5", 80).allowed);
  EXPECT_FALSE(list.Permits("10.1.2.4", 443).allowed);
  ASSERT_NE(list.FindAddressRule(*ParseCanonicalIp("10.1.2.3"), 80), nullptr);
  EXPECT_EQ(list.FindAddressRule(*ParseCanonicalIp("10.1.2.3"), 8080), nullptr);
}

TEST(AllowList, EveryHostPatternIsRefused) {
  EXPECT_NE(ParseError("*").find("\"*\""), std::string::npos);
  EXPECT_NE(ParseError("*").find("every host"), std::string::npos);
  EXPECT_NE(ParseError("*:443").find("every host"), std::string::npos);
}

TEST(AllowList, WildcardOverATopLevelDomainIsRefused) {
  std::string e = ParseError("*.com");
  EXPECT_NE(e.find("\"*.com\""), std::string::npos) << e;
  EXPECT_NE(e.find("top-level domain"), std::string::npos) << e;
  EXPECT_NE(ParseError("*.test:443").find("top-level domain"), std::string::npos);
}

TEST(AllowList, WildcardsOutsideALeadingLabelAreRefused) {
  ParseError("a.*.example.com");
  ParseError("*example.com");
  ParseError("ex*ample.com");
  ParseError("*.*.example.com");
  ParseError("*.10.0.0.1");
}

TEST(AllowList, UrlsAndPathsAreRefused) {
  std::string e = ParseError("http://example.com");
  EXPECT_NE(e.find("\"http://example.com\""), std::string::npos) << e;
  EXPECT_NE(e.find("URL"), std::string::npos) << e;
  ParseError("https://example.com/");
  ParseError("example.com/path");
  ParseError("user@example.com");
  ParseError("example.com?x");
}

TEST(AllowList, InvalidNamesAreRefusedWithTheEntryNamed) {
  std::string e = ParseError("exa_mple.com");
  EXPECT_NE(e.find("exa_mple.com"), std::string::npos) << e;
  ParseError("");
  ParseError("   ");
  ParseError("-example.com");
  ParseError("example-.com");
  ParseError("exa mple.com");
  ParseError("example..com");
  ParseError(".example.com");
  ParseError(std::string(64, 'a') + ".com");
  std::string long_name;
  for (int i = 0; i < 6; ++i) long_name += std::string(50, 'a') + ".";
  long_name += "com";
  ParseError(long_name);
  ParseError("1.2.3.4.5");
  ParseError("[example.com]");
  ParseError("fe80::1%eth0");
}

TEST(AllowList, BadPortsAreRefused) {
  ParseError("example.com:0");
  ParseError("example.com:65536");
  ParseError("example.com:");
  ParseError("example.com:http");
  ParseError("example.com:-1");
  ParseError("[::1]x");
}

TEST(AllowList, NonCanonicalAddressSpellingsAreRefusedInEntries) {
  std::string e = ParseError("127.1");
  EXPECT_NE(e.find("127.0.0.1"), std::string::npos) << e;
  ParseError("2130706433");
  ParseError("0x7f000001");
  ParseError("0177.0.0.1");
}

TEST(AllowList, WholeListFailsOnTheFirstBadEntryAndNamesIt) {
  auto list = AllowList::Parse({"good.example", "*.com", "also.good"});
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.status().message().find("*.com"), std::string::npos);
}

TEST(AllowList, EmptyListDeniesEverything) {
  AllowList list;
  EXPECT_FALSE(list.Permits("example.com", 443).allowed);
}

TEST(AllowList, InvalidRequestedHostsAreDeniedNotLookedUp) {
  AllowList list = MustParse({"*.example.test"});
  EXPECT_FALSE(list.Permits("a_b.example.test", 443).allowed);
  EXPECT_FALSE(list.Permits("a.example.test\r\nX: y", 443).allowed);
  EXPECT_FALSE(list.Permits("", 443).allowed);
}

}  // namespace
}  // namespace warden::egress
