#include "gateway/http/http_server.h"

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <mutex>
#include <thread>

#include "common/guard.h"
#include "gateway/http/http_connection.h"
#include "gateway/http/http_sessions.h"

namespace warden::gateway {

namespace net = boost::asio;
using net::ip::tcp;

struct HttpServer::Impl {
  Impl(SessionHost& host, HttpServerOptions options)
      : shared(std::make_shared<http::ServerShared>(host, std::move(options))),
        acceptor(net::make_strand(ioc)),
        sweeper(acceptor.get_executor()),
        accept_retry(acceptor.get_executor()) {}

  void Accept();
  void ArmSweeper();

  std::shared_ptr<http::ServerShared> shared;
  net::io_context ioc;
  tcp::acceptor acceptor;  // with the timers, on one strand
  net::steady_timer sweeper;
  net::steady_timer accept_retry;
  std::unique_ptr<net::thread_pool> closer;  // runs McpSession::Close off the I/O threads
  std::vector<std::thread> threads;
  std::mutex connections_mu;
  std::vector<std::weak_ptr<http::HttpConnection>> connections;  // for Stop
  std::atomic<uint16_t> port{0};
  bool started = false;
  bool stopped = false;
};

void HttpServer::Impl::Accept() {
  acceptor.async_accept(
      net::make_strand(ioc), [this](boost::system::error_code ec, tcp::socket socket) {
        if (shared->stopping || ec == net::error::operation_aborted) return;
        if (ec) {
          // Out of descriptors or a transient accept error: try again shortly rather than spin.
          accept_retry.expires_after(std::chrono::milliseconds(100));
          accept_retry.async_wait([this](boost::system::error_code wait_ec) {
            if (!wait_ec && !shared->stopping) Accept();
          });
          return;
        }
        auto connection = std::make_shared<http::HttpConnection>(std::move(socket), shared);
        {
          std::lock_guard lock(connections_mu);
          std::erase_if(connections, [](const auto& weak) { return weak.expired(); });
          connections.push_back(connection);
        }
        connection->Start();
        Accept();
      });
}

void HttpServer::Impl::ArmSweeper() {
  // Four looks per timeout, so a session outlives its timeout by at most a quarter of it.
  auto timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(shared->options.session_idle_timeout);
  auto period =
      std::clamp(timeout / 4, std::chrono::milliseconds(100), std::chrono::milliseconds(30000));
  sweeper.expires_after(period);
  sweeper.async_wait([this](boost::system::error_code ec) {
    if (ec || shared->stopping) return;
    auto idle = shared->sessions.TakeIdle(std::chrono::steady_clock::now(),
                                          shared->options.session_idle_timeout);
    for (auto& session : idle) {
      shared->run_blocking([session] { session->Close(); });
    }
    for (auto& context : shared->tasks->TakeIdle(shared->options.session_idle_timeout)) {
      shared->run_blocking([context] { context->Close(); });
    }
    ArmSweeper();
  });
}

HttpServer::HttpServer(SessionHost& host, HttpServerOptions options)
    : impl_(std::make_unique<Impl>(host, std::move(options))) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start() {
  Impl& s = *impl_;
  if (s.started) return Status::Error("the HTTP server was already started");
  const HttpServerOptions& options = s.shared->options;
  if (options.path.empty() || options.path.front() != '/') {
    return Status::Error("HTTP path '" + options.path + "' must start with '/'");
  }
  if (options.threads < 1) return Status::Error("HTTP server needs at least one thread");
  boost::system::error_code ec;
  net::ip::address address = options.host == "localhost"
                                 ? net::ip::address(net::ip::address_v4::loopback())
                                 : net::ip::make_address(options.host, ec);
  if (ec) return Status::Error("invalid listen host '" + options.host + "': " + ec.message());
  tcp::endpoint endpoint(address, options.port);
  const std::string where = options.host + ":" + std::to_string(options.port);
  if (s.acceptor.open(endpoint.protocol(), ec); ec) {
    return Status::Error("cannot open a socket for " + where + ": " + ec.message());
  }
  s.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (s.acceptor.bind(endpoint, ec); ec) {
    return Status::Error("cannot listen on " + where + ": " + ec.message());
  }
  if (s.acceptor.listen(net::socket_base::max_listen_connections, ec); ec) {
    return Status::Error("cannot listen on " + where + ": " + ec.message());
  }
  s.port = s.acceptor.local_endpoint(ec).port();
  s.shared->loopback = address.is_loopback();
  s.shared->port = s.port;
  s.shared->own_host_names = {"localhost", "127.0.0.1", "[::1]"};
  s.shared->own_host_names.push_back(address.is_v6() ? "[" + address.to_string() + "]"
                                                     : address.to_string());
  s.closer = std::make_unique<net::thread_pool>(2);
  net::thread_pool* closer = s.closer.get();
  s.shared->run_blocking = [closer](std::function<void()> job) {
    net::post(*closer, [job = std::move(job)] {
      RunGuarded("HTTP closer", "the session close was abandoned", job);
    });
  };
  s.shared->tasks = std::make_unique<TaskContexts>(
      "http",
      [&host = s.shared->host](const identity::Caller& caller, SessionOptions options) {
        return host.CreateTaskContext(caller, std::move(options));
      },
      [shared = s.shared.get()](std::shared_ptr<McpSession> context) {
        shared->run_blocking([context] { context->Close(); });
      });
  s.Accept();
  s.ArmSweeper();
  for (int i = 0; i < options.threads; ++i) {
    // A handler that throws ends run(); the thread logs it and runs the loop again, so one bad
    // request cannot stop the listener (or, uncaught, the process).
    s.threads.emplace_back([&s] {
      while (!RunGuarded("HTTP I/O thread", "the handler was abandoned", [&s] { s.ioc.run(); })) {
      }
    });
  }
  s.started = true;
  return Status::Ok();
}

uint16_t HttpServer::port() const { return impl_->port.load(); }

std::size_t HttpServer::session_count() const { return impl_->shared->sessions.size(); }

void HttpServer::Stop() {
  Impl& s = *impl_;
  if (!s.started || s.stopped) return;
  s.stopped = true;
  s.shared->stopping = true;
  net::post(s.acceptor.get_executor(), [&s] {
    boost::system::error_code ignored;
    s.acceptor.close(ignored);
    s.sweeper.cancel();
    s.accept_retry.cancel();
  });
  // Sessions first, while the connections still run, so requests in flight get their answers.
  for (auto& session : s.shared->sessions.TakeAll()) session->Close();
  for (auto& context : s.shared->tasks->TakeAll()) context->Close();
  // From here on, nothing from a session thread reaches the I/O threads.
  s.shared->gate.Shut();
  s.ioc.stop();
  for (auto& thread : s.threads) thread.join();
  s.threads.clear();
  s.closer->join();
  // No handler runs now: close every connection directly, then let the aborted operations
  // complete so the connections are released.
  std::vector<std::shared_ptr<http::HttpConnection>> live;
  {
    std::lock_guard lock(s.connections_mu);
    for (auto& weak : s.connections) {
      if (auto connection = weak.lock()) live.push_back(std::move(connection));
    }
    s.connections.clear();
  }
  for (auto& connection : live) connection->ForceClose();
  live.clear();
  boost::system::error_code ignored;
  s.acceptor.close(ignored);
  s.sweeper.cancel();
  s.accept_retry.cancel();
  s.ioc.restart();
  s.ioc.poll();
  // A session created while the first ones were closing (its initialize was already past the
  // stopping check) is closed too.
  for (auto& session : s.shared->sessions.TakeAll()) session->Close();
  for (auto& context : s.shared->tasks->TakeAll()) context->Close();
}

}  // namespace warden::gateway
