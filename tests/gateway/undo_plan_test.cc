// The compensating call's arguments (gateway/undo/undo_plan.h): `$args/POINTER` and
// `$result/POINTER` replaced when they are a whole string, in nested objects and arrays; the
// result read from structuredContent, else the JSON of its first text; a reference that finds
// nothing makes the plan unavailable, saying which.
#include "gateway/undo/undo_plan.h"

#include <gtest/gtest.h>

namespace warden::gateway {
namespace {

using nlohmann::json;

json TextResult(const std::string& text) {
  return {{"content", json::array({{{"type", "text"}, {"text", text}}})}};
}

TEST(UndoPlanTest, ArgsReferenceIsReplacedByTheArgumentValue) {
  auto out = ResolveUndoArguments({{"id", "$args/order/id"}, {"n", 3}}, {{"order", {{"id", 42}}}},
                                  nullptr);
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ(*out, (json{{"id", 42}, {"n", 3}}));
}

TEST(UndoPlanTest, ResultReferenceReadsStructuredContentFirst) {
  json result = TextResult("{\"id\": \"from-text\"}");
  result["structuredContent"] = {{"id", "from-structured"}};
  UndoPlan plan = PlanUndo({"mail__recall", {{"id", "$result/id"}}}, json::object(), result);
  ASSERT_TRUE(plan.available) << plan.reason;
  EXPECT_EQ(plan.tool, "mail__recall");
  EXPECT_EQ(plan.arguments, (json{{"id", "from-structured"}}));
}

TEST(UndoPlanTest, ResultReferenceReadsTheJsonOfTheFirstTextWithoutStructuredContent) {
  UndoPlan plan = PlanUndo({"mail__recall", {{"id", "$result/message/id"}}}, json::object(),
                           TextResult("{\"message\": {\"id\": \"m-7\"}}"));
  ASSERT_TRUE(plan.available) << plan.reason;
  EXPECT_EQ(plan.arguments, (json{{"id", "m-7"}}));
}

TEST(UndoPlanTest, NestedObjectsAndArraysAreWalked) {
  auto out = ResolveUndoArguments(
      {{"outer", {{"list", json::array({"$args/a", "plain", json::array({"$result/b"})})}}}},
      {{"a", "A"}}, {{"b", json::array({1, 2})}});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ(*out,
            (json{{"outer",
                   {{"list", json::array({"A", "plain", json::array({json::array({1, 2})})})}}}}));
}

TEST(UndoPlanTest, OnlyAWholeStringIsAReference) {
  auto out = ResolveUndoArguments(
      {{"a", "undo $args/text"}, {"b", "$argsX"}, {"c", "$args"}, {"d", "$args/"}},
      {{"text", "hi"}, {"", "empty key"}}, nullptr);
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)["a"], "undo $args/text");
  EXPECT_EQ((*out)["b"], "$argsX");
  EXPECT_EQ((*out)["c"], (json{{"text", "hi"}, {"", "empty key"}}));  // the whole document
  EXPECT_EQ((*out)["d"], "empty key");                                // RFC 6901: key ""
}

TEST(UndoPlanTest, PointerEscapesAndArrayIndexesFollowRfc6901) {
  auto out = ResolveUndoArguments({{"x", "$args/a~1b/1"}, {"y", "$args/m~0n"}},
                                  {{"a/b", json::array({"zero", "one"})}, {"m~n", true}}, nullptr);
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)["x"], "one");
  EXPECT_EQ((*out)["y"], true);
}

TEST(UndoPlanTest, AReferenceThatFindsNothingMakesThePlanUnavailableSayingWhich) {
  UndoPlan plan = PlanUndo({"mail__recall", {{"id", "$result/id"}}}, json::object(),
                           TextResult("{\"other\": 1}"));
  EXPECT_FALSE(plan.available);
  EXPECT_NE(plan.reason.find("'$result/id' finds nothing"), std::string::npos) << plan.reason;
  EXPECT_NE(plan.reason.find("mail__recall"), std::string::npos) << plan.reason;
}

TEST(UndoPlanTest, AResultReferenceOnAPlainTextResultIsUnavailable) {
  UndoPlan plan =
      PlanUndo({"t", {{"id", "$result/id"}}}, json::object(), TextResult("sent, not JSON"));
  EXPECT_FALSE(plan.available);
  EXPECT_NE(plan.reason.find("not JSON"), std::string::npos) << plan.reason;
}

TEST(UndoPlanTest, AnArrayIndexOutOfRangeOrNotANumberFindsNothing) {
  EXPECT_FALSE(ResolveUndoArguments({{"x", "$args/l/5"}}, {{"l", json::array({1})}}, nullptr));
  EXPECT_FALSE(ResolveUndoArguments({{"x", "$args/l/one"}}, {{"l", json::array({1})}}, nullptr));
  EXPECT_FALSE(ResolveUndoArguments({{"x", "$args/l/-"}}, {{"l", json::array({1})}}, nullptr));
}

TEST(UndoPlanTest, NoArgsGiveAnEmptyObject) {
  UndoPlan plan = PlanUndo({"t", nullptr}, json::object(), TextResult("x"));
  ASSERT_TRUE(plan.available) << plan.reason;
  EXPECT_EQ(plan.arguments, json::object());
}

TEST(UndoPlanTest, ResultDocumentIsNullWithoutStructuredContentOrJsonText) {
  EXPECT_TRUE(UndoResultDocument(json::object()).is_null());
  EXPECT_TRUE(UndoResultDocument(TextResult("plain")).is_null());
  EXPECT_EQ(UndoResultDocument(TextResult("[1]")), json::array({1}));
}

}  // namespace
}  // namespace warden::gateway
