#include "gateway/http_rules.h"

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

}  // namespace

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

bool SamePrincipal(const Caller& a, const Caller& b) {
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
