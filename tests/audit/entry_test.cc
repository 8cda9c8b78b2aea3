// The entry's canonical form and hash: the format external verifiers reproduce.
#include "audit/entry.h"

#include <gtest/gtest.h>

#include "audit/result_summary.h"
#include "audit/sha256.h"
#include "audit/time_format.h"

namespace warden::audit {
namespace {

using nlohmann::json;

AuditEntry GoldenEntry() {
  AuditEntry e;
  e.id = 1;
  e.time = "2025-01-02T03:04:05.123456Z";
  e.tenant = "acme";
  e.user = "alice";
  e.agent = "coder";
  e.session = "s1";
  e.tool = "fs__read";
  e.arguments = {{"path", "/srv/a.txt"}, {"mode", "r"}};
  e.decision = "allow";
  e.rule = "files-ro";
  e.reason = "read-only files";
  e.approvals = {{"carol", "2025-01-02T03:04:06.000000Z", "approve"}};
  e.result = ResultSummary{5, Sha256Hex("hello"), "hello"};
  e.labels = {"private_output"};
  e.latency_us = 1234;
  e.kind = EntryKind::kCall;
  e.prev_hash = kGenesisHash;
  return e;
}

TEST(Sha256, MatchesTheStandardTestVector) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("ab", "c"), Sha256Hex("abc"));
}

TEST(CanonicalJson, SortsKeysAndHasNoWhitespace) {
  json j =
      json::parse(R"({"b": 1, "a": [1, 2.5, "x"], "c": {"z": "\u00e9", "y": null, "x": true}})");
  EXPECT_EQ(CanonicalJson(j),
            "{\"a\":[1,2.5,\"x\"],\"b\":1,\"c\":{\"x\":true,\"y\":null,\"z\":\"\xc3\xa9\"}}");
}

// Numbers are part of the hashed bytes: a JSON library upgrade that prints them differently
// would make every stored entry with such a number fail verification. This pins the format.
TEST(CanonicalJson, NumberFormatIsPinned) {
  json j = {0.1,  2.5,   2.0,   -0.0, 1e-7, 0.0001, 1e14, 1e15, 1.5e15, -1234567890123456.8,
            1e16, 1e300, 5e-324};
  EXPECT_EQ(CanonicalJson(j),
            "[0.1,2.5,2.0,-0.0,1e-07,0.0001,100000000000000.0,1e+15,1.5e+15,-1.2345678901234567e+"
            "15,1e+16,"
            "1e+300,5e-324]");
  EXPECT_EQ(CanonicalJson(json::parse(
                "[18446744073709551615,-9223372036854775808,1E2,100000000000000000000]")),
            "[18446744073709551615,-9223372036854775808,100.0,1e+20]");
}

TEST(CanonicalJson, EscapesControlCharactersOnly) {
  json j = std::string("tab\there \"q\" back\\slash \x01 /");
  EXPECT_EQ(CanonicalJson(j), "\"tab\\there \\\"q\\\" back\\\\slash \\u0001 /\"");
}

TEST(CanonicalJson, ReplacesInvalidUtf8) {
  json j = std::string("bad \xff byte");
  EXPECT_EQ(CanonicalJson(j), "\"bad \xef\xbf\xbd byte\"");
}

TEST(CanonicalBody, IsTheDocumentedGoldenString) {
  // The same example is in docs/audit.md; if this changes, the on-disk format changed.
  EXPECT_EQ(
      CanonicalBody(GoldenEntry()),
      R"({"agent":"coder","approvals":[{"decision":"approve","when":"2025-01-02T03:04:06.000000Z","who":"carol"}],)"
      R"("arguments":{"mode":"r","path":"/srv/a.txt"},"decision":"allow","id":1,"kind":"call",)"
      R"("labels":["private_output"],"latency_us":1234,)"
      R"("prev_hash":"0000000000000000000000000000000000000000000000000000000000000000",)"
      R"("reason":"read-only files","result":{"excerpt":"hello",)"
      R"("sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824","size":5},)"
      R"("rule":"files-ro","session":"s1","tenant":"acme","time":"2025-01-02T03:04:05.123456Z",)"
      R"("tool":"fs__read","user":"alice"})");
}

TEST(ComputeEntryHash, IsTheDocumentedGoldenHash) {
  EXPECT_EQ(ComputeEntryHash(GoldenEntry()),
            "fc7e672974cbcb4c6378725e1a240af352322cf04c4548ecfca316780e14b96e");
}

TEST(ComputeEntryHash, IsSha256OfPrevHashThenCanonicalBody) {
  AuditEntry e = GoldenEntry();
  EXPECT_EQ(ComputeEntryHash(e), Sha256Hex(kGenesisHash + CanonicalBody(e)));
  e.hash = "ignored";
  EXPECT_EQ(ComputeEntryHash(e), Sha256Hex(kGenesisHash + CanonicalBody(e)));
  e.prev_hash = std::string(64, 'f');
  EXPECT_NE(ComputeEntryHash(e), ComputeEntryHash(GoldenEntry()));
}

TEST(CanonicalBody, EqualsTheGenericSerialisationForAwkwardStrings) {
  const std::string awkward[] = {"",
                                 "plain",
                                 "quote \" back \\ slash",
                                 "ctl \x01\x1f\x7f \b\f\n\r\t",
                                 "caf\xc3\xa9 \xf0\x9f\x98\x80",
                                 "bad \xff \xc3",
                                 "overlong \xc0\xaf",
                                 "surrogate \xed\xa0\x80",
                                 ",\"id\":5",
                                 "\xf4\x90\x80\x80"};
  for (const std::string& s : awkward) {
    AuditEntry e = GoldenEntry();
    e.tenant = e.user = e.agent = e.session = e.tool = e.decision = e.rule = e.reason = e.time = s;
    e.labels = {s, s};
    e.approvals = {{s, s, s}, {"a", "b", "c"}};
    e.result = ResultSummary{7, s, s};
    e.arguments = {{s, s}, {"id", 5}};
    e.hash = s;
    EXPECT_EQ(CanonicalBody(e), CanonicalJson(ToJson(e, false))) << s;
    EXPECT_EQ(CanonicalLine(e), CanonicalJson(ToJson(e, true))) << s;
    EXPECT_EQ(ValidUtf8(s), json::parse(CanonicalJson(json(s))).get<std::string>());
  }
  AuditEntry empty;
  EXPECT_EQ(CanonicalBody(empty), CanonicalJson(ToJson(empty, false)));
}

TEST(CanonicalLine, AddsTheHashToTheBody) {
  AuditEntry e = GoldenEntry();
  e.hash = ComputeEntryHash(e);
  json line = json::parse(CanonicalLine(e));
  EXPECT_EQ(line["hash"], e.hash);
  line.erase("hash");
  EXPECT_EQ(CanonicalJson(line), CanonicalBody(e));
}

TEST(FromJson, RoundTripsEveryField) {
  AuditEntry e = GoldenEntry();
  e.hash = ComputeEntryHash(e);
  auto back = FromJson(ToJson(e));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, e);
  AuditEntry no_result = e;
  no_result.result.reset();
  EXPECT_EQ(*FromJson(ToJson(no_result)), no_result);
}

TEST(FromJson, RejectsAMissingOrMistypedField) {
  json j = ToJson(GoldenEntry());
  j.erase("tenant");
  EXPECT_FALSE(FromJson(j).ok());
  j = ToJson(GoldenEntry());
  j["latency_us"] = -1;
  EXPECT_FALSE(FromJson(j).ok());
  j = ToJson(GoldenEntry());
  j["kind"] = "other";
  EXPECT_FALSE(FromJson(j).ok());
}

TEST(TimeFormat, IsUtcWithSixFractionalDigits) {
  auto t = std::chrono::system_clock::time_point(std::chrono::microseconds(1'735'787'045'000'042));
  EXPECT_EQ(FormatTime(t), "2025-01-02T03:04:05.000042Z");
  EXPECT_EQ(NowRfc3339().size(), std::string("2025-01-02T03:04:05.000042Z").size());
}

TEST(TimeFormat, ParsesRfc3339DatesAndAges) {
  auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1'735'787'045));
  EXPECT_EQ(*ParseTimeBound("2025-01-02T03:04:05Z", now), "2025-01-02T03:04:05.000000Z");
  EXPECT_EQ(*ParseTimeBound("2025-01-02T05:04:05.5+02:00", now), "2025-01-02T03:04:05.500000Z");
  EXPECT_EQ(*ParseTimeBound("2025-01-02", now), "2025-01-02T00:00:00.000000Z");
  EXPECT_EQ(*ParseTimeBound("2h", now), "2025-01-02T01:04:05.000000Z");
  EXPECT_EQ(*ParseTimeBound("1d", now), "2025-01-01T03:04:05.000000Z");
  EXPECT_FALSE(ParseTimeBound("yesterday", now).ok());
  EXPECT_FALSE(ParseTimeBound("2025-01-02T03:04:05", now).ok());
  EXPECT_FALSE(ParseTimeBound("2025-13-02", now).ok());
}

TEST(SummarizeResult, HashesAllAndKeepsARedactedCappedExcerpt) {
  std::string result = "token=abcdefgh1234 then " + std::string(1000, 'x');
  ResultSummary s = SummarizeResult(result, 40);
  EXPECT_EQ(s.size, result.size());
  EXPECT_EQ(s.sha256, Sha256Hex(result));
  EXPECT_LE(s.excerpt.size(), 40u);
  EXPECT_EQ(s.excerpt.find("abcdefgh1234"), std::string::npos);
  EXPECT_EQ(s.excerpt.rfind("token=[REDACTED] then ", 0), 0u) << s.excerpt;
  EXPECT_TRUE(s.excerpt.ends_with("...")) << s.excerpt;
}

TEST(SummarizeResult, RedactsASecretThatStraddlesTheCut) {
  std::string key = "AKIAIOSFODNN7EXAMPLE";
  ResultSummary s = SummarizeResult("key: " + key, 12);
  EXPECT_EQ(s.excerpt.find("AKIA"), std::string::npos) << s.excerpt;
}

TEST(CapUtf8, NeverSplitsACharacter) {
  std::string text = "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9";  // four two-byte characters
  std::string capped = CapUtf8(text, 6);
  EXPECT_EQ(capped, "\xc3\xa9...");
  EXPECT_EQ(CapUtf8("short", 10), "short");
}

}  // namespace
}  // namespace warden::audit
