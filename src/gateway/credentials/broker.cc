#include "gateway/credentials/broker.h"

#include "policy/credential_template.h"

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
  {
    std::lock_guard lock(mu_);
    // The first call always loads; later ones only when another process wrote.
    if (refreshed_ && !store_->ChangedElsewhere()) return;
    if (!refreshed_) store_->ChangedElsewhere();  // takes the current version
    refreshed_ = true;
  }
  auto all = store_->List();
  if (!all) return;
  for (const credentials::SecretInfo& info : *all) {
    auto found = store_->Get(info.scope.tenant, info.scope.user, info.scope.upstream, info.name);
    if (found && *found) redactor_.Add(info.name, (*found)->value);
  }
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
  if (cache) {
    std::lock_guard lock(mu_);
    instance_tokens_[key] = *token;
  }
  return token->jwt;
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
