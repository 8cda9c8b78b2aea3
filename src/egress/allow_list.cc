#include "egress/allow_list.h"

namespace warden::egress {

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Status EntryError(std::string_view entry, const std::string& why) {
  return Status::Error("allow entry " + Quote(entry) + " " + why);
}

Result<uint16_t> ParsePort(std::string_view entry, std::string_view text) {
  if (text.empty() || text.size() > 5) {
    return EntryError(entry, "has an invalid port (expected 1-65535)");
  }
  uint32_t port = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return EntryError(entry, "has an invalid port (expected 1-65535)");
    port = port * 10 + static_cast<uint32_t>(c - '0');
  }
  if (port == 0 || port > 65535) return EntryError(entry, "has an invalid port (expected 1-65535)");
  return static_cast<uint16_t>(port);
}

// Splits "host", "host:port", "[v6]", "[v6]:port" and bare "v6". Leaves host validation to
// the caller.
Status SplitHostPort(std::string_view entry, std::string_view& host,
                     std::optional<uint16_t>& port) {
  std::string_view port_text;
  bool has_port = false;
  if (!entry.empty() && entry.front() == '[') {
    size_t close = entry.find(']');
    if (close == std::string_view::npos) return EntryError(entry, "has an unclosed '['");
    host = entry.substr(0, close + 1);
    std::string_view rest = entry.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return EntryError(entry, "has text after ']' that is not :PORT");
      port_text = rest.substr(1);
      has_port = true;
    }
  } else {
    size_t first = entry.find(':');
    if (first != std::string_view::npos && entry.find(':', first + 1) != std::string_view::npos) {
      host = entry;  // a bare IPv6 literal: no port possible without brackets
    } else if (first != std::string_view::npos) {
      host = entry.substr(0, first);
      port_text = entry.substr(first + 1);
      has_port = true;
    } else {
      host = entry;
    }
  }
  if (has_port) {
    auto p = ParsePort(entry, port_text);
    if (!p.ok()) return p.status();
    port = *p;
  }
  return Status::Ok();
}

std::string RuleText(std::string_view host, bool v6, std::optional<uint16_t> port) {
  std::string text = (v6 && port) ? "[" + std::string(host) + "]" : std::string(host);
  if (port) text += ":" + std::to_string(*port);
  return text;
}

}  // namespace

bool AllowRule::MatchesHost(const Host& h) const {
  switch (kind) {
    case Kind::kAddress:
      return h.address && address && *h.address == *address;
    case Kind::kExactHost:
      return !h.address && h.name == host;
    case Kind::kSubdomains:
      return !h.address && h.name.size() > host.size() + 1 && h.name.ends_with(host) &&
             h.name[h.name.size() - host.size() - 1] == '.';
  }
  return false;
}

std::string DescribePorts(const AllowRule& rule) {
  return rule.port ? std::to_string(*rule.port) : std::string("80, 443");
}

Result<AllowRule> AllowList::ParseEntry(std::string_view raw) {
  std::string_view entry = Trim(raw);
  if (entry.empty()) return Status::Error("allow entry is empty");
  if (entry.find("://") != std::string_view::npos ||
      entry.find_first_of("/?#@") != std::string_view::npos) {
    return EntryError(entry,
                      "is a URL or has a path; write a host, e.g. example.com or example.com:443");
  }
  std::string_view host_text;
  AllowRule rule;
  WARDEN_RETURN_IF_ERROR(SplitHostPort(entry, host_text, rule.port));
  std::string host = ToLowerAscii(host_text);
  if (host.size() > 1 && host.back() == '.') host.pop_back();

  if (host == "*") return EntryError(entry, "would allow every host; name the hosts instead");
  const bool wildcard = host.starts_with("*.");
  std::string_view name = wildcard ? std::string_view(host).substr(2) : std::string_view(host);
  if (name.find('*') != std::string_view::npos) {
    return EntryError(entry, "has a '*' that is not a leading \"*.\" label");
  }

  HostSpelling spelling = ClassifyHostSpelling(name);
  if (spelling.kind != HostSpelling::Kind::kName) {
    if (wildcard) return EntryError(entry, "puts a wildcard over an IP address");
    auto canonical = ParseCanonicalIp(name);
    if (!canonical) {
      return EntryError(entry, spelling.kind == HostSpelling::Kind::kAddress
                                   ? "is an IP address in a non-standard spelling; write it as " +
                                         spelling.address.ToString()
                                   : "is neither a valid host name nor an IP address");
    }
    rule.kind = AllowRule::Kind::kAddress;
    rule.address = *canonical;
    rule.host = canonical->ToString();
    rule.text = RuleText(rule.host, canonical->is_v6(), rule.port);
    return rule;
  }
  Status valid = ValidateHostName(name);
  if (!valid.ok()) return EntryError(entry, "is not a valid host name: " + valid.message());
  if (wildcard && name.find('.') == std::string_view::npos) {
    return EntryError(entry, "would allow a whole top-level domain; name a domain below it");
  }
  rule.kind = wildcard ? AllowRule::Kind::kSubdomains : AllowRule::Kind::kExactHost;
  rule.host = std::string(name);
  rule.text = RuleText(host, false, rule.port);
  return rule;
}

Result<AllowList> AllowList::Parse(const std::vector<std::string>& entries) {
  AllowList list;
  for (const auto& e : entries) {
    auto rule = ParseEntry(e);
    if (!rule.ok()) return rule.status();
    list.rules_.push_back(std::move(rule).value());
  }
  return list;
}

Verdict AllowList::Permits(std::string_view host, uint16_t port) const {
  auto parsed = ParseHost(host);
  if (!parsed.ok()) return Verdict::Deny(parsed.status().message());
  return Permits(*parsed, port);
}

Verdict AllowList::Permits(const Host& host, uint16_t port) const {
  const AllowRule* host_only_match = nullptr;
  for (const auto& rule : rules_) {
    if (!rule.MatchesHost(host)) continue;
    if (rule.AllowsPort(port)) return Verdict::Allow(rule.text);
    if (!host_only_match) host_only_match = &rule;
  }
  const char* what = host.address ? "address " : "host ";
  if (host_only_match) {
    return Verdict::Deny("port " + std::to_string(port) + " is not allowed for " + host.name +
                         " (allow entry " + host_only_match->text + " allows " +
                         DescribePorts(*host_only_match) + ")");
  }
  return Verdict::Deny(what + host.name + " is not on the allow-list");
}

const AllowRule* AllowList::FindAddressRule(const IpAddress& address, uint16_t port) const {
  for (const auto& rule : rules_) {
    if (rule.kind == AllowRule::Kind::kAddress && rule.address && *rule.address == address &&
        rule.AllowsPort(port)) {
      return &rule;
    }
  }
  return nullptr;
}

}  // namespace warden::egress
