// JSON-RPC 2.0 messages as MCP uses them: parsing untrusted text into typed messages and
// serialising them back. Pure: no I/O, no threads, no exceptions out of any function here.
//
// Every malformed input becomes an ErrorResponse that can be sent back as is (see docs/mcp.md for
// the table of what maps to which code). Ids keep their exact JSON type and value: the string "1"
// and the integer 1 are different ids, and 2^53+1 survives the round trip.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace warden::mcp {

// Standard JSON-RPC 2.0 error codes.
inline constexpr int kParseError = -32700;      // the text is not JSON (or not UTF-8)
inline constexpr int kInvalidRequest = -32600;  // JSON, but not a valid JSON-RPC message
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;
// MCP's own codes, in the implementation-defined range -32000..-32099.
// Resource not found: resources/read of an unknown URI (spec 2025-06-18 and 2025-11-25, "Error
// Handling" under server/resources). SEP-2164 later moves this case to kInvalidParams; a client
// must accept both.
inline constexpr int kResourceNotFound = -32002;
// URL-mode elicitation required before the request can proceed (spec 2025-11-25).
inline constexpr int kUrlElicitationRequired = -32042;

// A request id: an integer or a string (MCP forbids null in requests). Integers are kept as
// int64 when they fit, else as uint64, so equal JSON numbers are equal ids. Integers beyond 64 bits
// and numbers with a fraction or exponent are rejected by Parse.
class Id {
 public:
  Id() : v_(std::int64_t{0}) {}
  Id(std::int64_t n) : v_(n) {}              // NOLINT: implicit by design
  Id(int n) : v_(std::int64_t{n}) {}         // NOLINT
  Id(std::string s) : v_(std::move(s)) {}    // NOLINT
  Id(const char* s) : v_(std::string(s)) {}  // NOLINT
  static Id Unsigned(std::uint64_t n);       // normalised: int64 when it fits

  bool is_string() const { return std::holds_alternative<std::string>(v_); }
  bool is_integer() const { return !is_string(); }
  // The integer value when the id is an integer that fits in int64.
  std::optional<std::int64_t> AsInt64() const {
    if (const auto* n = std::get_if<std::int64_t>(&v_)) return *n;
    return std::nullopt;
  }
  // The string value when the id is a string, else nullptr.
  const std::string* AsString() const { return std::get_if<std::string>(&v_); }
  // The id as JSON (a string or a number of the exact value).
  nlohmann::json ToJson() const;
  // For logs: 7, or "7" with quotes for a string.
  std::string ToString() const;

  friend bool operator==(const Id&, const Id&) = default;
  std::size_t Hash() const { return std::hash<decltype(v_)>{}(v_); }

 private:
  std::variant<std::int64_t, std::uint64_t, std::string> v_;
};

struct IdHash {
  std::size_t operator()(const Id& id) const { return id.Hash(); }
};

// A call that expects a response.
struct Request {
  Id id;
  std::string method;
  std::optional<nlohmann::json> params;  // absent, or an object or an array
};

// A one-way message: no id, no response.
struct Notification {
  std::string method;
  std::optional<nlohmann::json> params;  // absent, or an object or an array
};

// A successful reply.
struct Response {
  Id id;
  nlohmann::json result;
};

// A failed reply; id is null (nullopt) when the request's id could not be read.
struct ErrorResponse {
  std::optional<Id> id;
  int code = kInternalError;
  std::string message;
  std::optional<nlohmann::json> data;
};

using Message = std::variant<Request, Notification, Response, ErrorResponse>;

// What Parse accepts. Defaults suit the gateway's downstream side.
struct ParseOptions {
  std::size_t max_bytes = 4 * 1024 * 1024;  // longer text is refused before parsing
  std::size_t max_depth = 64;               // deeper nesting of arrays/objects is refused
  bool allow_batch = false;                 // true only for protocol 2025-03-26 (AllowsBatches)
};

// One parsed entry: a message, or the error to send back for it.
using ParsedEntry = std::variant<Message, ErrorResponse>;

struct ParseResult {
  // True when the text was a non-empty array of entries (and batches were allowed); replies then
  // go back as an array. A text-level failure (not JSON, empty batch, batch not allowed, too big,
  // too deep) is one error entry with is_batch false.
  bool is_batch = false;
  std::vector<ParsedEntry> entries;  // in input order; never empty

  // True when every entry is a message.
  bool ok() const;
};

// Parses one message or (when options.allow_batch) a batch. Never throws; malformed input yields
// error entries with kParseError or kInvalidRequest and a message that says what was wrong.
// An error entry carries the offending message's id when that id was itself valid, else null.
// Objects with a key given twice are refused (kInvalidRequest): two parsers that pick different
// copies would let a message mean one thing to policy and another to the upstream.
ParseResult Parse(std::string_view text, const ParseOptions& options = {});

// Compact JSON text for one message / for a batch (a JSON array). Invalid UTF-8 in strings is
// replaced with U+FFFD rather than throwing.
std::string Serialize(const Message& message);
std::string SerializeBatch(std::span<const Message> messages);
nlohmann::json ToJson(const Message& message);

// Convenience for building replies to a request.
ErrorResponse MakeError(std::optional<Id> id, int code, std::string message);

}  // namespace warden::mcp
