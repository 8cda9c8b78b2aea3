// The task contexts of MCP 2026-07-28 requests (docs/requests.md): one McpSession in modern mode
// per principal (tenant, user, agent, narrowed scope) and task (_meta["warden/task"], "" the
// principal's default), created by the first request that names it and closed when idle. What a
// context holds is node-local (its upstream instances, its parked calls); what must outlive it
// (trifecta legs, approvals, kill switches) is in the store under the principal and task.
// Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "gateway/session/session.h"
#include "identity/identity.h"
#include "mcp/jsonrpc.h"

namespace warden::gateway {

class TaskContexts {
 public:
  // Builds a context (an McpSession with options.modern set); nullptr: refused (stopping).
  using Make = std::function<std::shared_ptr<McpSession>(const identity::Caller&, SessionOptions)>;
  // At most `max_per_principal` live contexts per principal: the least recently used idle one is
  // closed to make room (through `close`, which may block: the caller's closer thread); when all
  // are busy, For refuses.
  TaskContexts(std::string transport, Make make,
               std::function<void(std::shared_ptr<McpSession>)> close,
               size_t max_per_principal = 64);

  // The context `request` belongs to for `caller`. An error (answered -32602) when
  // _meta["warden/task"] or _meta["warden/scope"] is not a valid string; kNotServed when `make`
  // gave nothing (a host without 2026 support, or one stopping).
  static constexpr char kNotServed[] = "this server does not serve protocol version 2026-07-28";
  Result<std::shared_ptr<McpSession>> For(const identity::Caller& caller,
                                          const mcp::Request& request);

  // Takes the contexts idle for `idle` or more (or already closed) out of the registry: the
  // caller closes them (McpSession::Close blocks).
  std::vector<std::shared_ptr<McpSession>> TakeIdle(std::chrono::steady_clock::duration idle);
  std::vector<std::shared_ptr<McpSession>> TakeAll();
  // The live contexts (stdio: a notifications/cancelled reaches them all).
  std::vector<std::shared_ptr<McpSession>> All() const;
  size_t size() const;

 private:
  std::string transport_;
  Make make_;
  std::function<void(std::shared_ptr<McpSession>)> close_;
  size_t max_per_principal_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<McpSession>> contexts_;  // by key (see For)
};

}  // namespace warden::gateway
