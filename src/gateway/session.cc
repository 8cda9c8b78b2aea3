#include "gateway/session.h"

#include <sys/random.h>

#include <cstdio>
#include <vector>

#include "mcp/protocol_version.h"

namespace warden::gateway {

using nlohmann::json;

namespace {

std::string RandomSessionId() {
  unsigned char bytes[16] = {};
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  std::string id;
  char hex[3];
  for (unsigned char b : bytes) {
    std::snprintf(hex, sizeof(hex), "%02x", b);
    id += hex;
  }
  return id;
}

json TextResult(const std::string& text, bool is_error) {
  return {{"content", json::array({{{"type", "text"}, {"text", text}}})}, {"isError", is_error}};
}

}  // namespace

McpSession::McpSession(Pipeline& pipeline, const BuiltinTools& tools,
                       const policy::PolicyHolder& policy, Caller caller, SessionOptions options)
    : pipeline_(pipeline),
      tools_(tools),
      policy_(policy),
      caller_(std::move(caller)),
      options_(std::move(options)) {
  if (options_.session_id.empty()) options_.session_id = RandomSessionId();
}

std::string McpSession::RefuseOversized(std::size_t bytes) const {
  return mcp::Serialize(mcp::MakeError(std::nullopt, mcp::kInvalidRequest,
                                       "Invalid Request: message is " + std::to_string(bytes) +
                                           " bytes or more, more than the limit of " +
                                           std::to_string(options_.max_message_bytes)));
}

std::optional<std::string> McpSession::HandleText(std::string_view text) {
  mcp::ParseOptions parse_options;
  parse_options.max_bytes = options_.max_message_bytes;
  parse_options.allow_batch = initialized_ && mcp::AllowsBatches(protocol_version_);
  mcp::ParseResult parsed = mcp::Parse(text, parse_options);

  std::vector<mcp::Message> replies;
  for (const mcp::ParsedEntry& entry : parsed.entries) {
    if (const auto* error = std::get_if<mcp::ErrorResponse>(&entry)) {
      replies.emplace_back(*error);
      continue;
    }
    if (auto reply = Handle(std::get<mcp::Message>(entry))) replies.push_back(std::move(*reply));
  }
  if (replies.empty()) return std::nullopt;
  if (parsed.is_batch) return mcp::SerializeBatch(replies);
  return mcp::Serialize(replies.front());
}

std::optional<mcp::Message> McpSession::Handle(const mcp::Message& message) {
  if (const auto* request = std::get_if<mcp::Request>(&message)) return HandleRequest(*request);
  if (const auto* note = std::get_if<mcp::Notification>(&message)) {
    // notifications/cancelled needs nothing: a call is finished before the next line is read.
    if (note->method == "notifications/initialized" && initialized_) client_ready_ = true;
    return std::nullopt;
  }
  // Responses and errors from the client answer requests warden never sent in this slice.
  return std::nullopt;
}

mcp::Message McpSession::HandleRequest(const mcp::Request& request) {
  const std::string& m = request.method;
  if (m == "ping") return mcp::Response{request.id, json::object()};
  if (m == "initialize") return Initialize(request);
  if (!initialized_)
    return mcp::MakeError(request.id, mcp::kInvalidRequest,
                          "server not initialized: send initialize before " + m);
  if (m == "tools/list") return ListTools(request);
  if (m == "tools/call") return CallTool(request);
  return mcp::MakeError(request.id, mcp::kMethodNotFound, "Method not found: " + m);
}

mcp::Message McpSession::Initialize(const mcp::Request& request) {
  if (initialized_)
    return mcp::MakeError(request.id, mcp::kInvalidRequest,
                          "initialize was already answered in this session");
  const json* params = request.params ? &*request.params : nullptr;
  if (params == nullptr || !params->is_object() || !params->contains("protocolVersion") ||
      !(*params)["protocolVersion"].is_string())
    return mcp::MakeError(request.id, mcp::kInvalidParams,
                          "initialize needs params.protocolVersion (a string)");
  protocol_version_ = std::string(mcp::Negotiate((*params)["protocolVersion"].get<std::string>()));
  initialized_ = true;
  json result = {
      {"protocolVersion", protocol_version_},
      {"capabilities", {{"tools", {{"listChanged", false}}}}},
      {"serverInfo", {{"name", "warden"}, {"version", options_.server_version}}},
      {"instructions",
       "warden decides every tool call by policy and records it in an audit log. Denied calls say "
       "why."},
  };
  return mcp::Response{request.id, std::move(result)};
}

mcp::Message McpSession::ListTools(const mcp::Request& request) {
  // One page holds every tool: the built-in set is small. A cursor is therefore never issued, and
  // one sent anyway is ignored.
  json list = json::array();
  std::shared_ptr<const policy::Policy> policy = policy_.Current();
  if (policy) {
    policy::CallContext who{caller_.tenant, caller_.user, caller_.agent, caller_.scope};
    for (const BuiltinTool& tool : tools_.list()) {
      if (policy::Visible(*policy, who, tool.name, {})) list.push_back(tool.definition);
    }
  }
  return mcp::Response{request.id, {{"tools", std::move(list)}}};
}

mcp::Message McpSession::CallTool(const mcp::Request& request) {
  const json* params = request.params ? &*request.params : nullptr;
  if (params == nullptr || !params->is_object() || !params->contains("name") ||
      !(*params)["name"].is_string())
    return mcp::MakeError(request.id, mcp::kInvalidParams,
                          "tools/call needs params.name (a string)");
  CallContext call;
  call.session = options_.session_id;
  call.tool = (*params)["name"].get<std::string>();
  if (params->contains("arguments")) {
    const json& args = (*params)["arguments"];
    if (!args.is_object())
      return mcp::MakeError(request.id, mcp::kInvalidParams,
                            "tools/call params.arguments must be an object");
    call.arguments = args;
  }
  if (const BuiltinTool* tool = tools_.Find(call.tool)) call.server = tool->server;

  StageOutcome outcome = pipeline_.Run(call);
  switch (outcome.result) {
    case StageResult::kContinue:
      if (call.result) return mcp::Response{request.id, call.result->mcp_result};
      return mcp::MakeError(request.id, mcp::kInternalError, "the call ended without a result");
    case StageResult::kPause:
      return mcp::MakeError(request.id, mcp::kInternalError, "paused calls are not supported yet");
    case StageResult::kDeny:
      break;
  }
  const std::string where = call.verdict_stage.empty() ? "" : " (" + call.verdict_stage + ")";
  switch (outcome.refusal) {
    case Refusal::kUnknownTool:
      return mcp::MakeError(request.id, mcp::kInvalidParams, outcome.reason);
    case Refusal::kInvalidArguments:
      // MCP 2025-11-25: input validation errors are tool execution errors, so the model can retry.
      return mcp::Response{request.id, TextResult(outcome.reason, true)};
    case Refusal::kDenied: {
      std::string text = "warden denied this call: " + outcome.reason;
      if (!outcome.rule.empty()) text += " [rule: " + outcome.rule + "]";
      return mcp::Response{request.id, TextResult(text, true)};
    }
    case Refusal::kInternal:
    case Refusal::kNone:
      break;
  }
  return mcp::MakeError(request.id, mcp::kInternalError,
                        "warden could not complete the call" + where + ": " + outcome.reason);
}

}  // namespace warden::gateway
