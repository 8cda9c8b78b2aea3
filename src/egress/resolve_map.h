// Fixed name -> address mappings given with `--resolve HOST=IP`: the proxy uses them instead of
// DNS for those hosts, and the address guard lets an allowed host reach its mapped address even in
// a refused range (that is how tests reach servers on loopback).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "egress/ip_address.h"

namespace warden::egress {

class ResolveMap {
 public:
  ResolveMap() = default;

  // HOST -> IP as sandbox::Options::resolve holds them. IP may be a comma-separated list
  // ("192.0.2.1,2001:db8::1"), tried in order. HOST must be a valid name (no wildcard, no
  // address); IP must be canonical. Errors name the entry: `--resolve "x=1.2.3": ...`.
  static Result<ResolveMap> Parse(const std::map<std::string, std::string>& entries);
  // The same from "HOST=IP" strings.
  static Result<ResolveMap> ParseEntries(const std::vector<std::string>& entries);

  // The addresses mapped for `host` (already normalised: lower case, no trailing dot), or
  // nullptr when it has no mapping.
  const std::vector<IpAddress>* Find(std::string_view host) const;
  bool empty() const { return map_.empty(); }

 private:
  Status Add(std::string_view host, std::string_view ips);
  std::map<std::string, std::vector<IpAddress>, std::less<>> map_;
};

}  // namespace warden::egress
