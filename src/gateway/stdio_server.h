// MCP's stdio transport: newline-delimited JSON-RPC messages read from one fd and answered on
// another, one message per line (no embedded newlines: Serialize never writes one). Synchronous
// and single-threaded for this slice: a tools/call runs to the end before the next line is read,
// so nothing is concurrent and notifications/cancelled has nothing to cancel. Streamable HTTP and
// concurrent calls come next (docs/gateway.md).
#pragma once

#include <string>

#include "common/status.h"
#include "gateway/session.h"

namespace warden::gateway {

class StdioServer {
 public:
  // `session` (not owned) answers each line; its max_message_bytes caps a line.
  explicit StdioServer(McpSession& session) : session_(session) {}

  // Reads lines from `in_fd` until end of file and writes each reply, followed by '\n', to
  // `out_fd`. Empty lines are skipped and a trailing '\r' is dropped. A line longer than the cap
  // is answered with -32600 and skipped whole, without buffering it. Returns ok at end of file,
  // or the error that stopped reading or writing. Neither fd is closed.
  Status Serve(int in_fd, int out_fd);

 private:
  Status HandleLine(std::string_view line, int out_fd);
  McpSession& session_;
};

}  // namespace warden::gateway
