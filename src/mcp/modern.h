// MCP 2026-07-28, the stateless revision: what one request carries instead of a session
// (params._meta), the HTTP headers that mirror its body (Mcp-Method, Mcp-Name,
// MCP-Protocol-Version) and how they are checked, the methods the revision removed, and the
// result fields it added (resultType, ttlMs, cacheScope). Pure: no I/O, no exceptions out.
// docs/mcp.md ("Two eras on one endpoint").
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mcp/jsonrpc.h"

namespace warden::mcp {

inline constexpr std::string_view kModernVersion = "2026-07-28";

// Error codes the revision defines.
inline constexpr int kHeaderMismatch = -32020;
inline constexpr int kMissingRequiredClientCapability = -32021;
inline constexpr int kUnsupportedProtocolVersion = -32022;

// The reserved _meta keys of a 2026 request.
inline constexpr char kMetaProtocolVersion[] = "io.modelcontextprotocol/protocolVersion";
inline constexpr char kMetaClientCapabilities[] = "io.modelcontextprotocol/clientCapabilities";
inline constexpr char kMetaClientInfo[] = "io.modelcontextprotocol/clientInfo";
inline constexpr char kMetaLogLevel[] = "io.modelcontextprotocol/logLevel";
inline constexpr char kMetaServerInfo[] = "io.modelcontextprotocol/serverInfo";

// What a 2026 request says about its client, read from params._meta.
struct RequestMeta {
  std::string protocol_version;  // "" when the request names none
  nlohmann::json client_capabilities = nlohmann::json::object();
  nlohmann::json client_info = nlohmann::json::object();
  std::string log_level;  // "" when the client asked for none
};

// Reads params._meta; an error naming the field when one has the wrong type (the request is then
// answered -32602). A request without params or _meta has an empty RequestMeta.
std::optional<std::string> ReadRequestMeta(const Request& request, RequestMeta& out);
// ReadRequestMeta, then takes the envelope (the four keys above) off params._meta, and _meta off
// params when nothing else is left in it: what a hop that answers the envelope passes on.
std::optional<std::string> TakeRequestMeta(Request& request, RequestMeta& out);

// The protocol version a request names in params._meta, or "" (a 2025 request, or none at all).
std::string MetaProtocolVersion(const Request& request);

// Whether warden serves `version` statelessly (2026-07-28).
bool IsModernVersion(std::string_view version);

// The -32022 error for a request naming a version warden does not speak: data lists every
// version warden supports (both eras) and the one requested.
ErrorResponse UnsupportedVersion(const std::optional<Id>& id, const std::string& requested);

// A header value as the revision encodes it: plain ASCII, or `=?base64?B64?=` (standard alphabet,
// padded) holding UTF-8. nullopt when the sentinel form does not decode.
std::optional<std::string> DecodeHeaderValue(std::string_view value);

// `value` as a header value: as it is when it is visible ASCII and spaces (0x20-0x7E) with no
// leading or trailing space and not itself of the sentinel form; else `=?base64?B64?=`.
std::string EncodeHeaderValue(std::string_view value);

// Whether an error code is one only a 2026-07-28 (modern) server sends: a client probing an
// upstream's era reads such an error as "modern, but not like this", anything else as legacy.
bool IsModernErrorCode(int code);

// One `x-mcp-header` annotation of a tool's inputSchema: the chain of `properties` keys that
// leads to the annotated parameter, and the header's name part (sent as Mcp-Param-{header}).
struct ParamHeader {
  std::vector<std::string> path;
  std::string header;
};
// The annotations of one tool definition (`tool` is one entry of tools/list). An error naming the
// tool and the rule when one breaks the revision's constraints: an empty or non-token name, two
// names equal but for case, an annotation not reached through `properties` keys alone (under
// items, oneOf, $ref, ...), or on a parameter that is not a string, integer or boolean. A client
// on HTTP must then leave the tool out of its list.
std::optional<std::string> ReadParamHeaders(const nlohmann::json& tool,
                                            std::vector<ParamHeader>& out);
// The header value for an argument at an annotated path: strings as they are, integers in
// decimal (within +-(2^53-1)), booleans as true/false, then EncodeHeaderValue. nullopt when the
// arguments hold no value there or one of another type (the header is then left out).
std::optional<std::string> ParamHeaderValue(const nlohmann::json& arguments,
                                            const std::vector<std::string>& path);

// The body value Mcp-Name mirrors: params.name of tools/call and prompts/get, params.uri of
// resources/read; nullopt for other methods (or when the body lacks it).
std::optional<std::string> NameOf(const Request& request);

// The headers of one HTTP request that mirror its body (nullopt: header absent).
struct MirrorHeaders {
  std::optional<std::string> protocol_version, method, name;
};
// "" when the headers agree with the body, else the message of the -32020 error (HTTP 400):
// MCP-Protocol-Version against _meta's version, Mcp-Method against `method` (required), Mcp-Name
// against NameOf (required when the body has one, refused when it has none).
// `body_version`: the version the body's _meta named, when the envelope was taken off already
// (TakeRequestMeta); else it is read from the request.
std::string CheckMirrorHeaders(const Request& request, const MirrorHeaders& headers,
                               std::optional<std::string_view> body_version = std::nullopt);

// Methods 2025-11-25 had that 2026-07-28 removed: answered -32601 (HTTP 404) on the new wire.
bool RemovedInModern(std::string_view method);

// What a server's input_required result asks (multi round-trip requests): its questions, each a
// request whose id is its key, in the order of their keys, and its requestState when it gave one.
inline constexpr size_t kMaxInputRequests = 16;
struct InputRequired {
  std::vector<std::pair<std::string, Request>> questions;
  std::optional<std::string> request_state;
};
// Reads `result` (an input_required result) into `out`; an error naming what is wrong: neither
// inputRequests nor requestState, inputRequests not an object or with more than
// kMaxInputRequests entries, an entry that is not an elicitation/create, sampling/createMessage
// or roots/list request (or whose params are not an object), a requestState that is not a string.
std::optional<std::string> ReadInputRequired(const nlohmann::json& result, InputRequired& out);

// Sets result.resultType to "complete" unless the result already says what it is.
void MarkComplete(nlohmann::json& result);

}  // namespace warden::mcp
