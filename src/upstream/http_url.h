// The parts of an upstream's Streamable HTTP endpoint that a request needs. Pure.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace warden::upstream {

struct HttpUrl {
  bool tls = false;         // https://
  std::string host;         // name or address, without IPv6 brackets
  std::string port;         // "80" (http) or "443" (https) when the URL names none
  std::string target;       // path and query, "/" when empty; never the fragment
  std::string host_header;  // the Host header: host[:port] as written in the URL
};

// Parses "http[s]://host[:port][/path][?query]". Refuses user info (credentials belong in
// Spec.headers), empty hosts, bad ports and spaces.
Result<HttpUrl> ParseHttpUrl(std::string_view url);

}  // namespace warden::upstream
