#include "gateway/builtins/web_fetch.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "egress/address_guard.h"
#include "egress/allow_list.h"
#include "egress/host_name.h"
#include "egress/resolver.h"
#include "monitor/families.h"

namespace warden::gateway {

using nlohmann::json;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using SteadyTime = std::chrono::steady_clock::time_point;

// ---------------------------------------------------------------------------------------------
// Definition and arguments

json WebFetchDefinition() {
  json egress_decision = {{"type", "object"},
                          {"properties",
                           {{"url", {{"type", "string"}}},
                            {"host", {{"type", "string"}}},
                            {"port", {{"type", "integer"}}},
                            {"address", {{"type", "string"}}},
                            {"allowed", {{"type", "boolean"}}},
                            {"reason", {{"type", "string"}}}}},
                          {"required", {"url", "host", "port", "address", "allowed", "reason"}}};
  return {
      {"name", "web__fetch"},
      {"title", "Fetch a web page"},
      {"description",
       "Fetches an http or https URL with GET and returns the status, content type and body text "
       "(cut at max_bytes). Only hosts on the policy's egress allow-list are reachable; private, "
       "loopback and link-local addresses are refused unless allowed literally. Redirects are "
       "followed (at most 5), each checked the same way. Non-text content is described, not "
       "returned."},
      {"inputSchema",
       {{"type", "object"},
        {"properties",
         {{"url", {{"type", "string"}, {"description", "The http:// or https:// URL to GET"}}},
          {"max_bytes",
           {{"type", "integer"},
            {"minimum", 1},
            {"description", "Body bytes to return at most (default 262144, capped at 1048576)"}}},
          {"timeout_s",
           {{"type", "number"},
            {"exclusiveMinimum", 0},
            {"description", "Limit for the whole fetch in seconds (default and cap 30)"}}}}},
        {"required", {"url"}},
        {"additionalProperties", false}}},
      {"outputSchema",
       {{"type", "object"},
        {"properties",
         {{"url", {{"type", "string"}, {"description", "The URL asked for"}}},
          {"final_url", {{"type", "string"}, {"description", "The URL of the last hop"}}},
          {"status", {{"type", "integer"}, {"description", "HTTP status; 0 when none"}}},
          {"content_type", {{"type", "string"}}},
          {"body", {{"type", "string"}, {"description", "Body text; empty for non-text"}}},
          {"truncated", {{"type", "boolean"}, {"description", "The body was cut at max_bytes"}}},
          {"bytes", {{"type", "integer"}, {"description", "Body bytes received and kept"}}},
          {"egress", {{"type", "array"}, {"items", egress_decision}}},
          {"error", {{"type", "string"}, {"description", "Why the fetch failed"}}}}},
        {"required",
         {"url", "final_url", "status", "content_type", "body", "truncated", "bytes", "egress"}}}},
      {"annotations",
       {{"readOnlyHint", true}, {"destructiveHint", false}, {"openWorldHint", true}}},
  };
}

Result<FetchRequest> ParseFetchArguments(const json& arguments) {
  if (!arguments.is_object()) return Status::Error("arguments must be an object");
  FetchRequest req;
  bool has_url = false;
  for (const auto& [key, value] : arguments.items()) {
    if (key == "url") {
      if (!value.is_string() || value.get_ref<const std::string&>().empty())
        return Status::Error("url must be a non-empty string");
      req.url = value.get<std::string>();
      has_url = true;
    } else if (key == "max_bytes") {
      // A JSON number with no fraction: 10 and 10.0 both count as integers.
      bool integral = value.is_number_integer() ||
                      (value.is_number_float() && std::isfinite(value.get<double>()) &&
                       std::floor(value.get<double>()) == value.get<double>());
      if (!integral || !(value.get<double>() >= 1))
        return Status::Error("max_bytes must be a positive integer");
      double n = value.get<double>();
      req.max_bytes = n >= static_cast<double>(kFetchMaxBytesCap) ? kFetchMaxBytesCap
                                                                  : static_cast<uint64_t>(n);
    } else if (key == "timeout_s") {
      if (!value.is_number() || !std::isfinite(value.get<double>()) || !(value.get<double>() > 0))
        return Status::Error("timeout_s must be a positive number");
      double ms = std::ceil(value.get<double>() * 1000.0);
      req.timeout_ms = ms >= static_cast<double>(kFetchTimeoutCapMs) ? kFetchTimeoutCapMs
                                                                     : static_cast<uint64_t>(ms);
    } else {
      return Status::Error("unknown argument '" + egress::Printable(key) +
                           "' (expected url, max_bytes, timeout_s)");
    }
  }
  if (!has_url) return Status::Error("url is required");
  return req;
}

namespace {

// ---------------------------------------------------------------------------------------------
// URLs. Our own strict parser: the gateway is the only party that reads the URL before it
// connects, so there is no second parser to disagree with; odd spellings are refused, not guessed.

struct Url {
  bool https = false;
  egress::Host host;
  uint16_t port = 80;
  std::string target = "/";  // origin-form: path and query, percent-encoded

  std::string HostText() const { return host.address ? host.address->ToUrlHost() : host.name; }
  bool DefaultPort() const { return port == (https ? 443 : 80); }
  // Host header value: host, and the port when it is not the scheme's.
  std::string Authority() const {
    return DefaultPort() ? HostText() : HostText() + ":" + std::to_string(port);
  }
  std::string ToString() const { return (https ? "https://" : "http://") + Authority() + target; }
};

constexpr size_t kMaxUrlBytes = 8192;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Path and query as sent: bytes outside printable ASCII, spaces and backslashes are
// percent-encoded (servers sometimes send such Locations); '#' starts the fragment, dropped.
std::string EncodeTarget(std::string_view raw) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : raw) {
    if (c == '#') break;
    if (c <= 0x20 || c >= 0x7f || c == '\\' || c == '"' || c == '<' || c == '>') {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (out.empty() || out[0] == '?') out.insert(out.begin(), '/');
  return out;
}

Result<uint16_t> ParsePort(std::string_view text) {
  if (text.empty() || text.size() > 5 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return Status::Error("bad port " + egress::Quote(text));
  unsigned long v = std::stoul(std::string(text));
  if (v == 0 || v > 65535) return Status::Error("bad port " + egress::Quote(text));
  return static_cast<uint16_t>(v);
}

Result<Url> ParseUrl(std::string_view text) {
  if (text.size() > kMaxUrlBytes) return Status::Error("URL is longer than 8192 bytes");
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) return Status::Error("URL contains a control character");
  }
  Url url;
  std::string lower = Lower(text.substr(0, 8));
  if (lower.starts_with("http://")) {
    text.remove_prefix(7);
  } else if (lower.starts_with("https://")) {
    url.https = true;
    url.port = 443;
    text.remove_prefix(8);
  } else {
    return Status::Error("URL " + egress::Quote(text) + " is not http:// or https://");
  }
  size_t end = text.find_first_of("/?#");
  std::string_view authority = text.substr(0, end);
  std::string_view rest = end == std::string_view::npos ? "" : text.substr(end);
  if (authority.find('@') != std::string_view::npos)
    return Status::Error("URL must not carry user information (user@host)");
  if (authority.find_first_of("%\\ ") != std::string_view::npos)
    return Status::Error("URL host " + egress::Quote(authority) + " has invalid characters");
  std::string_view host_text = authority;
  std::string_view port_text;
  if (authority.starts_with("[")) {
    size_t close = authority.find(']');
    if (close == std::string_view::npos)
      return Status::Error("URL has an unclosed '[' in its host");
    host_text = authority.substr(0, close + 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return Status::Error("URL has text after ']' in its host");
      port_text = after.substr(1);
      if (port_text.empty()) return Status::Error("URL has an empty port");
    }
  } else if (size_t colon = authority.find(':'); colon != std::string_view::npos) {
    host_text = authority.substr(0, colon);
    port_text = authority.substr(colon + 1);
    if (port_text.empty()) return Status::Error("URL has an empty port");
  }
  if (host_text.empty()) return Status::Error("URL has no host");
  auto host = egress::ParseHost(host_text);
  if (!host) return host.status();
  url.host = std::move(*host);
  if (!port_text.empty()) {
    auto port = ParsePort(port_text);
    if (!port) return port.status();
    url.port = *port;
  }
  url.target = EncodeTarget(rest);
  return url;
}

// RFC 3986 section 5.2.4, on an already split path.
std::string RemoveDotSegments(std::string_view path) {
  std::vector<std::string_view> out;
  bool trailing_slash = false;
  size_t pos = 1;  // path starts with '/'
  while (pos <= path.size()) {
    size_t next = path.find('/', pos);
    std::string_view seg =
        path.substr(pos, next == std::string_view::npos ? std::string_view::npos : next - pos);
    trailing_slash = (seg == "." || seg == "..");
    if (seg == "..") {
      if (!out.empty()) out.pop_back();
    } else if (seg != ".") {
      out.push_back(seg);
    }
    if (next == std::string_view::npos) break;
    pos = next + 1;
  }
  std::string result;
  for (std::string_view seg : out) {
    result += '/';
    result += seg;
  }
  if (trailing_slash || result.empty()) result += '/';
  return result;
}

// The URL a Location header points at, relative to `base` (RFC 3986 section 5.2).
Result<Url> ResolveReference(const Url& base, std::string_view ref) {
  ref = ref.substr(0, ref.find('#'));
  size_t colon = ref.find(':');
  size_t delim = ref.find_first_of("/?");
  if (colon != std::string_view::npos && (delim == std::string_view::npos || colon < delim))
    return ParseUrl(ref);  // has a scheme (a non-http one is refused there)
  std::string origin = std::string(base.https ? "https://" : "http://") + base.Authority();
  if (ref.starts_with("//")) return ParseUrl((base.https ? "https:" : "http:") + std::string(ref));
  std::string_view base_path = std::string_view(base.target).substr(0, base.target.find('?'));
  std::string_view base_query = std::string_view(base.target).substr(base_path.size());
  size_t q = ref.find('?');
  std::string_view path = ref.substr(0, q);
  std::string_view query = q == std::string_view::npos ? std::string_view() : ref.substr(q);
  std::string target;
  if (path.empty()) {
    target = std::string(base_path) + std::string(q == std::string_view::npos ? base_query : query);
  } else if (path.starts_with("/")) {
    target = RemoveDotSegments(path) + std::string(query);
  } else {
    std::string merged(base_path.substr(0, base_path.rfind('/') + 1));
    merged += path;
    target = RemoveDotSegments(merged) + std::string(query);
  }
  return ParseUrl(origin + target);
}

// ---------------------------------------------------------------------------------------------
// Egress decisions

struct EgressDecision {
  std::string url, host;
  uint16_t port = 0;
  std::string address;  // connected to, or refused; "" when no address was involved
  bool allowed = false;
  std::string reason;

  json ToJson() const {
    return {{"url", url},         {"host", host},       {"port", port},
            {"address", address}, {"allowed", allowed}, {"reason", reason}};
  }
};

// What a cancel or a resolver thread tells the fetching thread. Shared with the CancelToken's
// stop action and with resolver threads that may outlive the call.
struct Signals {
  std::mutex mu;
  std::condition_variable cv;
  bool cancelled = false;
  std::shared_ptr<asio::io_context> io;  // stopped on cancel
  uint64_t lookup = 0;                   // which lookup `resolved` answers
  std::optional<Result<std::vector<egress::IpAddress>>> resolved;

  void Cancel() {
    std::lock_guard lock(mu);
    cancelled = true;
    if (io) io->stop();
    cv.notify_all();
  }
};

// Why a step failed: refused by egress, a network/protocol failure, the deadline, or a cancel.
struct Failure {
  enum class Kind { kRefused, kFailed, kTimeout, kCancelled } kind = Kind::kFailed;
  std::string message;
};

// Resolves `name` off this thread and waits for it until `deadline` or a cancel.
Result<std::vector<egress::IpAddress>> Resolve(const std::string& name,
                                               const std::shared_ptr<Signals>& signals,
                                               SteadyTime deadline, Failure& failure) {
  // One pool per call: a lookup stuck in the C library keeps only its own detached thread.
  egress::ResolverPool pool(1, 1);
  uint64_t id;
  {
    std::lock_guard lock(signals->mu);
    id = ++signals->lookup;
    signals->resolved.reset();
  }
  pool.Lookup(name, [signals, id](Result<std::vector<egress::IpAddress>> r) {
    std::lock_guard lock(signals->mu);
    if (signals->lookup != id) return;
    signals->resolved = std::move(r);
    signals->cv.notify_all();
  });
  std::unique_lock lock(signals->mu);
  signals->cv.wait_until(lock, deadline,
                         [&] { return signals->cancelled || signals->resolved.has_value(); });
  if (signals->cancelled) {
    failure = {Failure::Kind::kCancelled, "cancelled while resolving " + name};
    return Status::Error(failure.message);
  }
  if (!signals->resolved) {
    ++signals->lookup;  // a late answer is dropped
    failure = {Failure::Kind::kTimeout, "timed out resolving " + name};
    return Status::Error(failure.message);
  }
  auto r = std::move(*signals->resolved);
  signals->resolved.reset();
  if (!r.ok()) {
    failure = {Failure::Kind::kFailed, "could not resolve " + name + ": " + r.status().message()};
    return Status::Error(failure.message);
  }
  return r;
}

std::string AllowHint(const Url& url) {
  std::string entry = url.HostText();
  if (!url.DefaultPort()) entry += ":" + std::to_string(url.port);
  return "; to allow it, add \"" + entry + "\" to egress.allow in the policy";
}

// Decides one hop: allow-list, then the addresses, each through the address guard. Returns the
// addresses that may be connected to (in resolver order) and appends every decision to `log`.
std::optional<std::vector<egress::IpAddress>> CheckHop(
    const Url& url, const egress::AllowList* allow, const std::shared_ptr<Signals>& signals,
    SteadyTime deadline, std::vector<EgressDecision>& log, Failure& failure) {
  EgressDecision d{.url = url.ToString(), .host = url.host.name, .port = url.port};
  if (allow == nullptr) {
    d.reason = "no egress allow-list is in force (no policy): every host is refused";
    failure = {Failure::Kind::kRefused,
               "host " + url.host.name + " refused: " + d.reason + AllowHint(url)};
    log.push_back(d);
    return std::nullopt;
  }
  egress::Verdict listed = allow->Permits(url.host, url.port);
  if (!listed.allowed) {
    d.reason = listed.rule_or_reason;
    failure = {Failure::Kind::kRefused, d.reason + AllowHint(url)};
    log.push_back(d);
    return std::nullopt;
  }
  std::vector<egress::IpAddress> candidates;
  if (url.host.address) {
    candidates.push_back(*url.host.address);
  } else {
    auto resolved = Resolve(url.host.name, signals, deadline, failure);
    if (!resolved) {
      d.reason = failure.message;
      log.push_back(d);
      return std::nullopt;
    }
    candidates = std::move(*resolved);
  }
  // The guard's exceptions are the allow-list's literal address entries; the policy has no
  // --resolve mappings.
  egress::AddressGuard guard(*allow, egress::ResolveMap());
  std::vector<egress::IpAddress> usable;
  std::string first_refusal;
  for (const egress::IpAddress& a : candidates) {
    egress::Verdict v = guard.Check(url.host, a, url.port);
    if (v.allowed) {
      usable.push_back(a);
      continue;
    }
    if (first_refusal.empty()) first_refusal = v.rule_or_reason;
    log.push_back({.url = d.url,
                   .host = d.host,
                   .port = d.port,
                   .address = a.ToString(),
                   .allowed = false,
                   .reason = v.rule_or_reason});
  }
  if (usable.empty()) {
    failure = {Failure::Kind::kRefused,
               "host " + url.host.name + " refused: " + first_refusal +
                   " (an address outside the public internet is reachable only through an "
                   "egress.allow entry naming it literally)"};
    return std::nullopt;
  }
  // Logged as allowed once connected (with the address used); see Fetch.
  d.allowed = true;
  d.reason = listed.rule_or_reason;
  log.push_back(d);
  return usable;
}

// ---------------------------------------------------------------------------------------------
// One HTTP exchange, on Asio coroutines driven by the calling thread.

constexpr auto kUseTuple = asio::as_tuple(asio::use_awaitable);
constexpr size_t kHeaderLimit = 64 << 10;

struct HopResponse {
  std::optional<Failure> failure;
  std::string address;  // connected to
  unsigned status = 0;
  std::string content_type, content_encoding, location;
  std::string body;  // raw bytes, at most max_bytes
  bool truncated = false;
};

asio::ip::address ToAsio(const egress::IpAddress& a) {
  if (a.is_v4()) return asio::ip::address_v4(a.v4());
  asio::ip::address_v6::bytes_type b;
  std::copy(a.bytes.begin(), a.bytes.end(), b.begin());
  return asio::ip::address_v6(b);
}

bool IsRedirect(unsigned status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

Failure NetFailure(const beast::error_code& ec, const std::string& step) {
  if (ec == beast::error::timeout) return {Failure::Kind::kTimeout, "timed out " + step};
  return {Failure::Kind::kFailed, step + ": " + ec.message()};
}

template <typename Stream>
asio::awaitable<void> ExchangeOnce(Stream& stream, const Url& url, uint64_t max_bytes,
                               SteadyTime deadline, HopResponse& out) {
  auto& tcp = beast::get_lowest_layer(stream);
  bhttp::request<bhttp::empty_body> req{bhttp::verb::get, url.target, 11};
  req.set(bhttp::field::host, url.Authority());
  req.set(bhttp::field::user_agent, "warden-web-fetch");
  req.set(bhttp::field::accept, "*/*");
  req.set(bhttp::field::accept_encoding, "identity");
  req.set(bhttp::field::connection, "close");
  tcp.expires_at(deadline);
  auto [wec, wn] = co_await bhttp::async_write(stream, req, kUseTuple);
  if (wec) {
    out.failure = NetFailure(wec, "sending the request to " + url.Authority());
    co_return;
  }
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::buffer_body> parser;
  parser.header_limit(kHeaderLimit);
  parser.body_limit(boost::none);  // we stop reading at max_bytes ourselves
  auto [hec, hn] = co_await bhttp::async_read_header(stream, buffer, parser, kUseTuple);
  if (hec) {
    out.failure = NetFailure(hec, "reading the response from " + url.Authority());
    co_return;
  }
  const auto& head = parser.get();
  out.status = head.result_int();
  out.content_type = std::string(head[bhttp::field::content_type]);
  out.content_encoding = std::string(head[bhttp::field::content_encoding]);
  out.location = std::string(head[bhttp::field::location]);
  if (IsRedirect(out.status) && !out.location.empty()) co_return;
  char chunk[16384];
  while (!parser.is_done()) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof chunk;
    auto [ec, n] = co_await bhttp::async_read(stream, buffer, parser, kUseTuple);
    out.body.append(chunk, sizeof chunk - parser.get().body().size);
    if (out.body.size() > max_bytes) {
      out.body.resize(max_bytes);
      out.truncated = true;
      co_return;
    }
    if (ec == bhttp::error::need_buffer) continue;
    // A server that closes a TLS connection without close_notify after a body delimited by the
    // close itself: the body is what it sent.
    if (ec == asio::ssl::error::stream_truncated && parser.need_eof()) break;
    if (ec) {
      out.failure = NetFailure(ec, "reading the body from " + url.Authority());
      co_return;
    }
  }
}

// Makes the TLS handshake verify the peer for `url`'s host: certificate chain against the
// system store (the context's), SNI for names, and the name or address checked against the
// certificate.
bool PrepareTls(SSL* ssl, const Url& url) {
  if (url.host.address) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    return X509_VERIFY_PARAM_set1_ip_asc(param, url.host.address->ToString().c_str()) == 1;
  }
  if (SSL_set_tlsext_host_name(ssl, url.host.name.c_str()) != 1) return false;
  SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  return SSL_set1_host(ssl, url.host.name.c_str()) == 1;
}

asio::awaitable<HopResponse> RunHop(Url url, std::vector<egress::IpAddress> addresses,
                                    uint64_t max_bytes, SteadyTime deadline,
                                    asio::ssl::context* tls) {
  HopResponse out;
  beast::tcp_stream tcp(co_await asio::this_coro::executor);
  beast::error_code last;
  std::string last_target;
  for (const egress::IpAddress& a : addresses) {
    tcp.expires_at(deadline);
    auto [ec] = co_await tcp.async_connect(asio::ip::tcp::endpoint(ToAsio(a), url.port), kUseTuple);
    if (!ec) {
      out.address = a.ToString();
      break;
    }
    last = ec;
    last_target = a.ToUrlHost() + ":" + std::to_string(url.port);
    tcp.close();  // the next address may be of the other family
    if (ec == beast::error::timeout) break;
  }
  if (out.address.empty()) {
    out.failure = NetFailure(last, "connecting to " + last_target);
    co_return out;
  }
  if (!url.https) {
    co_await ExchangeOnce(tcp, url, max_bytes, deadline, out);
    co_return out;
  }
  beast::ssl_stream<beast::tcp_stream> stream(std::move(tcp), *tls);
  if (!PrepareTls(stream.native_handle(), url)) {
    out.failure = Failure{Failure::Kind::kFailed, "could not set up TLS for " + url.host.name};
    co_return out;
  }
  beast::get_lowest_layer(stream).expires_at(deadline);
  auto [ec] = co_await stream.async_handshake(asio::ssl::stream_base::client, kUseTuple);
  if (ec) {
    std::string why = ec.message();
    long verify = SSL_get_verify_result(stream.native_handle());
    if (verify != X509_V_OK)
      why = std::string("certificate ") + X509_verify_cert_error_string(verify);
    out.failure = ec == beast::error::timeout
                      ? Failure{Failure::Kind::kTimeout, "timed out in the TLS handshake"}
                      : Failure{Failure::Kind::kFailed,
                                "TLS handshake with " + url.Authority() + " failed: " + why};
    co_return out;
  }
  co_await ExchangeOnce(stream, url, max_bytes, deadline, out);
  co_return out;
}

// Runs one hop on `signals->io` until it ends, the deadline passes (the streams time out) or
// the call is cancelled.
HopResponse RunHopOnLoop(const std::shared_ptr<Signals>& signals, const Url& url,
                         std::vector<egress::IpAddress> addresses, uint64_t max_bytes,
                         SteadyTime deadline, asio::ssl::context& tls) {
  asio::io_context& io = *signals->io;
  std::optional<HopResponse> done;
  asio::co_spawn(io, RunHop(url, std::move(addresses), max_bytes, deadline, &tls),
                 [&done](std::exception_ptr e, HopResponse r) {
                   if (e) {
                     r = {};
                     r.failure = Failure{Failure::Kind::kFailed, "internal error in the fetch"};
                   }
                   done = std::move(r);
                 });
  io.run();
  std::lock_guard lock(signals->mu);
  if (signals->cancelled) {
    HopResponse r;
    r.failure = Failure{Failure::Kind::kCancelled, "cancelled"};
    return r;
  }
  io.restart();
  if (!done) {
    HopResponse r;
    r.failure = Failure{Failure::Kind::kFailed, "the fetch ended without an answer"};
    return r;
  }
  return std::move(*done);
}

// ---------------------------------------------------------------------------------------------
// Bodies

std::string MediaType(std::string_view content_type) {
  std::string m = Lower(content_type.substr(0, content_type.find(';')));
  while (!m.empty() && (m.back() == ' ' || m.back() == '\t')) m.pop_back();
  while (!m.empty() && (m.front() == ' ' || m.front() == '\t')) m.erase(m.begin());
  return m;
}

std::string Charset(std::string_view content_type) {
  std::string lower = Lower(content_type);
  size_t at = lower.find("charset=");
  if (at == std::string::npos) return "";
  std::string v = lower.substr(at + 8);
  v = v.substr(0, v.find(';'));
  std::erase(v, '"');
  std::erase(v, ' ');
  return v;
}

// Length of the valid UTF-8 sequence at s[i], or 0.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((b(i + k) & 0xc0) != 0x80) return 0;
  if (n == 3 && c == 0xe0 && b(i + 1) < 0xa0) return 0;   // overlong
  if (n == 3 && c == 0xed && b(i + 1) >= 0xa0) return 0;  // surrogate
  if (n == 4 && c == 0xf0 && b(i + 1) < 0x90) return 0;   // overlong
  if (n == 4 && c == 0xf4 && b(i + 1) >= 0x90) return 0;  // above U+10FFFF
  return n;
}

// The body as UTF-8 text: Latin-1 decoded when the charset says so, otherwise invalid bytes
// (and a sequence cut at max_bytes) become U+FFFD.
std::string BodyText(std::string_view body, const std::string& charset) {
  std::string out;
  out.reserve(body.size());
  bool latin1 = charset == "iso-8859-1" || charset == "latin1" || charset == "windows-1252" ||
                charset == "us-ascii" || charset == "ascii";
  for (size_t i = 0; i < body.size();) {
    unsigned char c = static_cast<unsigned char>(body[i]);
    if (latin1) {
      if (c < 0x80) {
        out += static_cast<char>(c);
      } else {
        out += static_cast<char>(0xc0 | (c >> 6));
        out += static_cast<char>(0x80 | (c & 0x3f));
      }
      ++i;
      continue;
    }
    size_t n = Utf8SequenceLength(body, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(body.substr(i, n));
      i += n;
    }
  }
  return out;
}

bool IsTextMediaType(const std::string& media) {
  if (media.starts_with("text/")) return true;
  if (media.ends_with("+json") || media.ends_with("+xml")) return true;
  static const char* const kText[] = {
      "application/json",       "application/xml",          "application/javascript",
      "application/ecmascript", "application/x-javascript", "application/yaml",
      "application/x-yaml",     "application/toml",         "application/x-www-form-urlencoded",
      "application/graphql",    "application/sql",          "application/x-sh"};
  return std::find(std::begin(kText), std::end(kText), media) != std::end(kText);
}

// Whether the body is text the agent can read: a text media type (without a content coding),
// or no content type at all and bytes that are UTF-8 without NULs.
bool IsTextBody(const HopResponse& r) {
  std::string coding = Lower(r.content_encoding);
  if (!coding.empty() && coding != "identity") return false;
  std::string media = MediaType(r.content_type);
  if (media.empty()) return r.body.find('\0') == std::string::npos && IsValidUtf8(r.body);
  return IsTextMediaType(media);
}

// ---------------------------------------------------------------------------------------------
// Results

struct Outcome {
  std::string url, final_url;
  std::optional<Failure> failure;
  HopResponse response;
  bool text = true;
  std::vector<EgressDecision> egress;
};

CallResult BuildResult(const Outcome& o, uint64_t max_bytes) {
  const HopResponse& r = o.response;
  std::string body = o.text ? BodyText(r.body, Charset(r.content_type)) : "";
  std::string content_type = egress::Printable(r.content_type);
  std::string text;
  bool is_error;
  if (o.failure) {
    const char* what = o.failure->kind == Failure::Kind::kRefused ? "refused" : "failed";
    text = "web__fetch " + std::string(what) + ": " + o.failure->message;
    is_error = true;
  } else {
    std::string head = "HTTP " + std::to_string(r.status) + " from " + o.final_url;
    if (!content_type.empty()) head += " (" + content_type + ")";
    if (!o.text) {
      head += ": " + std::to_string(r.body.size()) + " bytes of non-text content, not shown";
      if (!r.content_encoding.empty())
        head += " (content coding " + egress::Printable(r.content_encoding) + ")";
    } else if (r.truncated) {
      head += ", body cut at " + std::to_string(max_bytes) + " bytes";
    }
    text = head + (o.text ? "\n\n" + body : "");
    is_error = r.status >= 400;
  }
  json egress = json::array();
  double allowed = 0, denied = 0;
  std::vector<std::string> hosts;
  for (const EgressDecision& d : o.egress) {
    egress.push_back(d.ToJson());
    (d.allowed ? allowed : denied) += 1;
    if (d.allowed && !d.host.empty()) hosts.push_back(d.host);
  }
  const monitor::Families& metrics = monitor::Metrics();
  if (allowed > 0) metrics.egress.Add({"web_fetch", "allowed"}, allowed);
  if (denied > 0) metrics.egress.Add({"web_fetch", "denied"}, denied);
  json structured = {{"url", o.url},           {"final_url", o.final_url},
                     {"status", r.status},     {"content_type", content_type},
                     {"body", body},           {"truncated", r.truncated},
                     {"bytes", r.body.size()}, {"egress", std::move(egress)}};
  if (o.failure)
    structured["error"] = o.failure->message;
  else if (r.status >= 400)
    structured["error"] = "HTTP status " + std::to_string(r.status);
  CallResult result = CallResult::FromText(std::move(text), is_error);
  result.value["structuredContent"] = std::move(structured);
  result.facts.hosts = std::move(hosts);
  return result;
}

// The hops: check, connect, exchange; follow redirects.
void Fetch(const FetchRequest& request, const FetchEgress& egress, asio::ssl::context& tls,
           const std::shared_ptr<Signals>& signals, Outcome& o) {
  SteadyTime deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(request.timeout_ms);
  auto url = ParseUrl(request.url);
  if (!url) {
    o.failure = Failure{Failure::Kind::kFailed, "bad url: " + url.status().message()};
    return;
  }
  std::optional<egress::AllowList> allow;
  if (egress.allow != nullptr) {
    auto parsed = egress::AllowList::Parse(*egress.allow);
    if (!parsed) {
      o.failure = Failure{Failure::Kind::kRefused,
                          "the policy's egress.allow is invalid: " + parsed.status().message()};
      return;
    }
    allow = std::move(*parsed);
  }
  for (int hop = 0;; ++hop) {
    o.final_url = url->ToString();
    Failure failure;
    auto addresses =
        CheckHop(*url, allow ? &*allow : nullptr, signals, deadline, o.egress, failure);
    if (!addresses) {
      o.failure = failure;
      return;
    }
    HopResponse r = RunHopOnLoop(signals, *url, *addresses, request.max_bytes, deadline, tls);
    if (!r.address.empty())
      o.egress.back().address = r.address;
    else if (!addresses->empty())
      o.egress.back().address = addresses->front().ToString();
    if (r.failure) {
      o.failure = r.failure;
      return;
    }
    if (!IsRedirect(r.status) || r.location.empty()) {
      o.text = IsTextBody(r);
      o.response = std::move(r);
      return;
    }
    if (hop == kFetchMaxRedirects) {
      o.response.status = r.status;
      o.failure = Failure{Failure::Kind::kFailed, "more than 5 redirects"};
      return;
    }
    auto next = ResolveReference(*url, r.location);
    if (!next) {
      o.response.status = r.status;
      o.failure = Failure{Failure::Kind::kFailed, "redirect to " + egress::Quote(r.location) +
                                                      ": " + next.status().message()};
      return;
    }
    // Another host is another party: sending it this URL is a send the session's state decides,
    // as if the agent had asked for it. (The same host chose the URL and has seen it already.)
    if (egress.redirect_check &&
        (next->host.name != url->host.name || next->port != url->port)) {
      if (std::optional<std::string> refused = egress.redirect_check(next->ToString())) {
        o.response.status = r.status;
        o.final_url = next->ToString();
        o.egress.push_back({.url = next->ToString(),
                            .host = next->host.name,
                            .port = next->port,
                            .allowed = false,
                            .reason = *refused});
        o.failure = Failure{Failure::Kind::kRefused,
                            "redirect to " + next->ToString() + " refused: " + *refused};
        return;
      }
    }
    url = std::move(next);
  }
}

}  // namespace

bool IsValidUtf8(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    size_t n = Utf8SequenceLength(bytes, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

CallResult RunWebFetch(const FetchRequest& request, const FetchEgress& egress,
                       const std::shared_ptr<CancelToken>& cancel) {
  // Declared before the io_context: a hop left pending by a cancel is destroyed with the
  // io_context, before the TLS context it was built from.
  asio::ssl::context tls(asio::ssl::context::tls_client);
  boost::system::error_code ec;
  tls.set_options(asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3 |
                      asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1,
                  ec);
  if (!ec) tls.set_default_verify_paths(ec);
  if (!ec) tls.set_verify_mode(asio::ssl::verify_peer, ec);
  auto signals = std::make_shared<Signals>();
  // The io_context is owned here and by `signals` (the cancel path stops it); it is detached
  // from `signals` before it is destroyed, on this thread.
  auto io = std::make_shared<asio::io_context>(1);
  signals->io = io;
  if (cancel) cancel->OnCancel([signals] { signals->Cancel(); });
  Outcome o;
  o.url = request.url;
  o.final_url = request.url;
  if (ec) {
    o.failure = Failure{Failure::Kind::kFailed, "could not set up TLS: " + ec.message()};
  } else {
    Fetch(request, egress, tls, signals, o);
  }
  if (cancel) cancel->OnCancel({});
  {
    std::lock_guard lock(signals->mu);
    signals->io.reset();
    if (signals->cancelled && (!o.failure || o.failure->kind != Failure::Kind::kRefused)) {
      std::string why = cancel ? cancel->reason() : "";
      o.failure = Failure{Failure::Kind::kCancelled,
                          "cancelled" + (why.empty() ? std::string() : " (" + why + ")")};
    }
  }
  if (o.failure && o.failure->kind == Failure::Kind::kTimeout)
    o.failure->message += " (limit " + std::to_string(request.timeout_ms) + " ms)";
  return BuildResult(o, request.max_bytes);
}

}  // namespace warden::gateway
