#include "gateway/credentials/broker.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "common/base64.h"
#include "policy/credential_template.h"
#include "upstream/http_url.h"

namespace warden::gateway {

namespace {

// "user 'alice' of tenant 'acme'" (or the single-user mode's local user).
std::string Who(const CredentialOwner& owner) {
  if (owner.tenant.empty()) return "the local user";
  return "user '" + owner.user + "' of tenant '" + owner.tenant + "'";
}

std::string SetCommand(const std::string& name, const CredentialOwner& owner) {
  std::string command = "warden secrets set " + name;
  if (!owner.tenant.empty()) command += " --tenant " + owner.tenant;
  std::string user = command + (owner.user.empty() ? "" : " --user " + owner.user);
  if (owner.tenant.empty()) return "`" + command + "`";
  return "`" + user + "` (or `" + command + "` for the whole tenant)";
}

// The token's audience: the upstream's `credentials.audience`, else its URL, else its name.
std::string AudienceOf(const policy::Policy& policy, const std::string& target) {
  auto it = policy.upstreams.find(target);
  if (it == policy.upstreams.end()) return target;
  if (!it->second.credentials.audience.empty()) return it->second.credentials.audience;
  if (!it->second.url.empty()) return it->second.url;
  return target;
}

// application/x-www-form-urlencoded (RFC 6749 appendix B): unreserved characters as they are,
// everything else %XX.
std::string FormEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

constexpr const char* kJwtType = "urn:ietf:params:oauth:token-type:jwt";
constexpr const char* kAccessTokenType = "urn:ietf:params:oauth:token-type:access_token";
// Exchanged tokens kept at once; past it the expired ones go, then all (a bound, not a cache
// policy).
constexpr size_t kMaxExchanged = 10000;

}  // namespace

void RedactMessage(const credentials::Redactor& redactor, mcp::Message& message) {
  std::visit(
      [&](auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, mcp::Response>) {
          redactor.RedactJson(m.result);
        } else if constexpr (std::is_same_v<T, mcp::ErrorResponse>) {
          m.message = redactor.RedactText(m.message);
          if (m.data) redactor.RedactJson(*m.data);
        } else {
          if (m.params) redactor.RedactJson(*m.params);
        }
      },
      message);
}

bool CredentialBroker::NeedsCallHeaders(const policy::Upstream& upstream) {
  const policy::UpstreamCredentials& c = upstream.credentials;
  return !upstream.url.empty() && (!c.header.empty() || !c.read.empty() || !c.write.empty());
}

void CredentialBroker::Refresh() {
  if (!store_) return;
  bool elsewhere = false;  // a change by another process (not the first load)
  {
    std::lock_guard lock(mu_);
    // The first call always loads; later ones only when another process wrote, asked at most
    // every 100 ms (this runs once per call: a query per call would be work on the hot path).
    const auto now = std::chrono::steady_clock::now();
    if (refreshed_ && now - checked_ < std::chrono::milliseconds(100)) return;
    checked_ = now;
    if (refreshed_ && !store_->ChangedElsewhere()) return;
    if (!refreshed_) store_->ChangedElsewhere();  // takes the current version
    elsewhere = refreshed_;
    refreshed_ = true;
  }
  // `warden secrets rotate --signing-key` in another process: mint with the new key and publish
  // it from now on, without a restart (the minter keeps the retired ones published).
  if (minter_ && elsewhere) {
    auto keys = credentials::SigningKeyEntries(*store_);
    Status replaced = keys ? minter_->Replace(std::move(*keys)) : keys.status();
    if (!replaced.ok())  // the keys in use stay in use
      spdlog::warn("credentials: the store's signing keys could not be taken up: {}", replaced.message());
  }
  auto all = store_->List();
  if (all) {
    for (const credentials::SecretInfo& info : *all) {
      auto found = store_->Get(info.scope.tenant, info.scope.user, info.scope.upstream, info.name);
      if (found && *found) redactor_.Add(info.name, (*found)->value);
    }
  }
  if (!elsewhere) return;
  std::lock_guard lock(listener_mu_);
  if (on_store_changed_) on_store_changed_();
}

Result<std::string> CredentialBroker::Secret(const std::string& name, const std::string& upstream,
                                             const CredentialOwner& owner) {
  if (!store_) {
    return Status::Error("secret '" + name +
                         "' is needed but this gateway has no secret store (the policy's "
                         "credentials section)");
  }
  auto found = store_->Get(owner.tenant, owner.user, upstream, name);
  if (!found) return found.status().Wrap("secret '" + name + "'");
  if (!*found) {
    return Status::Error("secret '" + name + "' is not set for " + Who(owner) +
                         ": an operator sets it with " + SetCommand(name, owner));
  }
  redactor_.Add(name, (*found)->value);
  return std::move((*found)->value);
}

Result<std::map<std::string, std::string>> CredentialBroker::SandboxEnvironment(
    const sandbox::Options& profile, const CredentialOwner& owner) {
  std::map<std::string, std::string> env;
  for (const sandbox::EgressCredentialSpec& c : profile.egress_credentials) {
    auto value = Secret(c.secret, "sandbox", owner);
    if (!value) return value.status().Wrap("credential " + c.env);
    env[c.env] = std::move(*value);
  }
  return env;
}

Result<std::string> CredentialBroker::MintFor(const policy::Policy& policy,
                                              const std::string& target,
                                              const CredentialOwner& owner, const std::string& tool,
                                              bool write, bool cache) {
  if (!minter_) {
    return Status::Error("{token:" + target +
                         "} is needed but this gateway mints no tokens (the policy's credentials "
                         "section)");
  }
  const std::string key = target + '\n' + owner.tenant + '\n' + owner.user;
  const auto now = std::chrono::system_clock::now();
  if (cache) {
    std::lock_guard lock(mu_);
    auto it = instance_tokens_.find(key);
    if (it != instance_tokens_.end() && it->second.expires - now > std::chrono::minutes(1))
      return it->second.jwt;
  }
  credentials::TokenRequest request;
  request.issuer = policy.credentials.token_issuer;
  request.tenant = owner.tenant;
  request.user = owner.user.empty() ? "local" : owner.user;
  request.agent = owner.agent;
  request.audience = AudienceOf(policy, target);
  request.write = write;
  request.tool = tool;
  request.lifetime = std::chrono::duration_cast<std::chrono::seconds>(
      std::chrono::milliseconds(policy.credentials.token_lifetime_ms));
  if (request.lifetime > minter_->max_lifetime()) request.lifetime = minter_->max_lifetime();
  auto token = minter_->Mint(request, now);
  if (!token) return token.status().Wrap("minting {token:" + target + "}");
  minted_.Record(*token, owner.tenant, request.user, owner.agent, now);
  if (cache) {
    std::lock_guard lock(mu_);
    instance_tokens_[key] = *token;
  }
  return token->jwt;
}

std::size_t CredentialBroker::Revoke(credentials::MintedTokens::Holder holder,
                                     const std::string& name) {
  using Holder = credentials::MintedTokens::Holder;
  // Cache keys are fields joined by '\n': instance tokens (target, tenant, user); exchanged
  // tokens (endpoint, tenant, user, agent, audience, scope).
  auto covered = [&](const std::string& key) {
    std::vector<std::string> f;
    for (size_t pos = 0;;) {
      size_t end = key.find('\n', pos);
      f.push_back(key.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
      if (end == std::string::npos) break;
      pos = end + 1;
    }
    switch (holder) {
      case Holder::kAll: return true;
      case Holder::kTenant: return f.size() > 1 && f[1] == name;
      case Holder::kUser: return f.size() > 2 && (f[2] == name || (f[2].empty() && name == "local"));
      case Holder::kAgent: return f.size() > 3 && f[3] == name;
    }
    return false;
  };
  {
    std::lock_guard lock(mu_);
    std::erase_if(instance_tokens_, [&](const auto& kv) { return covered(kv.first); });
    std::erase_if(exchanged_, [&](const auto& kv) { return covered(kv.first); });
  }
  return minted_.Revoke(holder, name);
}

Result<std::string> CredentialBroker::ExchangeFor(const policy::Policy& policy,
                                                  const std::string& target,
                                                  const CredentialOwner& owner, bool write) {
  if (!policy.credentials.token_exchange) {
    return Status::Error("{exchange:" + target + "} needs credentials.token_exchange");
  }
  const policy::TokenExchange& x = *policy.credentials.token_exchange;
  const std::string audience = AudienceOf(policy, target);
  const std::string scope = write ? "read write" : "read";
  const std::string key = x.endpoint + '\n' + owner.tenant + '\n' + owner.user + '\n' +
                          owner.agent + '\n' + audience + '\n' + scope;
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu_);
    auto it = exchanged_.find(key);
    if (it != exchanged_.end() && it->second.expires - now > std::chrono::seconds(30))
      return it->second.token;
  }
  // The subject: the user, as a token warden signs for the provider, or the user's own token.
  std::string subject, subject_type;
  if (x.subject == "minted") {
    if (!minter_) return Status::Error("{exchange:" + target + "} needs warden's signing keys");
    credentials::TokenRequest user;
    user.issuer = policy.credentials.token_issuer;
    user.tenant = owner.tenant;
    user.user = owner.user.empty() ? "local" : owner.user;
    user.audience = x.endpoint;
    user.write = write;
    user.lifetime = std::chrono::seconds(60);
    auto minted = minter_->Mint(user);
    if (!minted) return minted.status().Wrap("the subject token");
    subject = std::move(minted->jwt);
    subject_type = kJwtType;
  } else {
    auto own = Secret(x.subject.substr(7), target, owner);
    if (!own) return own.status().Wrap("the subject token");
    subject = std::move(*own);
    subject_type = kAccessTokenType;
  }
  std::string form = "grant_type=" + FormEncode("urn:ietf:params:oauth:grant-type:token-exchange") +
                     "&subject_token=" + FormEncode(subject) +
                     "&subject_token_type=" + FormEncode(subject_type) +
                     "&requested_token_type=" + FormEncode(kAccessTokenType) +
                     "&audience=" + FormEncode(audience) + "&scope=" + FormEncode(scope);
  if (!owner.agent.empty()) {
    // The actor: the agent, in a token of warden's whose subject it is (RFC 8693 2.1).
    if (!minter_) return Status::Error("{exchange:" + target + "} needs warden's signing keys");
    credentials::TokenRequest actor;
    actor.issuer = policy.credentials.token_issuer;
    actor.tenant = owner.tenant;
    actor.user = owner.agent;
    actor.audience = x.endpoint;
    actor.lifetime = std::chrono::seconds(60);
    auto actor_token = minter_->Mint(actor);
    if (!actor_token) return actor_token.status().Wrap("the actor token");
    form += "&actor_token=" + FormEncode(actor_token->jwt) +
            "&actor_token_type=" + FormEncode(kJwtType);
  }
  std::string authorization;
  if (!x.client_secret.empty()) {
    auto secret = Secret(x.client_secret.substr(7), target, owner);
    if (!secret) return secret.status().Wrap("the token endpoint's client secret");
    // RFC 6749 2.3.1: both parts form-encoded, then HTTP Basic.
    std::string encoded =
        Base64NoPad(FormEncode(x.client_id) + ":" + FormEncode(*secret), kBase64Alphabet);
    while (encoded.size() % 4) encoded += '=';
    authorization = "Basic " + encoded;
  } else {
    form += "&client_id=" + FormEncode(x.client_id);
  }
  int64_t expires_in = 0;
  auto token = PostExchange(x, form, authorization, &expires_in);
  if (!token) return token.status();
  redactor_.Add("exchanged_token", *token);
  if (expires_in > 0) {
    std::lock_guard lock(mu_);
    if (exchanged_.size() >= kMaxExchanged) {
      for (auto it = exchanged_.begin(); it != exchanged_.end();) {
        if (it->second.expires <= now) {
          redactor_.Remove(it->second.token);
          it = exchanged_.erase(it);
        } else {
          ++it;
        }
      }
      if (exchanged_.size() >= kMaxExchanged) exchanged_.clear();
    }
    exchanged_[key] = {*token, now + std::chrono::seconds(expires_in)};
  }
  return token;
}

Result<std::string> CredentialBroker::PostExchange(const policy::TokenExchange& x,
                                                   const std::string& form,
                                                   const std::string& authorization,
                                                   int64_t* expires_in) {
  std::lock_guard lock(exchange_mu_);
  if (!poster_ || poster_endpoint_ != x.endpoint) {
    auto url = upstream::ParseHttpUrl(x.endpoint);
    if (!url) return url.status().Wrap("credentials.token_exchange.endpoint");
    auto poster = notify::HttpPoster::Create(*url, x.ca_file);
    if (!poster) return poster.status().Wrap("the token endpoint");
    poster_ = std::move(*poster);
    poster_endpoint_ = x.endpoint;
  }
  std::vector<std::pair<std::string, std::string>> headers = {{"Accept", "application/json"}};
  if (!authorization.empty()) headers.emplace_back("Authorization", authorization);
  notify::PostOptions options;
  options.content_type = "application/x-www-form-urlencoded";
  options.read_body_bytes = 64 * 1024;
  notify::PostReply reply =
      poster_->Post(headers, form, std::chrono::milliseconds(x.timeout_ms), options);
  if (reply.kind != notify::PostReply::kAnswered) {
    return Status::Error("token exchange at " + x.endpoint + " failed: " +
                         (reply.error.empty() ? std::string("cancelled") : reply.error));
  }
  const nlohmann::json body = nlohmann::json::parse(reply.body, nullptr, false);
  if (reply.status != 200) {
    // RFC 6749 5.2: {error, error_description}; whatever else the provider says stays out.
    std::string why = "HTTP " + std::to_string(reply.status);
    if (body.is_object() && body.contains("error") && body["error"].is_string()) {
      why += ": " + body["error"].get<std::string>();
      if (body.contains("error_description") && body["error_description"].is_string())
        why += " (" + body["error_description"].get<std::string>().substr(0, 200) + ")";
    }
    return Status::Error("the token endpoint refused the exchange: " + why);
  }
  if (!body.is_object() || !body.contains("access_token") || !body["access_token"].is_string() ||
      body["access_token"].get_ref<const std::string&>().empty()) {
    return Status::Error("the token endpoint's answer has no access_token (RFC 8693 2.2.1)");
  }
  std::string token = body["access_token"].get<std::string>();
  if (token.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos)
    return Status::Error("the token endpoint's access_token holds a line break");
  *expires_in = 0;
  if (body.contains("expires_in") && body["expires_in"].is_number_integer())
    *expires_in = std::min<int64_t>(body["expires_in"].get<int64_t>(), 24 * 3600);
  return token;
}

Result<std::map<std::string, std::string>> CredentialBroker::Render(
    const policy::Policy& policy, const std::string& upstream,
    const std::map<std::string, std::string>& templates, const CredentialOwner& owner,
    const std::string& tool, bool write, bool header, bool cache_tokens) {
  std::map<std::string, std::string> out;
  for (const auto& [name, text] : templates) {
    auto parsed = policy::ParseTemplate(text);
    if (!parsed) return parsed.status();  // the loader checked it; fail closed anyway
    auto value =
        policy::Render(*parsed, [&](const policy::TemplatePart& part) -> Result<std::string> {
          if (part.kind == policy::TemplatePart::kSecret) return Secret(part.text, upstream, owner);
          if (part.kind == policy::TemplatePart::kExchange)
            return ExchangeFor(policy, part.text, owner, write);
          return MintFor(policy, part.text, owner, tool, write, cache_tokens);
        });
    const std::string where = (header ? "header " : "variable ") + name;
    if (!value) return value.status().Wrap(where);
    // A value that would end the header (or the variable) early is refused, never sent cut.
    const std::string_view forbidden =
        header ? std::string_view("\r\n\0", 3) : std::string_view("\0", 1);
    if (value->find_first_of(forbidden) != std::string::npos) {
      return Status::Error(where + ": the value holds " +
                           (header ? "a line break or NUL" : "a NUL byte") +
                           " and cannot be sent; set the secret again without it");
    }
    out[name] = std::move(*value);
  }
  return out;
}

Result<std::map<std::string, std::string>> CredentialBroker::Environment(
    const policy::Policy& policy, const std::string& upstream, const CredentialOwner& owner) {
  auto it = policy.upstreams.find(upstream);
  if (it == policy.upstreams.end()) return std::map<std::string, std::string>{};
  return Render(policy, upstream, it->second.credentials.env, owner, "", false, false, false);
}

Result<std::map<std::string, std::string>> CredentialBroker::InstanceHeaders(
    const policy::Policy& policy, const std::string& upstream, const CredentialOwner& owner) {
  auto it = policy.upstreams.find(upstream);
  if (it == policy.upstreams.end()) return std::map<std::string, std::string>{};
  return Render(policy, upstream, it->second.credentials.header, owner, "", false, true, true);
}

Result<std::map<std::string, std::string>> CredentialBroker::CallHeaders(
    const policy::Policy& policy, const std::string& upstream, const CredentialOwner& owner,
    const std::string& tool, bool write) {
  auto it = policy.upstreams.find(upstream);
  if (it == policy.upstreams.end()) return std::map<std::string, std::string>{};
  const policy::UpstreamCredentials& c = it->second.credentials;
  auto headers = Render(policy, upstream, c.header, owner, tool, write, true, false);
  if (!headers) return headers;
  // A read call gets the read set only: it never holds what a write needs.
  auto extra = Render(policy, upstream, write ? c.write.header : c.read.header, owner, tool, write,
                      true, false);
  if (!extra) return extra;
  for (auto& [name, value] : *extra) (*headers)[name] = std::move(value);
  return headers;
}

}  // namespace warden::gateway
