// MCP's stdio transport: newline-delimited JSON-RPC messages read from one fd and answered on
// another, one message per line (no embedded newlines: Serialize never writes one). Lines are
// read on the calling thread and handed to the session, which answers requests from its workers:
// replies may come back in another order than the requests, a long tools/call does not hold up
// a ping, and notifications/cancelled reaches a call in flight. Writes are serialised.
// The first message decides the connection's era: an initialize (or any 2025 message) makes it a
// 2025-11-25 session served by `session`; a request whose _meta names 2026-07-28 makes every
// request of the connection a stateless one, served by the task context of its task
// (session/task_contexts.h) when a factory for them was given.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
#include "gateway/session/session.h"
#include "gateway/session/task_contexts.h"

namespace warden::gateway {

class StdioServer {
 public:
  // `session` answers each line; a line longer than `max_message_bytes` is refused.
  explicit StdioServer(std::shared_ptr<McpSession> session,
                       std::size_t max_message_bytes = 4 * 1024 * 1024,
                       TaskContexts::Make make_context = nullptr);

  // Reads lines from `in_fd` until end of file and writes each reply, followed by '\n', to
  // `out_fd`; messages the session sends on its own (notifications, requests from upstreams)
  // go there too. Empty lines are skipped and a trailing '\r' is dropped. A line longer than the
  // cap is answered with -32600 and skipped whole, without buffering it. At end of input, waits
  // for the calls in flight to be answered, then closes the session. Returns ok at end of file,
  // or the error that stopped reading or writing. Neither fd is closed.
  Status Serve(int in_fd, int out_fd);

 private:
  void HandleLine(std::string_view line);
  // One line of a 2026-07-28 connection.
  void HandleModernLine(mcp::ParseResult parsed);
  void Write(const std::string& text);

  std::shared_ptr<McpSession> session_;
  std::size_t cap_;
  enum class Era { kUndecided, kSession, kModern } era_ = Era::kUndecided;
  std::unique_ptr<TaskContexts> tasks_;  // null: 2026-07-28 is not served
  int out_fd_ = -1;
  std::mutex write_mu_;
  Status write_error_;
  std::atomic<bool> write_failed_{false};
};

}  // namespace warden::gateway
