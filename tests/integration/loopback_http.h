// Stand-ins on the host's 127.0.0.1 for the egress tests of every backend: an HTTP server (an
// outside server; the tests map names to it with --resolve) and a UDP socket that must receive
// nothing from a sandbox.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>

namespace warden::testing {

// A socket of `type` bound to 127.0.0.1 on a port the kernel picks; sets *port to it.
inline int BindLoopback(int type, int* port) {
  int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

class LoopbackHttpServer {
 public:
  // `echo`: the body is the request head as received (a server that reflects what it got).
  explicit LoopbackHttpServer(std::string body = "from-host", bool echo = false)
      : body_(std::move(body)), echo_(echo) {
    fd_ = BindLoopback(SOCK_STREAM, &port_);
    listen(fd_, 32);
    thread_ = std::thread([this] { Serve(); });
  }
  ~LoopbackHttpServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
  }
  int port() const { return port_; }
  std::string port_text() const { return std::to_string(port_); }
  int requests() const { return requests_; }
  std::string last_request() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_;
  }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p = {fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      std::string req;
      char buf[4096];
      while (req.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = recv(c, buf, sizeof(buf), 0);
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
      }
      if (!req.empty()) {
        ++requests_;
        {
          std::lock_guard<std::mutex> lock(mu_);
          last_ = req;
        }
        const std::string& body = echo_ ? req : body_;
        std::string resp = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
                           "\r\nConnection: close\r\n\r\n" + body;
        send(c, resp.data(), resp.size(), MSG_NOSIGNAL);
      }
      close(c);
    }
  }
  std::string body_;
  bool echo_ = false;
  std::mutex mu_;
  std::string last_;
  int fd_ = -1, port_ = 0;
  std::atomic<int> requests_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A UDP socket bound to the host's loopback, for datagrams a sandbox must not be able to send.
class LoopbackUdpSink {
 public:
  LoopbackUdpSink() {
    fd_ = BindLoopback(SOCK_DGRAM, &port_);
  }
  ~LoopbackUdpSink() { close(fd_); }
  std::string port_text() const { return std::to_string(port_); }
  // Whether a datagram arrives within `ms`.
  bool Received(int ms) const {
    pollfd p = {fd_, POLLIN, 0};
    return poll(&p, 1, ms) > 0;
  }

 private:
  int fd_ = -1, port_ = 0;
};

}  // namespace warden::testing
