// The approvals console of `warden serve` (docs/approvals.md "The console"): the files of web/,
// embedded in the binary at build time, served at `/`, `/approvals/ID` and `/console/FILE`; and
// the console's sessions: `POST /console/login` turns a person's credential into an HttpOnly
// cookie and a CSRF token, which then authenticate /api/ requests from the console's page.
//
// Everything here is synchronous and non-blocking (SessionHost::Authenticate must not block), so
// the connection answers on its I/O thread. The security rules:
//  * every console response carries kConsoleSecurityHeaders (a CSP without inline script or style,
//    nosniff, no referrer, no caching);
//  * a request whose Origin is present must come from the listener's own origin (OriginIsOwn);
//    the connection checks this before calling in here;
//  * an agent's credential never opens a session (people decide approvals, never agents);
//  * session tokens are 256 random bits; the table is keyed by their SHA-256, and tokens and CSRF
//    tokens are compared in constant time.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "gateway/http/http_server.h"

namespace warden::gateway::http {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// One file of web/ as embedded by the build (src/gateway/http/embed_web.cmake writes the table
// into console_assets.cc): its name in web/ ("app.js") and its bytes.
struct ConsoleAsset {
  std::string_view name;
  std::string_view content;
};
extern const ConsoleAsset kConsoleAssets[];
extern const std::size_t kConsoleAssetCount;

// The embedded file `name`, or nullptr.
const ConsoleAsset* FindConsoleAsset(std::string_view name);
// The Content-Type for a file name by its extension (.html, .js, .css; else
// application/octet-stream).
std::string_view ConsoleContentType(std::string_view name);

// Headers on every console response (and on /api/ answers to the console: harmless there).
inline constexpr std::string_view kConsoleCsp =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
HeaderList ConsoleSecurityHeaders();

// The name of the console's session cookie.
inline constexpr std::string_view kConsoleCookie = "warden_console";

// True for the paths the console serves: "/", "/approvals/ID", "/console" and "/console/...".
bool IsConsolePath(std::string_view path);

// Whether `origin` (an Origin header's value, not empty) is the listener's own origin as the
// browser saw it: http or https with the host and port of the request's `host` header (already
// checked by HostAllowed). A port equal to the scheme's default may be left out on either side.
// Without a Host header no origin is own. Case-insensitive; "null" is never own.
bool OriginIsOwn(std::string_view origin, std::string_view host);

// The values of every `warden_console` cookie in a Cookie header value ("a=1; warden_console=T").
std::vector<std::string> ConsoleCookieValues(std::string_view cookie_header);

// Constant-time equality of two strings (the lengths may leak, the contents do not).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// A `Set-Cookie` value starting a session with `token`, and one ending it.
std::string SessionCookie(std::string_view token, bool secure);
std::string ExpiredSessionCookie(bool secure);

struct ConsoleSessionOptions {
  std::chrono::seconds idle_timeout{12 * 3600};  // a session unused this long is gone
  std::size_t max_sessions = 1000;  // at the cap, a new session evicts the least recently used
};

// The console's sessions, in memory (a restart logs everyone out). Thread-safe.
//
// A session keeps the credential it was opened with (or "" for the single-user mode's ambient
// local operator) rather than the Caller: every use authenticates it again through the host, so a
// key removed by a policy reload or an expired JWT ends the session at once.
class ConsoleSessions {
 public:
  explicit ConsoleSessions(ConsoleSessionOptions options = {}) : options_(options) {}

  struct Opened {
    std::string token;  // the cookie's value: 64 hex digits (256 random bits)
    std::string csrf;   // the X-CSRF-Token value: 64 hex digits
  };
  // Opens a session for `authorization` (an Authorization header value, "" for ambient).
  Opened Open(std::string authorization, std::chrono::steady_clock::time_point now);

  struct Found {
    std::string authorization;
    std::string csrf;
  };
  // The session named by `token` if it exists and has not been idle too long; counts as use.
  std::optional<Found> Find(std::string_view token, std::chrono::steady_clock::time_point now);
  // Ends the session named by `token` (nothing when there is none).
  void Close(std::string_view token);
  std::size_t size() const;

 private:
  struct Entry {
    std::string authorization;
    std::string csrf;
    std::chrono::steady_clock::time_point last_use;
  };
  void DropExpiredLocked(std::chrono::steady_clock::time_point now);

  const ConsoleSessionOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> sessions_;  // by SHA-256 of the token (hex)
};

// A console request: what the connection read, and about the listener.
struct ConsoleRequest {
  std::string method;                // "GET", "POST", ...
  std::string path;                  // no query
  std::string body;                  // POST: checked to be application/json by the connection
  std::vector<std::string> cookies;  // the warden_console cookie values sent
  std::string csrf;                  // the X-CSRF-Token header
  std::string peer;
  bool secure = false;  // the listener speaks TLS: cookies get `Secure`
};
struct ConsoleReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  HeaderList headers;  // besides ConsoleSecurityHeaders, which the connection adds
};

// Answers one console request (static files, login, session, logout). `host` authenticates the
// credential of a login, and every later use of a session.
ConsoleReply ServeConsole(const ConsoleRequest& request, SessionHost& host,
                          ConsoleSessions& sessions);

// Who an /api/ request without an Authorization header is, by its console cookie: the caller and
// the session's CSRF token, or nullopt when no cookie names a live session (or the session's
// credential no longer authenticates, which ends it).
struct CookieCaller {
  identity::Caller caller;
  std::string csrf;
};
std::optional<CookieCaller> CallerFromCookies(const std::vector<std::string>& cookies,
                                              const std::string& peer, SessionHost& host,
                                              ConsoleSessions& sessions);

// True for methods that change state (POST, PUT, PATCH, DELETE): those need X-CSRF-Token when
// the request is authenticated by the cookie or by nothing.
bool IsStateChanging(std::string_view method);

}  // namespace warden::gateway::http
