#include "egress/address_guard.h"

#include <gtest/gtest.h>

namespace warden::egress {
namespace {

Host H(const std::string& text) {
  auto h = ParseHost(text);
  EXPECT_TRUE(h.ok()) << text << ": " << h.status().message();
  return h.ok() ? *h : Host{};
}

// What the guard says about connecting to the address a client spelled as `text`.
Verdict CheckSpelling(const AddressGuard& guard, const std::string& text, uint16_t port = 80) {
  Host h = H(text);
  EXPECT_TRUE(h.address.has_value()) << text << " was not recognised as an address";
  if (!h.address) return Verdict::Allow("not an address");
  return guard.Check(h, *h.address, port);
}

TEST(IpSpelling, DecimalHexOctalAndShortFormsMeanTheAddressTheySpell) {
  const char* loopback_spellings[] = {"127.0.0.1",  "2130706433",  "0x7f000001", "0X7F000001",
                                      "0177.0.0.1", "127.1",       "127.0.1",    "0x7f.1",
                                      "127.0.0.1.", "017700000001"};
  for (const char* s : loopback_spellings) {
    HostSpelling sp = ClassifyHostSpelling(s);
    ASSERT_EQ(sp.kind, HostSpelling::Kind::kAddress) << s;
    EXPECT_EQ(sp.address.ToString(), "127.0.0.1") << s;
  }
}

TEST(IpSpelling, NumericLookingGarbageIsInvalidNotAName) {
  for (const char* s : {"1.2.3.4.5", "256.1.1.1", "09.1.1.1", "1..1", "4294967296", "0x1.0x100.1",
                        "1.2.3.256", "[::1", "fe80::1%eth0", "::g"}) {
    EXPECT_EQ(ClassifyHostSpelling(s).kind, HostSpelling::Kind::kInvalid) << s;
    EXPECT_FALSE(ParseHost(s).ok()) << s;
  }
}

TEST(IpSpelling, NamesStayNames) {
  for (const char* s : {"example.com", "1.example.com", "0x.example", "a1", "localhost"}) {
    EXPECT_EQ(ClassifyHostSpelling(s).kind, HostSpelling::Kind::kName) << s;
  }
}

TEST(IpSpelling, Ipv6LiteralsWithOrWithoutBrackets) {
  EXPECT_EQ(ClassifyHostSpelling("[::1]").address.ToString(), "::1");
  EXPECT_EQ(ClassifyHostSpelling("::ffff:127.0.0.1").address.ToString(), "::ffff:127.0.0.1");
  EXPECT_EQ(ParseCanonicalIp("127.1"), std::nullopt);
  EXPECT_EQ(ParseCanonicalIp("010.0.0.1"), std::nullopt);
  EXPECT_EQ(ParseCanonicalIp("10.0.0.1")->ToString(), "10.0.0.1");
}

TEST(AddressGuard, RefusesLoopbackMetadataPrivateAndUnspecified) {
  AddressGuard guard;
  struct Case {
    const char* spelling;
    const char* reason;
  } cases[] = {
      {"127.0.0.1", "loopback"},
      {"169.254.169.254", "link-local"},
      {"10.0.0.1", "private (RFC 1918)"},
      {"172.16.5.4", "private (RFC 1918)"},
      {"192.168.1.1", "private (RFC 1918)"},
      {"::1", "loopback"},
      {"[::1]", "loopback"},
      {"::ffff:127.0.0.1", "loopback (IPv4-mapped 127.0.0.1)"},
      {"::ffff:169.254.169.254", "IPv4-mapped"},
      {"::127.0.0.1", "IPv4-compatible"},
      {"64:ff9b::a00:1", "private (RFC 1918) (NAT64 10.0.0.1)"},
      {"0.0.0.0", "unspecified"},
      {"::", "unspecified"},
      {"2130706433", "loopback"},
      {"0x7f000001", "loopback"},
      {"0177.0.0.1", "loopback"},
      {"127.1", "loopback"},
      {"100.64.0.1", "CGNAT"},
      {"fc00::1", "unique local"},
      {"fd12:3456::1", "unique local"},
      {"fe80::1", "link-local"},
      {"224.0.0.1", "multicast"},
      {"ff02::1", "multicast"},
      {"255.255.255.255", "broadcast"},
      {"240.0.0.1", "reserved"},
      {"192.0.0.8", "reserved"},
      {"192.0.2.1", "documentation"},
      {"198.18.0.1", "benchmarking"},
      {"198.51.100.7", "documentation"},
      {"203.0.113.9", "documentation"},
      {"0.1.2.3", "this network"},
      {"2001:db8::1", "documentation"},
      {"2002:7f00:1::1", "6to4"},
      {"2001::1", "Teredo"},
      {"fec0::1", "site-local"},
      {"100::1", "discard"},
      {"4000::1", "not global unicast"},
  };
  for (const auto& c : cases) {
    Verdict v = CheckSpelling(guard, c.spelling);
    EXPECT_FALSE(v.allowed) << c.spelling;
    EXPECT_NE(v.rule_or_reason.find(c.reason), std::string::npos)
        << c.spelling << " -> " << v.rule_or_reason;
    EXPECT_EQ(v.rule_or_reason.rfind("address ", 0), 0u) << v.rule_or_reason;
  }
}

TEST(AddressGuard, DenialMessageNamesAddressAndRange) {
  AddressGuard guard;
  EXPECT_EQ(CheckSpelling(guard, "10.0.0.1").rule_or_reason,
            "address 10.0.0.1 is private (RFC 1918)");
}

TEST(AddressGuard, AllowsPublicAddresses) {
  AddressGuard guard;
  for (const char* s : {"8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111",
                        "2001:4860:4860::8888", "::ffff:8.8.8.8", "64:ff9b::808:808"}) {
    Verdict v = CheckSpelling(guard, s);
    EXPECT_TRUE(v.allowed) << s << ": " << v.rule_or_reason;
    EXPECT_EQ(v.rule_or_reason, "public address");
  }
}

TEST(AddressGuard, LiteralAllowEntryLiftsTheRefusalForThatAddressAndPortOnly) {
  auto list = AllowList::Parse({"127.0.0.1:8080", "[::1]:9090"});
  ASSERT_TRUE(list.ok());
  AddressGuard guard(*list, ResolveMap());
  Verdict v = CheckSpelling(guard, "127.0.0.1", 8080);
  EXPECT_TRUE(v.allowed);
  EXPECT_EQ(v.rule_or_reason, "allow entry 127.0.0.1:8080");
  EXPECT_TRUE(CheckSpelling(guard, "2130706433", 8080).allowed);
  EXPECT_FALSE(CheckSpelling(guard, "127.0.0.1", 8081).allowed);
  EXPECT_FALSE(CheckSpelling(guard, "127.0.0.2", 8080).allowed);
  EXPECT_TRUE(CheckSpelling(guard, "::1", 9090).allowed);
  // Also when a name resolved there: the operator allowed reaching that address and port.
  EXPECT_TRUE(guard.Check(H("anything.test"), *ParseCanonicalIp("127.0.0.1"), 8080).allowed);
}

TEST(AddressGuard, ResolveMappingLiftsTheRefusalOnlyForThatHostAndAddress) {
  auto resolve = ResolveMap::Parse({{"allowed.test", "127.0.0.1"}});
  ASSERT_TRUE(resolve.ok()) << resolve.status().message();
  AddressGuard guard(AllowList(), *resolve);
  IpAddress loopback = *ParseCanonicalIp("127.0.0.1");
  Verdict v = guard.Check(H("allowed.test"), loopback, 443);
  EXPECT_TRUE(v.allowed);
  EXPECT_EQ(v.rule_or_reason, "--resolve allowed.test=127.0.0.1");
  EXPECT_TRUE(guard.Check(H("ALLOWED.test."), loopback, 443).allowed);
  // Another name that resolves to loopback (DNS rebinding) gets nothing from the mapping.
  EXPECT_FALSE(guard.Check(H("rebind.evil.test"), loopback, 443).allowed);
  EXPECT_FALSE(guard.Check(H("allowed.test"), *ParseCanonicalIp("127.0.0.2"), 443).allowed);
  // Nor does the address itself, asked for directly.
  EXPECT_FALSE(guard.Check(H("127.0.0.1"), loopback, 443).allowed);
}

TEST(ResolveMap, RefusesBadEntriesNamingThem) {
  auto bad = ResolveMap::Parse({{"allowed.test", "127.1"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("allowed.test=127.1"), std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(ResolveMap::Parse({{"*.allowed.test", "127.0.0.1"}}).ok());
  EXPECT_FALSE(ResolveMap::Parse({{"10.0.0.1", "127.0.0.1"}}).ok());
  EXPECT_FALSE(ResolveMap::ParseEntries({"allowed.test"}).ok());
  auto good = ResolveMap::ParseEntries({"a.test=127.0.0.1,::1"});
  ASSERT_TRUE(good.ok()) << good.status().message();
  ASSERT_NE(good->Find("a.test"), nullptr);
  EXPECT_EQ(good->Find("a.test")->size(), 2u);
}

}  // namespace
}  // namespace warden::egress
