// MCP 2026-07-28's request envelope: _meta read with type errors named, the mirrored headers
// checked against the body (with the =?base64?...?= form), the removed methods, resultType.
#include "mcp/modern.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "common/base64.h"

namespace warden::mcp {
namespace {

using nlohmann::json;

Request Req(std::string method, json params) {
  return Request{Id(int64_t{1}), std::move(method), std::move(params)};
}

json Meta(json extra = json::object()) {
  json meta = {{kMetaProtocolVersion, "2026-07-28"}};
  meta.update(extra);
  return meta;
}

TEST(Modern, ReadsTheMetaOfARequest) {
  RequestMeta meta;
  auto bad = ReadRequestMeta(
      Req("tools/list", {{"_meta", Meta({{kMetaClientCapabilities, {{"elicitation", json::object()}}},
                                          {kMetaClientInfo, {{"name", "c"}}},
                                          {kMetaLogLevel, "warning"}})}}),
      meta);
  ASSERT_FALSE(bad) << *bad;
  EXPECT_EQ(meta.protocol_version, "2026-07-28");
  EXPECT_TRUE(meta.client_capabilities.contains("elicitation"));
  EXPECT_EQ(meta.client_info["name"], "c");
  EXPECT_EQ(meta.log_level, "warning");
}

TEST(Modern, NamesTheFieldOfTheWrongType) {
  RequestMeta meta;
  auto bad = ReadRequestMeta(Req("x", {{"_meta", Meta({{kMetaClientCapabilities, "all"}})}}), meta);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("clientCapabilities"), std::string::npos) << *bad;
  bad = ReadRequestMeta(Req("x", {{"_meta", {{kMetaProtocolVersion, 20260728}}}}), meta);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("protocolVersion"), std::string::npos) << *bad;
  bad = ReadRequestMeta(Req("x", {{"_meta", Meta({{kMetaLogLevel, "loud"}})}}), meta);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("logLevel"), std::string::npos) << *bad;
  bad = ReadRequestMeta(Req("x", {{"_meta", "v"}}), meta);
  ASSERT_TRUE(bad);
  // No params, or params without _meta: nothing to read, nothing wrong.
  EXPECT_FALSE(ReadRequestMeta(Request{Id(int64_t{1}), "x", std::nullopt}, meta));
  EXPECT_TRUE(meta.protocol_version.empty());
}

TEST(Modern, TheVersionDecidesTheEra) {
  EXPECT_EQ(MetaProtocolVersion(Req("tools/list", {{"_meta", Meta()}})), "2026-07-28");
  EXPECT_EQ(MetaProtocolVersion(Req("tools/list", json::object())), "");
  EXPECT_TRUE(IsModernVersion("2026-07-28"));
  EXPECT_FALSE(IsModernVersion("2025-11-25"));
  EXPECT_FALSE(IsModernVersion("2026-07-28 "));
  ErrorResponse e = UnsupportedVersion(Id(int64_t{7}), "2099-01-01");
  EXPECT_EQ(e.code, kUnsupportedProtocolVersion);
  ASSERT_TRUE(e.data);
  EXPECT_EQ((*e.data)["requested"], "2099-01-01");
  EXPECT_EQ((*e.data)["supported"][0], "2026-07-28");
  EXPECT_EQ((*e.data)["supported"][1], "2025-11-25");
}

TEST(Modern, HeaderValuesDecodeTheBase64Form) {
  EXPECT_EQ(DecodeHeaderValue("us-west1"), "us-west1");
  EXPECT_EQ(DecodeHeaderValue("=?base64?SGVsbG8sIOS4lueVjA==?="), "Hello, \xe4\xb8\x96\xe7\x95\x8c");
  EXPECT_EQ(DecodeHeaderValue("=?base64?IHBhZGRlZCA=?="), " padded ");
  EXPECT_EQ(DecodeHeaderValue("=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="), "=?base64?literal?=");
  // The sentinel with text that is not base64: refused, never taken literally.
  EXPECT_FALSE(DecodeHeaderValue("=?base64?not base64!?="));
  EXPECT_FALSE(DecodeHeaderValue("=?base64?SGVsbG8?="));  // unpadded
  // Markers are case-sensitive: another spelling is a plain value.
  EXPECT_EQ(DecodeHeaderValue("=?BASE64?SGk=?="), "=?BASE64?SGk=?=");
}

TEST(Modern, Base64DecodeIsStrict) {
  EXPECT_EQ(Base64Decode("SGk=", kBase64Alphabet, true), "Hi");
  EXPECT_EQ(Base64Decode("SGk", kBase64UrlAlphabet, false), "Hi");
  EXPECT_FALSE(Base64Decode("SGk", kBase64Alphabet, true));     // padding required
  EXPECT_FALSE(Base64Decode("SGk=", kBase64UrlAlphabet, false));  // padding refused
  EXPECT_FALSE(Base64Decode("SGl=", kBase64Alphabet, true));    // non-zero unused bits
  EXPECT_FALSE(Base64Decode("S", kBase64UrlAlphabet, false));
  EXPECT_FALSE(Base64Decode("SG k", kBase64Alphabet, false));
  EXPECT_FALSE(Base64Decode("+/==", kBase64UrlAlphabet, true));  // other alphabet
  EXPECT_EQ(Base64Decode("", kBase64UrlAlphabet, false), "");
}

TEST(Modern, MirroredHeadersMustMatchTheBody) {
  const Request call = Req("tools/call", {{"name", "get_weather"}, {"_meta", Meta()}});
  EXPECT_EQ(CheckMirrorHeaders(call, {"2026-07-28", "tools/call", "get_weather"}), "");
  EXPECT_EQ(CheckMirrorHeaders(call, {std::nullopt, "tools/call", "=?base64?Z2V0X3dlYXRoZXI=?="}), "");
  // Each way of disagreeing names what disagreed.
  EXPECT_NE(CheckMirrorHeaders(call, {"2026-07-28", "tools/call", "other"}).find("Mcp-Name"),
            std::string::npos);
  EXPECT_NE(CheckMirrorHeaders(call, {"2026-07-28", "tools/list", "get_weather"}).find("Mcp-Method"),
            std::string::npos);
  EXPECT_NE(CheckMirrorHeaders(call, {"2025-11-25", "tools/call", "get_weather"})
                .find("MCP-Protocol-Version"),
            std::string::npos);
  EXPECT_NE(CheckMirrorHeaders(call, {"2026-07-28", std::nullopt, "get_weather"}), "");  // required
  EXPECT_NE(CheckMirrorHeaders(call, {"2026-07-28", "tools/call", std::nullopt}), "");   // required
  EXPECT_NE(CheckMirrorHeaders(call, {"2026-07-28", "tools/call", "=?base64?!!?="}), "");
  // Case matters in values.
  EXPECT_NE(CheckMirrorHeaders(call, {"2026-07-28", "Tools/Call", "get_weather"}), "");
  const Request read = Req("resources/read", {{"uri", "file:///a b"}, {"_meta", Meta()}});
  EXPECT_EQ(CheckMirrorHeaders(read, {"2026-07-28", "resources/read", "=?base64?ZmlsZTovLy9hIGI=?="}), "");
  // A list has no name: a Mcp-Name header on it is refused.
  const Request list = Req("tools/list", {{"_meta", Meta()}});
  EXPECT_EQ(CheckMirrorHeaders(list, {"2026-07-28", "tools/list", std::nullopt}), "");
  EXPECT_NE(CheckMirrorHeaders(list, {"2026-07-28", "tools/list", "x"}), "");
}

TEST(Modern, RemovedMethodsAndResultType) {
  for (const char* m : {"ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"})
    EXPECT_TRUE(RemovedInModern(m)) << m;
  EXPECT_FALSE(RemovedInModern("tools/call"));
  EXPECT_FALSE(RemovedInModern("server/discover"));
  json r = json::object();
  MarkComplete(r);
  EXPECT_EQ(r["resultType"], "complete");
  json ir = {{"resultType", "input_required"}};
  MarkComplete(ir);
  EXPECT_EQ(ir["resultType"], "input_required");
}

// The spec's own encoding table (streamable-http, "Value Encoding"), then the round trip.
TEST(Modern, HeaderValuesEncodeWhatIsNotPlainAscii) {
  EXPECT_EQ(EncodeHeaderValue("us-west1"), "us-west1");
  EXPECT_EQ(EncodeHeaderValue("Hello, \xe4\xb8\x96\xe7\x95\x8c"), "=?base64?SGVsbG8sIOS4lueVjA==?=");
  EXPECT_EQ(EncodeHeaderValue(" padded "), "=?base64?IHBhZGRlZCA=?=");
  EXPECT_EQ(EncodeHeaderValue("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
  EXPECT_EQ(EncodeHeaderValue("=?base64?literal?="), "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=");
  EXPECT_EQ(EncodeHeaderValue(""), "");
  for (const std::string& v : std::vector<std::string>{"a\r\nInjected: 1", std::string("nul\0in", 6), "tab\there", "\x7f"}) {
    const std::string encoded = EncodeHeaderValue(v);
    EXPECT_EQ(encoded.find_first_of("\r\n\t\x7f" + std::string(1, '\0')), std::string::npos) << encoded;
    EXPECT_EQ(DecodeHeaderValue(encoded), v);
  }
}

TEST(Modern, OnlyTheNewRevisionsOwnErrorsMarkAModernServer) {
  EXPECT_TRUE(IsModernErrorCode(kUnsupportedProtocolVersion));
  EXPECT_TRUE(IsModernErrorCode(kHeaderMismatch));
  EXPECT_TRUE(IsModernErrorCode(kMissingRequiredClientCapability));
  for (int legacy : {-32601, -32602, -32600, -32000, -32603}) EXPECT_FALSE(IsModernErrorCode(legacy));
}

TEST(Modern, ParamHeadersAreReadWhereTheRevisionAllowsThem) {
  std::vector<ParamHeader> headers;
  json tool = {{"name", "sql"},
               {"inputSchema",
                {{"type", "object"},
                 {"properties",
                  {{"region", {{"type", "string"}, {"x-mcp-header", "Region"}}},
                   {"opts", {{"type", "object"},
                             {"properties", {{"dry", {{"type", "boolean"}, {"x-mcp-header", "Dry-Run"}}}}}}},
                   {"query", {{"type", "string"}, {"default", {{"x-mcp-header", "NotAnAnnotation"}}}}}}}}}};
  ASSERT_EQ(ReadParamHeaders(tool, headers), std::nullopt);
  ASSERT_EQ(headers.size(), 2u);
  std::map<std::string, std::vector<std::string>> by_header;
  for (const auto& h : headers) by_header[h.header] = h.path;
  EXPECT_EQ(by_header["Region"], (std::vector<std::string>{"region"}));
  EXPECT_EQ(by_header["Dry-Run"], (std::vector<std::string>{"opts", "dry"}));
  const json args = {{"region", "eu"}, {"opts", {{"dry", true}}}, {"query", "q"}};
  EXPECT_EQ(ParamHeaderValue(args, {"region"}), "eu");
  EXPECT_EQ(ParamHeaderValue(args, {"opts", "dry"}), "true");
  EXPECT_EQ(ParamHeaderValue(json{{"n", -7}}, {"n"}), "-7");
  EXPECT_EQ(ParamHeaderValue(json{{"n", int64_t{1} << 53}}, {"n"}), std::nullopt) << "unsafe integer";
  EXPECT_EQ(ParamHeaderValue(json{{"n", 1.5}}, {"n"}), std::nullopt);
  EXPECT_EQ(ParamHeaderValue(json::object(), {"region"}), std::nullopt) << "absent: no header";
  EXPECT_EQ(ParamHeaderValue(json{{"region", " x"}}, {"region"}), "=?base64?IHg=?=");
  EXPECT_EQ(ReadParamHeaders(json{{"name", "plain"}}, headers), std::nullopt);
  EXPECT_TRUE(headers.empty());
}

TEST(Modern, ParamHeadersThatBreakTheRulesInvalidateTheTool) {
  auto error = [](json properties) {
    std::vector<ParamHeader> headers;
    json tool = {{"name", "t"}, {"inputSchema", {{"type", "object"}, {"properties", properties}}}};
    auto e = ReadParamHeaders(tool, headers);
    EXPECT_TRUE(headers.empty());
    return e.value_or("");
  };
  EXPECT_NE(error({{"a", {{"type", "array"}, {"items", {{"type", "string"}, {"x-mcp-header", "A"}}}}}})
                .find("not reached through `properties` keys alone"),
            std::string::npos);
  EXPECT_NE(error({{"a", {{"oneOf", json::array({{{"type", "string"}, {"x-mcp-header", "A"}}})}}}})
                .find("not reached"),
            std::string::npos);
  EXPECT_NE(error({{"a", {{"type", "number"}, {"x-mcp-header", "A"}}}}).find("not of type string"),
            std::string::npos);
  EXPECT_NE(error({{"a", {{"type", "string"}, {"x-mcp-header", "Bad Name"}}}}).find("not an HTTP token"),
            std::string::npos);
  EXPECT_NE(error({{"a", {{"type", "string"}, {"x-mcp-header", ""}}}}).find("not an HTTP token"),
            std::string::npos);
  EXPECT_NE(error({{"a", {{"type", "string"}, {"x-mcp-header", "Same"}}},
                   {"b", {{"type", "string"}, {"x-mcp-header", "sAME"}}}})
                .find("given twice"),
            std::string::npos);
  std::vector<ParamHeader> headers;
  json root = {{"name", "t"}, {"inputSchema", {{"type", "string"}, {"x-mcp-header", "Root"}}}};
  EXPECT_TRUE(ReadParamHeaders(root, headers).has_value()) << "the root is no parameter";
  // Deep nesting is refused, not recursed without end.
  json deep = {{"type", "string"}};
  for (int i = 0; i < 100; ++i) deep = {{"type", "object"}, {"properties", {{"p", deep}}}};
  json deep_tool = {{"name", "t"}, {"inputSchema", deep}};
  EXPECT_TRUE(ReadParamHeaders(deep_tool, headers).has_value());
}

}  // namespace
// The envelope taken off: the four keys go into RequestMeta, the rest of _meta stays, and a
// _meta left empty goes; a wrong type is an error naming the field.
TEST(Modern, TakeRequestMetaLeavesTheCallWithoutTheEnvelope) {
  Request call{Id(int64_t{1}), "tools/call",
               json{{"name", "x"},
                    {"_meta",
                     {{"io.modelcontextprotocol/protocolVersion", "2026-07-28"},
                      {"io.modelcontextprotocol/clientCapabilities", {{"sampling", json::object()}}},
                      {"io.modelcontextprotocol/clientInfo", {{"name", "agent"}}},
                      {"io.modelcontextprotocol/logLevel", "info"},
                      {"progressToken", 7}}}}};
  RequestMeta meta;
  ASSERT_FALSE(TakeRequestMeta(call, meta).has_value());
  EXPECT_EQ(meta.protocol_version, "2026-07-28");
  EXPECT_EQ(meta.client_capabilities, json({{"sampling", json::object()}}));
  EXPECT_EQ(meta.client_info, json({{"name", "agent"}}));
  EXPECT_EQ(meta.log_level, "info");
  EXPECT_EQ((*call.params)["_meta"], json({{"progressToken", 7}}));
  Request bare{Id(int64_t{2}), "tools/list",
               json{{"_meta", {{"io.modelcontextprotocol/protocolVersion", "2026-07-28"}}}}};
  ASSERT_FALSE(TakeRequestMeta(bare, meta).has_value());
  EXPECT_FALSE(bare.params->contains("_meta"));
  Request bad{Id(int64_t{3}), "tools/list",
              json{{"_meta", {{"io.modelcontextprotocol/clientInfo", "me"}}}}};
  auto error = TakeRequestMeta(bad, meta);
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->find("clientInfo"), std::string::npos) << *error;
}

}  // namespace warden::mcp
