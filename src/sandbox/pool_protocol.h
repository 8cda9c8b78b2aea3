// The messages of pre-warmed pools (docs/pool.md): between `warden run --pool` (the client) and
// `warden pool start` (the server) on the pool's Unix socket, and from the server to a pooled
// sandbox's init on its sync socket (the claim). Both sockets are SOCK_SEQPACKET: one message is
// one JSON object of at most kMaxMessage bytes, carrying up to three file descriptors.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "sandbox/contain.h"
#include "sandbox/options.h"
#include "sandbox/result.h"

namespace warden::sandbox::pool {

// Largest message (a request with its argv and environment). SOCK_SEQPACKET sends a message
// whole, so it must fit the socket's send buffer (about 208 KiB by default).
constexpr size_t kMaxMessage = 160 * 1024;

struct Message {
  nlohmann::json body;
  std::vector<UniqueFd> fds;  // received descriptors (close-on-exec), owned by the receiver
};

// Sends `body` with `fds` (not owned, at most 3). Errors: the peer is gone, or the message is too
// large (the error says so).
Status Send(int sock, const nlohmann::json& body, const std::vector<int>& fds = {});
// Receives one message. Error when the peer closed the socket, the socket failed, or the message
// is not a JSON object.
Result<Message> Receive(int sock);

// ---- client -> server ----
// {"op":"status"} or {"op":"run", ...Options fields below..., "term": TERM} with three fds: the
// command's stdin, stdout and stderr (the write ends of the client's pipes).
nlohmann::json RunRequest(const Options& options);
// The inverse, for the server. Error names the malformed field.
Result<Options> OptionsFromRequest(const nlohmann::json& request);
// A request may add "workspace": true (the pool must have been started with one): the server then
// assigns a sandbox, sends {"workspace": HOST_PATH} and waits for {"op":"start"} before the
// command starts, so that the client can put files there; after the result it keeps the
// directory until the client closes the connection (to collect what the command wrote).
// {"kill":"output_limit"} or {"kill":"signal","signal":N}: the client asks to end its sandbox.

// ---- server -> client ----
// {"accepted":true,"output_limit_bytes":N} or {"refused":"message naming the option"}, then
// {"result":{ToJson's record}}.
Result<RunResult> ResultFromJson(const nlohmann::json& record);

// ---- server -> pooled init (sync socket) ----
// The command's half of a ChildSpec: argv, env, the PATH to search, workdir and the per-command
// rlimits. Sent with three fds (stdin, stdout, stderr).
nlohmann::json Claim(const contain::ChildSpec& command);
// In the pooled init, after seccomp and its ready (kReady on the sync socket): waits for the claim
// and fills `spec`'s command half and stdio from it. Error when the server is gone or the claim is
// malformed.
Status ReceiveClaimFromChild(contain::ChildSpec* spec);

}  // namespace warden::sandbox::pool
