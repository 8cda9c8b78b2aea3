// JsonSchema and CheckToolArguments: every keyword accepting and refusing, the messages the model
// reads, invalid schemas refused at compile, hostile schemas and values bounded, and the real
// inputSchemas of the MCP reference servers (fixtures/schemas/*.json: their tools/list results,
// captured from the pinned packages in tests/e2e; docs/json-schema.md says how).
#include "schema/json_schema.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace warden::schema {
namespace {

// The budgets below bound hostile schemas' cost (linear, not exponential); a sanitizer build runs
// the same work several times slower (a 3 s budget was missed by 24 ms under ASan with the suite's
// load beside it), so its budgets are widened by the same factor.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kSanitizerSlowdown = 4;
#else
constexpr int kSanitizerSlowdown = 1;
#endif

using json = nlohmann::json;

// "" when `value` conforms to `schema`; otherwise the validation error, or "compile: ..." when
// the schema does not compile.
std::string Check(const json& schema, const json& value) {
  auto compiled = JsonSchema::Compile(schema);
  if (!compiled) return "compile: " + compiled.status().message();
  Status st = compiled->Validate(value);
  return st.ok() ? "" : st.message();
}

std::string CompileError(const json& schema, JsonSchemaLimits limits = {}) {
  auto compiled = JsonSchema::Compile(schema, limits);
  return compiled ? "" : compiled.status().message();
}

// Runs `fn` and returns how long it took.
template <typename Fn>
std::chrono::milliseconds Timed(Fn fn) {
  auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

// --- type -----------------------------------------------------------------------------------

TEST(JsonSchemaType, EachTypeAcceptsItsOwnValuesAndRefusesOthers) {
  EXPECT_EQ(Check({{"type", "string"}}, "x"), "");
  EXPECT_EQ(Check({{"type", "string"}}, 1), "/: expected a string, got a number");
  EXPECT_EQ(Check({{"type", "number"}}, 1.5), "");
  EXPECT_EQ(Check({{"type", "number"}}, "1"), "/: expected a number, got a string");
  EXPECT_EQ(Check({{"type", "boolean"}}, false), "");
  EXPECT_EQ(Check({{"type", "boolean"}}, 0), "/: expected a boolean, got a number");
  EXPECT_EQ(Check({{"type", "null"}}, nullptr), "");
  EXPECT_EQ(Check({{"type", "null"}}, json::object()), "/: expected null, got an object");
  EXPECT_EQ(Check({{"type", "object"}}, json::object()), "");
  EXPECT_EQ(Check({{"type", "object"}}, json::array()), "/: expected an object, got an array");
  EXPECT_EQ(Check({{"type", "array"}}, json::array()), "");
  EXPECT_EQ(Check({{"type", "array"}}, nullptr), "/: expected an array, got null");
}

TEST(JsonSchemaType, IntegerIsANumberWithNoFraction) {
  const json schema = {{"type", "integer"}};
  EXPECT_EQ(Check(schema, 3), "");
  EXPECT_EQ(Check(schema, -3), "");
  EXPECT_EQ(Check(schema, json::parse("18446744073709551615")), "");
  EXPECT_EQ(Check(schema, 3.0), "");  // draft 2020-12: 3.0 is an integer
  EXPECT_EQ(Check(schema, 1.5), "/: expected an integer, got 1.5");
  EXPECT_EQ(Check(schema, "3"), "/: expected an integer, got a string");
}

TEST(JsonSchemaType, ListOfTypesAcceptsAnyOfThem) {
  const json schema = {{"type", {"string", "null"}}};
  EXPECT_EQ(Check(schema, "x"), "");
  EXPECT_EQ(Check(schema, nullptr), "");
  EXPECT_EQ(Check(schema, 1), "/: expected a string or null, got a number");
}

// --- objects ----------------------------------------------------------------------------------

TEST(JsonSchemaObject, RequiredAndPropertiesNameTheMember) {
  const json schema = json::parse(R"({"type": "object",
      "properties": {"message": {"type": "string"}, "count": {"type": "integer", "maximum": 10}},
      "required": ["message"]})");
  EXPECT_EQ(Check(schema, {{"message", "hi"}}), "");
  EXPECT_EQ(Check(schema, {{"message", "hi"}, {"count", 10}}), "");
  EXPECT_EQ(Check(schema, json::object()), "/: missing required member 'message'");
  EXPECT_EQ(Check(schema, {{"message", 1}}), "/message: expected a string, got a number");
  EXPECT_EQ(Check(schema, {{"message", "hi"}, {"count", 12}}),
            "/count: 12 is more than the maximum 10");
}

TEST(JsonSchemaObject, AdditionalPropertiesFalseRefusesUnknownMembersAndListsTheKnownOnes) {
  const json schema = {{"properties", {{"a", json::object()}, {"b", json::object()}}},
                       {"additionalProperties", false}};
  EXPECT_EQ(Check(schema, {{"a", 1}}), "");
  EXPECT_EQ(Check(schema, {{"a", 1}, {"c", 2}}), "/: unexpected member 'c' (allowed: a, b)");
}

TEST(JsonSchemaObject, AdditionalPropertiesSchemaChecksTheOtherMembers) {
  const json schema = {{"properties", {{"a", json::object()}}},
                       {"additionalProperties", {{"type", "string"}}}};
  EXPECT_EQ(Check(schema, {{"a", 1}, {"b", "x"}}), "");
  EXPECT_EQ(Check(schema, {{"a", 1}, {"b", 2}}), "/b: expected a string, got a number");
}

TEST(JsonSchemaObject, PatternPropertiesApplyToMatchingNamesAndCountAsKnown) {
  const json schema = {{"patternProperties", {{"^x-", {{"type", "string"}}}}},
                       {"additionalProperties", false}};
  EXPECT_EQ(Check(schema, {{"x-a", "v"}}), "");
  EXPECT_EQ(Check(schema, {{"x-a", 1}}), "/x-a: expected a string, got a number");
  EXPECT_EQ(Check(schema, {{"y", "v"}}), "/: unexpected member 'y'");
}

TEST(JsonSchemaObject, PropertyNamesChecksEveryName) {
  const json schema = {{"propertyNames", {{"pattern", "^[a-z]+$"}}}};
  EXPECT_EQ(Check(schema, {{"abc", 1}}), "");
  EXPECT_EQ(Check(schema, {{"Abc", 1}}),
            "/: member name 'Abc' is not allowed: \"Abc\" does not match the pattern \"^[a-z]+$\"");
}

TEST(JsonSchemaObject, MinAndMaxProperties) {
  const json schema = {{"minProperties", 1}, {"maxProperties", 2}};
  EXPECT_EQ(Check(schema, {{"a", 1}}), "");
  EXPECT_EQ(Check(schema, json::object()),
            "/: 0 members, fewer than the minimum 1 (minProperties)");
  EXPECT_EQ(Check(schema, {{"a", 1}, {"b", 2}, {"c", 3}}),
            "/: 3 members, more than the maximum 2 (maxProperties)");
}

TEST(JsonSchemaObject, DependentRequiredAndDraft7Dependencies) {
  const json modern = {{"dependentRequired", {{"card", {"billing"}}}}};
  EXPECT_EQ(Check(modern, {{"card", 1}, {"billing", 2}}), "");
  EXPECT_EQ(Check(modern, {{"billing", 2}}), "");
  EXPECT_EQ(Check(modern, {{"card", 1}}), "/: member 'card' requires member 'billing'");
  const json draft7 = {{"dependencies", {{"card", {"billing"}}, {"x", {{"required", {"y"}}}}}}};
  EXPECT_EQ(Check(draft7, {{"card", 1}}), "/: member 'card' requires member 'billing'");
  EXPECT_EQ(Check(draft7, {{"x", 1}}), "/: missing required member 'y'");
  EXPECT_EQ(Check(draft7, {{"x", 1}, {"y", 1}}), "");
}

TEST(JsonSchemaObject, PointersEscapeSlashAndTilde) {
  const json schema = {
      {"properties", {{"a/b", {{"properties", {{"c~d", {{"type", "string"}}}}}}}}}};
  EXPECT_EQ(Check(schema, {{"a/b", {{"c~d", 1}}}}), "/a~1b/c~0d: expected a string, got a number");
}

// --- arrays -----------------------------------------------------------------------------------

TEST(JsonSchemaArray, ItemsChecksEveryItemAndNamesItsIndex) {
  const json schema = {{"type", "array"}, {"items", {{"type", "string"}}}};
  EXPECT_EQ(Check(schema, {"a", "b"}), "");
  EXPECT_EQ(Check(schema, {"a", 2}), "/1: expected a string, got a number");
}

TEST(JsonSchemaArray, PrefixItemsThenItemsForTheRest) {
  const json schema = {{"prefixItems", {{{"type", "string"}}, {{"type", "number"}}}},
                       {"items", false}};
  EXPECT_EQ(Check(schema, {"a", 1}), "");
  EXPECT_EQ(Check(schema, {"a"}), "");
  EXPECT_EQ(Check(schema, {1, 1}), "/0: expected a string, got a number");
  EXPECT_EQ(Check(schema, {"a", 1, true}), "/2: no value is allowed here");
}

TEST(JsonSchemaArray, Draft7ItemsArrayAndAdditionalItems) {
  const json schema = {{"items", {{{"type", "string"}}}}, {"additionalItems", {{"type", "null"}}}};
  EXPECT_EQ(Check(schema, {"a", nullptr}), "");
  EXPECT_EQ(Check(schema, {"a", 1}), "/1: expected null, got a number");
}

TEST(JsonSchemaArray, MinAndMaxItems) {
  const json schema = {{"minItems", 1}, {"maxItems", 2}};
  EXPECT_EQ(Check(schema, {1}), "");
  EXPECT_EQ(Check(schema, json::array()), "/: 0 items, fewer than the minimum 1 (minItems)");
  EXPECT_EQ(Check(schema, {1, 2, 3}), "/: 3 items, more than the maximum 2 (maxItems)");
}

TEST(JsonSchemaArray, UniqueItemsComparesAsJsonSchemaDoes) {
  const json schema = {{"uniqueItems", true}};
  EXPECT_EQ(Check(schema, {1, 2, "1"}), "");
  // 1 and 1.0 are the same number; member order does not make two objects different.
  EXPECT_EQ(Check(schema, {1, 2, 1.0}), "/: items 0 and 2 are equal, but the items must be unique");
  EXPECT_EQ(Check(schema, json::parse(R"([{"a":1,"b":[2]}, {"b":[2.0],"a":1}])")),
            "/: items 0 and 1 are equal, but the items must be unique");
  EXPECT_EQ(Check({{"uniqueItems", false}}, {1, 1}), "");
}

TEST(JsonSchemaArray, ContainsWithMinAndMaxContains) {
  const json schema = {{"contains", {{"type", "string"}}}};
  EXPECT_EQ(Check(schema, {1, "a"}), "");
  EXPECT_EQ(Check(schema, {1, 2}), "/: 0 items match 'contains', fewer than the minimum 1");
  const json bounded = {{"contains", {{"type", "string"}}}, {"minContains", 2}, {"maxContains", 2}};
  EXPECT_EQ(Check(bounded, {"a", 1, "b"}), "");
  EXPECT_EQ(Check(bounded, {"a", 1}), "/: 1 item match 'contains', fewer than the minimum 2");
  EXPECT_EQ(Check(bounded, {"a", "b", "c"}),
            "/: 3 items match 'contains', more than the maximum 2 (maxContains)");
}

// --- values, numbers, strings -----------------------------------------------------------------

TEST(JsonSchemaValue, EnumListsTheAllowedValues) {
  const json schema = {{"enum", {"error", "success", 3}}};
  EXPECT_EQ(Check(schema, "success"), "");
  EXPECT_EQ(Check(schema, 3.0), "");
  EXPECT_EQ(Check(schema, "warn"), "/: \"warn\" is not one of \"error\", \"success\", 3");
}

TEST(JsonSchemaValue, ConstComparesStructurally) {
  const json schema = {{"const", {{"a", {1, 2}}, {"b", nullptr}}}};
  EXPECT_EQ(Check(schema, json::parse(R"({"b": null, "a": [1.0, 2]})")), "");
  EXPECT_EQ(Check(schema, json::parse(R"({"a": [2, 1], "b": null})")),
            "/: expected the constant {\"a\":[1,2],\"b\":null}, got {\"a\":[2,1],\"b\":null}");
}

TEST(JsonSchemaNumber, MinimumMaximumAndExclusiveBounds) {
  const json schema = {{"minimum", 1}, {"maximum", 10}};
  EXPECT_EQ(Check(schema, 1), "");
  EXPECT_EQ(Check(schema, 10), "");
  EXPECT_EQ(Check(schema, 0.5), "/: 0.5 is less than the minimum 1");
  EXPECT_EQ(Check(schema, 12), "/: 12 is more than the maximum 10");
  const json exclusive = {{"exclusiveMinimum", 0}, {"exclusiveMaximum", 1}};
  EXPECT_EQ(Check(exclusive, 0.5), "");
  EXPECT_EQ(Check(exclusive, 0), "/: 0 is not more than the exclusive minimum 0");
  EXPECT_EQ(Check(exclusive, 1), "/: 1 is not less than the exclusive maximum 1");
  // Draft-04 spelling: a boolean that makes minimum exclusive.
  const json draft4 = {{"minimum", 0}, {"exclusiveMinimum", true}};
  EXPECT_EQ(Check(draft4, 0), "/: 0 is not more than the exclusive minimum 0");
  EXPECT_EQ(Check(draft4, 0.1), "");
}

TEST(JsonSchemaNumber, BoundsAreExactBeyondDoublePrecision) {
  // 2^53 + 1 is not representable as a double: a comparison through double would call it equal.
  const json schema = {{"maximum", json::parse("9007199254740992")}};
  EXPECT_EQ(Check(schema, json::parse("9007199254740992")), "");
  EXPECT_EQ(Check(schema, json::parse("9007199254740993")),
            "/: 9007199254740993 is more than the maximum 9007199254740992");
  EXPECT_EQ(Check({{"minimum", 0}}, json::parse("18446744073709551615")), "");
  EXPECT_EQ(Check({{"maximum", -1}}, json::parse("18446744073709551615")),
            "/: 18446744073709551615 is more than the maximum -1");
}

TEST(JsonSchemaNumber, MultipleOf) {
  EXPECT_EQ(Check({{"multipleOf", 2}}, 8), "");
  EXPECT_EQ(Check({{"multipleOf", 2}}, 7), "/: 7 is not a multiple of 2");
  EXPECT_EQ(Check({{"multipleOf", 0.01}}, 0.07), "");  // not exact in binary, still a multiple
  EXPECT_EQ(Check({{"multipleOf", 0.01}}, 0.075), "/: 0.075 is not a multiple of 0.01");
}

TEST(JsonSchemaString, LengthsCountCodePointsNotBytes) {
  const json schema = {{"minLength", 2}, {"maxLength", 3}};
  EXPECT_EQ(Check(schema, "h\xC3\xA9"), "");  // "hé": 3 bytes, 2 code points
  EXPECT_EQ(Check(schema, "\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x9F\x98\x80"), "");  // 3 emoji
  EXPECT_EQ(Check(schema, "\xC3\xA9"),
            "/: string of 1 character is shorter than the minimum length 2");
  EXPECT_EQ(Check(schema, "abcd"), "/: string of 4 characters is longer than the maximum length 3");
}

TEST(JsonSchemaString, PatternIsAnUnanchoredSearch) {
  const json schema = {{"pattern", "[0-9]{3}"}};
  EXPECT_EQ(Check(schema, "ab123cd"), "");
  EXPECT_EQ(Check(schema, "ab12cd"), "/: \"ab12cd\" does not match the pattern \"[0-9]{3}\"");
  EXPECT_EQ(Check({{"pattern", "^\\p{L}+$"}}, "h\xC3\xA9llo"), "");  // Unicode classes work
  EXPECT_EQ(Check({{"pattern", "^a"}}, 5), "");  // pattern only concerns strings
}

TEST(JsonSchemaString, FormatIsIgnored) { EXPECT_EQ(Check({{"format", "uri"}}, "not a uri"), ""); }

TEST(JsonSchemaString, LongValuesAreCutInMessages) {
  const std::string long_value(5000, 'x');
  std::string error = Check({{"enum", {"a"}}}, long_value);
  EXPECT_LT(error.size(), 200u) << error;
  EXPECT_NE(error.find("xxx..."), std::string::npos) << error;
}

// --- combinators, booleans, $ref -------------------------------------------------------------

TEST(JsonSchemaCombinator, AllOfNeedsEveryOne) {
  const json schema = {{"allOf", {{{"type", "integer"}}, {{"minimum", 3}}}}};
  EXPECT_EQ(Check(schema, 4), "");
  EXPECT_EQ(Check(schema, 2), "/: 2 is less than the minimum 3");
}

TEST(JsonSchemaCombinator, AnyOfNeedsOneAndSaysWhyEachFailed) {
  const json schema = {{"anyOf", {{{"type", "string"}}, {{"type", "integer"}}}}};
  EXPECT_EQ(Check(schema, 4), "");
  EXPECT_EQ(Check(schema, "x"), "");
  EXPECT_EQ(Check(schema, 1.5),
            "/: matches none of the anyOf alternatives: [0] /: expected a string, got a number; "
            "[1] /: expected an integer, got 1.5");
}

TEST(JsonSchemaCombinator, OneOfNeedsExactlyOne) {
  const json schema = {{"oneOf", {{{"type", "integer"}}, {{"minimum", 10}}}}};
  EXPECT_EQ(Check(schema, 3), "");
  EXPECT_EQ(Check(schema, 10.5), "");
  EXPECT_EQ(Check(schema, 12), "/: matches oneOf alternatives 0 and 1, but exactly one must match");
  EXPECT_EQ(Check(schema, 1.5),
            "/: matches none of the oneOf alternatives: [0] /: expected an integer, got 1.5; "
            "[1] /: 1.5 is less than the minimum 10");
}

TEST(JsonSchemaCombinator, NotRefusesWhatItsSchemaAccepts) {
  const json schema = {{"not", {{"type", "null"}}}};
  EXPECT_EQ(Check(schema, 1), "");
  EXPECT_EQ(Check(schema, nullptr), "/: matches the schema under 'not'");
}

TEST(JsonSchemaCombinator, IfThenElse) {
  const json schema = json::parse(R"({"if": {"properties": {"kind": {"const": "file"}}},
      "then": {"required": ["path"]}, "else": {"required": ["url"]}})");
  EXPECT_EQ(Check(schema, {{"kind", "file"}, {"path", "/a"}}), "");
  EXPECT_EQ(Check(schema, {{"kind", "web"}, {"url", "x"}}), "");
  EXPECT_EQ(Check(schema, {{"kind", "file"}}), "/: missing required member 'path'");
  EXPECT_EQ(Check(schema, {{"kind", "web"}}), "/: missing required member 'url'");
}

TEST(JsonSchemaBoolean, TrueAcceptsAllFalseRefusesAll) {
  EXPECT_EQ(Check(true, {{"anything", 1}}), "");
  EXPECT_EQ(Check(false, 1), "/: no value is allowed here");
  EXPECT_EQ(Check(json::object(), "x"), "");
}

TEST(JsonSchemaRef, DefsAndDefinitionsAreFollowed) {
  const json schema = json::parse(R"({
      "properties": {"a": {"$ref": "#/$defs/name"}, "b": {"$ref": "#/definitions/count"}},
      "$defs": {"name": {"type": "string"}},
      "definitions": {"count": {"type": "integer"}}})");
  EXPECT_EQ(Check(schema, {{"a", "x"}, {"b", 2}}), "");
  EXPECT_EQ(Check(schema, {{"a", 1}}), "/a: expected a string, got a number");
  EXPECT_EQ(Check(schema, {{"b", "2"}}), "/b: expected an integer, got a string");
}

TEST(JsonSchemaRef, RecursiveSchemaThroughMembersValidatesATree) {
  const json schema = json::parse(R"({"$defs": {"node": {"type": "object",
      "properties": {"name": {"type": "string"},
                     "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["name"]}}, "$ref": "#/$defs/node"})");
  const json tree = json::parse(R"({"name": "a", "children": [{"name": "b", "children": [
      {"name": "c"}]}]})");
  EXPECT_EQ(Check(schema, tree), "");
  const json broken = json::parse(R"({"name": "a", "children": [{"children": []}]})");
  EXPECT_EQ(Check(schema, broken), "/children/0: missing required member 'name'");
}

TEST(JsonSchemaRef, RootAndOtherLocalPointersAndEscapesAreFollowed) {
  const json schema = json::parse(R"({"properties": {
      "self": {"$ref": "#"},
      "same": {"$ref": "#/properties/a%20b"},
      "slash": {"$ref": "#/$defs/x~1y"},
      "a b": {"type": "string"}},
      "$defs": {"x/y": {"type": "null"}}, "type": "object"})");
  EXPECT_EQ(Check(schema, {{"self", {{"same", "s"}}}, {"slash", nullptr}}), "");
  EXPECT_EQ(Check(schema, {{"self", 1}}), "/self: expected an object, got a number");
  EXPECT_EQ(Check(schema, {{"same", 1}}), "/same: expected a string, got a number");
  EXPECT_EQ(Check(schema, {{"slash", 1}}), "/slash: expected null, got a number");
}

TEST(JsonSchemaRef, NonLocalRefsAreAcceptedButNotChecked) {
  const json schema = {{"properties",
                        {{"a", {{"$ref", "https://example.com/s.json#/x"}}},
                         {"b", {{"$ref", "other.json"}}},
                         {"c", {{"$ref", "#anchor"}}}}}};
  EXPECT_EQ(Check(schema, {{"a", 1}, {"b", "x"}, {"c", nullptr}}), "");
}

TEST(JsonSchemaRef, RefToNothingIsRefusedAtCompile) {
  EXPECT_EQ(CompileError({{"properties", {{"a", {{"$ref", "#/$defs/missing"}}}}}}),
            "/properties/a/$ref: \"#/$defs/missing\" points at nothing in this schema");
  EXPECT_EQ(CompileError({{"$ref", "#/a~2"}}), "/$ref: \"#/a~2\" is not a valid JSON pointer");
  EXPECT_EQ(CompileError({{"$ref", 5}}), "/$ref: must be a string");
}

TEST(JsonSchemaRef, CycleThatNeverMovesIntoAValueIsRefusedAtCompile) {
  EXPECT_EQ(CompileError(json::parse(R"({"$defs": {"a": {"$ref": "#/$defs/b"},
      "b": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"})")),
            "/$defs/b/anyOf/1/$ref: \"#/$defs/a\" makes a cycle that never moves into a member "
            "or an item (validation would never end)");
  EXPECT_NE(CompileError({{"allOf", {{{"$ref", "#"}}}}}), "");
}

// --- invalid schemas --------------------------------------------------------------------------

TEST(JsonSchemaCompile, InvalidSchemasAreRefusedNamingTheKeyword) {
  EXPECT_EQ(CompileError(5), "/: a schema must be an object or a boolean, got a number");
  EXPECT_EQ(CompileError({{"type", "strng"}}),
            "/type: \"strng\" is not a type (null, boolean, object, array, number, string, "
            "integer)");
  EXPECT_EQ(CompileError({{"type", json::array()}}), "/type: must name at least one type");
  EXPECT_EQ(CompileError({{"properties", {{"a", {{"minimum", "5"}}}}}}),
            "/properties/a/minimum: must be a number");
  EXPECT_EQ(CompileError({{"required", "x"}}), "/required: must be an array of strings");
  EXPECT_EQ(CompileError({{"minLength", -1}}), "/minLength: must be a non-negative integer");
  EXPECT_EQ(CompileError({{"maxItems", 1.5}}), "/maxItems: must be a non-negative integer");
  EXPECT_EQ(CompileError({{"properties", json::array()}}),
            "/properties: must be an object whose members are schemas");
  EXPECT_EQ(CompileError({{"items", {{"type", 3}}}}),
            "/items/type: 3 is not a type (null, boolean, object, array, number, string, integer)");
  EXPECT_EQ(CompileError({{"anyOf", json::array()}}),
            "/anyOf: must be a non-empty array of schemas");
  EXPECT_EQ(CompileError({{"multipleOf", 0}}), "/multipleOf: must be more than 0");
  EXPECT_EQ(CompileError({{"uniqueItems", "yes"}}), "/uniqueItems: must be a boolean");
  EXPECT_EQ(CompileError({{"enum", "a"}}), "/enum: must be an array");
}

TEST(JsonSchemaCompile, InvalidPatternMakesTheSchemaUnusable) {
  std::string error = CompileError({{"properties", {{"name", {{"pattern", "(ab"}}}}}});
  EXPECT_EQ(error.rfind("/properties/name/pattern: invalid regex \"(ab\": ", 0), 0u) << error;
  // ECMA-262 lookaround and backreferences are not RE2: refused, never silently ignored.
  EXPECT_NE(CompileError({{"pattern", "^(?!admin).*$"}}), "");
  EXPECT_NE(CompileError({{"pattern", "(a)\\1"}}), "");
  EXPECT_NE(CompileError({{"patternProperties", {{"(", true}}}}), "");
  // A pattern whose program would be huge is refused rather than allowed to take the memory.
  EXPECT_NE(CompileError({{"pattern", "(\\pL{50}){20}"}}).find("1 MiB budget"), std::string::npos);
  EXPECT_EQ(CompileError({{"pattern", 5}}), "/pattern: must be a string (a regular expression)");
}

TEST(JsonSchemaCompile, AnnotationsAndUnknownKeywordsAreIgnored) {
  EXPECT_EQ(CompileError(json::parse(R"({"$schema": "http://json-schema.org/draft-07/schema#",
      "title": "t", "description": "d", "default": 3, "examples": [1], "x-vendor": {"type": 5},
      "readOnly": true, "deprecated": false, "$comment": "c", "format": "date"})")),
            "");
}

// --- hostile schemas and values ---------------------------------------------------------------

// {keyword: {keyword: ... inner}}, built without recursion.
json Nested(const std::string& keyword, int levels, json inner) {
  for (int i = 0; i < levels; ++i) {
    json outer = json::object();
    outer[keyword] = std::move(inner);
    inner = std::move(outer);
  }
  return inner;
}

TEST(JsonSchemaHostile, DeeplyNestedSchemaIsRefusedQuickly) {
  std::string error;
  auto took = Timed([&] { error = CompileError(Nested("not", 100000, json::object())); });
  EXPECT_NE(error.find("schema nested deeper than 64 levels"), std::string::npos) << error;
  EXPECT_LT(took.count(), 2000 * kSanitizerSlowdown);
  EXPECT_EQ(CompileError(Nested("items", 60, json::object())), "");  // within the limit
}

TEST(JsonSchemaHostile, DeeplyNestedValueStopsAtTheDepthLimit) {
  json value = json::array();
  for (int i = 0; i < 100000; ++i) value = json::array({std::move(value)});
  auto schema = JsonSchema::Compile({{"items", {{"$ref", "#"}}}});
  ASSERT_TRUE(schema.ok()) << schema.status().message();
  Status st;
  auto took = Timed([&] { st = schema->Validate(value); });
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("applied deeper than 64 levels"), std::string::npos) << st.message();
  EXPECT_LT(took.count(), 2000 * kSanitizerSlowdown);
  // Values compared whole (enum, const, uniqueItems) are bounded too.
  auto with_enum = JsonSchema::Compile({{"enum", {1}}});
  ASSERT_TRUE(with_enum.ok());
  st = with_enum->Validate(value);
  EXPECT_NE(st.message().find("value nested deeper than 64 levels"), std::string::npos)
      << st.message();
}

// A chain of $defs where each level tries its successor twice: 2^levels applications unbounded.
json ExponentialRefBomb(int levels) {
  json defs = json::object();
  for (int i = 0; i < levels; ++i) {
    const std::string next = "#/$defs/d" + std::to_string(i + 1);
    defs["d" + std::to_string(i)] = {{"anyOf", {{{"$ref", next}}, {{"$ref", next}}}}};
  }
  defs["d" + std::to_string(levels)] = {{"type", "string"}};
  return {{"$defs", defs}, {"$ref", "#/$defs/d0"}};
}

TEST(JsonSchemaHostile, ExponentialRefFanOutStopsAfterTheStepBudget) {
  auto schema = JsonSchema::Compile(ExponentialRefBomb(25));  // 2^25 paths, 51 levels deep
  ASSERT_TRUE(schema.ok()) << schema.status().message();
  Status st;
  auto took = Timed([&] { st = schema->Validate(5); });
  EXPECT_NE(st.message().find("stopped after 10000 steps"), std::string::npos) << st.message();
  EXPECT_LT(took.count(), 2000 * kSanitizerSlowdown);
  EXPECT_TRUE(schema->Validate("a string passes on the first path").ok());
}

TEST(JsonSchemaHostile, ExhaustedBudgetNeverTurnsIntoAPassUnderNotOrAnyOf) {
  // Were an exhausted branch merely "failed", `not` would pass it and anyOf would try `true`.
  const json bomb = ExponentialRefBomb(25);
  json under_not = {{"$defs", bomb["$defs"]}, {"not", {{"$ref", "#/$defs/d0"}}}};
  json under_any = {{"$defs", bomb["$defs"]}, {"anyOf", {{{"$ref", "#/$defs/d0"}}, true}}};
  for (const json& schema : {under_not, under_any}) {
    auto compiled = JsonSchema::Compile(schema);
    ASSERT_TRUE(compiled.ok()) << compiled.status().message();
    Status st = compiled->Validate(5);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("stopped after 10000 steps"), std::string::npos) << st.message();
  }
}

TEST(JsonSchemaHostile, HugeEnumIsASetLookup) {
  json values = json::array();
  for (int i = 0; i < 200000; ++i) values.push_back("v" + std::to_string(i));
  auto schema = JsonSchema::Compile({{"enum", values}});
  ASSERT_TRUE(schema.ok());
  Status in, out;
  auto took = Timed([&] {
    for (int i = 0; i < 1000; ++i) in = schema->Validate("v199999");
    out = schema->Validate("nope");
  });
  EXPECT_TRUE(in.ok()) << in.message();
  EXPECT_FALSE(out.ok());
  EXPECT_LT(out.message().size(), 300u);
  EXPECT_NE(out.message().find("(200000 values)"), std::string::npos) << out.message();
  EXPECT_LT(took.count(), 1000 * kSanitizerSlowdown);
}

TEST(JsonSchemaHostile, HugeSchemaCompilesLinearlyAndValidationStaysInBudget) {
  json properties = json::object();
  for (int i = 0; i < 50000; ++i) properties["p" + std::to_string(i)] = {{"type", "integer"}};
  const json schema = {{"type", "object"}, {"properties", properties}};
  Result<JsonSchema> compiled = Status::Error("not yet");
  auto took = Timed([&] { compiled = JsonSchema::Compile(schema); });
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  EXPECT_LT(took.count(), 3000 * kSanitizerSlowdown);
  EXPECT_TRUE(compiled->Validate({{"p1", 1}, {"p49999", 2}}).ok());
  json many = json::object();
  for (int i = 0; i < 20000; ++i) many["p" + std::to_string(i)] = i;
  Status st = compiled->Validate(many);
  EXPECT_NE(st.message().find("stopped after 10000 steps"), std::string::npos) << st.message();
  // A wide allOf costs one step per branch.
  json wide = json::array();
  for (int i = 0; i < 20000; ++i) wide.push_back(json::object());
  auto all_of = JsonSchema::Compile({{"allOf", wide}});
  ASSERT_TRUE(all_of.ok());
  EXPECT_FALSE(all_of->Validate(1).ok());
}

TEST(JsonSchemaHostile, SubschemaCountIsLimited) {
  json properties = json::object();
  for (int i = 0; i < 200; ++i) properties["p" + std::to_string(i)] = json::object();
  const std::string error = CompileError({{"properties", properties}}, {.max_subschemas = 100});
  EXPECT_NE(error.find("schema has more than 100 subschemas"), std::string::npos) << error;
  EXPECT_EQ(CompileError({{"properties", properties}}, {.max_subschemas = 1000}), "");
}

TEST(JsonSchemaHostile, CatastrophicBacktrackingPatternIsLinearInRe2) {
  // (a+)+$ against "aaaa...b" takes exponential time in a backtracking engine.
  auto schema = JsonSchema::Compile({{"pattern", "^(a+)+$"}});
  ASSERT_TRUE(schema.ok());
  const std::string value = std::string(100000, 'a') + "b";
  Status st;
  auto took = Timed([&] { st = schema->Validate(value); });
  EXPECT_FALSE(st.ok());
  EXPECT_LT(took.count(), 1000 * kSanitizerSlowdown);
}

TEST(JsonSchemaHostile, ManyArgumentsAgainstOneItemsSchemaAreBounded) {
  auto schema = JsonSchema::Compile({{"items", {{"type", "string"}}}});
  ASSERT_TRUE(schema.ok());
  EXPECT_TRUE(schema->Validate(json(std::vector<std::string>(5000, "x"))).ok());
  Status st = schema->Validate(json(std::vector<std::string>(20000, "x")));
  EXPECT_NE(st.message().find("stopped after 10000 steps"), std::string::npos) << st.message();
}

TEST(JsonSchemaHostile, LimitsAreConfigurable) {
  // Depth counts every application: [[[]]] takes items, $ref, items, $ref: 4 levels.
  auto shallow = JsonSchema::Compile({{"items", {{"$ref", "#"}}}}, {.max_depth = 4});
  ASSERT_TRUE(shallow.ok());
  EXPECT_TRUE(shallow->Validate(json::parse("[[[]]]")).ok());
  EXPECT_FALSE(shallow->Validate(json::parse("[[[[[]]]]]")).ok());
  auto thrifty = JsonSchema::Compile({{"items", true}}, {.max_steps = 10});
  ASSERT_TRUE(thrifty.ok());
  EXPECT_TRUE(thrifty->Validate(json::array({1, 2, 3})).ok());
  EXPECT_FALSE(thrifty->Validate(json(std::vector<int>(50, 1))).ok());
}

// --- the reference servers' real input schemas ------------------------------------------------

json Fixture(const std::string& name) {
  const auto path = std::filesystem::path(__FILE__).parent_path() / "fixtures" / "schemas" / name;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
}

json Tool(const json& listing, const std::string& name) {
  for (const json& tool : listing["tools"])
    if (tool["name"] == name) return tool;
  ADD_FAILURE() << "no tool " << name;
  return json::object();
}

TEST(JsonSchemaReferenceServers, EveryPublishedInputSchemaCompiles) {
  for (const char* file : {"server-everything.json", "server-filesystem.json"}) {
    const json listing = Fixture(file);
    ASSERT_TRUE(listing.is_object() && listing["tools"].size() > 5) << file;
    for (const json& tool : listing["tools"]) {
      auto compiled = JsonSchema::Compile(tool["inputSchema"]);
      EXPECT_TRUE(compiled.ok()) << tool["name"] << ": " << compiled.status().message();
    }
  }
}

TEST(JsonSchemaReferenceServers, ServerEverythingArguments) {
  const json listing = Fixture("server-everything.json");
  const json echo = Tool(listing, "echo");
  EXPECT_TRUE(CheckToolArguments(echo, {{"message", "hi"}}).ok());
  EXPECT_EQ(CheckToolArguments(echo, json::object()).message(),
            "/: missing required member 'message'");
  EXPECT_EQ(CheckToolArguments(echo, nullptr).message(), "/: missing required member 'message'");
  EXPECT_EQ(CheckToolArguments(echo, {{"message", 5}}).message(),
            "/message: expected a string, got a number");

  const json sum = Tool(listing, "get-sum");
  EXPECT_TRUE(CheckToolArguments(sum, {{"a", 1}, {"b", 2.5}}).ok());
  EXPECT_EQ(CheckToolArguments(sum, {{"a", "1"}, {"b", 2}}).message(),
            "/a: expected a number, got a string");

  const json links = Tool(listing, "get-resource-links");
  EXPECT_TRUE(CheckToolArguments(links, json::object()).ok());
  EXPECT_TRUE(CheckToolArguments(links, {{"count", 10}}).ok());
  EXPECT_EQ(CheckToolArguments(links, {{"count", 12}}).message(),
            "/count: 12 is more than the maximum 10");
  EXPECT_EQ(CheckToolArguments(links, {{"count", 0}}).message(),
            "/count: 0 is less than the minimum 1");

  const json annotated = Tool(listing, "get-annotated-message");
  EXPECT_TRUE(
      CheckToolArguments(annotated, {{"messageType", "debug"}, {"includeImage", true}}).ok());
  EXPECT_EQ(CheckToolArguments(annotated, {{"messageType", "warn"}}).message(),
            "/messageType: \"warn\" is not one of \"error\", \"success\", \"debug\"");
  EXPECT_EQ(
      CheckToolArguments(annotated, {{"messageType", "error"}, {"includeImage", "yes"}}).message(),
      "/includeImage: expected a boolean, got a string");

  // `format: uri` is an annotation here: not checked.
  EXPECT_TRUE(CheckToolArguments(Tool(listing, "gzip-file-as-resource"), {{"data", "x"}}).ok());
  EXPECT_TRUE(CheckToolArguments(Tool(listing, "get-env"), json::object()).ok());
}

TEST(JsonSchemaReferenceServers, ServerFilesystemArguments) {
  const json listing = Fixture("server-filesystem.json");
  const json read_many = Tool(listing, "read_multiple_files");
  EXPECT_TRUE(CheckToolArguments(read_many, {{"paths", {"/a", "/b"}}}).ok());
  EXPECT_EQ(CheckToolArguments(read_many, {{"paths", json::array()}}).message(),
            "/paths: 0 items, fewer than the minimum 1 (minItems)");
  EXPECT_EQ(CheckToolArguments(read_many, {{"paths", {"/a", 7}}}).message(),
            "/paths/1: expected a string, got a number");
  EXPECT_EQ(CheckToolArguments(read_many, {{"paths", "/a"}}).message(),
            "/paths: expected an array, got a string");

  const json edit = Tool(listing, "edit_file");
  EXPECT_TRUE(CheckToolArguments(edit, json::parse(R"({"path": "/f",
      "edits": [{"oldText": "a", "newText": "b"}], "dryRun": true})"))
                  .ok());
  EXPECT_EQ(CheckToolArguments(edit, json::parse(R"({"path": "/f", "edits": [
      {"oldText": "a", "newText": "b"}, {"oldText": "x"}]})"))
                .message(),
            "/edits/1: missing required member 'newText'");

  const json move = Tool(listing, "move_file");
  EXPECT_TRUE(CheckToolArguments(move, {{"source", "/a"}, {"destination", "/b"}}).ok());
  EXPECT_EQ(CheckToolArguments(move, {{"source", "/a"}}).message(),
            "/: missing required member 'destination'");

  const json sizes = Tool(listing, "list_directory_with_sizes");
  EXPECT_EQ(CheckToolArguments(sizes, {{"path", "/"}, {"sortBy", "date"}}).message(),
            "/sortBy: \"date\" is not one of \"name\", \"size\"");
  // A property named like a keyword is a property.
  EXPECT_TRUE(
      CheckToolArguments(Tool(listing, "search_files"), {{"path", "/"}, {"pattern", "*.md"}}).ok());
}

// --- CheckToolArguments and its cache ---------------------------------------------------------

TEST(CheckToolArguments, ToolWithoutInputSchemaTakesAnything) {
  EXPECT_TRUE(CheckToolArguments({{"name", "t"}}, {{"x", 1}}).ok());
  EXPECT_TRUE(CheckToolArguments(json::object(), nullptr).ok());
}

TEST(CheckToolArguments, UnusableSchemaRefusesTheCallAndSaysItIsTheSchema) {
  const json tool = {{"name", "t"},
                     {"inputSchema", {{"properties", {{"q", {{"pattern", "(?=x)"}}}}}}}};
  Status st = CheckToolArguments(tool, {{"q", "x"}});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().rfind("the tool's inputSchema is unusable: /properties/q/pattern: ", 0),
            0u)
      << st.message();
}

TEST(CheckToolArguments, AbsurdlyDeepInputSchemaIsRefusedWithoutRecursingThroughIt) {
  json tool = {{"name", "t"}};
  tool["inputSchema"] = Nested("not", 200000, json::object());  // moved: a copy would recurse
  Status st = CheckToolArguments(tool, json::object());
  EXPECT_EQ(st.message(), "the tool's inputSchema is unusable: nested deeper than 256 levels");
}

json ToolWithMaximum(int maximum) {
  return {{"name", "t"}, {"inputSchema", {{"properties", {{"n", {{"maximum", maximum}}}}}}}};
}

TEST(ToolSchemaCache, KeepsEachSchemaOnceAndEvictsTheLeastRecentlyUsed) {
  ToolSchemaCache cache(/*max_entries=*/2);
  EXPECT_TRUE(cache.Check(ToolWithMaximum(1), {{"n", 1}}).ok());
  EXPECT_TRUE(cache.Check(ToolWithMaximum(1), {{"n", 0}}).ok());
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_TRUE(cache.Check(ToolWithMaximum(2), {{"n", 2}}).ok());
  EXPECT_TRUE(cache.Check(ToolWithMaximum(3), {{"n", 3}}).ok());
  EXPECT_EQ(cache.size(), 2u);
  // Evicted or not, every answer is the one its own schema gives.
  EXPECT_EQ(cache.Check(ToolWithMaximum(1), {{"n", 2}}).message(),
            "/n: 2 is more than the maximum 1");
  EXPECT_EQ(cache.Check(ToolWithMaximum(3), {{"n", 4}}).message(),
            "/n: 4 is more than the maximum 3");
}

TEST(ToolSchemaCache, BoundedInBytesAndNeverKeepsAHugeSchema) {
  ToolSchemaCache cache(/*max_entries=*/100, /*max_bytes=*/2000);
  json big = json::object();
  for (int i = 0; i < 100; ++i) big["p" + std::to_string(i)] = {{"type", "string"}};
  EXPECT_EQ(cache.Check({{"inputSchema", {{"properties", big}}}}, {{"p1", 1}}).message(),
            "/p1: expected a string, got a number");
  EXPECT_EQ(cache.size(), 0u);
  for (int i = 0; i < 100; ++i) cache.Check(ToolWithMaximum(i), json::object());
  EXPECT_LT(cache.size(), 100u);
  EXPECT_GT(cache.size(), 0u);
}

TEST(ToolSchemaCache, ConcurrentChecksGetTheirOwnSchemasAnswers) {
  ToolSchemaCache cache(/*max_entries=*/5);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        const int maximum = (i * 7 + t) % 20;
        if (!cache.Check(ToolWithMaximum(maximum), {{"n", maximum}}).ok()) ++wrong;
        if (cache.Check(ToolWithMaximum(maximum), {{"n", maximum + 1}}).ok()) ++wrong;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(cache.size(), 5u);
}

}  // namespace
}  // namespace warden::schema
