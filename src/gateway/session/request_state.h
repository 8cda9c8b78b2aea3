// warden's own `requestState` for MCP 2026-07-28 multi-round-trip requests (docs/requests.md,
// "requestState: warden's own, sealed"). The spec makes the state attacker-controlled input that
// must be integrity-protected when it matters: warden's is a JSON payload sealed with AES-256-GCM
// under a key only warden holds, bound to the principal, the task, the request's method and the
// digest of its parameters, with an expiry and a random id that the holder of the parked call
// accepts once (single use).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/status.h"
#include "mcp/jsonrpc.h"

namespace warden::gateway {

struct RequestState {
  std::string id;         // 128 random bits, hex: what single use is enforced on
  std::string principal;  // TENANT/USER/AGENT
  std::string task;       // the task the call belongs to ("" the principal's default)
  std::string method;     // the request's method
  std::string call;       // CallDigest of the request
  int64_t expires_ms = 0;  // Unix time in milliseconds
  // "parked": a call waiting on this node for the client's answers (ref: its handle);
  // "upstream": a 2026-07-28 upstream's own input_required, relayed (inner: the upstream's
  // requestState, when it gave one; the retry is a new call carrying it, on any node).
  std::string kind;
  std::string ref;
  std::optional<std::string> inner;
};

// The longest upstream requestState warden wraps in its own.
inline constexpr size_t kMaxInnerRequestState = 32 * 1024;

// SHA-256 (hex) of the canonical JSON of {method, params} without params._meta,
// params.inputResponses and params.requestState: what a retry must repeat unchanged.
std::string CallDigest(const mcp::Request& request);

class RequestStateSealer {
 public:
  // A random key (states do not survive the process).
  RequestStateSealer();
  // A key derived from `secret` (the secret store's master key) with HKDF-SHA256, info
  // "warden request state": every gateway sharing that secret opens the others' states.
  explicit RequestStateSealer(const std::array<uint8_t, 32>& secret);

  // base64url(nonce || ciphertext || tag) of the payload; "" only if the cipher failed.
  std::string Seal(const RequestState& state) const;
  // The payload, or an error saying why not: not base64url, too short, does not decrypt (altered,
  // or sealed by another key), not a payload of this version. Expiry and binding are the
  // caller's to check (it knows the request).
  Result<RequestState> Open(const std::string& text) const;

  static int64_t NowMs();

 private:
  std::array<uint8_t, 32> key_{};
};

// The ids of the states of kind "upstream" already used to resume a call, each kept until its
// expiry: what makes such a state single use on this node, whichever task context opens it
// (one closed meanwhile, idle or ended by task__end, forgets nothing here). Node-wide for now;
// a fleet needs it in the shared store (issue 34). Thread-safe.
class UsedStates {
 public:
  explicit UsedStates(size_t max_entries = 100000) : max_(max_entries) {}
  enum class Use { kFirst, kAlreadyUsed, kFull };
  // kFirst marks `id` used until `expires_ms`; kAlreadyUsed when it was; kFull when `max_entries`
  // unexpired ids are held (fail closed: the retry is refused, not let through twice).
  Use MarkUsed(const std::string& id, int64_t expires_ms, int64_t now_ms);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  size_t max_;
  std::unordered_map<std::string, int64_t> by_id_;
  std::multimap<int64_t, std::string> by_expiry_;
};

}  // namespace warden::gateway
