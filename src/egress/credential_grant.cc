#include "egress/credential_grant.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>

#include "egress/host_name.h"

namespace warden::egress {

namespace {

std::string FillTemplate(const std::string& value_template, const std::string& value) {
  std::string out = value_template;
  const size_t at = out.find("{}");
  out.replace(at, 2, value);
  return out;
}

// The reason to refuse a request that carries c's placeholder `where` (never the value).
std::string Misplaced(const EgressCredential& c, const std::string& where) {
  return "the placeholder of credential " + c.name + " may only go to " + CredentialDestination(c) +
         ", in its " + c.header + " header, where the proxy puts the value (it was in " + where + ")";
}

}  // namespace

Result<EgressCredential> MakeEgressCredential(std::string name, std::string_view host,
                                              uint16_t port, std::string value, bool tls,
                                              std::string header, std::string value_template) {
  const std::string what = "credential " + name;
  auto placement =
      sandbox::CheckCredentialPlacement(what, std::move(header), std::move(value_template));
  if (!placement) return placement.status();
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
  c.header = std::move(placement->header);
  c.value_template = std::move(placement->value_template);
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
                     uint16_t port, const http::RequestHead& head, bool tls) {
  GrantPlan plan;
  const std::string request_line = head.method + " " + head.target;
  for (const EgressCredential& c : credentials) {
    // A TLS credential never goes out in clear text, even to its own host.
    const bool here = c.host == host && c.port == port && c.tls == tls;
    if (here) {
      plan.headers.push_back({c.header, FillTemplate(c.value_template, c.value)});
      plan.response.push_back({c.value, c.placeholder, false, c.name});
      plan.used.push_back(c.name);
    }
    plan.request.push_back({c.placeholder, "", true, Misplaced(c, "the request body")});
    if (!plan.refused.empty()) continue;
    if (request_line.find(c.placeholder) != std::string::npos) {
      plan.refused = Misplaced(c, "the request line");
      continue;
    }
    for (const http::HeaderField& f : head.headers) {
      if (here && http::EqualsIgnoreCase(f.name, c.header)) continue;  // replaced as a whole
      if (f.name.find(c.placeholder) != std::string::npos ||
          f.value.find(c.placeholder) != std::string::npos) {
        plan.refused = Misplaced(c, "header " + f.name);
        break;
      }
    }
  }
  return plan;
}

std::string RefuseTunnel(const std::vector<EgressCredential>& credentials, std::string_view request,
                         std::string_view where) {
  for (const EgressCredential& c : credentials) {
    if (request.find(c.placeholder) != std::string_view::npos) return Misplaced(c, std::string(where));
  }
  return "";
}

std::string BuildGrantedRequestHead(const GrantPlan& plan, http::RequestHead head,
                                    const http::AbsoluteUrl& url, bool close,
                                    uint16_t default_port) {
  if (plan.headers.empty()) return http::BuildUpstreamRequestHead(head, url, close, default_port);
  std::erase_if(head.headers, [&plan](const http::HeaderField& f) {
    if (http::EqualsIgnoreCase(f.name, "accept-encoding")) return true;
    for (const auto& set : plan.headers) {
      if (http::EqualsIgnoreCase(f.name, set.name)) return true;
    }
    return false;
  });
  std::string out = http::BuildUpstreamRequestHead(head, url, close, default_port);
  std::string fields;
  for (const auto& set : plan.headers) fields += set.name + ": " + set.value + "\r\n";
  fields += "Accept-Encoding: identity\r\n";
  out.insert(out.size() - 2, fields);  // before the empty line that ends the head
  return out;
}

std::string UnmaskableResponse(const http::ResponseHead& head) {
  int transfer_codings = 0;
  for (const http::HeaderField& f : head.headers) {
    if (http::EqualsIgnoreCase(f.name, "content-encoding")) {
      std::string_view v = f.value;
      while (!v.empty()) {
        const size_t comma = v.find(',');
        std::string_view item = v.substr(0, comma);
        while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
        while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
        if (!item.empty() && !http::EqualsIgnoreCase(item, "identity")) {
          // Not quoted: what the server sent could hold the value.
          return "the answer has a Content-Encoding other than identity (the proxy asked for "
                 "identity); an encoded answer cannot be masked";
        }
        if (comma == std::string_view::npos) break;
        v.remove_prefix(comma + 1);
      }
    } else if (http::EqualsIgnoreCase(f.name, "transfer-encoding")) {
      if (++transfer_codings > 1 || !http::EqualsIgnoreCase(f.value, "chunked")) {
        return "the answer has a transfer coding other than one chunked; it cannot be masked";
      }
    }
  }
  return "";
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
