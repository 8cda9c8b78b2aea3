#include "upstream/http_url.h"

#include <algorithm>
#include <cctype>

namespace warden::upstream {

Result<HttpUrl> ParseHttpUrl(std::string_view url) {
  const std::string quoted = "'" + std::string(url) + "'";
  constexpr std::string_view kHttp = "http://";
  constexpr std::string_view kHttps = "https://";
  const bool tls = url.substr(0, kHttps.size()) == kHttps;
  if (!tls && url.substr(0, kHttp.size()) != kHttp)
    return Status::Error("upstream URL " + quoted + ": must start with http:// or https://");
  if (std::any_of(url.begin(), url.end(), [](unsigned char c) { return c <= ' ' || c == 0x7f; }))
    return Status::Error("upstream URL " + quoted + ": contains spaces or control characters");
  std::string_view rest = url.substr(tls ? kHttps.size() : kHttp.size());
  rest = rest.substr(0, rest.find('#'));
  const size_t path_at = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, path_at);
  HttpUrl out;
  out.tls = tls;
  out.target = path_at == std::string_view::npos ? "/" : std::string(rest.substr(path_at));
  if (out.target.front() == '?') out.target.insert(0, "/");
  if (authority.find('@') != std::string_view::npos)
    return Status::Error("upstream URL " + quoted +
                         ": user info is not allowed; put credentials in headers");
  out.host_header = std::string(authority);
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos)
      return Status::Error("upstream URL " + quoted + ": unterminated [IPv6] host");
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return Status::Error("upstream URL " + quoted + ": junk after ]");
      port = after.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (out.host.empty()) return Status::Error("upstream URL " + quoted + ": no host");
  if (port.empty()) {
    out.port = tls ? "443" : "80";
  } else {
    const bool digits =
        port.size() <= 5 &&
        std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c); });
    if (!digits || std::stoul(std::string(port)) == 0 || std::stoul(std::string(port)) > 65535)
      return Status::Error("upstream URL " + quoted + ": bad port '" + std::string(port) + "'");
    out.port = std::string(port);
  }
  return out;
}

}  // namespace warden::upstream
