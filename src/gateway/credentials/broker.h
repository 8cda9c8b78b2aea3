// What the gateway asks of the secret store and the token minter, at the moment a credential is
// needed (docs/credentials.md): an upstream instance's environment at spawn (stdio), the headers
// of warden's own requests on an instance (HTTP: initialize, listings), and the headers of one
// call. Every secret value it reads is added to the redactor, which the redact stage applies to
// everything going back to the agent and into the audit log.
//
// A secret that is not there is an error naming the secret and how to set it, for the calls
// that need it alone; the rest of the gateway is untouched. Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
#include "credentials/minted_tokens.h"
#include "credentials/redactor.h"
#include "credentials/secret_store.h"
#include "credentials/tokens.h"
#include "mcp/jsonrpc.h"
#include "sandbox/options.h"
#include "notify/http_post.h"
#include "policy/model.h"

namespace warden::gateway {

// Who a credential is for: the tenant and user it acts as, and the agent acting (empty for
// warden's own requests on an instance, and for a person).
struct CredentialOwner {
  std::string tenant, user, agent;
};

// The headers the credentials stage chose for one call (in CallContext::state): the session
// sends the call's request to the upstream with exactly these.
struct UpstreamCallHeaders {
  bool set = false;
  std::map<std::string, std::string> headers;
};

// `message` with every string of it through the redactor (a result, an error's message and
// data, a notification's or request's params): the last step before anything reaches a client.
void RedactMessage(const credentials::Redactor& redactor, mcp::Message& message);

class CredentialBroker {
 public:
  // `store` and `minter` may be null (no credentials section): then any template that needs one
  // fails naming what is missing. Nothing is owned.
  CredentialBroker(credentials::SecretStore* store, credentials::TokenMinter* minter,
                   credentials::Redactor& redactor)
      : store_(store), minter_(minter), redactor_(redactor) {}

  // stdio: the upstream's `credentials.env`, for an instance of `owner`.
  Result<std::map<std::string, std::string>> Environment(const policy::Policy& policy,
                                                         const std::string& upstream,
                                                         const CredentialOwner& owner);
  // HTTP: `credentials.header`, for warden's own requests on an instance of `owner` (a token
  // here has no actor and a read scope; it is reused until a minute before it expires).
  Result<std::map<std::string, std::string>> InstanceHeaders(const policy::Policy& policy,
                                                             const std::string& upstream,
                                                             const CredentialOwner& owner);
  // HTTP: `credentials.header` plus `read.header` or `write.header` by the call's access, for one
  // call of `owner` to `tool`; tokens are minted for this call (actor: the agent).
  Result<std::map<std::string, std::string>> CallHeaders(const policy::Policy& policy,
                                                         const std::string& upstream,
                                                         const CredentialOwner& owner,
                                                         const std::string& tool, bool write);

  // sandbox__exec: the values of a sandbox profile's egress `credentials` (each one's `secret`,
  // the user's else the tenant's; upstream scope "sandbox"), by variable name.
  Result<std::map<std::string, std::string>> SandboxEnvironment(const sandbox::Options& profile,
                                                                const CredentialOwner& owner);

  // Adds every value the store holds to the redactor (again when another process changed the
  // store since): a secret of any user is hidden from every agent. After such a change the
  // minter also takes the store's signing keys again (a rotation by `warden secrets rotate
  // --signing-key` is used from then on). Cheap when nothing changed.
  void Refresh();
  // Called (outside the broker's lock, on the thread that noticed) after Refresh saw the store
  // changed by another process: the instance registry restarts stdio servers whose environment
  // changed. Empty: nobody. Must not block.
  // Returns once no call of the previous listener is running (so that its owner may go).
  void SetOnStoreChanged(std::function<void()> listener) {
    std::lock_guard lock(listener_mu_);
    on_store_changed_ = std::move(listener);
  }

  // A kill switch came into force for `holder` `name` (docs/credentials.md, "Revocation"): the
  // live tokens minted for the callers it stops are revoked (published at
  // /.well-known/warden-revoked.json), and the tokens cached for them (warden's own requests'
  // tokens, exchanged tokens) are forgotten, so none is sent again. Returns how many minted
  // tokens were revoked.
  std::size_t Revoke(credentials::MintedTokens::Holder holder, const std::string& name);
  const credentials::MintedTokens& minted() const { return minted_; }

  const credentials::Redactor& redactor() const { return redactor_; }
  credentials::TokenMinter* minter() const { return minter_; }
  bool has_store() const { return store_ != nullptr; }

  // An upstream whose credentials need nothing of the store: no work at call time.
  static bool NeedsCallHeaders(const policy::Upstream& upstream);

 private:
  Result<std::map<std::string, std::string>> Render(
      const policy::Policy& policy, const std::string& upstream,
      const std::map<std::string, std::string>& templates, const CredentialOwner& owner,
      const std::string& tool, bool write, bool header, bool cache_tokens);
  Result<std::string> Secret(const std::string& name, const std::string& upstream,
                             const CredentialOwner& owner);
  Result<std::string> MintFor(const policy::Policy& policy, const std::string& target,
                              const CredentialOwner& owner, const std::string& tool, bool write,
                              bool cache);
  // {exchange:TARGET}: RFC 8693 at credentials.token_exchange's endpoint, the user's token as
  // subject and a token naming the agent as actor; cached until 30 s before it expires.
  Result<std::string> ExchangeFor(const policy::Policy& policy, const std::string& target,
                                  const CredentialOwner& owner, bool write);
  Result<std::string> PostExchange(const policy::TokenExchange& x, const std::string& form,
                                   const std::string& authorization, int64_t* expires_in);

  credentials::SecretStore* store_;
  credentials::TokenMinter* minter_;
  credentials::Redactor& redactor_;
  credentials::MintedTokens minted_;  // thread-safe on its own

  std::mutex mu_;
  bool refreshed_ = false;
  std::mutex listener_mu_;  // held while the listener runs
  std::function<void()> on_store_changed_;
  std::chrono::steady_clock::time_point checked_{};  // the last ChangedElsewhere
  // Tokens for warden's own requests: by (upstream, tenant, user).
  std::map<std::string, credentials::Token> instance_tokens_;
  // Exchanged tokens: by (endpoint, tenant, user, agent, audience, scope), with their expiry.
  struct Exchanged {
    std::string token;
    std::chrono::steady_clock::time_point expires;
  };
  std::map<std::string, Exchanged> exchanged_;
  // One POST at a time to the token endpoint (HttpPoster is not thread-safe); a cache hit never
  // waits for it.
  std::mutex exchange_mu_;
  std::string poster_endpoint_;
  std::unique_ptr<notify::HttpPoster> poster_;
};

}  // namespace warden::gateway
