// The JSON-RPC 2.0 layer as a specification: what parses, what each malformed shape maps to, and
// that ids keep their exact type and value.
#include "mcp/jsonrpc.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace warden::mcp {
namespace {

using nlohmann::json;

const Message& OnlyMessage(const ParseResult& r) {
  EXPECT_EQ(r.entries.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<Message>(r.entries.at(0)));
  return std::get<Message>(r.entries.at(0));
}

ParseOptions Batches() {
  ParseOptions o;
  o.allow_batch = true;
  return o;
}

// ---- valid messages ----

TEST(JsonRpcParse, RequestWithObjectParams) {
  auto r = Parse(R"({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}})");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.is_batch);
  const auto& req = std::get<Request>(OnlyMessage(r));
  EXPECT_EQ(req.id, Id(7));
  EXPECT_EQ(req.method, "tools/call");
  ASSERT_TRUE(req.params.has_value());
  EXPECT_EQ((*req.params)["name"], "x");
}

TEST(JsonRpcParse, RequestWithArrayParamsAndNoParams) {
  auto a = Parse(R"({"jsonrpc":"2.0","id":"a","method":"m","params":[1,2]})");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(std::get<Request>(OnlyMessage(a)).params->is_array());
  auto b = Parse(R"({"jsonrpc":"2.0","id":"a","method":"ping"})");
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(std::get<Request>(OnlyMessage(b)).params.has_value());
}

TEST(JsonRpcParse, NotificationHasNoId) {
  auto r = Parse(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(std::get<Notification>(OnlyMessage(r)).method, "notifications/initialized");
}

TEST(JsonRpcParse, ResponseAnyResultIncludingNull) {
  auto r = Parse(R"({"jsonrpc":"2.0","id":3,"result":{"tools":[]}})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(std::get<Response>(OnlyMessage(r)).result, json::parse(R"({"tools":[]})"));
  auto n = Parse(R"({"jsonrpc":"2.0","id":3,"result":null})");
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(std::get<Response>(OnlyMessage(n)).result.is_null());
}

TEST(JsonRpcParse, ErrorResponseWithNullIdAndData) {
  auto r = Parse(
      R"({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad","data":{"x":1}}})");
  ASSERT_TRUE(r.ok());
  const auto& e = std::get<ErrorResponse>(OnlyMessage(r));
  EXPECT_FALSE(e.id.has_value());
  EXPECT_EQ(e.code, kParseError);
  EXPECT_EQ(e.message, "bad");
  EXPECT_EQ(*e.data, json::parse(R"({"x":1})"));
}

TEST(JsonRpcParse, UnknownExtraMembersAreTolerated) {
  auto r = Parse(R"({"jsonrpc":"2.0","id":1,"method":"ping","x-extra":true})");
  EXPECT_TRUE(r.ok());
}

TEST(JsonRpcParse, LeadingAndTrailingWhitespaceIsFine) {
  EXPECT_TRUE(Parse(" \n\t{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\r\n ").ok());
}

// ---- round trips ----

class RoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(RoundTrip, SerializeThenParseGivesTheSameMessage) {
  auto first = Parse(GetParam());
  ASSERT_TRUE(first.ok()) << GetParam();
  std::string text = Serialize(OnlyMessage(first));
  auto second = Parse(text);
  ASSERT_TRUE(second.ok()) << text;
  EXPECT_EQ(ToJson(OnlyMessage(first)), ToJson(OnlyMessage(second)));
  EXPECT_EQ(json::parse(text), json::parse(GetParam()));
  EXPECT_EQ(text, json::parse(text).dump()) << "compact output expected";
}

INSTANTIATE_TEST_SUITE_P(
    Messages, RoundTrip,
    ::testing::Values(
        R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}})",
        R"({"jsonrpc":"2.0","id":"abc","method":"ping"})",
        R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}})",
        R"({"jsonrpc":"2.0","method":"m","params":[1,"two",null]})",
        R"({"jsonrpc":"2.0","id":-4,"result":{"content":[{"type":"text","text":"h\u00e9"}]}})",
        R"({"jsonrpc":"2.0","id":9007199254740993,"result":{}})",
        R"({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x"}})",
        R"({"jsonrpc":"2.0","id":"z","error":{"code":-32002,"message":"Resource not found","data":{"uri":"file:///a"}}})"));

// ---- ids keep their type and value ----

TEST(JsonRpcIds, StringOneAndIntegerOneAreDifferent) {
  auto s = Parse(R"({"jsonrpc":"2.0","id":"1","method":"a"})");
  auto n = Parse(R"({"jsonrpc":"2.0","id":1,"method":"a"})");
  const Id& sid = std::get<Request>(OnlyMessage(s)).id;
  const Id& nid = std::get<Request>(OnlyMessage(n)).id;
  EXPECT_NE(sid, nid);
  EXPECT_TRUE(sid.is_string());
  EXPECT_TRUE(nid.is_integer());
  EXPECT_EQ(Serialize(Response{sid, json::object()}), R"({"id":"1","jsonrpc":"2.0","result":{}})");
  EXPECT_EQ(Serialize(Response{nid, json::object()}), R"({"id":1,"jsonrpc":"2.0","result":{}})");
}

TEST(JsonRpcIds, LargeAndNegativeIntegersSurviveExactly) {
  for (const char* id : {"9007199254740993", "-9007199254740993", "-1", "0", "9223372036854775807",
                         "-9223372036854775808", "18446744073709551615"}) {
    std::string text = std::string(R"({"jsonrpc":"2.0","id":)") + id + R"(,"method":"a"})";
    auto r = Parse(text);
    ASSERT_TRUE(r.ok()) << id;
    const Id& parsed = std::get<Request>(OnlyMessage(r)).id;
    EXPECT_EQ(parsed.ToString(), id);
    std::string reply = Serialize(Response{parsed, json::object()});
    EXPECT_NE(reply.find(std::string("\"id\":") + id + ","), std::string::npos) << reply;
  }
}

TEST(JsonRpcIds, UnsignedAndSignedFormsOfOneValueAreEqual) {
  EXPECT_EQ(Id::Unsigned(5), Id(5));
  EXPECT_EQ(Id::Unsigned(5).Hash(), Id(5).Hash());
  EXPECT_NE(Id::Unsigned(18446744073709551615ull), Id(-1));
}

TEST(JsonRpcIds, ErrorForInvalidRequestEchoesAValidId) {
  auto r = Parse(R"({"jsonrpc":"2.0","id":"k","method":5})");
  const auto& e = std::get<ErrorResponse>(r.entries.at(0));
  ASSERT_TRUE(e.id.has_value());
  EXPECT_EQ(*e.id, Id("k"));
}

// ---- malformed input: every shape maps to the right code, never throws ----

struct BadCase {
  const char* name;
  std::string text;
  int code;
  std::optional<json> id;  // expected id of the error; nullopt means null
  const char* says;        // a fragment of the error message
  bool allow_batch = false;
};

std::string Nested(int depth) {
  // A request whose params nest `depth` arrays deep (the whole message is depth+1 deep).
  return R"({"jsonrpc":"2.0","method":"a","params":)" + std::string(depth, '[') +
         std::string(depth, ']') + "}";
}

std::vector<BadCase> BadCases() {
  using std::string;
  return {
      {"Empty", "", kParseError, {}, "Parse error"},
      {"OnlyWhitespace", "  \n ", kParseError, {}, "Parse error"},
      {"TruncatedObject",
       R"({"jsonrpc":"2.0","id":1,"method":"ping")",
       kParseError,
       {},
       "Parse error"},
      {"TruncatedString",
       R"({"jsonrpc":"2.0","id":1,"method":"pi)",
       kParseError,
       {},
       "Parse error"},
      {"TruncatedAfterColon", R"({"jsonrpc":)", kParseError, {}, "Parse error"},
      {"TrailingGarbage", R"({"jsonrpc":"2.0","method":"a"} x)", kParseError, {}, "Parse error"},
      {"TwoObjects",
       R"({"jsonrpc":"2.0","method":"a"}{"jsonrpc":"2.0","method":"b"})",
       kParseError,
       {},
       "Parse error"},
      {"SingleQuotes", R"({'jsonrpc':'2.0','method':'a'})", kParseError, {}, "Parse error"},
      {"TrailingComma", R"({"jsonrpc":"2.0","method":"a",})", kParseError, {}, "Parse error"},
      {"Comment", R"(/* hi */ {"jsonrpc":"2.0","method":"a"})", kParseError, {}, "Parse error"},
      {"NaNLiteral", R"({"jsonrpc":"2.0","id":NaN,"method":"a"})", kParseError, {}, "Parse error"},
      {"UnquotedKey", R"({jsonrpc:"2.0","method":"a"})", kParseError, {}, "Parse error"},
      {"InvalidUtf8Byte",
       "{\"jsonrpc\":\"2.0\",\"method\":\"a\xff\"}",
       kParseError,
       {},
       "Parse error"},
      {"OverlongUtf8",
       "{\"jsonrpc\":\"2.0\",\"method\":\"\xc0\xaf\"}",
       kParseError,
       {},
       "Parse error"},
      {"TruncatedUtf8",
       "{\"jsonrpc\":\"2.0\",\"method\":\"\xe2\x82\"}",
       kParseError,
       {},
       "Parse error"},
      {"LoneSurrogateEscape",
       R"({"jsonrpc":"2.0","method":"\ud800"})",
       kParseError,
       {},
       "Parse error"},
      {"EmbeddedNul",
       string("{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\0", 31),
       kParseError,
       {},
       "Parse error"},
      {"NulAfterValidMessage",
       string("{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\0{\"x\":1}", 38),
       kParseError,
       {},
       "NUL byte"},
      {"RawControlCharInString",
       "{\"jsonrpc\":\"2.0\",\"method\":\"a\nb\"}",
       kParseError,
       {},
       "Parse error"},
      {"TopLevelString", R"("hello")", kInvalidRequest, {}, "must be a JSON object"},
      {"TopLevelNumber", "42", kInvalidRequest, {}, "must be a JSON object"},
      {"TopLevelNull", "null", kInvalidRequest, {}, "must be a JSON object"},
      {"MissingJsonrpc", R"({"id":1,"method":"a"})", kInvalidRequest, json(1),
       "jsonrpc member missing"},
      {"VersionOnePointZero", R"({"jsonrpc":"1.0","id":1,"method":"a"})", kInvalidRequest, json(1),
       "\"2.0\""},
      {"VersionAsNumber", R"({"jsonrpc":2.0,"id":1,"method":"a"})", kInvalidRequest, json(1),
       "\"2.0\""},
      {"VersionTwoPointZeroZero", R"({"jsonrpc":"2.00","id":"q","method":"a"})", kInvalidRequest,
       json("q"), "\"2.0\""},
      {"IdObject",
       R"({"jsonrpc":"2.0","id":{"a":1},"method":"a"})",
       kInvalidRequest,
       {},
       "got object"},
      {"IdArray", R"({"jsonrpc":"2.0","id":[1],"method":"a"})", kInvalidRequest, {}, "got array"},
      {"IdBool", R"({"jsonrpc":"2.0","id":true,"method":"a"})", kInvalidRequest, {}, "got boolean"},
      {"IdFloat", R"({"jsonrpc":"2.0","id":1.5,"method":"a"})", kInvalidRequest, {}, "fraction"},
      {"IdIntegralFloat",
       R"({"jsonrpc":"2.0","id":1.0,"method":"a"})",
       kInvalidRequest,
       {},
       "fraction"},
      {"IdExponent", R"({"jsonrpc":"2.0","id":1e3,"method":"a"})", kInvalidRequest, {}, "exponent"},
      {"IdBeyond64Bits",
       R"({"jsonrpc":"2.0","id":18446744073709551616,"method":"a"})",
       kInvalidRequest,
       {},
       "64 bits"},
      {"IdNullInRequest",
       R"({"jsonrpc":"2.0","id":null,"method":"a"})",
       kInvalidRequest,
       {},
       "must not be null"},
      {"MethodNumber", R"({"jsonrpc":"2.0","id":1,"method":5})", kInvalidRequest, json(1),
       "method must be a string"},
      {"MethodNull", R"({"jsonrpc":"2.0","id":1,"method":null})", kInvalidRequest, json(1),
       "method must be a string"},
      {"MethodEmpty", R"({"jsonrpc":"2.0","id":1,"method":""})", kInvalidRequest, json(1),
       "must not be empty"},
      {"ParamsString", R"({"jsonrpc":"2.0","id":1,"method":"a","params":"x"})", kInvalidRequest,
       json(1), "params must be"},
      {"ParamsNumber", R"({"jsonrpc":"2.0","id":1,"method":"a","params":3})", kInvalidRequest,
       json(1), "params must be"},
      {"ParamsNull",
       R"({"jsonrpc":"2.0","method":"a","params":null})",
       kInvalidRequest,
       {},
       "params must be"},
      {"ParamsBool", R"({"jsonrpc":"2.0","id":2,"method":"a","params":false})", kInvalidRequest,
       json(2), "params must be"},
      {"ResultAndError", R"({"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}})",
       kInvalidRequest, json(1), "both result and error"},
      {"MethodAndResult", R"({"jsonrpc":"2.0","id":1,"method":"a","result":{}})", kInvalidRequest,
       json(1), "both method and"},
      {"NoMethodNoResultNoError", R"({"jsonrpc":"2.0","id":1})", kInvalidRequest, json(1),
       "needs a method"},
      {"EmptyObject", "{}", kInvalidRequest, {}, "jsonrpc member missing"},
      {"ResultWithoutId", R"({"jsonrpc":"2.0","result":{}})", kInvalidRequest, {}, "needs an id"},
      {"ResultWithNullId",
       R"({"jsonrpc":"2.0","id":null,"result":{}})",
       kInvalidRequest,
       {},
       "null id"},
      {"ErrorWithoutId",
       R"({"jsonrpc":"2.0","error":{"code":1,"message":"m"}})",
       kInvalidRequest,
       {},
       "needs an id"},
      {"ErrorNotObject", R"({"jsonrpc":"2.0","id":1,"error":"boom"})", kInvalidRequest, json(1),
       "error must be an object"},
      {"ErrorCodeString", R"({"jsonrpc":"2.0","id":1,"error":{"code":"1","message":"m"}})",
       kInvalidRequest, json(1), "error.code"},
      {"ErrorCodeFloat", R"({"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"m"}})",
       kInvalidRequest, json(1), "error.code"},
      {"ErrorCodeTooBig", R"({"jsonrpc":"2.0","id":1,"error":{"code":4294967296,"message":"m"}})",
       kInvalidRequest, json(1), "32 bits"},
      {"ErrorMessageMissing", R"({"jsonrpc":"2.0","id":1,"error":{"code":1}})", kInvalidRequest,
       json(1), "error.message"},
      {"ErrorIdObject",
       R"({"jsonrpc":"2.0","id":{},"error":{"code":1,"message":"m"}})",
       kInvalidRequest,
       {},
       "got object"},
      {"DuplicateMethod", R"({"jsonrpc":"2.0","id":1,"method":"a","method":"b"})", kInvalidRequest,
       json(1), "\"method\" appears more than once"},
      {"DuplicateId",
       R"({"jsonrpc":"2.0","id":1,"id":2,"method":"a"})",
       kInvalidRequest,
       {},
       "\"id\" appears more than once"},
      {"DuplicateKeyInsideParams",
       R"({"jsonrpc":"2.0","id":1,"method":"a","params":{"p":1,"p":2}})", kInvalidRequest, json(1),
       "\"p\" appears"},
      {"BatchWhenNotAllowed",
       R"([{"jsonrpc":"2.0","method":"a"}])",
       kInvalidRequest,
       {},
       "batches are not allowed"},
      {"EmptyBatch", "[]", kInvalidRequest, {}, "empty batch", true},
      {"NestingBeyondLimit", Nested(64), kInvalidRequest, {}, "nesting deeper than 64"},
      {"HugeNesting",
       std::string(100000, '['),
       kInvalidRequest,
       {},
       "nesting deeper than 64",
       true},
      {"HugeObjectNesting",
       [] {
         std::string s;
         for (int i = 0; i < 50000; ++i) s += "{\"a\":";
         return s;
       }(),
       kInvalidRequest,
       {},
       "nesting deeper"},
      {"OversizeText",
       std::string(4 * 1024 * 1024 + 1, ' '),
       kInvalidRequest,
       {},
       "more than the limit"},
  };
}

class Malformed : public ::testing::TestWithParam<BadCase> {};

TEST_P(Malformed, MapsToTheRightErrorWithoutThrowing) {
  const BadCase& c = GetParam();
  ParseOptions options;
  options.allow_batch = c.allow_batch;
  ParseResult r;
  ASSERT_NO_THROW(r = Parse(c.text, options));
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.is_batch);
  ASSERT_EQ(r.entries.size(), 1u);
  ASSERT_TRUE(std::holds_alternative<ErrorResponse>(r.entries[0]));
  const auto& e = std::get<ErrorResponse>(r.entries[0]);
  EXPECT_EQ(e.code, c.code) << e.message;
  EXPECT_NE(e.message.find(c.says), std::string::npos) << e.message;
  if (c.id) {
    ASSERT_TRUE(e.id.has_value()) << e.message;
    EXPECT_EQ(e.id->ToJson(), *c.id);
  } else {
    EXPECT_FALSE(e.id.has_value()) << e.message;
  }
  // The error itself serialises to a valid reply.
  json reply;
  ASSERT_NO_THROW(reply = json::parse(Serialize(e)));
  EXPECT_EQ(reply["jsonrpc"], "2.0");
}

INSTANTIATE_TEST_SUITE_P(Table, Malformed, ::testing::ValuesIn(BadCases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(JsonRpcLimits, NestingAtTheLimitIsAccepted) {
  EXPECT_TRUE(Parse(Nested(63)).ok());  // 64 levels including the message object
}

TEST(JsonRpcLimits, SizeAndDepthComeFromOptions) {
  ParseOptions small;
  small.max_bytes = 10;
  auto r = Parse(R"({"jsonrpc":"2.0","method":"a"})", small);
  EXPECT_EQ(std::get<ErrorResponse>(r.entries[0]).code, kInvalidRequest);
  ParseOptions shallow;
  shallow.max_depth = 2;
  EXPECT_TRUE(Parse(R"({"jsonrpc":"2.0","method":"a","params":[]})", shallow).ok());
  EXPECT_FALSE(Parse(R"({"jsonrpc":"2.0","method":"a","params":[[]]})", shallow).ok());
}

// ---- batches ----

TEST(JsonRpcBatch, MixedValidAndInvalidEntriesGetPerEntryResults) {
  const char* text = R"([
    {"jsonrpc":"2.0","id":1,"method":"ping"},
    {"jsonrpc":"1.0","id":2,"method":"ping"},
    {"jsonrpc":"2.0","method":"notifications/initialized"},
    5,
    {"jsonrpc":"2.0","id":"r","result":{}},
    {"jsonrpc":"2.0","id":3,"method":"a","method":"b"},
    {"jsonrpc":"2.0","id":{},"method":"a"}
  ])";
  auto r = Parse(text, Batches());
  ASSERT_TRUE(r.is_batch);
  ASSERT_EQ(r.entries.size(), 7u);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(std::holds_alternative<Request>(std::get<Message>(r.entries[0])));
  const auto& bad_version = std::get<ErrorResponse>(r.entries[1]);
  EXPECT_EQ(bad_version.code, kInvalidRequest);
  EXPECT_EQ(*bad_version.id, Id(2));
  EXPECT_TRUE(std::holds_alternative<Notification>(std::get<Message>(r.entries[2])));
  EXPECT_EQ(std::get<ErrorResponse>(r.entries[3]).code, kInvalidRequest);
  EXPECT_TRUE(std::holds_alternative<Response>(std::get<Message>(r.entries[4])));
  const auto& dup = std::get<ErrorResponse>(r.entries[5]);
  EXPECT_NE(dup.message.find("\"method\" appears"), std::string::npos);
  EXPECT_EQ(*dup.id, Id(3));
  EXPECT_FALSE(std::get<ErrorResponse>(r.entries[6]).id.has_value());
}

TEST(JsonRpcBatch, AllValidBatchIsOk) {
  auto r =
      Parse(R"([{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"}])", Batches());
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.is_batch);
  EXPECT_EQ(r.entries.size(), 2u);
}

TEST(JsonRpcBatch, SingleElementBatchIsStillABatch) {
  auto r = Parse(R"([{"jsonrpc":"2.0","id":1,"method":"a"}])", Batches());
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.is_batch);
}

TEST(JsonRpcBatch, NestedBatchEntryIsInvalid) {
  auto r = Parse(R"([[{"jsonrpc":"2.0","method":"a"}]])", Batches());
  ASSERT_TRUE(r.is_batch);
  EXPECT_EQ(std::get<ErrorResponse>(r.entries[0]).code, kInvalidRequest);
}

TEST(JsonRpcBatch, InvalidJsonInsideBatchIsOneParseError) {
  auto r = Parse(R"([{"jsonrpc":"2.0","method":"a"},{"jsonrpc")", Batches());
  EXPECT_FALSE(r.is_batch);
  ASSERT_EQ(r.entries.size(), 1u);
  EXPECT_EQ(std::get<ErrorResponse>(r.entries[0]).code, kParseError);
}

TEST(JsonRpcBatch, SerializeBatchIsAnArray) {
  std::vector<Message> replies = {Response{Id(1), json::object()},
                                  ErrorResponse{std::nullopt, kInvalidRequest, "x", std::nullopt}};
  EXPECT_EQ(
      SerializeBatch(replies),
      R"([{"id":1,"jsonrpc":"2.0","result":{}},{"error":{"code":-32600,"message":"x"},"id":null,"jsonrpc":"2.0"}])");
}

// ---- serialisation ----

TEST(JsonRpcSerialize, NotificationOmitsIdAndAbsentParams) {
  EXPECT_EQ(Serialize(Notification{"notifications/initialized", std::nullopt}),
            R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
}

TEST(JsonRpcSerialize, InvalidUtf8InAStringIsReplacedNotThrown) {
  std::string out;
  ASSERT_NO_THROW(
      out = Serialize(ErrorResponse{Id(1), kInternalError, "bad \xff byte", std::nullopt}));
  EXPECT_TRUE(Parse(out).ok()) << out;
}

TEST(JsonRpcSerialize, CodesAreTheStandardValues) {
  EXPECT_EQ(kParseError, -32700);
  EXPECT_EQ(kInvalidRequest, -32600);
  EXPECT_EQ(kMethodNotFound, -32601);
  EXPECT_EQ(kInvalidParams, -32602);
  EXPECT_EQ(kInternalError, -32603);
  EXPECT_EQ(kResourceNotFound, -32002);
}

}  // namespace
}  // namespace warden::mcp
