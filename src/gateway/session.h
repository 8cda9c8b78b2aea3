// One downstream MCP session: the lifecycle (initialize, then requests), method dispatch and the
// mapping of pipeline outcomes onto MCP results and JSON-RPC errors. Transport-independent: the
// stdio server feeds it lines; the Streamable HTTP server will feed it POST bodies. Parsing and
// serialising are src/mcp's (mcp::Parse / mcp::Serialize); this class only decides what to answer.
// Synchronous and single-threaded: one message is handled to the end before the next.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/builtin_tools.h"
#include "gateway/pipeline.h"
#include "gateway/stages.h"
#include "mcp/jsonrpc.h"
#include "policy/holder.h"

namespace warden::gateway {

struct SessionOptions {
  std::string server_version = "0.1.0";  // serverInfo.version
  std::string session_id;                // recorded in audit entries; empty: a random one
  std::size_t max_message_bytes = 4 * 1024 * 1024;
};

class McpSession {
 public:
  // Nothing is owned; all must outlive the session. `caller` is who this session speaks for in
  // tools/list (the identity stage says the same for calls).
  McpSession(Pipeline& pipeline, const BuiltinTools& tools, const policy::PolicyHolder& policy,
             Caller caller, SessionOptions options = {});

  // Handles one complete message text (a line over stdio). Returns the text to send back (a
  // response, an error, or a batch of them), or nullopt when nothing is owed (notifications,
  // client responses). Never throws.
  std::optional<std::string> HandleText(std::string_view text);

  // The reply to send for a message the transport refused before parsing it (too long).
  std::string RefuseOversized(std::size_t bytes) const;

  bool initialized() const { return initialized_; }
  const std::string& protocol_version() const { return protocol_version_; }
  const std::string& session_id() const { return options_.session_id; }
  std::size_t max_message_bytes() const { return options_.max_message_bytes; }

 private:
  std::optional<mcp::Message> Handle(const mcp::Message& message);
  mcp::Message HandleRequest(const mcp::Request& request);
  mcp::Message Initialize(const mcp::Request& request);
  mcp::Message ListTools(const mcp::Request& request);
  mcp::Message CallTool(const mcp::Request& request);

  Pipeline& pipeline_;
  const BuiltinTools& tools_;
  const policy::PolicyHolder& policy_;
  Caller caller_;
  SessionOptions options_;
  bool initialized_ = false;   // initialize was answered
  bool client_ready_ = false;  // notifications/initialized arrived
  std::string protocol_version_;
};

}  // namespace warden::gateway
