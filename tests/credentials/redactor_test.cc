// Redaction of known secret values and credential shapes from tool results (docs/credentials.md,
// "Redaction"): each encoding a value is matched in, each shape, the JSON walk, and streams cut
// at every position. The sample secrets are made up.
#include "credentials/redactor.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace warden::credentials {
namespace {

using nlohmann::json;

const std::string kValue = "s3cr3t-Value-0123456789";
const std::string kMarker = "[REDACTED:api]";

// The tests' own base64 (with padding), independent of the redactor's.
std::string B64(std::string_view in, bool url) {
  const char* a = url ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                      : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < in.size(); i += 3) {
    uint32_t n = static_cast<uint8_t>(in[i]) << 16;
    if (i + 1 < in.size()) n |= static_cast<uint8_t>(in[i + 1]) << 8;
    if (i + 2 < in.size()) n |= static_cast<uint8_t>(in[i + 2]);
    out.push_back(a[(n >> 18) & 63]);
    out.push_back(a[(n >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? a[(n >> 6) & 63] : '=');
    out.push_back(i + 2 < in.size() ? a[n & 63] : '=');
  }
  return out;
}

Redactor& WithValue(Redactor& r) {
  EXPECT_TRUE(r.Add("api", kValue));
  return r;
}

TEST(Redactor, RawValue) {
  Redactor r;
  WithValue(r);
  bool changed = false;
  EXPECT_EQ(r.RedactText("key is " + kValue + ".", &changed), "key is " + kMarker + ".");
  EXPECT_TRUE(changed);
  EXPECT_EQ(r.RedactText(kValue + kValue), kMarker + kMarker);
}

TEST(Redactor, JsonEscapedValueInRawText) {
  Redactor r;
  const std::string value = "pa\"ss\\wo\x01rd\n!";
  ASSERT_TRUE(r.Add("pw", value));
  std::string dumped = json{{"v", value}}.dump();
  ASSERT_NE(dumped.find("\\u0001"), std::string::npos);  // the escapes are really there
  EXPECT_EQ(r.RedactText(dumped), R"({"v":"[REDACTED:pw]"})");
  EXPECT_EQ(r.RedactText("raw " + value), "raw [REDACTED:pw]");
}

TEST(Redactor, JsonEscapedAsciiOnlyAndHtmlSafe) {
  Redactor r;
  ASSERT_TRUE(r.Add("py", "p\xc3\xa4ssw\xc3\xb6rd-123"));
  ASSERT_TRUE(r.Add("go", "a<b>&c-123456"));
  // Python's json.dumps (ensure_ascii) and Go's encoding/json (HTML-safe) write these.
  EXPECT_EQ(r.RedactText(R"({"v": "p\u00e4ssw\u00f6rd-123"})"), R"({"v": "[REDACTED:py]"})");
  EXPECT_EQ(r.RedactText(R"({"v":"a\u003cb\u003e\u0026c-123456"})"), R"({"v":"[REDACTED:go]"})");
}

TEST(Redactor, Base64AtEachAlignmentInBothAlphabets) {
  Redactor r;
  // Bytes whose encodings hold '+' and '/' (or '-' and '_'), so that the alphabets differ.
  const std::string value = std::string("\xfb\xef\xbe\xff\xff\xff", 6) + "key-material!";
  ASSERT_TRUE(r.Add("bin", value));
  for (bool url : {false, true}) {
    for (size_t offset = 0; offset < 3; ++offset) {
      std::string blob = std::string(9 + offset, 'x') + value + std::string(7, 'y');
      std::string encoded = B64(blob, url);
      ASSERT_NE(B64(blob, !url), encoded);
      std::string text = "data: " + encoded + "\n";
      std::string out = r.RedactText(text);
      EXPECT_NE(out.find("[REDACTED:bin]"), std::string::npos) << url << offset << " " << text;
      // The part of the encoding that is only the leading bytes stays.
      EXPECT_TRUE(out.starts_with("data: " + encoded.substr(0, 12))) << out;
    }
  }
  // Alone, padded.
  EXPECT_NE(r.RedactText(B64(value, false)).find("[REDACTED:bin]"), std::string::npos);
}

TEST(Redactor, PercentEncodedUpperLowerAndForm) {
  Redactor r;
  ASSERT_TRUE(r.Add("pw", "p@ss w/rd&x=1"));
  EXPECT_EQ(r.RedactText("https://x.test/?q=p%40ss%20w%2Frd%26x%3D1&y=2"),
            "https://x.test/?q=[REDACTED:pw]&y=2");
  EXPECT_EQ(r.RedactText("q=p%40ss%20w%2frd%26x%3d1"), "q=[REDACTED:pw]");
  EXPECT_EQ(r.RedactText("q=p%40ss+w%2Frd%26x%3D1"), "q=[REDACTED:pw]");
}

TEST(Redactor, PercentEncodingOfAPlainValueIsTheValue) {
  Redactor r;
  WithValue(r);
  // Nothing in kValue is percent-encoded: raw, hex and the base64 cores (up to 6) only.
  EXPECT_EQ(r.RedactText("?k=" + kValue), "?k=" + kMarker);
  EXPECT_EQ(r.size(), 1u);
}

TEST(Redactor, LowerCaseHex) {
  Redactor r;
  WithValue(r);
  std::string hex;
  for (unsigned char c : kValue) {
    hex.push_back("0123456789abcdef"[c >> 4]);
    hex.push_back("0123456789abcdef"[c & 15]);
  }
  EXPECT_EQ(r.RedactText("xxd: " + hex + "\n"), "xxd: " + kMarker + "\n");
}

TEST(Redactor, ShortValuesAreRefused) {
  Redactor r;
  EXPECT_FALSE(r.Add("short", "1234567"));
  EXPECT_FALSE(r.Add("empty", ""));
  EXPECT_EQ(r.size(), 0u);
  EXPECT_EQ(r.longest(), 0u);
  EXPECT_EQ(r.RedactText("1234567"), "1234567");
  EXPECT_TRUE(r.Add("eight", "12345678"));
  EXPECT_EQ(r.RedactText("a 12345678 b"), "a [REDACTED:eight] b");
}

TEST(Redactor, AddingTwiceKeepsOneAndRemoveForgets) {
  Redactor r;
  WithValue(r);
  EXPECT_TRUE(r.Add("api", kValue));
  EXPECT_TRUE(r.Add("other", kValue));  // same value: the first name stays
  EXPECT_EQ(r.size(), 1u);
  EXPECT_EQ(r.RedactText(kValue), kMarker);
  EXPECT_GE(r.longest(), 2 * kValue.size());  // the hex form
  r.Remove(kValue);
  EXPECT_EQ(r.size(), 0u);
  EXPECT_EQ(r.RedactText(kValue), kValue);
  r.Remove("not there");
}

TEST(Redactor, LongestMatchFirstAndOverlapsMerge) {
  Redactor r;
  ASSERT_TRUE(r.Add("a", "abcdefgh1234"));
  ASSERT_TRUE(r.Add("b", "abcdefgh1234XYZ"));  // a is a prefix of b
  ASSERT_TRUE(r.Add("c", "1234XYZ-tail"));     // overlaps the end of b
  EXPECT_EQ(r.RedactText("<abcdefgh1234>"), "<[REDACTED:a]>");
  EXPECT_EQ(r.RedactText("<abcdefgh1234XYZ>"), "<[REDACTED:b]>");
  EXPECT_EQ(r.RedactText("<abcdefgh1234XYZ-tail>"), "<[REDACTED:b]>");
  EXPECT_EQ(r.RedactText("<1234XYZ-tail>"), "<[REDACTED:c]>");
  // Touching, not overlapping: two markers.
  EXPECT_EQ(r.RedactText("abcdefgh12341234XYZ-tail"), "[REDACTED:a][REDACTED:c]");
}

TEST(Redactor, KnownValueInsideAShapeIsOneMarker) {
  Redactor r;
  ASSERT_TRUE(r.Add("gh", "16C7e42F292c6912E7710c838347Ae178B4a"));
  EXPECT_EQ(r.RedactText("t=ghp_16C7e42F292c6912E7710c838347Ae178B4a;"), "t=[REDACTED:gh];");
}

const std::string kJwt =
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";
const std::string kPem =
    "-----BEGIN RSA PRIVATE "
    "KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I\n"
    "aFDrBz9vFqU4yQ==\n-----END RSA PRIVATE KEY-----";

TEST(Redactor, WellKnownShapes) {
  Redactor r;  // no known values at all
  for (const std::string& shape :
       {kJwt, kPem, std::string("ghp_16C7e42F292c6912E7710c838347Ae178B4a"),
        std::string("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuv"),
        std::string("AKIAIOSFODNN7EXAMPLE"), std::string("sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123"),
        std::string("sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
        std::string("xoxb-123456789012-1234567890123-AbCdEfGhIjKl"),
        std::string("AIzaSyA1234567890abcdefghijklmnopqrstu")}) {
    bool changed = false;
    EXPECT_EQ(r.RedactText("got " + shape + "\n", &changed), "got [REDACTED]\n") << shape;
    EXPECT_TRUE(changed);
  }
  EXPECT_EQ(r.RedactText("Authorization: Bearer abc123def456ghi789"),
            "Authorization: Bearer [REDACTED]");
}

TEST(Redactor, OrdinaryTextIsUntouched) {
  Redactor r;
  WithValue(r);
  ASSERT_TRUE(r.Add("token", "wtk_Zx8Qm2Lp9Vt4Rk7Wb1Nc6Hj3Ys5Ga0Ud8Fe2Io4Kq"));
  for (const char* text :
       {"commit 9fceb02d0ae598e95dc970b74767f19372d61af8",
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  file.tar.gz",
        "id 123e4567-e89b-12d3-a456-426614174000",
        "The basic idea is simple: tokenize the input, then parse it. Bearer bonds are old.",
        "blob Zx8Qm2Lp9Vt4Rk7Wb1Nc6Hj3Ys5Ga0Ud8Fe2Io4KqZZ is random but nobody's secret",
        "password=hunter2 https://app:s3cr3t-pass@db.internal/prod", "", "[REDACTED]"}) {
    bool changed = true;
    EXPECT_EQ(r.RedactText(text, &changed), text);
    EXPECT_FALSE(changed) << text;
  }
}

TEST(Redactor, RedactJsonWalksValuesAndKeys) {
  Redactor r;
  WithValue(r);
  // "V\u0061lue": the value is split by an escape in the JSON text, whole once decoded.
  json doc = json::parse(R"({"a": ["x s3cr3t-V\u0061lue-0123456789 y", {"n": 1, "ok": "fine"}],
      "s3cr3t-Value-0123456789": {"deep": [[{"k": "s3cr3t-Value-0123456789"}]]},
      "note": ")" + kJwt +
                         R"(", "flag": true, "none": null})");
  EXPECT_TRUE(r.RedactJson(doc));
  EXPECT_EQ(doc["a"][0], "x " + kMarker + " y");
  EXPECT_EQ(doc["a"][1], (json{{"n", 1}, {"ok", "fine"}}));
  ASSERT_TRUE(doc.contains(kMarker));
  EXPECT_FALSE(doc.contains(kValue));
  EXPECT_EQ(doc[kMarker]["deep"][0][0]["k"], kMarker);
  EXPECT_EQ(doc["note"], "[REDACTED]");
  EXPECT_EQ(doc["flag"], true);
  EXPECT_EQ(doc["none"], nullptr);
  EXPECT_FALSE(r.RedactJson(doc));  // nothing left
}

TEST(Redactor, RedactJsonKeepsKeysThatRedactAlike) {
  Redactor r;
  json doc = {{"ghp_16C7e42F292c6912E7710c838347Ae178B4a", 1},
              {"ghp_26C7e42F292c6912E7710c838347Ae178B4a", 2}};
  EXPECT_TRUE(r.RedactJson(doc));
  EXPECT_EQ(doc.size(), 2u);
  EXPECT_TRUE(doc.contains("[REDACTED]"));
  EXPECT_TRUE(doc.contains("[REDACTED]#2"));
}

std::string Stream(const Redactor& r, const std::vector<std::string_view>& chunks) {
  StreamRedactor s(r);
  std::string out;
  for (std::string_view c : chunks) out += s.Feed(c);
  return out + s.Finish();
}

TEST(StreamRedactor, ValueSplitAtEveryPointOfTwoChunks) {
  Redactor r;
  WithValue(r);
  // Separators inside a value are places where a stream could otherwise stop early.
  ASSERT_TRUE(r.Add("sep", "p@ss, w/rd;\n x=1"));
  for (const auto& [value, marker] :
       {std::pair{kValue, kMarker},
        std::pair{std::string("p@ss, w/rd;\n x=1"), std::string("[REDACTED:sep]")}}) {
    // A lead-in longer than any pattern, so that a first chunk ending inside the value is long
    // enough to be emitted in part.
    const std::string lead = "plain words, and more, and more plain words before it: ";
    const std::string text = lead + value + " after\n";
    const std::string expected = lead + marker + " after\n";
    for (size_t i = 0; i <= text.size(); ++i) {
      std::string_view t = text;
      EXPECT_EQ(Stream(r, {t.substr(0, i), t.substr(i)}), expected) << i;
    }
  }
}

TEST(StreamRedactor, ValueSplitAtEveryPairOfPointsOfThreeChunks) {
  Redactor r;
  WithValue(r);
  const std::string text = "a " + kValue + " b";
  const std::string expected = "a " + kMarker + " b";
  std::string_view t = text;
  for (size_t i = 0; i <= text.size(); ++i) {
    for (size_t j = i; j <= text.size(); ++j) {
      EXPECT_EQ(Stream(r, {t.substr(0, i), t.substr(i, j - i), t.substr(j)}), expected)
          << i << "," << j;
    }
  }
}

TEST(StreamRedactor, ShapesSplitAtEveryPoint) {
  Redactor r;
  for (const std::string& text :
       {"jwt: " + kJwt + "\nnext line\n", "key:\n" + kPem + "\ndone\n",
        std::string("curl -H 'Authorization: Bearer abc123def456ghi789' x\n"),
        std::string("push ghp_16C7e42F292c6912E7710c838347Ae178B4a ok")}) {
    const std::string expected = r.RedactText(text);
    ASSERT_NE(expected, text);
    std::string_view t = text;
    for (size_t i = 0; i <= text.size(); ++i)
      EXPECT_EQ(Stream(r, {t.substr(0, i), t.substr(i)}), expected) << i << " in " << text;
  }
}

TEST(StreamRedactor, ValueInBase64SplitAtEveryPoint) {
  Redactor r;
  WithValue(r);
  for (size_t offset = 0; offset < 3; ++offset) {
    std::string text = "blob " + B64(std::string(30 + offset, 'q') + kValue + "zzzz", false) + "\n";
    const std::string expected = r.RedactText(text);
    ASSERT_NE(expected.find(kMarker), std::string::npos);
    std::string_view t = text;
    for (size_t i = 0; i <= text.size(); ++i)
      EXPECT_EQ(Stream(r, {t.substr(0, i), t.substr(i)}), expected) << offset << "," << i;
  }
}

TEST(StreamRedactor, RandomChunksOfAMixedTextMatchTheWholeText) {
  Redactor r;
  WithValue(r);
  ASSERT_TRUE(r.Add("pw", "p@ss w/rd&x=1"));
  std::string text;
  for (int i = 0; i < 300; ++i) {
    text += "line " + std::to_string(i) + ": ";
    switch (i % 6) {
      case 0:
        text += "value " + kValue + " there";
        break;
      case 1:
        text += "Authorization: Bearer abcdefgh" + std::to_string(i);
        break;
      case 2:
        text += kPem;
        break;
      case 3:
        text += "q=p%40ss%20w%2Frd%26x%3D1&" + kJwt;
        break;
      case 4:
        text += "plain words, nothing to hide";
        break;
      default:
        text += "commit 9fceb02d0ae598e95dc970b74767f19372d61af8";
        break;
    }
    text += i % 7 == 0 ? " " : "\n";
  }
  const std::string expected = r.RedactText(text);
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::string_view> chunks;
    std::string_view rest = text;
    while (!rest.empty()) {
      size_t n = std::min<size_t>(rest.size(), 1 + rng() % (round < 10 ? 16 : 3000));
      chunks.push_back(rest.substr(0, n));
      rest.remove_prefix(n);
    }
    EXPECT_EQ(Stream(r, chunks), expected) << round;
  }
}

TEST(StreamRedactor, HoldsBackABoundedAmount) {
  Redactor r;
  WithValue(r);
  StreamRedactor s(r);
  std::string line = "an ordinary line of output with no secret in it\n";
  std::string emitted;
  size_t fed = 0;
  for (int i = 0; i < 500; ++i) {
    emitted += s.Feed(line);
    fed += line.size();
    // Lines end in a newline, a safe place to stop: only the value's length - 1 waits.
    EXPECT_GE(emitted.size() + r.longest(), fed);
  }
  // A run with nowhere safe to stop still comes out, all but the last 8192 bytes.
  std::string run(1000, 'a');
  for (int i = 0; i < 20; ++i) {
    emitted += s.Feed(run);
    fed += run.size();
  }
  EXPECT_GE(emitted.size() + 8192, fed);
  emitted += s.Finish();
  EXPECT_EQ(emitted.size(), fed);
  EXPECT_EQ(s.Finish(), "");
}

TEST(StreamRedactor, AnUnterminatedPemBlockWaitsForItsEnd) {
  Redactor r;
  StreamRedactor s(r);
  EXPECT_EQ(s.Feed("ok\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"), "ok\n");
  EXPECT_EQ(s.Feed("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"), "");
  EXPECT_EQ(s.Feed("-----END PRIVATE KEY-----\nafter\n"), "[REDACTED]\nafter\n");
  EXPECT_EQ(s.Finish(), "");
}

TEST(Redactor, ConcurrentAddRemoveAndRedact) {
  Redactor r;
  WithValue(r);
  std::thread writer([&] {
    for (int i = 0; i < 200; ++i) {
      std::string v = "transient-value-" + std::to_string(i);
      r.Add("t", v);
      r.Remove(v);
    }
  });
  for (int i = 0; i < 200; ++i) EXPECT_EQ(r.RedactText("x " + kValue), "x " + kMarker);
  writer.join();
  EXPECT_EQ(r.size(), 1u);
}

}  // namespace
}  // namespace warden::credentials
