// The one display rule (src/audit/display_text.h): what a person reads of a call (its arguments,
// its tool name) shows controls, bidirectional controls and every other format character as a
// visible escape, so that text cannot look like something other than what is stored.
#include "audit/display_text.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace warden::audit {
namespace {

// `cp` as UTF-8.
std::string Utf8Of(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

struct DisplayRange {
  uint32_t first, last;
};

// Unicode general category Cf, the line and paragraph separators, C0, DEL and C1.
const std::vector<DisplayRange> kEscapedRanges = {
    {0x0000, 0x001F},   {0x007F, 0x009F},   {0x00AD, 0x00AD},   {0x0600, 0x0605},
    {0x061C, 0x061C},   {0x06DD, 0x06DD},   {0x070F, 0x070F},   {0x0890, 0x0891},
    {0x08E2, 0x08E2},   {0x180E, 0x180E},   {0x200B, 0x200F},   {0x2028, 0x202E},
    {0x2060, 0x2064},   {0x2066, 0x206F},   {0xFEFF, 0xFEFF},   {0xFFF9, 0xFFFB},
    {0x110BD, 0x110BD}, {0x110CD, 0x110CD}, {0x13430, 0x1343F}, {0x1BCA0, 0x1BCA3},
    {0x1D173, 0x1D17A}, {0xE0001, 0xE0001}, {0xE0020, 0xE007F},
};

bool InEscapedRanges(uint32_t cp) {
  for (const DisplayRange& r : kEscapedRanges)
    if (cp >= r.first && cp <= r.last) return true;
  return false;
}

TEST(DisplayText, AttackRightToLeftOverrideShowsAsEscapesNotAsReorderedDigits) {
  // Stored "\u202e0009\u202c" renders as "9000" when shown raw.
  EXPECT_EQ(ForDisplay("\xE2\x80\xAE"
                       "0009"
                       "\xE2\x80\xAC"),
            "\\u202e0009\\u202c");
  EXPECT_EQ(JsonForDisplay(nlohmann::json{{"amount", "\u202e0009\u202c"}}),
            "{\n  \"amount\": \"\\u202e0009\\u202c\"\n}");
}

TEST(DisplayText, EveryBidirectionalControlIsEscaped) {
  for (uint32_t cp : {0x202Au, 0x202Bu, 0x202Cu, 0x202Du, 0x202Eu, 0x2066u, 0x2067u, 0x2068u,
                      0x2069u, 0x200Eu, 0x200Fu, 0x061Cu}) {
    char want[16];
    std::snprintf(want, sizeof want, "\\u%04x", static_cast<unsigned>(cp));
    EXPECT_EQ(ForDisplay("a" + Utf8Of(cp) + "b"), std::string("a") + want + "b") << std::hex << cp;
  }
}

TEST(DisplayText, EveryListedRangeIsEscapedAtBothEndsAndItsNeighboursAreNot) {
  for (const DisplayRange& r : kEscapedRanges) {
    for (uint32_t cp : {r.first, r.last, r.first + (r.last - r.first) / 2}) {
      EXPECT_TRUE(ActsOnDisplay(cp)) << std::hex << cp;
      const std::string shown = ForDisplay(Utf8Of(cp));
      EXPECT_EQ(shown.rfind("\\u", 0), 0u) << std::hex << cp << " shown as " << shown;
    }
    for (uint32_t cp : {r.first - 1, r.last + 1}) {
      if (r.first == 0 || InEscapedRanges(cp)) continue;
      EXPECT_FALSE(ActsOnDisplay(cp)) << std::hex << cp;
    }
  }
}

TEST(DisplayText, ExactlyTheListedCodePointsActOnDisplay) {
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;  // surrogates are not text
    ASSERT_EQ(ActsOnDisplay(cp), InEscapedRanges(cp)) << std::hex << cp;
  }
}

TEST(DisplayText, CodePointsAboveTheBasicPlaneEscapeAsSurrogatePairsSoJsonStaysJson) {
  EXPECT_EQ(ForDisplay(Utf8Of(0xE0001)), "\\udb40\\udc01");
  EXPECT_EQ(ForDisplay(Utf8Of(0x1D173)), "\\ud834\\udd73");
  const nlohmann::json value = {{"tag", "x" + Utf8Of(0xE0041) + Utf8Of(0x202E) + "y"}};
  const std::string shown = JsonForDisplay(value);
  EXPECT_EQ(nlohmann::json::parse(shown), value) << "the display is JSON for the same value";
  EXPECT_NE(shown.find("\\udb40\\udc41\\u202e"), std::string::npos) << shown;
}

TEST(DisplayText, ControlsAreEscapedAndPlainTextReadsOneWayOnly) {
  EXPECT_EQ(ForDisplay("a\x1b[2Jb"), "a\\u001b[2Jb");
  EXPECT_EQ(ForDisplay("del\x7f"), "del\\u007f");
  EXPECT_EQ(ForDisplay("c1\xC2\x9B"), "c1\\u009b");
  EXPECT_EQ(ForDisplay("line\nnext\ttab\\slash\r"), "line\\nnext\\ttab\\\\slash\\u000d");
  EXPECT_EQ(ForDisplay("sep\xE2\x80\xA8para\xE2\x80\xA9"), "sep\\u2028para\\u2029");
}

TEST(DisplayText, JsonFormKeepsItsIndentationAndItsEscapes) {
  const nlohmann::json value = {{"a", "x\ny\\z"}, {"n", {1, 2}}};
  const std::string shown = JsonForDisplay(value);
  EXPECT_EQ(shown, value.dump(2)) << "nothing to escape: the JSON as dumped";
  EXPECT_EQ(ForDisplay("{\n  \"k\": \"\xE2\x80\x8B\"\n}", DisplayForm::kJson),
            "{\n  \"k\": \"\\u200b\"\n}");
}

TEST(DisplayText, OrdinaryTextIsUnchanged) {
  for (const std::string text :
       {"mail__send_email", "café é", "日本語のテキスト", "emoji 😀👍🏽", "Ελληνικά", "עברית",
        "العربية", "नमस्ते", "a b-c_d.e:f/g?h=i&j", "👨‍👩‍👧"}) {
    // (The family emoji's joiners are U+200D, a format character: it is the one exception.)
    if (text == "👨‍👩‍👧") {
      EXPECT_EQ(ForDisplay(text), "👨\\u200d👩\\u200d👧");
      continue;
    }
    EXPECT_EQ(ForDisplay(text), text);
    EXPECT_EQ(ForDisplay(text, DisplayForm::kJson), text);
  }
}

TEST(DisplayText, InvalidUtf8BecomesTheReplacementCharacter) {
  EXPECT_EQ(ForDisplay("a\xFF"
                       "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_NE(ForDisplay("\xC0\xAF").find("\xEF\xBF\xBD"), std::string::npos);
  EXPECT_EQ(ForDisplay("\xC0\xAF").find('/'), std::string::npos) << "no overlong slash";
  EXPECT_EQ(ForDisplay("\xED\xA0\x80").find("\xED\xA0\x80"), std::string::npos)
      << "no encoded surrogate";
  EXPECT_EQ(ForDisplay("trunc\xE2\x80"), "trunc\xEF\xBF\xBD");
}

TEST(DisplayText, AddDisplayFieldsAddsEscapedCopiesAndLeavesTheRawFields) {
  nlohmann::json record = {
      {"tool", "x\u202e"}, {"reasons", {"a\u2066", "b"}}, {"mixed", {"a", 1}}, {"n", 3}};
  const nlohmann::json before = record;
  AddDisplayFields(record, {"tool", "reasons", "mixed", "n", "absent"});
  EXPECT_EQ(record["tool"], before["tool"]);
  EXPECT_EQ(record["reasons"], before["reasons"]);
  EXPECT_EQ(record["tool_display"], "x\\u202e");
  EXPECT_EQ(record["reasons_display"], nlohmann::json({"a\\u2066", "b"}));
  EXPECT_FALSE(record.contains("mixed_display"));
  EXPECT_FALSE(record.contains("n_display"));
  EXPECT_FALSE(record.contains("absent_display"));
}

}  // namespace
}  // namespace warden::audit
