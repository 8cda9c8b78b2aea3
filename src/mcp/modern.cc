#include "mcp/modern.h"

#include "common/base64.h"
#include "common/http_token.h"
#include "mcp/protocol_version.h"

namespace warden::mcp {

using nlohmann::json;

namespace {

const json* MetaOf(const Request& request) {
  if (!request.params || !request.params->is_object()) return nullptr;
  auto meta = request.params->find("_meta");
  if (meta == request.params->end() || !meta->is_object()) return nullptr;
  return &*meta;
}

// Printable and short, for an error message that quotes a value the client sent.
std::string Quote(std::string_view value) {
  std::string out = "'";
  for (char c : value.substr(0, 80)) {
    unsigned char u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20 || u == 0x7f || u >= 0x80 ? '?' : c);
  }
  if (value.size() > 80) out += "...";
  return out + "'";
}

}  // namespace

namespace {

// ReadRequestMeta and TakeRequestMeta: `take` moves the capabilities and client info out of
// `meta` (which must then be mutable) instead of copying them.
std::optional<std::string> ReadMeta(const Request& request, json* meta, RequestMeta& out,
                                    bool take) {
  out = RequestMeta{};
  if (request.params && request.params->contains("_meta") &&
      !(*request.params)["_meta"].is_object())
    return "params._meta must be an object";
  if (meta == nullptr) return std::nullopt;
  if (auto it = meta->find(kMetaProtocolVersion); it != meta->end()) {
    if (!it->is_string()) return std::string("_meta.") + kMetaProtocolVersion + " must be a string";
    out.protocol_version = it->get<std::string>();
  }
  if (auto it = meta->find(kMetaClientCapabilities); it != meta->end()) {
    if (!it->is_object())
      return std::string("_meta.") + kMetaClientCapabilities + " must be an object";
    if (take) out.client_capabilities = std::move(*it);
    else out.client_capabilities = *it;
  }
  if (auto it = meta->find(kMetaClientInfo); it != meta->end()) {
    if (!it->is_object()) return std::string("_meta.") + kMetaClientInfo + " must be an object";
    if (take) out.client_info = std::move(*it);
    else out.client_info = *it;
  }
  if (auto it = meta->find(kMetaLogLevel); it != meta->end()) {
    static constexpr std::string_view kLevels[] = {"debug",    "info",  "notice", "warning",
                                                   "error",    "critical", "alert", "emergency"};
    bool known = false;
    if (it->is_string())
      for (std::string_view level : kLevels) known = known || it->get_ref<const std::string&>() == level;
    if (!known)
      return std::string("_meta.") + kMetaLogLevel +
             " must be one of debug, info, notice, warning, error, critical, alert, emergency";
    out.log_level = it->get<std::string>();
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> ReadRequestMeta(const Request& request, RequestMeta& out) {
  return ReadMeta(request, const_cast<json*>(MetaOf(request)), out, /*take=*/false);
}

std::optional<std::string> TakeRequestMeta(Request& request, RequestMeta& out) {
  json* meta = const_cast<json*>(MetaOf(request));
  if (auto bad = ReadMeta(request, meta, out, /*take=*/true)) return bad;
  if (meta == nullptr) return std::nullopt;
  for (const char* key : {kMetaProtocolVersion, kMetaClientCapabilities, kMetaClientInfo,
                          kMetaLogLevel})
    meta->erase(key);
  if (meta->empty()) request.params->erase("_meta");
  return std::nullopt;
}

std::string MetaProtocolVersion(const Request& request) {
  const json* meta = MetaOf(request);
  if (meta == nullptr) return "";
  auto it = meta->find(kMetaProtocolVersion);
  return it != meta->end() && it->is_string() ? it->get<std::string>() : "";
}

bool IsModernVersion(std::string_view version) { return version == kModernVersion; }

ErrorResponse UnsupportedVersion(const std::optional<Id>& id, const std::string& requested) {
  json supported = json::array({std::string(kModernVersion)});
  for (std::string_view v : kSupportedVersions) supported.push_back(std::string(v));
  ErrorResponse error = MakeError(id, kUnsupportedProtocolVersion,
                                  "Unsupported protocol version: " + Quote(requested) +
                                      "; this server supports " + supported.dump());
  error.data = json{{"supported", std::move(supported)}, {"requested", requested}};
  return error;
}

std::optional<std::string> DecodeHeaderValue(std::string_view value) {
  static constexpr std::string_view kPrefix = "=?base64?", kSuffix = "?=";
  if (value.size() < kPrefix.size() + kSuffix.size() || value.substr(0, kPrefix.size()) != kPrefix ||
      value.substr(value.size() - kSuffix.size()) != kSuffix)
    return std::string(value);
  value = value.substr(kPrefix.size(), value.size() - kPrefix.size() - kSuffix.size());
  return Base64Decode(value, kBase64Alphabet, /*padded=*/true);
}

std::string EncodeHeaderValue(std::string_view value) {
  static constexpr std::string_view kPrefix = "=?base64?", kSuffix = "?=";
  bool plain = value.empty() || (value.front() != ' ' && value.back() != ' ');
  for (char c : value) plain = plain && c >= 0x20 && c <= 0x7e;
  const bool sentinel = value.size() >= kPrefix.size() + kSuffix.size() &&
                        value.substr(0, kPrefix.size()) == kPrefix &&
                        value.substr(value.size() - kSuffix.size()) == kSuffix;
  if (plain && !sentinel) return std::string(value);
  std::string encoded = Base64NoPad(value, kBase64Alphabet);
  while (encoded.size() % 4 != 0) encoded.push_back('=');
  return std::string(kPrefix) + encoded + std::string(kSuffix);
}

bool IsModernErrorCode(int code) {
  return code == kHeaderMismatch || code == kMissingRequiredClientCapability ||
         code == kUnsupportedProtocolVersion;
}

namespace {

std::string LowerAscii(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string PathText(const std::vector<std::string>& path) {
  std::string out;
  for (const auto& key : path) out += (out.empty() ? "" : ".") + key;
  return out.empty() ? "(the schema root)" : out;
}

// Walks a schema. `reachable`: every step so far was a `properties` key. Annotations found where
// they may be go to `out`; one anywhere else is an error.
std::optional<std::string> WalkSchema(const json& schema, std::vector<std::string>& path,
                                      bool reachable, int depth, std::vector<ParamHeader>& out) {
  if (depth > 32) return "its inputSchema nests deeper than 32 levels";
  if (schema.is_array()) {
    for (const json& item : schema)
      if (auto e = WalkSchema(item, path, false, depth + 1, out)) return e;
    return std::nullopt;
  }
  if (!schema.is_object()) return std::nullopt;
  if (auto it = schema.find("x-mcp-header"); it != schema.end()) {
    if (!reachable || path.empty())
      return "x-mcp-header at " + PathText(path) +
             " is not reached through `properties` keys alone";
    if (!it->is_string() || !IsHttpToken(it->get_ref<const std::string&>()))
      return "x-mcp-header at " + PathText(path) + " is not an HTTP token";
    auto type = schema.find("type");
    const bool primitive = type != schema.end() && type->is_string() &&
                           (*type == "string" || *type == "integer" || *type == "boolean");
    if (!primitive)
      return "x-mcp-header at " + PathText(path) +
             " is on a parameter that is not of type string, integer or boolean";
    out.push_back({path, it->get<std::string>()});
  }
  for (auto it = schema.begin(); it != schema.end(); ++it) {
    // Keywords whose values are data, not schemas: nothing in them is an annotation.
    static constexpr std::string_view kData[] = {"x-mcp-header", "default", "examples", "const",
                                                 "enum", "description", "title"};
    bool data = false;
    for (std::string_view k : kData) data = data || it.key() == k;
    if (data) continue;
    if (it.key() == "properties" && it->is_object()) {
      for (auto prop = it->begin(); prop != it->end(); ++prop) {
        path.push_back(prop.key());
        auto e = WalkSchema(*prop, path, reachable, depth + 1, out);
        path.pop_back();
        if (e) return e;
      }
      continue;
    }
    // Anything else (items, oneOf, $ref targets in $defs, if/then/else, ...) may hold an
    // annotation only to be refused.
    path.push_back(it.key());
    auto e = WalkSchema(*it, path, false, depth + 1, out);
    path.pop_back();
    if (e) return e;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> ReadParamHeaders(const json& tool, std::vector<ParamHeader>& out) {
  out.clear();
  const std::string name =
      tool.is_object() && tool.contains("name") && tool["name"].is_string()
          ? tool["name"].get<std::string>()
          : "?";
  if (!tool.is_object()) return std::string("a tool definition is not an object");
  auto schema = tool.find("inputSchema");
  if (schema == tool.end()) return std::nullopt;
  std::vector<std::string> path;
  if (auto e = WalkSchema(*schema, path, true, 0, out)) {
    out.clear();
    return "tool " + Quote(name) + ": " + *e;
  }
  std::vector<std::string> seen;
  for (const ParamHeader& h : out) {
    std::string lower = LowerAscii(h.header);
    for (const std::string& s : seen)
      if (s == lower) {
        out.clear();
        return "tool " + Quote(name) + ": x-mcp-header " + Quote(h.header) +
               " is given twice (names are compared without case)";
      }
    seen.push_back(std::move(lower));
  }
  return std::nullopt;
}

std::optional<std::string> ParamHeaderValue(const json& arguments,
                                            const std::vector<std::string>& path) {
  const json* at = &arguments;
  for (const std::string& key : path) {
    if (!at->is_object()) return std::nullopt;
    auto it = at->find(key);
    if (it == at->end()) return std::nullopt;
    at = &*it;
  }
  constexpr int64_t kSafe = (int64_t{1} << 53) - 1;
  if (at->is_string()) return EncodeHeaderValue(at->get_ref<const std::string&>());
  if (at->is_boolean()) return std::string(at->get<bool>() ? "true" : "false");
  if (at->is_number_unsigned()) {
    const uint64_t v = at->get<uint64_t>();
    if (v > static_cast<uint64_t>(kSafe)) return std::nullopt;
    return std::to_string(v);
  }
  if (at->is_number_integer()) {
    const int64_t v = at->get<int64_t>();
    if (v > kSafe || v < -kSafe) return std::nullopt;
    return std::to_string(v);
  }
  return std::nullopt;
}

std::optional<std::string> NameOf(const Request& request) {
  const char* field = request.method == "tools/call" || request.method == "prompts/get" ? "name"
                      : request.method == "resources/read"                              ? "uri"
                                                                                        : nullptr;
  if (field == nullptr || !request.params || !request.params->is_object()) return std::nullopt;
  auto it = request.params->find(field);
  if (it == request.params->end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

std::string CheckMirrorHeaders(const Request& request, const MirrorHeaders& headers,
                               std::optional<std::string_view> body_version) {
  const std::string version =
      body_version ? std::string(*body_version) : MetaProtocolVersion(request);
  if (headers.protocol_version && *headers.protocol_version != version)
    return "Header mismatch: MCP-Protocol-Version header value " +
           Quote(*headers.protocol_version) + " does not match body value " + Quote(version);
  if (!headers.method) return "Header mismatch: the Mcp-Method header is required";
  if (*headers.method != request.method)
    return "Header mismatch: Mcp-Method header value " + Quote(*headers.method) +
           " does not match body value " + Quote(request.method);
  const std::optional<std::string> body_name = NameOf(request);
  if (!headers.name) {
    if (body_name) return "Header mismatch: the Mcp-Name header is required for " + request.method;
    return "";
  }
  const std::optional<std::string> name = DecodeHeaderValue(*headers.name);
  if (!name) return "Header mismatch: the Mcp-Name header is not valid =?base64?...?= text";
  if (!body_name)
    return "Header mismatch: Mcp-Name header sent, but " + request.method + " has no name in its body";
  if (*name != *body_name)
    return "Header mismatch: Mcp-Name header value " + Quote(*name) +
           " does not match body value " + Quote(*body_name);
  return "";
}

bool RemovedInModern(std::string_view method) {
  return method == "initialize" || method == "ping" || method == "logging/setLevel" ||
         method == "resources/subscribe" || method == "resources/unsubscribe";
}

std::optional<std::string> ReadInputRequired(const json& result, InputRequired& out) {
  out = InputRequired{};
  if (!result.is_object()) return "input_required that is not an object";
  auto requests = result.find("inputRequests");
  auto state = result.find("requestState");
  if (requests == result.end() && state == result.end())
    return "input_required without inputRequests or requestState";
  if (state != result.end()) {
    if (!state->is_string()) return "input_required with a requestState that is not a string";
    out.request_state = state->get<std::string>();
  }
  if (requests == result.end()) return std::nullopt;
  if (!requests->is_object()) return "input_required with inputRequests that is not an object";
  if (requests->size() > kMaxInputRequests)
    return "input_required with more than " + std::to_string(kMaxInputRequests) + " inputRequests";
  for (auto it = requests->begin(); it != requests->end(); ++it) {
    const json& q = *it;
    auto method = q.is_object() ? q.find("method") : q.end();
    const bool known = q.is_object() && method != q.end() && method->is_string() &&
                       (*method == "elicitation/create" || *method == "sampling/createMessage" ||
                        *method == "roots/list");
    if (!known)
      return "inputRequests." + it.key() +
             " is not an elicitation/create, sampling/createMessage or roots/list request";
    std::optional<json> params;
    if (auto p = q.find("params"); p != q.end()) {
      if (!p->is_object()) return "inputRequests." + it.key() + ".params is not an object";
      params = *p;
    }
    out.questions.emplace_back(it.key(), Request{Id(it.key()), method->get<std::string>(), std::move(params)});
  }
  return std::nullopt;
}

void MarkComplete(json& result) {
  if (result.is_object() && !result.contains("resultType")) result["resultType"] = "complete";
}

}  // namespace warden::mcp
