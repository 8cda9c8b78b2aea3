#include "gateway/http/console.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace warden::gateway::http {
namespace {

// Names of their own: this file shares a unity translation unit with the other http/ files.
std::string ConsoleLower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view ConsoleTrim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string Hex(const unsigned char* data, std::size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[data[i] >> 4]);
    out.push_back(kDigits[data[i] & 15]);
  }
  return out;
}

// 256 bits from the kernel's CSPRNG (through OpenSSL), as 64 hex digits. Failing to get them is
// not survivable for a session table: throw, and the connection's guard drops the request.
std::string RandomToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("RAND_bytes failed");
  return Hex(bytes, sizeof bytes);
}

std::string Sha256Hex(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(text.data(), text.size(), digest, &n, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("SHA-256 failed");
  }
  return Hex(digest, n);
}

// "name", "name:port", "[v6]" or "[v6]:port" -> name and port ("" when none). False when
// malformed (userinfo, a path, an empty name, a port that is not digits).
bool SplitAuthority(std::string_view text, std::string* name, std::string* port) {
  std::string_view host = text;
  std::string_view rest;
  if (text.starts_with('[')) {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) return false;
    host = text.substr(0, close + 1);
    rest = text.substr(close + 1);
  } else if (const std::size_t colon = text.find(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    rest = text.substr(colon);
  }
  if (host.empty()) return false;
  for (char c : host) {
    const auto u = static_cast<unsigned char>(c);
    if (!(std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '[' || c == ']' ||
          c == ':')) {
      return false;
    }
  }
  port->clear();
  if (!rest.empty()) {
    if (rest.front() != ':' || rest.size() < 2 || rest.size() > 6) return false;
    for (char c : rest.substr(1)) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    }
    *port = std::to_string(std::stoul(std::string(rest.substr(1))));  // "08787" is 8787
  }
  *name = std::string(host);
  return true;
}

ConsoleReply JsonReply(int status, const nlohmann::json& body, HeaderList headers = {}) {
  return ConsoleReply{status, "application/json", body.dump(), std::move(headers)};
}

ConsoleReply ErrorReply(int status, const std::string& message, HeaderList headers = {}) {
  return JsonReply(status, {{"error", message}}, std::move(headers));
}

ConsoleReply MethodNotAllowed(const std::string& path, const char* allow) {
  return ErrorReply(405, path + " takes " + std::string(allow) + " only", {{"Allow", allow}});
}

ConsoleReply AssetReply(const ConsoleAsset& asset) {
  return ConsoleReply{
      200, std::string(ConsoleContentType(asset.name)), std::string(asset.content), {}};
}

// {"user", "tenant", "csrf"}: what the page needs to know about its session.
ConsoleReply SessionReply(const identity::Caller& caller, const std::string& csrf,
                          HeaderList headers = {}) {
  return JsonReply(200, {{"user", caller.user}, {"tenant", caller.tenant}, {"csrf", csrf}},
                   std::move(headers));
}

// The caller of a session's credential, if it still authenticates as a person.
std::optional<identity::Caller> Reauthenticate(const std::string& authorization,
                                               const std::string& peer, SessionHost& host) {
  Result<identity::Caller> caller = host.Authenticate(authorization, peer);
  if (!caller.ok() || !caller->agent.empty()) return std::nullopt;
  return std::move(caller).value();
}

ConsoleReply Login(const ConsoleRequest& request, SessionHost& host, ConsoleSessions& sessions) {
  nlohmann::json body = nlohmann::json::parse(request.body, nullptr, false);
  if (!body.is_object() || !body.contains("credential") || !body["credential"].is_string() ||
      body["credential"].get<std::string>().empty()) {
    return ErrorReply(400, "expected a JSON object {\"credential\": \"...\"}");
  }
  const std::string credential = body["credential"].get<std::string>();
  for (char c : credential) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return ErrorReply(400, "the credential holds a control character");
    }
  }
  // Exactly what an `Authorization: Bearer` header with it would be.
  std::string authorization = "Bearer " + credential;
  Result<identity::Caller> caller = host.Authenticate(authorization, request.peer);
  if (!caller.ok()) return ErrorReply(401, caller.status().message());
  if (!caller->agent.empty()) return ErrorReply(403, "agents may not use the console");
  ConsoleSessions::Opened opened =
      sessions.Open(std::move(authorization), std::chrono::steady_clock::now());
  return SessionReply(*caller, opened.csrf,
                      {{"Set-Cookie", SessionCookie(opened.token, request.secure)}});
}

ConsoleReply Session(const ConsoleRequest& request, SessionHost& host, ConsoleSessions& sessions) {
  for (const std::string& token : request.cookies) {
    auto found = sessions.Find(token, std::chrono::steady_clock::now());
    if (!found) continue;
    if (auto caller = Reauthenticate(found->authorization, request.peer, host)) {
      return SessionReply(*caller, found->csrf);
    }
    sessions.Close(token);  // its credential no longer works
  }
  // Single-user mode: the host authenticates a request without credentials as the local
  // operator. The page still gets a session, so that its state-changing requests carry a token
  // another origin cannot read.
  if (auto caller = Reauthenticate("", request.peer, host)) {
    ConsoleSessions::Opened opened = sessions.Open("", std::chrono::steady_clock::now());
    return SessionReply(*caller, opened.csrf,
                        {{"Set-Cookie", SessionCookie(opened.token, request.secure)}});
  }
  return ErrorReply(401, "not logged in to the console");
}

ConsoleReply Logout(const ConsoleRequest& request, ConsoleSessions& sessions) {
  for (const std::string& token : request.cookies) {
    auto found = sessions.Find(token, std::chrono::steady_clock::now());
    if (!found) continue;
    if (!ConstantTimeEquals(request.csrf, found->csrf)) {
      return ErrorReply(
          403, request.csrf.empty() ? "missing X-CSRF-Token header" : "bad X-CSRF-Token header");
    }
    sessions.Close(token);
  }
  return JsonReply(200, nlohmann::json::object(),
                   {{"Set-Cookie", ExpiredSessionCookie(request.secure)}});
}

bool IsApprovalId(std::string_view id) {
  return !id.empty() && id.size() <= 128 && std::all_of(id.begin(), id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

}  // namespace

const ConsoleAsset* FindConsoleAsset(std::string_view name) {
  for (std::size_t i = 0; i < kConsoleAssetCount; ++i) {
    if (kConsoleAssets[i].name == name) return &kConsoleAssets[i];
  }
  return nullptr;
}

std::string_view ConsoleContentType(std::string_view name) {
  if (name.ends_with(".html")) return "text/html; charset=utf-8";
  if (name.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (name.ends_with(".css")) return "text/css; charset=utf-8";
  return "application/octet-stream";
}

HeaderList ConsoleSecurityHeaders() {
  return {{"Content-Security-Policy", std::string(kConsoleCsp)},
          {"X-Content-Type-Options", "nosniff"},
          {"Referrer-Policy", "no-referrer"},
          {"X-Frame-Options", "DENY"},
          {"Cache-Control", "no-store"}};
}

bool IsConsolePath(std::string_view path) {
  return path == "/" || path.starts_with("/approvals/") || path == "/console" ||
         path.starts_with("/console/");
}

bool OriginIsOwn(std::string_view origin, std::string_view host) {
  host = ConsoleTrim(host);
  if (host.empty()) return false;
  std::string given = ConsoleLower(ConsoleTrim(origin));
  if (given.ends_with('/')) given.pop_back();
  std::string_view rest = given;
  std::string default_port;
  if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
    default_port = "80";
  } else if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
    default_port = "443";
  } else {
    return false;
  }
  std::string origin_name, origin_port, host_name, host_port;
  if (!SplitAuthority(rest, &origin_name, &origin_port)) return false;
  if (!SplitAuthority(ConsoleLower(host), &host_name, &host_port)) return false;
  if (origin_port.empty()) origin_port = default_port;
  if (host_port.empty()) host_port = default_port;
  return origin_name == host_name && origin_port == host_port;
}

std::vector<std::string> ConsoleCookieValues(std::string_view cookie_header) {
  std::vector<std::string> out;
  while (!cookie_header.empty()) {
    const std::size_t semi = cookie_header.find(';');
    std::string_view pair = ConsoleTrim(cookie_header.substr(0, semi));
    const std::size_t eq = pair.find('=');
    if (eq != std::string_view::npos && ConsoleTrim(pair.substr(0, eq)) == kConsoleCookie) {
      std::string_view value = ConsoleTrim(pair.substr(eq + 1));
      if (!value.empty()) out.emplace_back(value);
    }
    if (semi == std::string_view::npos) break;
    cookie_header.remove_prefix(semi + 1);
  }
  return out;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string SessionCookie(std::string_view token, bool secure) {
  std::string out = std::string(kConsoleCookie) + "=" + std::string(token) +
                    "; HttpOnly; SameSite=Strict; Path=/";
  if (secure) out += "; Secure";
  return out;
}

std::string ExpiredSessionCookie(bool secure) {
  std::string out = std::string(kConsoleCookie) + "=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0";
  if (secure) out += "; Secure";
  return out;
}

// ---- ConsoleSessions ----

ConsoleSessions::Opened ConsoleSessions::Open(std::string authorization,
                                              std::chrono::steady_clock::time_point now) {
  Opened opened{RandomToken(), RandomToken()};
  std::lock_guard lock(mu_);
  DropExpiredLocked(now);
  while (!sessions_.empty() && sessions_.size() >= options_.max_sessions) {
    auto oldest = std::min_element(sessions_.begin(), sessions_.end(), [](auto& a, auto& b) {
      return a.second.last_use < b.second.last_use;
    });
    sessions_.erase(oldest);
  }
  sessions_[Sha256Hex(opened.token)] = Entry{std::move(authorization), opened.csrf, now};
  return opened;
}

std::optional<ConsoleSessions::Found> ConsoleSessions::Find(
    std::string_view token, std::chrono::steady_clock::time_point now) {
  // Looked up by the token's hash: how long the lookup takes says nothing about the token.
  const std::string key = Sha256Hex(token);
  std::lock_guard lock(mu_);
  auto it = sessions_.find(key);
  if (it == sessions_.end() || !ConstantTimeEquals(it->first, key)) return std::nullopt;
  if (now - it->second.last_use > options_.idle_timeout) {
    sessions_.erase(it);
    return std::nullopt;
  }
  it->second.last_use = now;
  return Found{it->second.authorization, it->second.csrf};
}

void ConsoleSessions::Close(std::string_view token) {
  const std::string key = Sha256Hex(token);
  std::lock_guard lock(mu_);
  sessions_.erase(key);
}

std::size_t ConsoleSessions::size() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

void ConsoleSessions::DropExpiredLocked(std::chrono::steady_clock::time_point now) {
  std::erase_if(sessions_, [&](const auto& entry) {
    return now - entry.second.last_use > options_.idle_timeout;
  });
}

// ---- Requests ----

ConsoleReply ServeConsole(const ConsoleRequest& request, SessionHost& host,
                          ConsoleSessions& sessions) {
  const std::string& path = request.path;
  const bool get = request.method == "GET";
  if (path == "/" || path.starts_with("/approvals/")) {
    // One page for the list and every approval: the script reads the path.
    if (path != "/" && !IsApprovalId(std::string_view(path).substr(11))) {
      return ErrorReply(404, "no such page");
    }
    if (!get) return MethodNotAllowed(path, "GET");
    const ConsoleAsset* index = FindConsoleAsset("index.html");
    if (index == nullptr) return ErrorReply(404, "this build has no console");
    return AssetReply(*index);
  }
  if (path == "/console/login") {
    if (request.method != "POST") return MethodNotAllowed(path, "POST");
    return Login(request, host, sessions);
  }
  if (path == "/console/session") {
    if (!get) return MethodNotAllowed(path, "GET");
    return Session(request, host, sessions);
  }
  if (path == "/console/logout") {
    if (request.method != "POST") return MethodNotAllowed(path, "POST");
    return Logout(request, sessions);
  }
  if (path.starts_with("/console/")) {
    std::string_view name = std::string_view(path).substr(9);
    const ConsoleAsset* asset =
        name.find('/') == std::string_view::npos ? FindConsoleAsset(name) : nullptr;
    if (asset != nullptr) {
      if (!get) return MethodNotAllowed(path, "GET");
      return AssetReply(*asset);
    }
  }
  return ErrorReply(404, "no such console file: " + path);
}

std::optional<CookieCaller> CallerFromCookies(const std::vector<std::string>& cookies,
                                              const std::string& peer, SessionHost& host,
                                              ConsoleSessions& sessions) {
  for (const std::string& token : cookies) {
    auto found = sessions.Find(token, std::chrono::steady_clock::now());
    if (!found) continue;
    if (auto caller = Reauthenticate(found->authorization, peer, host)) {
      return CookieCaller{std::move(*caller), std::move(found->csrf)};
    }
    sessions.Close(token);
  }
  return std::nullopt;
}

bool IsStateChanging(std::string_view method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE";
}

}  // namespace warden::gateway::http
