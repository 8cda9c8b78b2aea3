#include "mcp/modern.h"

#include "common/base64.h"
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

std::optional<std::string> ReadRequestMeta(const Request& request, RequestMeta& out) {
  out = RequestMeta{};
  if (request.params && request.params->contains("_meta") &&
      !(*request.params)["_meta"].is_object())
    return "params._meta must be an object";
  const json* meta = MetaOf(request);
  if (meta == nullptr) return std::nullopt;
  if (auto it = meta->find(kMetaProtocolVersion); it != meta->end()) {
    if (!it->is_string()) return std::string("_meta.") + kMetaProtocolVersion + " must be a string";
    out.protocol_version = it->get<std::string>();
  }
  if (auto it = meta->find(kMetaClientCapabilities); it != meta->end()) {
    if (!it->is_object())
      return std::string("_meta.") + kMetaClientCapabilities + " must be an object";
    out.client_capabilities = *it;
  }
  if (auto it = meta->find(kMetaClientInfo); it != meta->end()) {
    if (!it->is_object()) return std::string("_meta.") + kMetaClientInfo + " must be an object";
    out.client_info = *it;
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

std::optional<std::string> NameOf(const Request& request) {
  const char* field = request.method == "tools/call" || request.method == "prompts/get" ? "name"
                      : request.method == "resources/read"                              ? "uri"
                                                                                        : nullptr;
  if (field == nullptr || !request.params || !request.params->is_object()) return std::nullopt;
  auto it = request.params->find(field);
  if (it == request.params->end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

std::string CheckMirrorHeaders(const Request& request, const MirrorHeaders& headers) {
  const std::string version = MetaProtocolVersion(request);
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

void MarkComplete(json& result) {
  if (result.is_object() && !result.contains("resultType")) result["resultType"] = "complete";
}

}  // namespace warden::mcp
