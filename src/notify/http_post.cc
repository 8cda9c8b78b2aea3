// Each Post runs on an io_context of its own, on the caller's thread, for at most the timeout
// (run_for); whatever is still pending then (resolve, connect, handshake, read) is abandoned with
// that io_context, and Cancel() stops it early. A new TCP connection (and TLS session) per POST.
#include "notify/http_post.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <mutex>
#include <optional>

namespace warden::notify {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Request = http::request<http::string_body>;

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t kHeaderLimit = 16 * 1024;  // of the reply; its body is never read

PostReply Failed(std::string error) {
  return PostReply{PostReply::kFailed, 0, std::move(error), ""};
}

// Sends SNI for a name and has the handshake check the name or address against the certificate
// (the chain is checked against the context's store).
bool PrepareTls(SSL* ssl, const upstream::HttpUrl& url) {
  boost::system::error_code ec;
  (void)asio::ip::make_address(url.host, ec);  // an IP literal: no SNI, the address is checked
  if (!ec) return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), url.host.c_str()) == 1;
  if (SSL_set_tlsext_host_name(ssl, url.host.c_str()) != 1) return false;
  SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  return SSL_set1_host(ssl, url.host.c_str()) == 1;
}

// Writes the request on a connected stream and reads the reply's header, and its body when
// `body_limit` is not zero.
template <class Stream>
asio::awaitable<PostReply> Talk(Stream& stream, const Request& req, const std::string& where,
                                std::size_t body_limit) {
  auto [write_error, written] = co_await http::async_write(stream, req, kTuple);
  if (write_error) co_return Failed("sending to " + where + " failed: " + write_error.message());
  beast::flat_buffer buffer;
  if (body_limit == 0) {
    http::response_parser<http::buffer_body> parser;
    parser.header_limit(kHeaderLimit);
    auto [read_error, read] = co_await http::async_read_header(stream, buffer, parser, kTuple);
    if (read_error)
      co_return Failed("reading the reply from " + where + " failed: " + read_error.message());
    co_return PostReply{PostReply::kAnswered, parser.get().result_int(), "", ""};
  }
  http::response_parser<http::string_body> parser;
  parser.header_limit(kHeaderLimit);
  parser.body_limit(body_limit);
  auto [read_error, read] = co_await http::async_read(stream, buffer, parser, kTuple);
  if (read_error == http::error::body_limit)
    co_return Failed("the reply from " + where + " is over " + std::to_string(body_limit) +
                     " bytes");
  if (read_error)
    co_return Failed("reading the reply from " + where + " failed: " + read_error.message());
  co_return PostReply{PostReply::kAnswered, parser.get().result_int(), "",
                      std::move(parser.get().body())};
}

}  // namespace

struct HttpPoster::Impl {
  upstream::HttpUrl url;
  std::optional<asio::ssl::context> tls;  // https only

  std::mutex mu;
  bool cancelled = false;
  asio::io_context* running = nullptr;  // the Post in progress

  asio::awaitable<PostReply> Exchange(Request req, std::size_t body_limit);
};

asio::awaitable<PostReply> HttpPoster::Impl::Exchange(Request req, std::size_t body_limit) {
  auto executor = co_await asio::this_coro::executor;
  tcp::resolver resolver(executor);
  auto [resolve_error, endpoints] = co_await resolver.async_resolve(url.host, url.port, kTuple);
  if (resolve_error)
    co_return Failed("cannot resolve " + url.host + ": " + resolve_error.message());
  const std::string& where = url.host_header;
  if (!tls) {
    beast::tcp_stream stream(executor);
    auto [connect_error, endpoint] = co_await stream.async_connect(endpoints, kTuple);
    if (connect_error)
      co_return Failed("cannot connect to " + where + ": " + connect_error.message());
    co_return co_await Talk(stream, req, where, body_limit);
  }
  beast::ssl_stream<beast::tcp_stream> stream(executor, *tls);
  auto [connect_error, endpoint] = co_await stream.next_layer().async_connect(endpoints, kTuple);
  if (connect_error)
    co_return Failed("cannot connect to " + where + ": " + connect_error.message());
  if (!PrepareTls(stream.native_handle(), url)) co_return Failed("cannot set up TLS for " + where);
  auto [handshake_error] = co_await stream.async_handshake(asio::ssl::stream_base::client, kTuple);
  if (handshake_error) {
    std::string why = handshake_error.message();
    const long verify = SSL_get_verify_result(stream.native_handle());
    if (verify != X509_V_OK)
      why = std::string("certificate ") + X509_verify_cert_error_string(verify);
    co_return Failed("TLS with " + where + " failed: " + why);
  }
  co_return co_await Talk(stream, req, where, body_limit);
}

HttpPoster::HttpPoster(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpPoster::~HttpPoster() = default;

Result<std::unique_ptr<HttpPoster>> HttpPoster::Create(upstream::HttpUrl url,
                                                       const std::string& ca_file) {
  auto impl = std::make_unique<Impl>();
  impl->url = std::move(url);
  if (impl->url.tls) {
    beast::error_code ec;
    impl->tls.emplace(asio::ssl::context::tls_client);
    impl->tls->set_options(asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3 |
                               asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1,
                           ec);
    if (!ec && ca_file.empty()) impl->tls->set_default_verify_paths(ec);
    if (!ec && !ca_file.empty()) {
      impl->tls->load_verify_file(ca_file, ec);
      if (ec) return Status::Error("cannot load the CA file " + ca_file + ": " + ec.message());
    }
    if (!ec) impl->tls->set_verify_mode(asio::ssl::verify_peer, ec);
    if (ec) return Status::Error("cannot set up TLS: " + ec.message());
  }
  return std::unique_ptr<HttpPoster>(new HttpPoster(std::move(impl)));
}

PostReply HttpPoster::Post(const std::vector<std::pair<std::string, std::string>>& headers,
                           const std::string& body, std::chrono::milliseconds timeout,
                           const PostOptions& options) {
  Request req{http::verb::post, impl_->url.target, 11};
  req.set(http::field::host, impl_->url.host_header);
  req.set(http::field::user_agent, "warden-webhook/0.1");
  req.set(http::field::content_type, options.content_type);
  for (const auto& [name, value] : headers) req.set(name, value);
  req.body() = body;
  req.keep_alive(false);
  req.prepare_payload();

  std::optional<PostReply> reply;  // outlives the io_context, which may hold the handler
  asio::io_context ioc(1);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->cancelled) return PostReply{PostReply::kCancelled, 0, "", ""};
    impl_->running = &ioc;
  }
  asio::co_spawn(ioc, impl_->Exchange(std::move(req), options.read_body_bytes),
                 [&reply](std::exception_ptr error, PostReply done) {
                   reply = error ? Failed("internal error") : std::move(done);
                 });
  ioc.run_for(timeout);
  bool cancelled = false;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->running = nullptr;
    cancelled = impl_->cancelled;
  }
  if (reply) return *reply;
  if (cancelled) return PostReply{PostReply::kCancelled, 0, "", ""};
  return Failed("no reply from " + impl_->url.host_header + " within " +
                std::to_string(timeout.count()) + " ms");
}

void HttpPoster::Cancel() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->cancelled = true;
  if (impl_->running) impl_->running->stop();
}

Status PostText(const std::string& url, const std::string& ca_file, const std::string& body,
                std::chrono::milliseconds timeout) {
  auto parsed = upstream::ParseHttpUrl(url);
  if (!parsed) return parsed.status();
  auto poster = HttpPoster::Create(*parsed, ca_file);
  if (!poster) return poster.status();
  PostOptions options;
  options.content_type = "text/plain; charset=utf-8";
  const PostReply reply = (*poster)->Post({}, body, timeout, options);
  const std::string where = std::string(parsed->tls ? "https" : "http") + "://" + parsed->host +
                            ":" + parsed->port;
  if (reply.kind != PostReply::kAnswered) return Status::Error(where + ": " + reply.error);
  if (reply.status < 200 || reply.status > 299)
    return Status::Error(where + ": HTTP " + std::to_string(reply.status));
  return Status::Ok();
}

}  // namespace warden::notify
