#include "gateway/http/http_connection.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "gateway/http/console.h"
#include "gateway/http/http_replay.h"
#include "gateway/http/http_rules.h"
#include "mcp/modern.h"
#include "mcp/protocol_version.h"
#include "monitor/metrics.h"

namespace warden::gateway::http {
namespace {

namespace beast = boost::beast;
namespace net = boost::asio;
namespace bhttp = boost::beast::http;
using HttpStatus = bhttp::status;

// Bytes queued for a client that does not read: past this the connection is dropped rather than
// buffering without bound (a stalled SSE reader).
constexpr std::size_t kMaxQueuedBytes = 8 << 20;
// Bytes of a pipelined next request kept while a response is pending.
constexpr std::size_t kMaxPipelinedBytes = 64 << 10;
constexpr std::size_t kMaxHeaderBytes = 16 << 10;

// The body of a refusal on the MCP endpoint: a JSON-RPC error without an id, as the transport
// spec suggests, so MCP clients can show the message.
std::string ErrorBody(int code, const std::string& message) {
  return mcp::Serialize(mcp::MakeError(std::nullopt, code, message));
}

bool IsHttpParseError(const beast::error_code& ec) {
  return ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category();
}

bool IsInitialize(const mcp::ParsedEntry& entry) {
  if (entry.index() != 0) return false;
  const auto* request = std::get_if<mcp::Request>(&std::get<0>(entry));
  return request != nullptr && request->method == "initialize";
}

// A header value fit for an error message: at most 100 bytes, control bytes as '?'.
std::string PrintableHeader(std::string_view value) {
  std::string out;
  for (char c : value.substr(0, 100)) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20 || u >= 0x7f ? '?' : c);
  }
  return out;
}

bool HasInitializeVersion(const mcp::ParsedEntry& entry) {
  const auto* message = std::get_if<mcp::Message>(&entry);
  const auto* request = message ? std::get_if<mcp::Request>(message) : nullptr;
  return request && request->params && request->params->is_object() &&
         request->params->contains("protocolVersion");
}

std::string SupportedVersionsText() {
  std::string out;
  for (std::string_view v : mcp::kSupportedVersions) {
    if (!out.empty()) out += ", ";
    out += v;
  }
  return out;
}

// Ends the session's "requests in flight" count once every callback of a POST is gone: after
// its replies, or when the session drops the exchange.
struct PostToken {
  PostToken(std::shared_ptr<ServerShared> s, std::string i)
      : shared(std::move(s)), id(std::move(i)) {
    shared->sessions.BeginPost(id);
  }
  ~PostToken() { shared->sessions.EndPost(id); }
  std::shared_ptr<ServerShared> shared;
  std::string id;
};

}  // namespace

HttpConnection::HttpConnection(net::ip::tcp::socket socket, std::shared_ptr<ServerShared> shared)
    : stream_(std::move(socket)),
      shared_(std::move(shared)),
      keepalive_(stream_.get_executor()),
      sse_timer_(stream_.get_executor()) {
  beast::error_code ec;
  auto endpoint = stream_.socket().remote_endpoint(ec);
  if (!ec) peer_ = endpoint.address().to_string();
  auto local = stream_.socket().local_endpoint(ec);
  if (!ec) {
    net::ip::address address = local.address();
    if (address.is_v6() && address.to_v6().is_v4_mapped()) {
      address = net::ip::make_address_v4(net::ip::v4_mapped, address.to_v6());
    }
    local_host_ = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
  }
}

void HttpConnection::Start() {
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->ReadHeader(); });
}

void HttpConnection::ForceClose() { Close(); }

// ---- Reading requests ----

void HttpConnection::ReadHeader() {
  if (closed_ || shared_->stopping) return Close();
  api_ = false;
  console_ = false;
  cors_.clear();
  body_limit_ = shared_->options.max_body_bytes;
  parser_.emplace();
  parser_->header_limit(kMaxHeaderBytes);
  // The size limit is applied by ServePost once the other headers are checked, so a body that is
  // too big gets 413 rather than a parse error.
  parser_->body_limit(boost::none);
  stream_.expires_after(shared_->options.header_timeout);
  bhttp::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnHeader(ec); });
}

void HttpConnection::OnHeader(beast::error_code ec) {
  if (ec) {
    if (ec == bhttp::error::header_limit) {
      return Refuse(HttpStatus::request_header_fields_too_large, mcp::kInvalidRequest,
                    "request head over " + std::to_string(kMaxHeaderBytes) + " bytes", false);
    }
    if (IsHttpParseError(ec) && ec != bhttp::error::end_of_stream &&
        ec != bhttp::error::partial_message) {
      return Refuse(HttpStatus::bad_request, mcp::kInvalidRequest,
                    "malformed HTTP request: " + ec.message(), false);
    }
    return Close();  // the client went away, or sent nothing in time
  }
  stream_.expires_never();
  const auto& req = parser_->get();
  request_version_ = req.version();
  request_keep_alive_ = req.keep_alive();
  chunked_ = request_version_ >= 11;
  Route();
}

void HttpConnection::ReadBody() {
  parser_->body_limit(body_limit_);
  stream_.expires_after(2 * shared_->options.header_timeout);
  bhttp::async_read(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnBody(ec); });
}

void HttpConnection::OnBody(beast::error_code ec) {
  if (ec == bhttp::error::body_limit) {
    return Refuse(HttpStatus::payload_too_large, mcp::kInvalidRequest,
                  "request body over the limit of " + std::to_string(body_limit_) + " bytes",
                  false);
  }
  if (ec) {
    if (IsHttpParseError(ec) && ec != bhttp::error::end_of_stream &&
        ec != bhttp::error::partial_message) {
      return Refuse(HttpStatus::bad_request, mcp::kInvalidRequest,
                    "malformed HTTP request body: " + ec.message(), false);
    }
    return Close();
  }
  stream_.expires_never();
  if (api_) return ServeApiBody();
  if (console_) return ServeConsoleRequestBody();
  ServePostBody();
}

bool HttpConnection::KeepAliveAfterRefusal() const {
  // A body we did not read would be taken for the next request: close instead.
  return request_keep_alive_ && parser_ && parser_->is_done();
}

std::string HttpConnection::Header(std::string_view name) const {
  const auto& req = parser_->get();
  auto it = req.find(name);  // case-insensitive
  return it == req.end() ? std::string() : std::string(it->value());
}

// ---- Routing ----

void HttpConnection::Route() {
  const auto& req = parser_->get();
  std::string_view target = req.target();
  std::string_view path = target.substr(0, target.find('?'));
  const bool keep = KeepAliveAfterRefusal();

  // DNS-rebinding defence, first half: a rebound page's requests name the attacker's host in
  // Host (its own origin, as far as the browser knows), and a client need not send Origin.
  if (req.count(bhttp::field::host) > 1) {
    return Refuse(HttpStatus::bad_request, mcp::kInvalidRequest, "more than one Host header", keep);
  }
  if (std::string host = Header("Host"); !host.empty()) {
    std::vector<std::string> own = shared_->own_host_names;
    if (!local_host_.empty()) own.push_back(local_host_);
    if (!HostAllowed(host, shared_->options.allowed_hosts, own, shared_->port)) {
      return Refuse(HttpStatus::forbidden, mcp::kInvalidRequest,
                    "host '" + PrintableHeader(host) +
                        "' is not allowed (not this server's address; see --allow-host)",
                    keep);
    }
  }
  if (path == "/healthz") {
    if (req.method() != bhttp::verb::get) {
      return Refuse(HttpStatus::method_not_allowed, mcp::kInvalidRequest, "/healthz takes GET only",
                    keep, {{"Allow", "GET"}});
    }
    return SendJson(HttpStatus::ok, R"({"status":"ok"})", keep);
  }
  if (path == "/.well-known/jwks.json" && shared_->options.jwks) {
    // Public keys only: no credentials asked, no CORS needed (servers fetch it, not pages).
    if (req.method() != bhttp::verb::get) {
      return Refuse(HttpStatus::method_not_allowed, mcp::kInvalidRequest,
                    "/.well-known/jwks.json takes GET only", keep, {{"Allow", "GET"}});
    }
    return SendJson(HttpStatus::ok, shared_->options.jwks(), keep);
  }
  if (path == "/.well-known/warden-revoked.json" && shared_->options.revoked) {
    // As the JWKS: what an upstream checks a token against, no credentials asked.
    if (req.method() != bhttp::verb::get) {
      return Refuse(HttpStatus::method_not_allowed, mcp::kInvalidRequest,
                    "/.well-known/warden-revoked.json takes GET only", keep, {{"Allow", "GET"}});
    }
    return SendJson(HttpStatus::ok, shared_->options.revoked(), keep);
  }
  if (path == "/metrics" && shared_->options.metrics) {
    if (req.method() != bhttp::verb::get) {
      return Refuse(HttpStatus::method_not_allowed, mcp::kInvalidRequest, "/metrics takes GET only",
                    keep, {{"Allow", "GET"}});
    }
    // A scraper sends no Origin; a page that does must not learn the figures (a loopback peer
    // needs no key).
    if (req.find(bhttp::field::origin) != req.end()) {
      return Refuse(HttpStatus::forbidden, mcp::kInvalidRequest,
                    "/metrics does not answer browser pages (the request carries an Origin)",
                    keep);
    }
    Result<std::string> body = shared_->options.metrics(Header("Authorization"), peer_);
    if (!body) {
      shared_->host.Refused(identity::Caller{}, 401, "/metrics: " + body.status().message(), peer_);
      return SendJson(HttpStatus::unauthorized,
                      nlohmann::json{{"error", body.status().message()}}.dump(), keep,
                      {{"WWW-Authenticate", "Bearer"}});
    }
    return SendBody(HttpStatus::ok, monitor::kContentType, std::move(*body), keep);
  }
  api_ = path == "/api" || path.starts_with("/api/");
  console_ = !api_ && path != shared_->options.path && IsConsolePath(path);
  if (!api_ && !console_ && path != shared_->options.path) {
    return Refuse(HttpStatus::not_found, mcp::kInvalidRequest,
                  "no such endpoint; MCP is served at " + shared_->options.path +
                      ", the approvals console at /",
                  keep);
  }
  const bool has_origin = req.find(bhttp::field::origin) != req.end();
  std::string origin = Header("Origin");
  // The console answers its own pages only: no CORS, no other origin (its session cookie and
  // CSRF token must never be readable or usable from another page).
  if (console_) {
    if (has_origin && !OriginIsOwn(origin, Header("Host"))) {
      return Refuse(HttpStatus::forbidden, mcp::kInvalidRequest,
                    "origin '" + PrintableHeader(origin) +
                        "' is not this server's own: the console takes same-origin requests only",
                    keep);
    }
    return ServeConsoleRequest();
  }
  // Second half: a browser page from another origin must not reach a local server.
  // The same rule for the admin API, and for CORS preflights.
  if (has_origin && (origin.empty() ||
                     !OriginAllowed(origin, shared_->options.allowed_origins, shared_->loopback))) {
    return Refuse(HttpStatus::forbidden, mcp::kInvalidRequest, "origin '" + origin + "' is not allowed",
                  keep);
  }
  // Responses differ by Origin; an allowed one may read them, and the session id header.
  cors_.emplace_back("Vary", "Origin");
  if (has_origin) {
    cors_.emplace_back("Access-Control-Allow-Origin", origin);
    cors_.emplace_back("Access-Control-Expose-Headers", "Mcp-Session-Id");
  }
  const bhttp::verb method = req.method();
  if (method == bhttp::verb::options) return ServePreflight(has_origin);
  // The admin API is stricter than MCP: besides the listener's own origin, only an origin the
  // operator named (--allow-origin), never "any loopback page".
  if (api_ && has_origin && !OriginIsOwn(origin, Header("Host")) &&
      !OriginAllowed(origin, shared_->options.allowed_origins, false)) {
    return Refuse(HttpStatus::forbidden, mcp::kInvalidRequest,
                  "origin '" + PrintableHeader(origin) +
                      "' is not allowed: the admin API takes this server's own origin, or one "
                      "named by --allow-origin",
                  keep);
  }
  if (!api_ && method != bhttp::verb::post && method != bhttp::verb::get &&
      method != bhttp::verb::delete_) {
    return Refuse(
        HttpStatus::method_not_allowed, mcp::kInvalidRequest,
        "method " + std::string(req.method_string()) + " is not allowed; use POST, GET or DELETE",
        keep, {{"Allow", "GET, POST, DELETE, OPTIONS"}});
  }
  if (api_) return AuthenticateApi();
  Result<identity::Caller> caller = shared_->host.Authenticate(Header("Authorization"), peer_);
  if (!caller.ok()) {
    shared_->host.Refused(identity::Caller{}, 401, caller.status().message(), peer_);
    nlohmann::json body = {{"error", caller.status().message()}};
    return SendJson(HttpStatus::unauthorized, body.dump(), keep, {{"WWW-Authenticate", "Bearer"}});
  }
  caller_ = std::move(caller).value();
  if (method == bhttp::verb::post) return ServePost();
  if (method == bhttp::verb::get) return ServeGet();
  return ServeDelete();
}

bool HttpConnection::CheckProtocolVersionHeader() {
  // Absent: the spec says assume 2025-03-26; the session knows what was negotiated, so nothing
  // depends on the header. Present: it must name a version warden speaks; an empty (or blank)
  // value is not a version, and is refused like any other value that is not one.
  const auto& req = parser_->get();
  if (req.find("MCP-Protocol-Version") == req.end()) return true;
  std::string version = Header("MCP-Protocol-Version");
  if (mcp::IsSupportedVersion(version)) return true;
  if (version.find_first_not_of(" \t") == std::string::npos) {
    Refuse(HttpStatus::bad_request, mcp::kInvalidRequest,
           "empty MCP-Protocol-Version header: send a version (supported: " +
               SupportedVersionsText() + ") or leave the header out",
           KeepAliveAfterRefusal());
    return false;
  }
  Refuse(HttpStatus::bad_request, mcp::kInvalidRequest,
         "unsupported MCP-Protocol-Version '" + version +
             "' (supported: " + SupportedVersionsText() + ")",
         KeepAliveAfterRefusal());
  return false;
}

// ---- OPTIONS: CORS preflight ----

void HttpConnection::ServePreflight(bool has_origin) {
  // A browser asks before a cross-origin request with custom headers; it sends no credentials,
  // so the answer does not depend on who asks. The origin was checked in Route: a disallowed one
  // got 403 there.
  Headers headers = {{"Allow", "GET, POST, DELETE, OPTIONS"}};
  if (has_origin) {
    headers.emplace_back("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
    headers.emplace_back("Access-Control-Allow-Headers",
                         "Content-Type, Authorization, Mcp-Session-Id, MCP-Protocol-Version, "
                         "Last-Event-ID, Accept");
    headers.emplace_back("Access-Control-Max-Age", "600");
  }
  SendEmpty(HttpStatus::no_content, KeepAliveAfterRefusal(), headers);
}

// ---- The admin API (/api/...) ----

void HttpConnection::AuthenticateApi() {
  const auto& req = parser_->get();
  const bool keep = KeepAliveAfterRefusal();
  // With an Authorization header: that credential, as on /mcp. A browser cannot send one from
  // another origin without a CORS grant, so such a request needs no CSRF token.
  const bool has_authorization = req.find(bhttp::field::authorization) != req.end();
  std::optional<CookieCaller> by_cookie;
  if (!has_authorization) {
    by_cookie = CallerFromCookies(ConsoleCookies(), peer_, shared_->host, shared_->console);
  }
  if (by_cookie) {
    caller_ = by_cookie->caller;
  } else {
    Result<identity::Caller> caller = shared_->host.Authenticate(Header("Authorization"), peer_);
    if (!caller.ok()) {
      shared_->host.Refused(identity::Caller{}, 401, caller.status().message(), peer_);
      nlohmann::json body = {{"error", caller.status().message()}};
      return SendJson(HttpStatus::unauthorized, body.dump(), keep, {{"WWW-Authenticate", "Bearer"}});
    }
    caller_ = std::move(caller).value();
  }
  if (!has_authorization) {
    // Authenticated by the console's cookie, or by nothing (single-user mode): what a browser
    // attaches on its own. Only the console's page may use that, and a change also needs the
    // session's CSRF token, which no other page can read.
    std::string origin = Header("Origin");
    if (req.find(bhttp::field::origin) != req.end() && !OriginIsOwn(origin, Header("Host"))) {
      return Refuse(HttpStatus::forbidden, mcp::kInvalidRequest,
                    "origin '" + PrintableHeader(origin) +
                        "' is not this server's own: a request without an Authorization header "
                        "must come from the console",
                    keep);
    }
    if (IsStateChanging(std::string(req.method_string()))) {
      const bool has_token = req.find("X-CSRF-Token") != req.end();
      if (!by_cookie) {
        return Refuse(HttpStatus::forbidden, mcp::kInvalidRequest,
                      "missing X-CSRF-Token header: a " + std::string(req.method_string()) +
                          " without an Authorization header needs a console session "
                          "(GET /console/session) and its token",
                      keep);
      }
      if (!has_token) {
        return Refuse(HttpStatus::forbidden, mcp::kInvalidRequest,
                      "missing X-CSRF-Token header: a change made with the console's cookie needs "
                      "the session's token",
                      keep);
      }
      if (!ConstantTimeEquals(Header("X-CSRF-Token"), by_cookie->csrf)) {
        return Refuse(HttpStatus::forbidden, mcp::kInvalidRequest,
                      "bad X-CSRF-Token header: not this console session's token", keep);
      }
    }
  }
  ServeApi();
}

std::vector<std::string> HttpConnection::ConsoleCookies() const {
  std::vector<std::string> out;
  const auto& req = parser_->get();
  for (auto [it, end] = req.equal_range(bhttp::field::cookie); it != end; ++it) {
    for (std::string& value : ConsoleCookieValues(it->value())) out.push_back(std::move(value));
  }
  return out;
}

// ---- The console (/, /approvals/ID, /console/...) ----

void HttpConnection::ServeConsoleRequest() {
  const bool keep = KeepAliveAfterRefusal();
  if (!parser_->is_done()) {
    std::string content_type = Header("Content-Type");
    if (!IsJsonContentType(content_type)) {
      return Refuse(HttpStatus::unsupported_media_type, mcp::kInvalidRequest,
                    "Content-Type must be application/json, got '" + content_type + "'", keep);
    }
    auto length = parser_->content_length();
    if (length && *length > kMaxAdminBodyBytes) {
      return Refuse(HttpStatus::payload_too_large, mcp::kInvalidRequest,
                    "request body is " + std::to_string(*length) + " bytes, over the limit of " +
                        std::to_string(kMaxAdminBodyBytes),
                    false);
    }
    body_limit_ = kMaxAdminBodyBytes;
    return ReadBody();
  }
  ServeConsoleRequestBody();
}

void HttpConnection::ServeConsoleRequestBody() {
  const auto& req = parser_->get();
  std::string_view target = req.target();
  ConsoleRequest request{.method = std::string(req.method_string()),
                         .path = std::string(target.substr(0, target.find('?'))),
                         .body = req.body(),
                         .cookies = ConsoleCookies(),
                         .csrf = Header("X-CSRF-Token"),
                         .peer = peer_,
                         .secure = false};  // the listener has no TLS of its own
  ConsoleReply reply = ServeConsole(request, shared_->host, shared_->console);
  if (req.method() == bhttp::verb::post && (reply.status == 401 || reply.status == 403)) {
    // A refused login or logout is audited like any refusal (the message, never the credential).
    nlohmann::json body = nlohmann::json::parse(reply.body, nullptr, false);
    std::string what = body.is_object() && body.contains("error") && body["error"].is_string()
                           ? body["error"].get<std::string>()
                           : "refused";
    shared_->host.Refused(identity::Caller{}, reply.status, request.path + ": " + what, peer_);
  }
  SendBody(static_cast<HttpStatus>(reply.status), reply.content_type, std::move(reply.body),
           request_keep_alive_, reply.headers);
}

void HttpConnection::ServeApi() {
  const bool keep = KeepAliveAfterRefusal();
  if (!parser_->is_done()) {
    // A body: JSON, small.
    std::string content_type = Header("Content-Type");
    if (!IsJsonContentType(content_type)) {
      return Refuse(HttpStatus::unsupported_media_type, mcp::kInvalidRequest,
                    "Content-Type must be application/json, got '" + content_type + "'", keep);
    }
    auto length = parser_->content_length();
    if (length && *length > kMaxAdminBodyBytes) {
      return Refuse(HttpStatus::payload_too_large, mcp::kInvalidRequest,
                    "request body is " + std::to_string(*length) + " bytes, over the limit of " +
                        std::to_string(kMaxAdminBodyBytes),
                    false);
    }
    body_limit_ = kMaxAdminBodyBytes;
    return ReadBody();
  }
  ServeApiBody();
}

void HttpConnection::ServeApiBody() {
  const auto& req = parser_->get();
  std::string_view target = req.target();
  AdminRequest request{.method = std::string(req.method_string()),
                       .path = std::string(target.substr(0, target.find('?'))),
                       .query = target.find('?') == std::string_view::npos
                                    ? std::string()
                                    : std::string(target.substr(target.find('?') + 1)),
                       .body = req.body(),
                       .peer = peer_};
  // The host answers from any thread, once. The watch on the socket keeps the connection alive
  // meanwhile (and notices a client that leaves); the answer holds it only as a Remote.
  Watch();
  shared_->host.Admin(caller_, std::move(request), [remote = Remote(*this)](AdminReply reply) {
    remote.Post([reply = std::move(reply)](const std::shared_ptr<HttpConnection>& self) mutable {
      if (!self) return;  // the client went away
      self->SendJson(static_cast<HttpStatus>(reply.status), std::move(reply.body),
                     self->request_keep_alive_, reply.headers);
    });
  });
}

// ---- POST ----

void HttpConnection::ServePost() {
  const bool keep = KeepAliveAfterRefusal();
  std::string content_type = Header("Content-Type");
  if (!IsJsonContentType(content_type)) {
    return Refuse(HttpStatus::unsupported_media_type, mcp::kInvalidRequest,
                  "Content-Type must be application/json, got '" + content_type + "'", keep);
  }
  std::string accept = Header("Accept");
  if (!AcceptsMediaType(accept, "application/json") ||
      !AcceptsMediaType(accept, "text/event-stream")) {
    return Refuse(
        HttpStatus::not_acceptable, mcp::kInvalidRequest,
        "Accept must list both application/json and text/event-stream, got '" + accept + "'", keep);
  }
  auto length = parser_->content_length();
  if (length && *length > shared_->options.max_body_bytes) {
    return Refuse(HttpStatus::payload_too_large, mcp::kInvalidRequest,
                  "request body is " + std::to_string(*length) + " bytes, over the limit of " +
                      std::to_string(shared_->options.max_body_bytes),
                  false);
  }
  if (parser_->is_done()) return ServePostBody();  // no body at all: Parse says what is wrong
  if (beast::iequals(Header("Expect"), "100-continue") && request_version_ >= 11) {
    Queue("HTTP/1.1 100 Continue\r\n\r\n", After::kNothing);
  }
  ReadBody();
}

void HttpConnection::ServePostBody() {
  const bool keep = request_keep_alive_;
  const std::string session_id = Header("Mcp-Session-Id");
  std::shared_ptr<McpSession> session;
  if (!session_id.empty()) {
    session = shared_->sessions.Find(session_id, caller_);
    if (!session) {
      return Refuse(HttpStatus::not_found, mcp::kInvalidRequest,
                    "unknown session; start a new one with initialize", keep);
    }
    if (!CheckProtocolVersionHeader()) return;
  }
  mcp::ParseOptions options;
  options.max_bytes = shared_->options.max_body_bytes;
  options.allow_batch = session != nullptr && session->AllowsBatches();
  mcp::ParseResult parsed = mcp::Parse(parser_->get().body(), options);

  const bool text_error = !parsed.is_batch && parsed.entries.front().index() == 1;
  if (text_error) {
    shared_->host.Refused(caller_, 400, std::get<1>(parsed.entries.front()).message, peer_);
    return SendJson(HttpStatus::bad_request, mcp::Serialize(std::get<1>(parsed.entries.front())), keep);
  }
  if (!session) {
    if (shared_->stopping) {
      return Refuse(HttpStatus::service_unavailable, mcp::kInternalError, "the server is stopping",
                    false);
    }
    // An initialize of 2026 (no params.protocolVersion, a 2026 _meta) is a removed method there.
    if (!parsed.is_batch && IsModernRequest(parsed) &&
        !(IsInitialize(parsed.entries.front()) && HasInitializeVersion(parsed.entries.front()))) {
      return ServeModern(std::move(parsed));
    }
    if (parsed.is_batch || !IsInitialize(parsed.entries.front())) {
      return Refuse(HttpStatus::bad_request, mcp::kInvalidRequest,
                    "Mcp-Session-Id header required: only an initialize request may come "
                    "without one",
                    keep);
    }
    session = shared_->host.CreateSession(caller_);
    if (!session) {
      return Refuse(HttpStatus::service_unavailable, mcp::kInternalError,
                    "no new session can be opened now; try again later", keep);
    }
    shared_->sessions.Add(session);
    return HandleMessages(std::move(session), std::move(parsed), true);
  }
  for (const mcp::ParsedEntry& entry : parsed.entries) {
    if (parsed.is_batch && IsInitialize(entry)) {
      return Refuse(HttpStatus::bad_request, mcp::kInvalidRequest,
                    "initialize must be sent alone, not in a batch", keep);
    }
  }
  HandleMessages(std::move(session), std::move(parsed), false);
}

// MCP 2026-07-28 tells itself apart by the version its body's _meta names (or, lacking one,
// by the MCP-Protocol-Version header naming a version that is not of a session era).
bool HttpConnection::IsModernRequest(const mcp::ParseResult& parsed) const {
  const auto* message = std::get_if<mcp::Message>(&parsed.entries.front());
  if (message == nullptr) return false;
  std::string version;
  if (const auto* request = std::get_if<mcp::Request>(message))
    version = mcp::MetaProtocolVersion(*request);
  else if (const auto* note = std::get_if<mcp::Notification>(message))
    version = mcp::MetaProtocolVersion(mcp::Request{mcp::Id(int64_t{0}), note->method, note->params});
  if (!version.empty()) return !mcp::IsSupportedVersion(version);
  const auto& req = parser_->get();
  if (req.find("MCP-Protocol-Version") == req.end()) return false;
  const std::string header = Header("MCP-Protocol-Version");
  return !header.empty() && !mcp::IsSupportedVersion(header);
}

void HttpConnection::ServeModern(mcp::ParseResult parsed) {
  const bool keep = request_keep_alive_;
  auto send_error = [&](HttpStatus status, const mcp::ErrorResponse& error) {
    shared_->host.Refused(caller_, static_cast<int>(status), error.message, peer_);
    SendJson(status, mcp::Serialize(error), keep);
  };
  auto& message = std::get<mcp::Message>(parsed.entries.front());
  if (!std::holds_alternative<mcp::Request>(message)) {
    // 2026-07-28 has no client notifications or responses over HTTP that warden needs.
    return SendEmpty(HttpStatus::accepted, keep);
  }
  mcp::Request& request = std::get<mcp::Request>(message);
  const auto& head = parser_->get();
  // The envelope first: a 2026 request carries its version and its client's capabilities. It is
  // taken off the request here, once, and handed to the task context beside it.
  const bool declares_capabilities =
      request.params && request.params->is_object() && request.params->contains("_meta") &&
      (*request.params)["_meta"].is_object() &&
      (*request.params)["_meta"].contains(mcp::kMetaClientCapabilities);
  mcp::RequestMeta meta;
  if (auto bad = mcp::TakeRequestMeta(request, meta))
    return send_error(HttpStatus::bad_request, mcp::MakeError(request.id, mcp::kInvalidParams, *bad));
  const std::string& version = meta.protocol_version;
  auto bad_envelope = [&](const char* what) {
    send_error(HttpStatus::bad_request,
               mcp::MakeError(request.id, mcp::kInvalidParams,
                              std::string("a request of protocol version 2026-07-28 needs "
                                          "params._meta with ") + what));
  };
  if (version.empty()) return bad_envelope(mcp::kMetaProtocolVersion);
  // The header a proxy may have routed on must say what the body says, before anything else.
  if (head.find("MCP-Protocol-Version") != head.end() &&
      Header("MCP-Protocol-Version") != version)
    return send_error(HttpStatus::bad_request,
                      mcp::MakeError(request.id, mcp::kHeaderMismatch,
                                     "Header mismatch: MCP-Protocol-Version header value '" +
                                         PrintableHeader(Header("MCP-Protocol-Version")) +
                                         "' does not match the body's _meta version"));
  if (!mcp::IsModernVersion(version))
    return send_error(HttpStatus::bad_request, mcp::UnsupportedVersion(request.id, version));
  if (!declares_capabilities) return bad_envelope(mcp::kMetaClientCapabilities);
  const auto& req = parser_->get();
  mcp::MirrorHeaders headers;
  if (req.find("MCP-Protocol-Version") != req.end()) headers.protocol_version = Header("MCP-Protocol-Version");
  if (req.find("Mcp-Method") != req.end()) headers.method = Header("Mcp-Method");
  if (req.find("Mcp-Name") != req.end()) headers.name = Header("Mcp-Name");
  if (req.count("Mcp-Method") > 1 || req.count("Mcp-Name") > 1 || req.count("MCP-Protocol-Version") > 1)
    return send_error(HttpStatus::bad_request,
                      mcp::MakeError(request.id, mcp::kHeaderMismatch,
                                     "Header mismatch: a mirrored header was sent more than once"));
  if (std::string mismatch = mcp::CheckMirrorHeaders(request, headers, version); !mismatch.empty())
    return send_error(HttpStatus::bad_request,
                      mcp::MakeError(request.id, mcp::kHeaderMismatch, mismatch));
  if (shared_->stopping)
    return Refuse(HttpStatus::service_unavailable, mcp::kInternalError, "the server is stopping",
                  false);
  auto context = shared_->tasks->For(caller_, request);
  if (!context) {
    if (context.status().message() == TaskContexts::kNotServed) {
      mcp::ErrorResponse error = mcp::UnsupportedVersion(request.id, version);
      nlohmann::json supported = nlohmann::json::array();
      for (std::string_view v : mcp::kSupportedVersions) supported.push_back(std::string(v));
      error.data = nlohmann::json{{"supported", std::move(supported)}, {"requested", version}};
      return send_error(HttpStatus::bad_request, error);
    }
    return send_error(HttpStatus::ok,
                      mcp::MakeError(request.id, mcp::kInvalidParams, context.status().message()));
  }
  HandleMessages(std::move(*context), std::move(parsed), false, std::move(meta));
}

void HttpConnection::HandleMessages(std::shared_ptr<McpSession> session, mcp::ParseResult parsed,
                                    bool new_session, std::optional<mcp::RequestMeta> meta) {
  const bool modern = meta.has_value();
  auto post = std::make_shared<PostState>();
  post->is_batch = parsed.is_batch;
  post->modern = modern;
  // A task context is no session: nothing of its streams is kept for a resumption.
  if (!modern) post->session_id = session->id();
  if (new_session) post->new_session_id = session->id();
  // Resumability (priming events, retry) came with 2025-11-25; older clients may not expect an
  // event with empty data.
  post->resumable = !modern && !new_session && session->protocol_version() >= "2025-11-25";

  // One reply slot per request and per malformed entry, in input order.
  std::vector<std::size_t> slot_of(parsed.entries.size(), 0);
  for (std::size_t i = 0; i < parsed.entries.size(); ++i) {
    const mcp::ParsedEntry& entry = parsed.entries[i];
    if (entry.index() == 1) {
      post->slots.emplace_back(mcp::Serialize(std::get<1>(entry)));
      post->answered.push_back(true);
    } else if (std::holds_alternative<mcp::Request>(std::get<0>(entry))) {
      slot_of[i] = post->slots.size();
      post->slots.emplace_back(std::nullopt);
      post->answered.push_back(false);
      ++post->remaining;
    }
  }

  if (post->slots.empty()) {
    // Only notifications and responses: accepted, nothing to answer.
    for (mcp::ParsedEntry& entry : parsed.entries) {
      session->Handle(std::move(std::get<0>(entry)), Exchange{});
    }
    return SendEmpty(HttpStatus::accepted, request_keep_alive_);
  }

  post_ = post;
  std::shared_ptr<PostToken> token;
  if (post->remaining > 0) {
    token = std::make_shared<PostToken>(shared_, post->session_id);
    Watch();
  }
  const Remote remote(*this);
  for (std::size_t i = 0; i < parsed.entries.size(); ++i) {
    mcp::ParsedEntry& entry = parsed.entries[i];
    if (entry.index() == 1) continue;
    mcp::Message& message = std::get<0>(entry);
    if (!std::holds_alternative<mcp::Request>(message)) {
      session->Handle(std::move(message), Exchange{});
      continue;
    }
    Exchange exchange;
    // Both callbacks may run on any thread, during Handle or long after; they only serialise
    // and post to this connection's strand, and only while the server runs.
    // (`shared` is used only when the connection is gone, on the calling thread, while the
    // Remote, which holds it, is alive.)
    exchange.reply = [remote, post, token, slot = slot_of[i]](mcp::Message m) {
      const auto* error = std::get_if<mcp::ErrorResponse>(&m);
      const bool is_error = error != nullptr;
      // 2026-07-28 gives some errors an HTTP status of their own.
      if (error && post->modern) {
        if (error->code == mcp::kMethodNotFound) post->status = 404;
        if (error->code == mcp::kHeaderMismatch || error->code == mcp::kUnsupportedProtocolVersion ||
            error->code == mcp::kMissingRequiredClientCapability)
          post->status = 400;
      }
      int retry_after = 0;
      if (error && error->code == kUpstreamBusy && error->data && error->data->is_object() &&
          error->data->contains("retryAfter") && (*error->data)["retryAfter"].is_number_integer())
        retry_after = (*error->data)["retryAfter"].get<int>();
      remote.Post([post, slot, is_error, retry_after, shared = &remote.shared(),
                   text = mcp::Serialize(m)](const std::shared_ptr<HttpConnection>& self) mutable {
        if (self) {
          if (retry_after > 0 && !post->new_session_id.empty()) post->retry_after = retry_after;
          return self->OnReply(post, slot, std::move(text), is_error);
        }
        // The client went away. A reply on an SSE stream is recorded, so a client that resumes
        // the stream gets it; a JSON reply had no stream and is dropped.
        if (std::uint64_t stream = post->shared_stream.load()) {
          shared->sessions.Record(post->session_id, stream, std::move(text), true, 0);
        }
      });
    };
    exchange.related = [remote, post, token](const mcp::Message& m) {
      remote.Post([post, shared = &remote.shared(),
                   text = mcp::Serialize(m)](const std::shared_ptr<HttpConnection>& self) mutable {
        if (self) return self->OnRelated(post, std::move(text));
        if (std::uint64_t stream = post->shared_stream.load()) {
          shared->sessions.Record(post->session_id, stream, std::move(text), false, 0);
        }
      });
    };
    if (modern) {
      exchange.on_start = [post](std::shared_ptr<CancelToken> token) {
        std::lock_guard lock(post->cancel_mu);
        post->cancel = std::move(token);
      };
      session->HandleModern(std::move(std::get<mcp::Request>(message)), std::move(exchange),
                            std::move(meta));
    } else {
      session->Handle(std::move(message), std::move(exchange));
    }
  }
  if (post->remaining == 0) return FinishJson(*post);  // malformed entries and notifications
  if (post->resumable && post_ == post && !post->streaming) {
    // A reply that takes a while goes out on a primed, resumable SSE stream.
    sse_timer_.expires_after(shared_->options.sse_after);
    sse_timer_.async_wait([self = shared_from_this(), post](beast::error_code ec) {
      if (ec || self->closed_ || post != self->post_ || post->streaming || post->finished) return;
      self->SwitchToSse(*post);
    });
  }
}

void HttpConnection::OnReply(const std::shared_ptr<PostState>& post, std::size_t slot,
                             std::string text, bool is_error) {
  if (post->stream != 0 && (closed_ || post->finished || post != post_)) {
    // A streamed POST this connection no longer writes (the client went away): recorded for
    // a client that resumes the stream.
    shared_->sessions.Record(post->session_id, post->stream, std::move(text), true, 0);
    return;
  }
  if (closed_ || post->finished || post != post_ || slot >= post->slots.size() ||
      post->answered[slot]) {
    return;
  }
  post->answered[slot] = true;
  --post->remaining;
  if (is_error && !post->new_session_id.empty()) post->initialize_failed = true;
  if (post->streaming) {
    EmitPostEvent(*post, std::move(text), true);
    if (post->remaining == 0) FinishPost(*post);
    return;
  }
  post->slots[slot] = std::move(text);
  if (post->remaining == 0) FinishJson(*post);
}

void HttpConnection::OnRelated(const std::shared_ptr<PostState>& post, std::string text) {
  if (post->stream != 0 && (closed_ || post != post_)) {
    shared_->sessions.Record(post->session_id, post->stream, std::move(text), false, 0);
    return;
  }
  // After the last reply the stream is over; a late progress message has nowhere to go.
  if (closed_ || post->finished || post != post_) return;
  if (!post->streaming) SwitchToSse(*post);
  EmitPostEvent(*post, std::move(text), false);
}

void HttpConnection::SwitchToSse(PostState& post) {
  sse_timer_.cancel();
  post.streaming = true;
  post.stream = shared_->next_stream++;
  post.shared_stream = post.stream;
  // Replies still to be recorded on the stream: those to come and those already here.
  std::size_t pending = post.remaining;
  for (const auto& slot : post.slots) pending += slot ? 1 : 0;
  shared_->sessions.BeginReplay(post.session_id, post.stream, true, pending, post.stream);
  Headers headers;
  if (!post.new_session_id.empty()) headers.emplace_back("Mcp-Session-Id", post.new_session_id);
  StartSse(headers);
  if (post.resumable) {
    Queue(StreamBytes(SsePrimingEvent(EventId(post.stream, 0), shared_->options.sse_retry.count())),
          After::kNothing);
  }
  // Replies that came before the switch go out first, in the order they came in.
  for (auto& slot : post.slots) {
    if (slot) EmitPostEvent(post, std::move(*slot), true);
    slot.reset();
  }
}

void HttpConnection::EmitPostEvent(PostState& post, std::string text, bool reply) {
  auto recorded = shared_->sessions.Record(post.session_id, post.stream, text, reply, post.stream);
  if (!recorded) {
    // The session is gone (DELETE): nothing to resume, the event still goes out.
    Queue(StreamBytes(SseEvent("", text)), After::kNothing);
  } else if (recorded->mine) {
    Queue(StreamBytes(SseEvent(recorded->event_id, text)), After::kNothing);
  }
  // Otherwise a resumed stream took over: the registry handed the event to its reader.
}

void HttpConnection::FinishJson(PostState& post) {
  post.finished = true;
  std::string body;
  if (post.is_batch) {
    body = "[";
    for (std::size_t i = 0; i < post.slots.size(); ++i) {
      if (i > 0) body += ",";
      body += *post.slots[i];
    }
    body += "]";
  } else {
    body = std::move(*post.slots.front());
  }
  Headers headers;
  if (!post.new_session_id.empty() && !post.initialize_failed) {
    headers.emplace_back("Mcp-Session-Id", post.new_session_id);
  }
  // An upstream at its instance cap: the client may try again later (the body says which).
  const bool busy = post.initialize_failed && post.retry_after > 0;
  if (busy) headers.emplace_back("Retry-After", std::to_string(post.retry_after));
  FinishPost(post);
  const HttpStatus status = busy ? HttpStatus::service_unavailable
                            : post.status.load() != 0 ? static_cast<HttpStatus>(post.status.load())
                                               : HttpStatus::ok;
  SendJson(status, std::move(body), request_keep_alive_, headers);
}

void HttpConnection::FinishPost(PostState& post) {
  post.finished = true;
  sse_timer_.cancel();
  if (post.initialize_failed) {
    // A session whose initialize failed is of no use to anyone: the client starts again.
    if (auto session = shared_->sessions.RemoveAny(post.new_session_id)) {
      shared_->run_blocking([session] { session->Close(); });
    }
  }
  if (post.streaming) EndSse();
  post_.reset();
}

// ---- GET: the session's stream ----

void HttpConnection::ServeGet() {
  const bool keep = KeepAliveAfterRefusal();
  if (!AcceptsMediaType(Header("Accept"), "text/event-stream")) {
    return Refuse(HttpStatus::not_acceptable, mcp::kInvalidRequest,
                  "GET opens an SSE stream: Accept must list text/event-stream", keep);
  }
  const std::string session_id = Header("Mcp-Session-Id");
  if (session_id.empty()) {
    return Refuse(HttpStatus::bad_request, mcp::kInvalidRequest, "Mcp-Session-Id header required",
                  keep);
  }
  std::shared_ptr<McpSession> session = shared_->sessions.Find(session_id, caller_);
  if (!session) {
    return Refuse(HttpStatus::not_found, mcp::kInvalidRequest,
                  "unknown session; start a new one with initialize", keep);
  }
  if (!CheckProtocolVersionHeader()) return;
  std::string last_event_id = Header("Last-Event-ID");
  if (!last_event_id.empty()) return ResumeStream(session, last_event_id);

  const std::uint64_t token = shared_->next_stream++;
  if (!shared_->sessions.OpenStream(session_id, token, StreamSink(token), StreamEnd(token))) {
    return Refuse(HttpStatus::conflict, mcp::kInvalidRequest,
                  "this session already has an open GET stream", keep);
  }
  stream_session_ = session_id;
  stream_token_ = token;
  stream_number_ = token;
  shared_->sessions.BeginReplay(session_id, token, false, 0, token);
  StartSse({});
  if (session->protocol_version() >= "2025-11-25") {
    Queue(StreamBytes(SsePrimingEvent(EventId(token, 0), shared_->options.sse_retry.count())),
          After::kNothing);
  }
  Watch();
  ArmKeepAlive();
}

MessageSink HttpConnection::StreamSink(std::uint64_t token) {
  return [remote = Remote(*this), token](const mcp::Message& m) {
    remote.Post(
        [token, text = mcp::Serialize(m)](const std::shared_ptr<HttpConnection>& self) mutable {
          if (self) self->OnStreamMessage(token, std::move(text));
        });
  };
}

std::function<void()> HttpConnection::StreamEnd(std::uint64_t token) {
  return [remote = Remote(*this), token] {
    remote.Post([token](const std::shared_ptr<HttpConnection>& self) {
      if (self) self->EndStream(token);
    });
  };
}

void HttpConnection::OnStreamMessage(std::uint64_t token, std::string text) {
  if (closed_ || token != stream_token_) return;
  auto recorded = shared_->sessions.Record(stream_session_, stream_number_, text, false, token);
  Queue(StreamBytes(SseEvent(recorded ? recorded->event_id : "", text)), After::kNothing);
}

void HttpConnection::ResumeStream(const std::shared_ptr<McpSession>& session,
                                  const std::string& last_event_id) {
  const bool keep = KeepAliveAfterRefusal();
  auto parsed = ParseEventId(last_event_id);
  if (!parsed) {
    return Refuse(HttpStatus::bad_request, mcp::kInvalidRequest,
                  "Last-Event-ID '" + last_event_id +
                      "' is not an event id this server sent (they look like 12-3)",
                  keep);
  }
  const auto [stream, seq] = *parsed;
  const std::string session_id = session->id();
  const std::uint64_t token = shared_->next_stream++;
  const Remote remote(*this);
  SessionRegistry::StreamReader reader{.token = token, .deliver = nullptr, .end = nullptr};
  reader.deliver = [remote, token](std::string id, std::string data) {
    remote.Post([token, id = std::move(id),
                 data = std::move(data)](const std::shared_ptr<HttpConnection>& self) mutable {
      if (self) self->OnResumedEvent(token, std::move(id), std::move(data));
    });
  };
  reader.end = [remote, token] {
    remote.Post([token](const std::shared_ptr<HttpConnection>& self) {
      if (self) self->EndResumed(token);
    });
  };
  // The id first: one that cannot be honoured is a 400 whatever else is going on.
  auto resumed = shared_->sessions.Resume(session_id, stream, seq, std::move(reader));
  if (!resumed) {
    return Refuse(HttpStatus::bad_request, mcp::kInvalidRequest, resumed.status().message(), keep);
  }
  // Resuming the GET stream makes this connection the session's stream again: the slot has to
  // be free (409 otherwise, as for any second GET stream). A POST stream leaves it alone.
  const bool get_stream = !resumed->post;
  if (get_stream &&
      !shared_->sessions.OpenStream(session_id, token, StreamSink(token), StreamEnd(token))) {
    return Refuse(HttpStatus::conflict, mcp::kInvalidRequest,
                  "this session already has an open GET stream", keep);
  }
  if (get_stream) {
    stream_session_ = session_id;
    stream_token_ = token;
    stream_number_ = stream;
  } else {
    resume_session_ = session_id;
    resume_stream_ = stream;
    resume_token_ = token;
  }
  StartSse({});
  for (auto& [id, data] : resumed->events) {
    Queue(StreamBytes(SseEvent(id, data)), After::kNothing);
  }
  if (!get_stream && resumed->complete) {
    // Every reply was already in: the replay is the whole rest of the stream.
    shared_->sessions.DetachReader(session_id, stream, token);
    resume_token_ = 0;
    return EndSse();
  }
  Watch();
  ArmKeepAlive();
}

void HttpConnection::OnResumedEvent(std::uint64_t token, std::string event_id, std::string data) {
  if (closed_ || token != resume_token_) return;
  Queue(StreamBytes(SseEvent(event_id, data)), After::kNothing);
}

void HttpConnection::EndResumed(std::uint64_t token) {
  if (closed_ || token != resume_token_) return;
  resume_token_ = 0;
  keepalive_.cancel();
  EndSse();
}

void HttpConnection::EndStream(std::uint64_t token) {
  if (closed_ || token != stream_token_) return;
  shared_->sessions.CloseStream(stream_session_, stream_token_);
  stream_token_ = 0;
  keepalive_.cancel();
  EndSse();
}

void HttpConnection::ArmKeepAlive() {
  keepalive_.expires_after(shared_->options.sse_keepalive);
  const std::uint64_t token = stream_token_ != 0 ? stream_token_ : resume_token_;
  keepalive_.async_wait([self = shared_from_this(), token](beast::error_code ec) {
    if (ec || self->closed_ || (token != self->stream_token_ && token != self->resume_token_)) {
      return;
    }
    self->Queue(self->StreamBytes(kSseKeepAlive), After::kNothing);
    self->ArmKeepAlive();
  });
}

// ---- DELETE ----

void HttpConnection::ServeDelete() {
  const bool keep = KeepAliveAfterRefusal();
  const std::string session_id = Header("Mcp-Session-Id");
  if (session_id.empty()) {
    return Refuse(HttpStatus::bad_request, mcp::kInvalidRequest, "Mcp-Session-Id header required",
                  keep);
  }
  if (!CheckProtocolVersionHeader()) return;
  std::shared_ptr<McpSession> session = shared_->sessions.Remove(session_id, caller_);
  if (!session) {
    return Refuse(HttpStatus::not_found, mcp::kInvalidRequest,
                  "unknown session; start a new one with initialize", keep);
  }
  // Close blocks until the session's upstreams are gone: off the I/O threads, answering after.
  auto executor = stream_.get_executor();
  shared_->run_blocking([self = shared_from_this(), session, executor, keep] {
    session->Close();
    self->shared_->gate.Post(
        [&] { net::post(executor, [self, keep] { self->SendEmpty(HttpStatus::no_content, keep); }); });
  });
}

// ---- Responses ----

void HttpConnection::Refuse(HttpStatus status, int code, const std::string& message, bool keep_alive,
                            const Headers& headers) {
  shared_->host.Refused(caller_, static_cast<int>(status), message, peer_);
  // The admin API speaks plain JSON; the MCP endpoint a JSON-RPC error MCP clients can show.
  SendJson(status,
           api_ || console_ ? nlohmann::json{{"error", message}}.dump() : ErrorBody(code, message),
           keep_alive, headers);
}

void HttpConnection::SendJson(HttpStatus status, std::string body, bool keep_alive,
                              const Headers& headers) {
  SendBody(status, "application/json", std::move(body), keep_alive, headers);
}

void HttpConnection::SendBody(HttpStatus status, std::string_view content_type, std::string body,
                              bool keep_alive, const Headers& headers) {
  bhttp::response<bhttp::string_body> res{status, request_version_};
  res.set(bhttp::field::server, "warden");
  res.set(bhttp::field::content_type, content_type);
  res.set(bhttp::field::cache_control, "no-store");
  // Every console answer, refusals included, carries the console's CSP and the rest.
  if (console_) {
    for (const auto& [name, value] : ConsoleSecurityHeaders()) res.set(name, value);
  }
  for (const auto& [name, value] : cors_) res.set(name, value);
  for (const auto& [name, value] : headers) res.set(name, value);
  res.keep_alive(keep_alive);
  res.body() = std::move(body);
  res.prepare_payload();
  std::ostringstream text;
  text << res;
  Queue(std::move(text).str(), keep_alive ? After::kNextRequest : After::kClose);
}

void HttpConnection::SendEmpty(HttpStatus status, bool keep_alive, const Headers& headers) {
  bhttp::response<bhttp::empty_body> res{status, request_version_};
  res.set(bhttp::field::server, "warden");
  for (const auto& [name, value] : cors_) res.set(name, value);
  for (const auto& [name, value] : headers) res.set(name, value);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  std::ostringstream text;
  text << res;
  Queue(std::move(text).str(), keep_alive ? After::kNextRequest : After::kClose);
}

void HttpConnection::StartSse(const Headers& headers) {
  bhttp::response<bhttp::empty_body> res{HttpStatus::ok, request_version_};
  res.set(bhttp::field::server, "warden");
  res.set(bhttp::field::content_type, "text/event-stream");
  res.set(bhttp::field::cache_control, "no-cache");
  res.set("X-Accel-Buffering", "no");  // reverse proxies must not hold events back
  for (const auto& [name, value] : cors_) res.set(name, value);
  for (const auto& [name, value] : headers) res.set(name, value);
  if (chunked_) {
    res.chunked(true);
    res.keep_alive(request_keep_alive_);
  } else {
    res.keep_alive(false);  // HTTP/1.0: the body ends with the connection
  }
  std::ostringstream text;
  text << res.base();
  Queue(std::move(text).str(), After::kNothing);
}

std::string HttpConnection::StreamBytes(std::string_view data) const {
  return chunked_ ? HttpChunk(data) : std::string(data);
}

void HttpConnection::EndSse() {
  if (chunked_) {
    Queue(std::string(kHttpLastChunk), request_keep_alive_ ? After::kNextRequest : After::kClose);
  } else {
    Queue(std::string(), After::kClose);
  }
}

void HttpConnection::Queue(std::string bytes, After after) {
  if (closed_) return;
  out_bytes_ += bytes.size();
  if (out_bytes_ > kMaxQueuedBytes) return Close();  // the client does not read
  out_.push_back(Output{std::move(bytes), after});
  if (!writing_) WriteNext();
}

void HttpConnection::WriteNext() {
  writing_ = true;
  net::async_write(
      stream_, net::buffer(out_.front().bytes),
      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnWrite(ec); });
}

void HttpConnection::OnWrite(beast::error_code ec) {
  writing_ = false;
  if (ec) return Close();
  Output done = std::move(out_.front());
  out_.pop_front();
  out_bytes_ -= done.bytes.size();
  if (done.after == After::kClose) return Close();
  if (!out_.empty() && !closed_) WriteNext();
  if (done.after == After::kNextRequest) NextRequest();
}

void HttpConnection::NextRequest() {
  if (closed_) return;
  if (watching_) {
    // The watch read must end before the parser reads again; its handler goes on.
    read_after_watch_ = true;
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
    return;
  }
  ReadHeader();
}

// ---- Watching for the client going away ----

void HttpConnection::Watch() {
  if (watching_ || closed_) return;
  watching_ = true;
  stream_.async_read_some(
      buffer_.prepare(4096),
      [self = shared_from_this()](beast::error_code ec, std::size_t n) { self->OnWatch(ec, n); });
}

void HttpConnection::OnWatch(beast::error_code ec, std::size_t n) {
  watching_ = false;
  if (!ec) buffer_.commit(n);  // the start of a pipelined request: kept for the parser
  if (closed_) return;
  if (read_after_watch_ && (!ec || ec == net::error::operation_aborted)) {
    read_after_watch_ = false;
    return ReadHeader();
  }
  if (ec) return Close();  // the client went away; whatever it waited for is dropped
  if (buffer_.size() < kMaxPipelinedBytes) Watch();
}

void HttpConnection::Close() {
  if (closed_) return;
  closed_ = true;
  if (post_ && post_->modern && !post_->finished) {
    // 2026-07-28: a client that closes the request's stream cancels the request.
    std::shared_ptr<CancelToken> cancel;
    {
      std::lock_guard lock(post_->cancel_mu);
      cancel = post_->cancel;
    }
    if (cancel) cancel->Cancel("the client closed the request's stream");
  }
  if (post_) {
    if (post_->stream != 0) {
      // Later events of the stream are recorded for a client that resumes it.
      shared_->sessions.DetachReader(post_->session_id, post_->stream, post_->stream);
    }
    post_->finished = true;
  }
  post_.reset();
  if (resume_token_ != 0) {
    shared_->sessions.DetachReader(resume_session_, resume_stream_, resume_token_);
    resume_token_ = 0;
  }
  sse_timer_.cancel();
  if (stream_token_ != 0) {
    shared_->sessions.CloseStream(stream_session_, stream_token_);
    stream_token_ = 0;
  }
  keepalive_.cancel();
  beast::error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  stream_.close();
}

}  // namespace warden::gateway::http
