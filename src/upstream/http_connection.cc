// The Streamable HTTP transport (MCP 2025-03-26 and later), client side: every message is a POST
// to the endpoint; a request's reply is either one JSON body or an SSE stream carrying the
// server's notifications and requests and, last, the response. The session id from the initialize
// reply goes on every later request, and MCP-Protocol-Version after initialize. A GET stream
// carries server-initiated messages when the server offers one (405: it does not).
//
// Each exchange is a coroutine on its own strand of a small io_context (two threads), with its
// own TCP connection (and TLS session, for https://, verified against the system store or the
// upstream's ca_file): a slow request never holds up another. The only file of src/upstream that
// includes Asio and Beast (slow to compile); keep it that way.
#include <atomic>
#include <cstdio>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <map>
#include <mutex>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <thread>
#include <vector>

#include "common/guard.h"
#include "mcp/modern.h"
#include "upstream/connection.h"
#include "upstream/http_url.h"
#include "upstream/sse.h"

namespace warden::upstream {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t kErrorBodyKeep = 64 * 1024;  // of an HTTP error's body, for the message
constexpr int kMaxResumes = 3;                     // GET Last-Event-ID attempts per request
constexpr milliseconds kDefaultRetry{500};         // when the server sent no `retry:`
constexpr milliseconds kListenRetryMax{10000};
constexpr milliseconds kDeleteTimeout{1000};

// One HTTP exchange to perform.
struct Exchange {
  http::verb verb = http::verb::post;
  std::string body;                   // POST: one JSON-RPC message
  std::optional<int64_t> request_id;  // a request: its response is expected on this exchange
  bool initialize = false;            // the reply carries the session id
  bool listen = false;                // the GET stream for server-initiated messages
  std::string last_event_id;          // resuming a stream (GET with Last-Event-ID)
  milliseconds retry{kDefaultRetry};
  std::string sent_session;  // the session id this exchange carried
  int resumes = 0;
  std::map<std::string, std::string> headers;  // for this request alone (a per-call token)
  // A 2026-07-28 request: the headers that mirror its body (MCP-Protocol-Version, Mcp-Method,
  // Mcp-Name, Mcp-Param-*), set after every other header. `tools_list`: its reply's tools are
  // checked for x-mcp-header annotations.
  std::vector<std::pair<std::string, std::string>> mirror;
  bool tools_list = false;
};

// How an exchange ended.
struct Outcome {
  enum Kind {
    kDone,         // finished as it should (a request: its response was delivered)
    kStreamEnded,  // an SSE stream ended before the request's response (may be resumed)
    kFailed,       // transport failure (connect, read, write): `error`
    kRefused,      // an HTTP error status: `error`
    kNoStream,     // GET answered 405: the server offers no stream
    kQuiet,        // nothing to report (abandoned, closing, or already reported as the end)
  } kind = kDone;
  std::string error;
};

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

class HttpConnection final : public Connection {
 public:
  HttpConnection(const Spec& spec, const ClientOptions& options, ConnectionSink sink, HttpUrl url)
      : spec_(spec), options_(options), sink_(std::move(sink)), url_(std::move(url)) {}
  ~HttpConnection() override { Close(); }

  Status Open(Clock::time_point deadline) override;
  void Send(const mcp::Message& message) override { SendWithHeaders(message, {}); }
  void SendWithHeaders(const mcp::Message& message,
                       const std::map<std::string, std::string>& headers) override;
  void Initialized(const std::string& protocol_version, Clock::time_point deadline) override;
  void Abandon(int64_t id) override;
  void Close() override;

 private:
  // A request in flight: the TCP stream carrying its reply, so that Abandon can drop it.
  struct Active {
    std::weak_ptr<beast::tcp_stream> stream;
    bool abandoned = false;
  };

  asio::awaitable<void> Run(Exchange ex);
  asio::awaitable<void> Listen();
  // Connects (and for https: shakes hands), then Talk()s.
  asio::awaitable<Outcome> Perform(Exchange& ex);
  // One request and its reply on a connected stream (a tcp_stream, or TLS over one: `lower`).
  template <class Stream>
  asio::awaitable<Outcome> Talk(Stream& stream, beast::tcp_stream& lower, Exchange& ex);
  template <class Stream>
  asio::awaitable<Outcome> ReadSse(Stream& stream, beast::flat_buffer& buffer,
                                   http::response_parser<http::buffer_body>& parser, Exchange& ex);
  // Reads the body in chunks, handing each to `on_chunk` until it returns false or the body ends.
  template <class Stream>
  asio::awaitable<beast::error_code> ReadBody(
      Stream& stream, beast::flat_buffer& buffer,
      http::response_parser<http::buffer_body>& parser,
      const std::function<bool(std::string_view)>& on_chunk);
  asio::awaitable<void> Sleep(milliseconds delay);
  http::request<http::string_body> BuildRequest(Exchange& ex);
  // Parses one JSON text from the server and hands its messages on; sets `got_response` when one
  // answers ex.request_id.
  void Dispatch(std::string_view text, const Exchange& ex, bool& got_response);
  // A modern request: its mirror headers (the body is the truth they are made from).
  void Mirror(const mcp::Request& request, Exchange& ex);
  // A tools/list reply from a modern server: tools whose x-mcp-header annotations break the
  // revision's rules are left out (with a warning), the others' annotations remembered.
  void CheckToolHeaders(mcp::Response& response);
  void Spawn(Exchange ex);
  bool Track(int64_t id, const std::shared_ptr<beast::tcp_stream>& stream);  // false: abandoned
  bool Abandoned(int64_t id);
  void Untrack(int64_t id);
  void FailRequest(const Exchange& ex, const std::string& error);
  void Dead(const std::string& why, const std::string& error);
  std::string TooBig() const {
    return "sent a message over " + std::to_string(options_.max_message_bytes) + " bytes";
  }

  const Spec spec_;
  const ClientOptions options_;
  const ConnectionSink sink_;
  const HttpUrl url_;

  std::mutex mu_;
  std::string session_id_;
  std::string protocol_version_;
  bool expired_ = false;
  bool dead_reported_ = false;
  std::map<int64_t, Active> active_;
  std::atomic<bool> closing_{false};
  // A modern server's x-mcp-header annotations, by tool name, from the tools/list replies seen.
  std::map<std::string, std::vector<mcp::ParamHeader>> param_headers_;

  std::mutex close_mu_;
  bool closed_ = false;
  tcp::resolver::results_type endpoints_;
  std::optional<asio::ssl::context> tls_;  // https only: the peer is verified against it
  std::vector<std::thread> threads_;
  // Last: destroyed first, together with any coroutine frame still suspended in it.
  asio::io_context ioc_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
};

Status HttpConnection::Open(Clock::time_point /*deadline: resolving is the only wait*/) {
  tcp::resolver resolver(ioc_);
  beast::error_code ec;
  endpoints_ = resolver.resolve(url_.host, url_.port, ec);
  if (ec) return Status::Error("cannot resolve " + url_.host + ": " + ec.message());
  if (url_.tls) {
    tls_.emplace(asio::ssl::context::tls_client);
    tls_->set_options(asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3 |
                          asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1,
                      ec);
    if (!ec && spec_.ca_file.empty()) tls_->set_default_verify_paths(ec);
    if (!ec && !spec_.ca_file.empty()) {
      tls_->load_verify_file(spec_.ca_file, ec);
      if (ec) return Status::Error("cannot load the CA file " + spec_.ca_file + ": " + ec.message());
    }
    if (!ec) tls_->set_verify_mode(asio::ssl::verify_peer, ec);
    if (ec) return Status::Error("cannot set up TLS: " + ec.message());
  }
  work_.emplace(ioc_.get_executor());
  for (int i = 0; i < 2; ++i) {
    threads_.emplace_back([this] {
      while (!RunGuarded("upstream HTTP I/O thread", "the handler was abandoned",
                         [this] { ioc_.run(); })) {
      }
    });
  }
  return Status::Ok();
}

void HttpConnection::Spawn(Exchange ex) {
  asio::co_spawn(asio::make_strand(ioc_), Run(std::move(ex)), [](std::exception_ptr) {
    // An exception here is an allocation failure; the request's timeout still completes it.
  });
}

void HttpConnection::SendWithHeaders(const mcp::Message& message,
                                     const std::map<std::string, std::string>& headers) {
  if (closing_) return;
  Exchange ex;
  ex.body = mcp::Serialize(message);
  ex.headers = headers;
  if (const auto* request = std::get_if<mcp::Request>(&message)) {
    ex.request_id = request->id.AsInt64();
    ex.initialize = request->method == "initialize";
    if (!mcp::MetaProtocolVersion(*request).empty()) Mirror(*request, ex);
    if (ex.request_id) {
      std::lock_guard<std::mutex> lock(mu_);
      active_[*ex.request_id];
    }
  }
  Spawn(std::move(ex));
}

void HttpConnection::Mirror(const mcp::Request& request, Exchange& ex) {
  ex.mirror.emplace_back("MCP-Protocol-Version", mcp::MetaProtocolVersion(request));
  // A method that is not plain text cannot be mirrored (and is no method the server knows).
  if (mcp::EncodeHeaderValue(request.method) == request.method)
    ex.mirror.emplace_back("Mcp-Method", request.method);
  if (auto name = mcp::NameOf(request)) ex.mirror.emplace_back("Mcp-Name", mcp::EncodeHeaderValue(*name));
  ex.tools_list = request.method == "tools/list";
  if (request.method != "tools/call" || !request.params) return;
  const auto name = mcp::NameOf(request);
  auto arguments = request.params->find("arguments");
  if (!name || arguments == request.params->end()) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto annotated = param_headers_.find(*name);
  if (annotated == param_headers_.end()) return;
  for (const mcp::ParamHeader& h : annotated->second)
    if (auto value = mcp::ParamHeaderValue(*arguments, h.path))
      ex.mirror.emplace_back("Mcp-Param-" + h.header, std::move(*value));
}

void HttpConnection::CheckToolHeaders(mcp::Response& response) {
  auto tools = response.result.is_object() ? response.result.find("tools") : response.result.end();
  if (!response.result.is_object() || tools == response.result.end() || !tools->is_array()) return;
  constexpr std::size_t kMaxRemembered = 10000;
  nlohmann::json kept = nlohmann::json::array();
  for (auto& tool : *tools) {
    std::vector<mcp::ParamHeader> headers;
    if (auto error = mcp::ReadParamHeaders(tool, headers)) {
      std::fprintf(stderr, "warden: upstream %s: tool left out: %s\n", spec_.name.c_str(),
                   error->c_str());
      continue;
    }
    if (tool.contains("name") && tool["name"].is_string()) {
      std::lock_guard<std::mutex> lock(mu_);
      const std::string name = tool["name"].get<std::string>();
      if (headers.empty())
        param_headers_.erase(name);
      else if (param_headers_.size() < kMaxRemembered || param_headers_.count(name))
        param_headers_[name] = std::move(headers);
    }
    kept.push_back(std::move(tool));
  }
  *tools = std::move(kept);
}

void HttpConnection::Initialized(const std::string& protocol_version, Clock::time_point deadline) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    protocol_version_ = protocol_version;
  }
  if (closing_) return;
  // Every POST has its own TCP connection, so two POSTs can arrive in either order: the
  // notification must be in before the first request is sent. A server that refuses it answers
  // the next request too; that is where the error surfaces.
  auto ex = std::make_shared<Exchange>();
  ex->body = mcp::Serialize(mcp::Message(mcp::Notification{"notifications/initialized", std::nullopt}));
  auto done = asio::co_spawn(
      asio::make_strand(ioc_),
      [this, ex]() -> asio::awaitable<void> { co_await Perform(*ex); }, asio::use_future);
  done.wait_until(deadline);
  asio::co_spawn(asio::make_strand(ioc_), Listen(), [](std::exception_ptr) {});
}

void HttpConnection::Abandon(int64_t id) {
  std::shared_ptr<beast::tcp_stream> stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(id);
    if (it == active_.end()) return;
    it->second.abandoned = true;
    stream = it->second.stream.lock();
  }
  // Streams are used only on their own strand: close it there.
  if (stream) asio::post(stream->get_executor(), [stream] { stream->close(); });
}

bool HttpConnection::Track(int64_t id, const std::shared_ptr<beast::tcp_stream>& stream) {
  std::lock_guard<std::mutex> lock(mu_);
  Active& a = active_[id];
  a.stream = stream;
  return !a.abandoned;
}

bool HttpConnection::Abandoned(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = active_.find(id);
  return it != active_.end() && it->second.abandoned;
}

void HttpConnection::Untrack(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  active_.erase(id);
}

void HttpConnection::FailRequest(const Exchange& ex, const std::string& error) {
  if (!ex.request_id || closing_ || Abandoned(*ex.request_id)) return;
  sink_.on_request_failed(*ex.request_id, error);
}

void HttpConnection::Dead(const std::string& why, const std::string& error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (dead_reported_ || closing_) return;
    dead_reported_ = true;
  }
  sink_.on_dead(why, error);
}

asio::awaitable<void> HttpConnection::Sleep(milliseconds delay) {
  asio::steady_timer timer(co_await asio::this_coro::executor, delay);
  co_await timer.async_wait(kTuple);
}

asio::awaitable<void> HttpConnection::Run(Exchange ex) {
  for (;;) {
    Outcome outcome = co_await Perform(ex);
    if (!ex.request_id) co_return;  // a notification or a reply: nobody waits on it
    const int64_t id = *ex.request_id;
    // The transport lets a server end a request's stream early and the client resume it with GET
    // and Last-Event-ID (2025-11-25 does it on purpose); without an event id there is nothing to
    // resume.
    const bool resumable = outcome.kind == Outcome::kStreamEnded && !ex.last_event_id.empty() &&
                           ex.resumes < kMaxResumes && !closing_ && !Abandoned(id);
    if (resumable) {
      ++ex.resumes;
      co_await Sleep(ex.retry);
      ex.verb = http::verb::get;
      ex.body.clear();
      continue;
    }
    switch (outcome.kind) {
      case Outcome::kStreamEnded:
        FailRequest(ex, "the server ended the response stream without a response");
        break;
      case Outcome::kFailed:
      case Outcome::kRefused:
        FailRequest(ex, outcome.error);
        break;
      default:
        break;
    }
    Untrack(id);
    co_return;
  }
}

asio::awaitable<void> HttpConnection::Listen() {
  Exchange ex;
  ex.verb = http::verb::get;
  ex.listen = true;
  int failures = 0;
  while (!closing_) {
    Outcome outcome = co_await Perform(ex);
    // 405: no stream offered; an HTTP error: the server does not want one from us; quiet: ended.
    if (outcome.kind == Outcome::kNoStream || outcome.kind == Outcome::kRefused ||
        outcome.kind == Outcome::kQuiet || closing_)
      co_return;
    // The stream ended (servers close it at will) or the connection failed: reopen, from the last
    // event seen, backing off while it keeps failing.
    failures = outcome.kind == Outcome::kFailed ? failures + 1 : 0;
    milliseconds delay = ex.retry;
    for (int i = 0; i < failures && delay < kListenRetryMax; ++i) delay *= 2;
    co_await Sleep(std::min(delay, kListenRetryMax));
  }
}

http::request<http::string_body> HttpConnection::BuildRequest(Exchange& ex) {
  http::request<http::string_body> req{ex.verb, url_.target, 11};
  req.set(http::field::host, url_.host_header);
  req.set(http::field::user_agent, "warden-upstream/0.1");
  for (const auto& [name, value] : spec_.headers) req.set(name, value);
  // Credentials: computed now (a token minted for warden's own requests expires), then the
  // request's own, which replace them. Values were checked for line breaks where they came from
  // (the policy loader, the secret store); Beast refuses what would split the request anyway.
  if (spec_.request_headers && ex.headers.empty()) {
    for (const auto& [name, value] : spec_.request_headers()) req.set(name, value);
  }
  for (const auto& [name, value] : ex.headers) req.set(name, value);
  for (const auto& [name, value] : ex.mirror) req.set(name, value);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ex.initialize && !session_id_.empty()) {
      req.set("Mcp-Session-Id", session_id_);
      ex.sent_session = session_id_;
    }
    if (!ex.initialize && !protocol_version_.empty())
      req.set("MCP-Protocol-Version", protocol_version_);
  }
  if (ex.verb == http::verb::post) {
    req.set(http::field::accept, "application/json, text/event-stream");
    req.set(http::field::content_type, "application/json");
    req.body() = ex.body;
  } else if (ex.verb == http::verb::get) {
    req.set(http::field::accept, "text/event-stream");
    if (!ex.last_event_id.empty()) req.set("Last-Event-ID", ex.last_event_id);
  }
  req.keep_alive(false);  // one TCP connection per exchange (docs/upstream.md)
  req.prepare_payload();
  return req;
}

// The TLS handshake checks the chain against the context's store, sends SNI for a name and
// checks the name or address against the certificate.
bool PrepareTls(SSL* ssl, const HttpUrl& url) {
  boost::system::error_code ec;
  (void)asio::ip::make_address(url.host, ec);  // an IP literal: no SNI, the address is checked
  if (!ec) return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), url.host.c_str()) == 1;
  if (SSL_set_tlsext_host_name(ssl, url.host.c_str()) != 1) return false;
  SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  return SSL_set1_host(ssl, url.host.c_str()) == 1;
}

asio::awaitable<Outcome> HttpConnection::Perform(Exchange& ex) {
  auto executor = co_await asio::this_coro::executor;
  std::shared_ptr<beast::ssl_stream<beast::tcp_stream>> secure;
  std::shared_ptr<beast::tcp_stream> stream;
  if (tls_) {
    secure = std::make_shared<beast::ssl_stream<beast::tcp_stream>>(executor, *tls_);
    stream = std::shared_ptr<beast::tcp_stream>(secure, &secure->next_layer());  // aliasing
  } else {
    stream = std::make_shared<beast::tcp_stream>(executor);
  }
  // Abandon() closes the TCP stream, which also ends a TLS exchange on it.
  if (ex.request_id && !Track(*ex.request_id, stream)) co_return Outcome{Outcome::kQuiet, ""};
  stream->expires_after(options_.connect_timeout);
  auto [connect_error, endpoint] = co_await stream->async_connect(endpoints_, kTuple);
  if (connect_error)
    co_return Outcome{Outcome::kFailed,
                      "cannot connect to " + url_.host_header + ": " + connect_error.message()};
  if (!secure) co_return co_await Talk(*stream, *stream, ex);
  if (!PrepareTls(secure->native_handle(), url_))
    co_return Outcome{Outcome::kFailed, "cannot set up TLS for " + url_.host};
  auto [handshake_error] =
      co_await secure->async_handshake(asio::ssl::stream_base::client, kTuple);
  if (handshake_error) {
    std::string why = handshake_error.message();
    const long verify = SSL_get_verify_result(secure->native_handle());
    if (verify != X509_V_OK) why = std::string("certificate ") + X509_verify_cert_error_string(verify);
    co_return Outcome{Outcome::kFailed, "TLS with " + url_.host_header + " failed: " + why};
  }
  co_return co_await Talk(*secure, *stream, ex);
}

template <class Stream>
asio::awaitable<Outcome> HttpConnection::Talk(Stream& stream_ref, beast::tcp_stream& lower,
                                              Exchange& ex) {
  Stream* stream = &stream_ref;
  beast::tcp_stream* timed = &lower;
  http::request<http::string_body> req = BuildRequest(ex);
  timed->expires_after(options_.connect_timeout);
  auto [write_error, written] = co_await http::async_write(*stream, req, kTuple);
  if (write_error)
    co_return Outcome{Outcome::kFailed,
                      "sending to " + url_.host_header + " failed: " + write_error.message()};
  // A request's reply may take as long as the request is allowed to (the client's timer abandons
  // it); anything else must answer within the request timeout.
  if (ex.request_id || ex.listen)
    timed->expires_never();
  else
    timed->expires_after(options_.request_timeout);
  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);  // per-message limits are ours, below
  parser.header_limit(64 * 1024);
  auto [read_error, header_bytes] =
      co_await http::async_read_header(*stream, buffer, parser, kTuple);
  if (read_error) {
    if (closing_ || (ex.request_id && Abandoned(*ex.request_id)))
      co_return Outcome{Outcome::kQuiet, ""};
    co_return Outcome{Outcome::kFailed, "reading the reply from " + url_.host_header +
                                            " failed: " + read_error.message()};
  }
  const auto& res = parser.get();
  const unsigned status = res.result_int();
  if (ex.initialize && status / 100 == 2) {
    auto session = res.find("Mcp-Session-Id");
    if (session != res.end()) {
      std::lock_guard<std::mutex> lock(mu_);
      session_id_ = std::string(session->value());
    }
  }
  const std::string status_text =
      "HTTP " + std::to_string(status) + " " + std::string(res.reason());
  if (status == 404 && !ex.sent_session.empty()) {
    // The server forgot our session: a new one needs a new initialize (a restart).
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (session_id_ == ex.sent_session) expired_ = true;
    }
    Dead("session expired (HTTP 404)", "session expired (HTTP 404)");
    co_return Outcome{Outcome::kQuiet, ""};
  }
  if (ex.listen && status == 405) co_return Outcome{Outcome::kNoStream, ""};
  if (status < 200 || status >= 300) {
    std::string body;
    co_await ReadBody(*stream, buffer, parser, [&](std::string_view chunk) {
      body.append(chunk.substr(0, kErrorBodyKeep - std::min(kErrorBodyKeep, body.size())));
      return body.size() < kErrorBodyKeep;
    });
    // A JSON-RPC error in the body answers the request as well as the status does.
    bool got_response = false;
    if (ex.request_id && res[http::field::content_type].starts_with("application/json"))
      Dispatch(body, ex, got_response);
    if (got_response) co_return Outcome{Outcome::kDone, ""};
    if (body.size() > 300) body = body.substr(0, 300) + "...";
    co_return Outcome{Outcome::kRefused, status_text + (body.empty() ? "" : ": " + body)};
  }
  const std::string content_type = Lower(res[http::field::content_type]);
  if (content_type.starts_with("text/event-stream"))
    co_return co_await ReadSse(*stream, buffer, parser, ex);
  if (!ex.request_id)
    co_return Outcome{Outcome::kDone, ""};  // 202 or 200 for a notification or reply
  if (status == 202 || parser.is_done())
    co_return Outcome{Outcome::kRefused, status_text + " with no response to the request"};
  if (!content_type.starts_with("application/json"))
    co_return Outcome{Outcome::kRefused,
                      status_text + " with unexpected Content-Type '" + content_type + "'"};
  std::string body;
  bool too_big = false;
  auto body_error = co_await ReadBody(*stream, buffer, parser, [&](std::string_view chunk) {
    too_big = body.size() + chunk.size() > options_.max_message_bytes;
    if (!too_big) body.append(chunk);
    return !too_big;
  });
  if (too_big) {
    Dead(TooBig(), "session dropped (the server " + TooBig() + ")");
    co_return Outcome{Outcome::kQuiet, ""};
  }
  if (body_error) {
    if (closing_ || Abandoned(*ex.request_id)) co_return Outcome{Outcome::kQuiet, ""};
    co_return Outcome{Outcome::kFailed, "reading the reply from " + url_.host_header +
                                            " failed: " + body_error.message()};
  }
  bool got_response = false;
  Dispatch(body, ex, got_response);
  if (!got_response)
    co_return Outcome{Outcome::kRefused,
                      "the server's JSON reply holds no response to the request"};
  co_return Outcome{Outcome::kDone, ""};
}

template <class Stream>
asio::awaitable<Outcome> HttpConnection::ReadSse(Stream& stream,
                                                 beast::flat_buffer& buffer,
                                                 http::response_parser<http::buffer_body>& parser,
                                                 Exchange& ex) {
  SseParser sse(options_.max_message_bytes);
  bool got_response = false;
  bool too_big = false;
  auto error = co_await ReadBody(stream, buffer, parser, [&](std::string_view chunk) {
    Status fed = sse.Feed(chunk, [&](const SseEvent& event) {
      if ((event.type.empty() || event.type == "message") && !event.data.empty())
        Dispatch(event.data, ex, got_response);
    });
    if (!fed.ok()) too_big = true;
    // The response ends a request's stream; a server should close it then, but need not.
    return !too_big && !(got_response && ex.request_id);
  });
  if (!sse.last_event_id().empty()) ex.last_event_id = sse.last_event_id();
  if (sse.retry_ms()) ex.retry = milliseconds(*sse.retry_ms());
  if (too_big) {
    Dead(TooBig(), "session dropped (the server " + TooBig() + ")");
    co_return Outcome{Outcome::kQuiet, ""};
  }
  if (got_response) co_return Outcome{Outcome::kDone, ""};
  if (closing_ || (ex.request_id && Abandoned(*ex.request_id)))
    co_return Outcome{Outcome::kQuiet, ""};
  if (error && !ex.request_id)
    co_return Outcome{Outcome::kFailed,
                      "the event stream from " + url_.host_header + " failed: " + error.message()};
  co_return Outcome{Outcome::kStreamEnded, error ? error.message() : "ended"};
}

template <class Stream>
asio::awaitable<beast::error_code> HttpConnection::ReadBody(
    Stream& stream, beast::flat_buffer& buffer,
    http::response_parser<http::buffer_body>& parser,
    const std::function<bool(std::string_view)>& on_chunk) {
  char chunk[16384];
  while (!parser.is_done()) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof chunk;
    auto [error, n] = co_await http::async_read_some(stream, buffer, parser, kTuple);
    if (error == http::error::need_buffer) error = {};
    if (error == asio::ssl::error::stream_truncated && parser.need_eof()) {
      // A TLS peer that closes without close_notify, on a body that ends at the close.
      error = {};
      parser.put_eof(error);
      if (error) co_return error;
    } else if (error) {
      co_return error;
    }
    const std::size_t got = sizeof chunk - parser.get().body().size;
    if (got > 0 && !on_chunk(std::string_view(chunk, got))) co_return beast::error_code{};
  }
  co_return beast::error_code{};
}

void HttpConnection::Dispatch(std::string_view text, const Exchange& ex, bool& got_response) {
  mcp::ParseOptions parse;
  parse.max_bytes = options_.max_message_bytes;
  parse.allow_batch = true;  // only 2025-03-26 servers send them; harmless to accept from any
  mcp::ParseResult parsed = mcp::Parse(text, parse);
  for (auto& entry : parsed.entries) {
    auto* message = std::get_if<mcp::Message>(&entry);
    if (!message) continue;  // not JSON-RPC: dropped, as over stdio
    if (ex.request_id) {
      std::optional<mcp::Id> id;
      if (const auto* r = std::get_if<mcp::Response>(message)) id = r->id;
      if (const auto* e = std::get_if<mcp::ErrorResponse>(message)) id = e->id;
      if (id && id->AsInt64() == ex.request_id) {
        got_response = true;
        if (ex.tools_list)
          if (auto* response = std::get_if<mcp::Response>(message)) CheckToolHeaders(*response);
      }
    }
    if (closing_) return;
    sink_.on_message(std::move(*message));
  }
}

void HttpConnection::Close() {
  std::lock_guard<std::mutex> close_lock(close_mu_);
  if (closed_) return;
  closed_ = true;
  closing_ = true;  // no new exchanges, no more sink calls
  if (threads_.empty()) return;
  std::string session;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!expired_) session = session_id_;
  }
  if (!session.empty()) {
    // End the session on the server (it may answer 405: sessions it does not let clients end).
    auto deleted = asio::co_spawn(
        asio::make_strand(ioc_),
        [this]() -> asio::awaitable<Outcome> {
          Exchange ex;
          ex.verb = http::verb::delete_;
          co_return co_await Perform(ex);
        },
        asio::use_future);
    deleted.wait_for(kDeleteTimeout);
  }
  work_.reset();
  ioc_.stop();  // abandons every exchange; their frames go with the io_context
  for (auto& t : threads_) t.join();
  threads_.clear();
}

}  // namespace

Result<std::unique_ptr<Connection>> MakeHttpConnection(const Spec& spec,
                                                       const ClientOptions& options,
                                                       ConnectionSink sink) {
  auto url = ParseHttpUrl(spec.url);
  if (!url) return url.status();
  return std::unique_ptr<Connection>(
      new HttpConnection(spec, options, std::move(sink), std::move(*url)));
}

}  // namespace warden::upstream
