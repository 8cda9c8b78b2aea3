// Argument predicates: each kind, on the values an agent might send, including the ones that try
// to slip past a rule (wrong types, look-alike strings, missing arguments).
#include <gtest/gtest.h>

#include "policy/arg_predicate.h"
#include "policy/policy.h"

namespace warden::policy {
namespace {

using nlohmann::json;

// Loads a one-rule policy whose rule allows `tool` when `args` holds; everything else is denied.
Policy OneRule(const std::string& args) {
  auto p = LoadPolicyText(
      "version: 1\n"
      "tools:\n"
      "  - match: { tool: t, args: " +
          args +
          " }\n"
          "    effect: allow\n"
          "defaults: { unknown_tool: { effect: deny } }\n",
      "predicate.yaml");
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? std::move(p).value() : Policy{};
}

bool Allows(const Policy& p, const json& arguments) {
  return Decide(p, {}, ToolCall{"", "t", arguments}).effect == Effect::kAllow;
}

TEST(JsonPointerTest, ResolvesMembersIndexesAndEscapes) {
  json doc = {{"to", "a@b"},
              {"items", {{{"name", "x"}}, {{"name", "y"}}}},
              {"a/b", 1},
              {"m~n", 2},
              {"", 3}};
  auto resolve = [&](const char* text) { return JsonPointer::Parse(text)->Resolve(doc); };
  EXPECT_EQ(*resolve("/to"), "a@b");
  EXPECT_EQ(*resolve("/items/1/name"), "y");
  EXPECT_EQ(*resolve("/a~1b"), 1);
  EXPECT_EQ(*resolve("/m~0n"), 2);
  EXPECT_EQ(*resolve("/"), 3);
  EXPECT_EQ(*resolve(""), doc);
  EXPECT_EQ(resolve("/items/2/name"), nullptr);
  EXPECT_EQ(resolve("/items/01"), nullptr) << "leading zeros are not array indexes";
  EXPECT_EQ(resolve("/items/-"), nullptr);
  EXPECT_EQ(resolve("/to/x"), nullptr);
  EXPECT_EQ(resolve("/missing"), nullptr);
}

TEST(JsonPointerTest, RejectsMalformedPointers) {
  EXPECT_FALSE(JsonPointer::Parse("to").ok());
  EXPECT_FALSE(JsonPointer::Parse("/a~").ok());
  EXPECT_FALSE(JsonPointer::Parse("/a~2").ok());
}

TEST(PredicateTest, EqualsComparesByTypeAndPlainScalarsAlsoMatchTheirText) {
  Policy p = OneRule("{ /n: { equals: 5 } }");
  EXPECT_TRUE(Allows(p, {{"n", 5}}));
  EXPECT_TRUE(Allows(p, {{"n", 5.0}}));
  EXPECT_TRUE(Allows(p, {{"n", "5"}}));
  EXPECT_FALSE(Allows(p, {{"n", 6}}));
  EXPECT_FALSE(Allows(p, {{"n", "5 "}}));
  EXPECT_FALSE(Allows(p, {{"n", {5}}}));
  EXPECT_FALSE(Allows(p, json::object()));

  Policy quoted = OneRule("{ /n: { equals: \"5\" } }");
  EXPECT_TRUE(Allows(quoted, {{"n", "5"}}));
  EXPECT_FALSE(Allows(quoted, {{"n", 5}}));

  Policy boolean = OneRule("{ /force: { equals: true } }");
  EXPECT_TRUE(Allows(boolean, {{"force", true}}));
  EXPECT_FALSE(Allows(boolean, {{"force", false}}));
  EXPECT_FALSE(Allows(boolean, {{"force", 1}}));

  Policy null = OneRule("{ /x: { equals: null } }");
  EXPECT_TRUE(Allows(null, {{"x", nullptr}}));
  EXPECT_FALSE(Allows(null, json::object())) << "absent is not null";
}

TEST(PredicateTest, PrefixAndSuffixTestStringsOnly) {
  Policy prefix = OneRule("{ /path: { prefix: \"/work/\" } }");
  EXPECT_TRUE(Allows(prefix, {{"path", "/work/a.txt"}}));
  EXPECT_FALSE(Allows(prefix, {{"path", "/workshop/a.txt"}}));
  EXPECT_FALSE(Allows(prefix, {{"path", {"/work/a"}}}));
  Policy suffix = OneRule("{ /to: { suffix: \"@acme.com\" } }");
  EXPECT_TRUE(Allows(suffix, {{"to", "bob@acme.com"}}));
  EXPECT_FALSE(Allows(suffix, {{"to", "bob@acme.com.evil.example"}}));
}

TEST(PredicateTest, RegexIsAFullMatch) {
  Policy p = OneRule("{ /to: { regex: \"[^@]+@acme\\\\.com\" } }");
  EXPECT_TRUE(Allows(p, {{"to", "bob@acme.com"}}));
  EXPECT_FALSE(Allows(p, {{"to", "bob@acme.com.evil.example"}}))
      << "a partial match must not count";
  EXPECT_FALSE(Allows(p, {{"to", "bob@acme.com "}}));
  EXPECT_FALSE(Allows(p, {{"to", "bob@acmeXcom"}}));
  EXPECT_FALSE(Allows(p, {{"to", {"bob@acme.com", "eve@evil.example"}}}))
      << "a list is not a string";
}

TEST(PredicateTest, RegexOnHostileInputStaysLinear) {
  // (a+)+$ is catastrophic for backtracking engines; RE2 answers in linear time.
  Policy p = OneRule("{ /s: { regex: \"(a+)+b\" } }");
  EXPECT_FALSE(Allows(p, {{"s", std::string(100000, 'a') + "c"}}));
}

TEST(PredicateTest, InMatchesAnyListedValue) {
  Policy p = OneRule("{ /priority: { in: [low, normal, 3] } }");
  EXPECT_TRUE(Allows(p, {{"priority", "low"}}));
  EXPECT_TRUE(Allows(p, {{"priority", "normal"}}));
  EXPECT_TRUE(Allows(p, {{"priority", 3}}));
  EXPECT_FALSE(Allows(p, {{"priority", "high"}}));
  EXPECT_FALSE(Allows(p, {{"priority", "LOW"}}));
}

TEST(PredicateTest, MinAndMaxAreInclusiveAndAcceptDecimalStrings) {
  Policy p = OneRule("{ /amount: { min: 0, max: 100 } }");
  EXPECT_TRUE(Allows(p, {{"amount", 0}}));
  EXPECT_TRUE(Allows(p, {{"amount", 100}}));
  EXPECT_TRUE(Allows(p, {{"amount", 99.5}}));
  EXPECT_FALSE(Allows(p, {{"amount", 100.01}}));
  EXPECT_FALSE(Allows(p, {{"amount", -1}}));
  // An upstream may read "5000" as 5000: the string counts as the number it spells.
  EXPECT_TRUE(Allows(p, {{"amount", "50"}}));
  EXPECT_FALSE(Allows(p, {{"amount", "5000"}}));
  EXPECT_FALSE(Allows(p, {{"amount", "50 EUR"}}));
  EXPECT_FALSE(Allows(p, {{"amount", true}}));
  EXPECT_FALSE(Allows(p, json::object()));
}

TEST(PredicateTest, ExistsTrueAndFalse) {
  Policy present = OneRule("{ /order/id: { exists: true } }");
  EXPECT_TRUE(Allows(present, {{"order", {{"id", nullptr}}}}));
  EXPECT_FALSE(Allows(present, {{"order", json::object()}}));
  Policy absent = OneRule("{ /cc: { exists: false } }");
  EXPECT_TRUE(Allows(absent, {{"to", "x"}}));
  EXPECT_FALSE(Allows(absent, {{"cc", "y"}}));
  EXPECT_TRUE(Allows(absent, nullptr)) << "a call without arguments has no /cc";
}

TEST(PredicateTest, AllConditionsOfARuleMustHold) {
  Policy p = OneRule("{ /amount: { max: 100 }, /currency: { equals: EUR } }");
  EXPECT_TRUE(Allows(p, {{"amount", 10}, {"currency", "EUR"}}));
  EXPECT_FALSE(Allows(p, {{"amount", 10}, {"currency", "USD"}}));
  EXPECT_FALSE(Allows(p, {{"amount", 1000}, {"currency", "EUR"}}));
}

TEST(PredicateTest, ArrayElementsAreAddressedByIndex) {
  Policy p = OneRule("{ /recipients/0: { suffix: \"@acme.com\" } }");
  EXPECT_TRUE(Allows(p, {{"recipients", {"a@acme.com", "b@x.example"}}}));
  EXPECT_FALSE(Allows(p, {{"recipients", {"b@x.example"}}}));
}

}  // namespace
}  // namespace warden::policy
