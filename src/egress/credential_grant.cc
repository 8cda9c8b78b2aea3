#include "egress/credential_grant.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>

#include "egress/host_name.h"

namespace warden::egress {

Result<EgressCredential> MakeEgressCredential(std::string name, std::string_view host,
                                              uint16_t port, std::string value, bool tls) {
  const std::string what = "credential " + name;
  if (value.size() < kMinCredentialBytes) {
    return Status::Error(what + ": the value is " + std::to_string(value.size()) +
                         " bytes; at least " + std::to_string(kMinCredentialBytes) +
                         " are needed for a placeholder that cannot turn up by chance");
  }
  for (unsigned char c : value) {
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      return Status::Error(what + ": the value holds a control character (it goes into HTTP " +
                           "header fields, where those are not allowed)");
    }
  }
  auto parsed = ParseHost(host);
  if (!parsed) return parsed.status().Wrap(what + ": host");
  if (port == 0) return Status::Error(what + ": port 0");
  EgressCredential c;
  c.name = std::move(name);
  c.host = parsed->name;
  c.port = port;
  c.tls = tls;
  if (tls && parsed->address) {
    return Status::Error(what + ": a credential over HTTPS needs a host name, not an address");
  }
  // Letters and digits drawn uniformly (rejection sampling), as long as the value.
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  while (c.placeholder.size() < value.size()) {
    unsigned char buf[64];
    ssize_t n = getrandom(buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(what + ": getrandom", errno);
    }
    for (ssize_t i = 0; i < n && c.placeholder.size() < value.size(); ++i) {
      if (buf[i] < 248) c.placeholder += kAlphabet[buf[i] % 62];
    }
  }
  c.value = std::move(value);
  return c;
}

StreamRewriter::StreamRewriter(std::vector<Rule> rules) : rules_(std::move(rules)) {
  for (const Rule& r : rules_) keep_ = std::max(keep_, r.from.size() - 1);
}

bool StreamRewriter::Apply(std::string& text) {
  for (const Rule& r : rules_) {
    for (size_t at = text.find(r.from); at != std::string::npos; at = text.find(r.from, at)) {
      if (r.refuse) {
        refused_ = r.label;
        return false;
      }
      text.replace(at, r.from.size(), r.to);
      at += r.to.size();
      ++replaced_;
    }
  }
  return true;
}

void StreamRewriter::Feed(std::string_view data, std::string* out) {
  if (!refused_.empty()) return;
  if (rules_.empty()) {
    out->append(data);
    return;
  }
  carry_.append(data);
  if (!Apply(carry_)) {
    carry_.clear();
    return;
  }
  if (carry_.size() <= keep_) return;
  const size_t pass = carry_.size() - keep_;
  out->append(carry_, 0, pass);
  carry_.erase(0, pass);
}

void StreamRewriter::Flush(std::string* out) {
  if (refused_.empty()) out->append(carry_);
  carry_.clear();
}

std::string CredentialDestination(const EgressCredential& c) {
  const bool v6 = c.host.find(':') != std::string::npos;
  return (c.tls ? "https://" : "") + (v6 ? "[" + c.host + "]" : c.host) + ":" + std::to_string(c.port);
}

GrantPlan PlanGrants(const std::vector<EgressCredential>& credentials, std::string_view host,
                     uint16_t port, std::string_view head, bool tls) {
  GrantPlan plan;
  for (const EgressCredential& c : credentials) {
    // A TLS credential never goes out in clear text, even to its own host.
    const bool here = c.host == host && c.port == port && c.tls == tls;
    const bool carried = head.find(c.placeholder) != std::string_view::npos;
    if (here) {
      plan.request.push_back({c.placeholder, c.value, false, c.name});
      plan.response.push_back({c.value, c.placeholder, false, c.name});
      if (carried) plan.used.push_back(c.name);
    } else {
      const std::string reason =
          "the placeholder of credential " + c.name + " may only go to " + CredentialDestination(c);
      if (carried && plan.refused.empty()) plan.refused = reason;
      plan.request.push_back({c.placeholder, "", true, reason});
    }
  }
  return plan;
}

void ReplaceAll(const std::vector<StreamRewriter::Rule>& rules, std::string& text) {
  for (const auto& r : rules) {
    if (r.refuse) continue;
    for (size_t at = text.find(r.from); at != std::string::npos; at = text.find(r.from, at)) {
      text.replace(at, r.from.size(), r.to);
      at += r.to.size();
    }
  }
}

}  // namespace warden::egress
