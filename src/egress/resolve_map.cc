#include "egress/resolve_map.h"

#include "egress/host_name.h"

namespace warden::egress {

Status ResolveMap::Add(std::string_view host_text, std::string_view ips) {
  const std::string entry = std::string(host_text) + "=" + std::string(ips);
  auto fail = [&](const std::string& why) {
    return Status::Error("--resolve " + Quote(entry) + ": " + why);
  };
  auto host = ParseHost(host_text);
  if (!host.ok()) return fail(host.status().message());
  if (host->address) return fail("the host is an IP address; map a name");
  std::vector<IpAddress> addresses;
  size_t start = 0;
  while (start <= ips.size()) {
    size_t comma = ips.find(',', start);
    if (comma == std::string_view::npos) comma = ips.size();
    std::string_view one = ips.substr(start, comma - start);
    auto ip = ParseCanonicalIp(one);
    if (!ip) return fail(Quote(one) + " is not an IP address (write a.b.c.d or an IPv6 address)");
    addresses.push_back(*ip);
    start = comma + 1;
  }
  auto& slot = map_[host->name];
  slot.insert(slot.end(), addresses.begin(), addresses.end());
  return Status::Ok();
}

Result<ResolveMap> ResolveMap::Parse(const std::map<std::string, std::string>& entries) {
  ResolveMap map;
  for (const auto& [host, ips] : entries) WARDEN_RETURN_IF_ERROR(map.Add(host, ips));
  return map;
}

Result<ResolveMap> ResolveMap::ParseEntries(const std::vector<std::string>& entries) {
  ResolveMap map;
  for (const auto& e : entries) {
    size_t eq = e.find('=');
    if (eq == std::string::npos) {
      return Status::Error("--resolve " + Quote(e) + ": expected HOST=IP");
    }
    WARDEN_RETURN_IF_ERROR(
        map.Add(std::string_view(e).substr(0, eq), std::string_view(e).substr(eq + 1)));
  }
  return map;
}

const std::vector<IpAddress>* ResolveMap::Find(std::string_view host) const {
  auto it = map_.find(host);
  return it == map_.end() ? nullptr : &it->second;
}

}  // namespace warden::egress
