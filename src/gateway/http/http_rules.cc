#include "gateway/http/http_rules.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace warden::gateway::http {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The media type of one Accept or Content-Type item: "Text/Event-Stream; q=1" ->
// "text/event-stream".
std::string MediaType(std::string_view item) { return Lower(Trim(item.substr(0, item.find(';')))); }

bool AllDigits(std::string_view s) {
  return !s.empty() && s.size() <= 5 &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

// "http://localhost", "https://127.0.0.1:5173", "http://[::1]:80" and the like.
bool IsLoopbackOrigin(std::string_view origin) {
  std::string_view rest = origin;
  if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
  } else {
    return false;
  }
  for (std::string_view host : {"localhost", "127.0.0.1", "[::1]"}) {
    if (!rest.starts_with(host)) continue;
    std::string_view tail = rest.substr(host.size());
    if (tail.empty()) return true;
    return tail.front() == ':' && AllDigits(tail.substr(1));
  }
  return false;
}

// "name", "name:port", "[v6]" or "[v6]:port", split; false when it is none of these (an IPv6
// address without brackets, an empty name, a port that is not 1 to 5 digits, a character that
// has no business in a host name such as '@', '/', or a space).
bool SplitHostPort(std::string_view text, std::string* name, std::string* port) {
  std::string_view rest = text;
  std::string_view host;
  if (rest.starts_with('[')) {
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    host = rest.substr(0, close + 1);
    rest.remove_prefix(close + 1);
    for (char c : host.substr(1, host.size() - 2)) {
      if (!(std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.')) return false;
    }
  } else {
    const std::size_t colon = rest.find(':');
    host = rest.substr(0, colon);
    rest.remove_prefix(host.size());
    if (host.empty()) return false;
    for (char c : host) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_')) {
        return false;
      }
    }
  }
  if (!rest.empty()) {
    if (rest.front() != ':' || !AllDigits(rest.substr(1))) return false;
    *port = std::string(rest.substr(1));
  } else {
    port->clear();
  }
  *name = Lower(host);
  return true;
}

}  // namespace

bool HostAllowed(std::string_view host, const std::vector<std::string>& allowed,
                 const std::vector<std::string>& own_names, std::uint16_t port) {
  host = Trim(host);
  if (host.empty()) return true;
  std::string name, given_port;
  if (!SplitHostPort(host, &name, &given_port)) return false;
  // "localhost:08787" is not port 8787's usual spelling; compare numbers, not text.
  const bool port_ok = given_port.empty() || std::stoul(given_port) == port;
  for (const std::string& own : own_names) {
    if (port_ok && name == Lower(own)) return true;
  }
  for (const std::string& entry : allowed) {
    std::string want_name, want_port;
    if (!SplitHostPort(Trim(entry), &want_name, &want_port) || want_name != name) continue;
    if (want_port.empty() || (!given_port.empty() && std::stoul(want_port) == std::stoul(given_port)))
      return true;
  }
  return false;
}

bool AcceptsMediaType(std::string_view accept, std::string_view media_type) {
  const std::string wanted = Lower(media_type);
  while (!accept.empty()) {
    std::size_t comma = accept.find(',');
    if (MediaType(accept.substr(0, comma)) == wanted) return true;
    if (comma == std::string_view::npos) break;
    accept.remove_prefix(comma + 1);
  }
  return false;
}

bool IsJsonContentType(std::string_view content_type) {
  return MediaType(content_type) == "application/json";
}

bool OriginAllowed(std::string_view origin, const std::vector<std::string>& allowed,
                   bool loopback_server) {
  if (origin.empty()) return true;
  std::string given = Lower(origin);
  if (given.ends_with('/')) given.pop_back();
  for (const std::string& entry : allowed) {
    std::string want = Lower(entry);
    if (want.ends_with('/')) want.pop_back();
    if (!want.empty() && want == given) return true;
  }
  // Ports are digits only, so "http://localhost.evil.example" or "http://localhost:80@evil" fail.
  return loopback_server && IsLoopbackOrigin(given);
}

bool SamePrincipal(const identity::Caller& a, const identity::Caller& b) {
  return a.tenant == b.tenant && a.user == b.user && a.agent == b.agent;
}

std::string SseEvent(std::string_view id, std::string_view data) {
  std::string out;
  out.reserve(data.size() + id.size() + 16);
  if (!id.empty()) out.append("id: ").append(id).append("\n");
  while (true) {
    std::size_t nl = data.find_first_of("\r\n");
    out.append("data: ").append(data.substr(0, nl)).append("\n");
    if (nl == std::string_view::npos) break;
    data.remove_prefix(nl + 1);
  }
  out.append("\n");
  return out;
}

std::string HttpChunk(std::string_view data) {
  char size[24];
  int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string out(size, static_cast<std::size_t>(n));
  out.append(data).append("\r\n");
  return out;
}

}  // namespace warden::gateway::http
