// Who is calling over HTTP: API keys (hashed in the policy) and JWTs (checked against the JWKS file
// the policy names), the local single-user mode, and the task scope a session may narrow itself to.
// Reference: docs/identity.md. The identity stage of an HTTP transport calls Authenticate once per
// request and answers 401 when it fails; nothing here does network I/O.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "identity/caller.h"
#include "policy/model.h"

namespace warden::identity {

// How the transport was started. Decided by whoever starts the listener, never by a request.
struct IdentityOptions {
  // True only when the listener is on a loopback address: then a policy without tenants (the
  // embedded default, or a file that declares none) serves `local_user`, the local operator, to
  // every request, credentials or not. False (the default, and any other listener): a policy
  // without tenants refuses every request.
  bool local_single_user = false;
  std::string local_user;  // required when local_single_user
};

// Turns an HTTP Authorization header into a Caller. Immutable once built and safe to share between
// threads; build a new one when the policy is reloaded (it copies what it needs from the policy).
class Authenticator {
 public:
  // Built from `policy.identity`: its tenants, the API key hashes the loader collected and, when
  // `identity.jwt` is set, the keys of its JWKS file, read now. Errors name the file and what is
  // wrong with it (unreadable, not JSON, a key that cannot be used). Refuses a `jwt` section in a
  // policy without tenants (no token could name a known caller), and local_single_user without a
  // local_user. With tenants declared, local_single_user is ignored: every request is checked.
  static Result<Authenticator> Create(const policy::Policy& policy, IdentityOptions options);

  // The caller named by `authorization` (the header's value, "" when absent): "Bearer <API key>"
  // or "Bearer <JWT>" (a token with exactly two dots is a JWT; anything else is an API key).
  // An agent's key gives its tenant, the agent's user and the agent; a user's own key (`keys:` on
  // the user) gives the tenant and the user with an empty agent; a token gives the tenant, user
  // and (optional) agent of the configured claims, each of which must exist in the policy, and an
  // empty agent when it has no agent claim. `agent.empty()` means a person is calling (a user
  // acting directly, or the local user): only people may use the admin API and decide approvals.
  // The scope is always empty (see NarrowScope). On failure the Status says why in one line
  // (missing credentials, unknown key, bad signature, expired, wrong issuer, unknown tenant ...);
  // it never contains the key or the token. `now` is for tests.
  Result<Caller> Authenticate(
      std::string_view authorization,
      std::chrono::system_clock::time_point now = std::chrono::system_clock::now()) const;

  struct State;  // defined in identity.cc

 private:
  explicit Authenticator(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  std::shared_ptr<const State> state_;
};

// The scope a session asks for (`_meta["warden/scope"]` of the initialize request), given the
// caller as established so far. Returns the scope to record: the policy must define it, and a
// session already in a scope may repeat that scope but never switch to another (switching could
// widen what it may do; a scope only ever narrows). Errors name the requested scope.
Result<std::string> NarrowScope(const policy::Policy& policy, const Caller& caller,
                                const std::string& requested);

// What the policy stores for an API key: "sha256:" + lower-case hex SHA-256 of the key's text,
// the same as `printf %s KEY | sha256sum`.
std::string HashApiKey(std::string_view key);
// The credentials of "Bearer <credentials>" (the scheme case-insensitive, RFC 9110 11.1), or
// why the header is not that; the message never quotes the header.
Result<std::string_view> BearerCredentials(std::string_view header);

}  // namespace warden::identity
