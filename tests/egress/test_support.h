// Helpers for the egress tests: real peers on loopback (plain sockets and threads, no Asio, so
// that the test binaries stay quick to build), a raw client, and curl as a real client.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/unique_fd.h"
#include "egress/proxy.h"

namespace warden::egress::testing {

// A TCP socket bound to `ip` on a free port and, unless `listen_too` is false, listening. Bound
// without listening, the port refuses connections and no other process can take it meanwhile
// (closing a listener to get a "closed port" races other tests under ctest -j).
inline std::pair<UniqueFd, uint16_t> ListenTcp(const char* ip = "127.0.0.1", bool listen_too = true) {
  const bool v6 = std::strchr(ip, ':') != nullptr;
  UniqueFd fd(::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_storage ss{};
  socklen_t len;
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    inet_pton(AF_INET6, ip, &a->sin6_addr);
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    inet_pton(AF_INET, ip, &a->sin_addr);
    len = sizeof *a;
  }
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0 ||
      (listen_too && listen(fd.get(), 128) != 0)) {
    return {UniqueFd(), 0};
  }
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
  uint16_t port = v6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                     : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return {std::move(fd), port};
}

inline UniqueFd ConnectTcp(uint16_t port, const char* ip = "127.0.0.1") {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return UniqueFd();
  int one = 1;
  setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

inline bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads until the peer closes, `until` appears, or `timeout` passes.
inline std::string ReadFor(int fd, std::chrono::milliseconds timeout, std::string_view until = {},
                           bool* closed = nullptr) {
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  if (closed) *closed = false;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buf[65536];
    ssize_t n = ::read(fd, buf, sizeof buf);  // read(), not recv(): pipes too
    if (n <= 0) {
      if (closed) *closed = true;
      break;
    }
    out.append(buf, static_cast<size_t>(n));
    if (!until.empty() && out.find(until) != std::string::npos) break;
  }
  return out;
}

inline std::string ReadExactly(int fd, size_t n, std::chrono::milliseconds timeout) {
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (out.size() < n) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buf[4096];
    ssize_t r = ::recv(fd, buf, std::min(sizeof buf, n - out.size()), 0);
    if (r <= 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  return out;
}

// One datagram, or "" after `timeout`.
inline std::string RecvDatagram(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return "";
  char buf[1500];
  ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// Whether the peer has closed (EOF or reset) within `timeout`, discarding any data.
inline bool ClosedWithin(int fd, std::chrono::milliseconds timeout) {
  bool closed = false;
  ReadFor(fd, timeout, {}, &closed);
  return closed;
}

// A server that runs `handler` on each accepted connection in its own thread.
class TestServer {
 public:
  using Handler = std::function<void(int fd)>;
  explicit TestServer(Handler handler, const char* ip = "127.0.0.1")
      : handler_(std::move(handler)) {
    auto [fd, port] = ListenTcp(ip);
    fd_ = std::move(fd);
    port_ = port;
    thread_ = std::thread([this] { AcceptLoop(); });
  }
  ~TestServer() {
    stop_ = true;
    ::shutdown(fd_.get(), SHUT_RDWR);
    thread_.join();
    std::vector<std::thread> workers;
    {
      std::lock_guard lock(mu_);
      for (int c : open_) ::shutdown(c, SHUT_RDWR);
      workers.swap(workers_);
    }
    for (auto& t : workers) t.join();  // without the lock: each worker takes it to finish
  }
  uint16_t port() const { return port_; }
  int connections() const { return connections_; }

 private:
  void AcceptLoop() {
    while (!stop_) {
      int c = ::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) {
        if (stop_) return;
        continue;
      }
      connections_++;
      std::lock_guard lock(mu_);
      open_.push_back(c);
      workers_.emplace_back([this, c] {
        handler_(c);
        std::lock_guard l(mu_);
        std::erase(open_, c);
        ::close(c);
      });
    }
  }
  Handler handler_;
  UniqueFd fd_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread thread_;
  std::mutex mu_;
  std::vector<int> open_;
  std::vector<std::thread> workers_;
};

// Echoes every byte back until the peer closes.
inline void EchoHandler(int fd) {
  char buf[65536];
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return;
    if (!SendAll(fd, std::string_view(buf, static_cast<size_t>(n)))) return;
  }
}

// A small HTTP/1.1 origin server with keep-alive. It remembers every request head it gets.
// GET /big?N sends N bytes; /chunked answers with a chunked body; /echo answers with the request
// (head and body) and its Authorization in X-Echo-Authorization; anything else answers
// "hello from upstream: METHOD PATH BODY-LENGTH".
class HttpOrigin {
 public:
  HttpOrigin() : server_([this](int fd) { Serve(fd); }) {}
  uint16_t port() const { return server_.port(); }
  int connections() const { return server_.connections(); }
  std::vector<std::string> heads() {
    std::lock_guard lock(mu_);
    return heads_;
  }
  std::vector<std::string> bodies() {
    std::lock_guard lock(mu_);
    return bodies_;
  }

 private:
  static std::string Header(const std::string& head, const std::string& name) {
    std::string lower = head;
    for (auto& c : lower) c = static_cast<char>(tolower(c));
    size_t p = lower.find("\r\n" + name + ":");
    if (p == std::string::npos) return "";
    size_t start = p + 3 + name.size();
    size_t end = head.find("\r\n", start);
    std::string v = head.substr(start, end - start);
    while (!v.empty() && v.front() == ' ') v.erase(0, 1);
    return v;
  }

  void Serve(int fd) {
    std::string buf;
    while (true) {
      size_t end;
      while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
        char tmp[8192];
        ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
        if (n <= 0) return;
        buf.append(tmp, static_cast<size_t>(n));
      }
      std::string head = buf.substr(0, end + 4);
      buf.erase(0, end + 4);
      std::string body;
      if (!ReadBody(fd, head, buf, body)) return;
      {
        std::lock_guard lock(mu_);
        heads_.push_back(head);
        bodies_.push_back(body);
      }
      std::string first = head.substr(0, head.find("\r\n"));
      std::string method = first.substr(0, first.find(' '));
      std::string path = first.substr(first.find(' ') + 1);
      path = path.substr(0, path.find(' '));
      bool close = Header(head, "connection") == "close" || first.ends_with("HTTP/1.0");
      std::string response;
      if (path.starts_with("/big?")) {
        size_t n = std::stoul(path.substr(5));
        response = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(n) + "\r\n" +
                   (close ? "Connection: close\r\n" : "") + "\r\n";
        if (!SendAll(fd, response)) return;
        std::string chunk(65536, 'x');
        while (n > 0) {
          size_t k = std::min(n, chunk.size());
          if (!SendAll(fd, std::string_view(chunk).substr(0, k))) return;
          n -= k;
        }
      } else if (path.starts_with("/gzip-echo")) {
        // The request gzip-compressed, whatever the client accepts: a server that answers
        // encoded although it was asked for identity (the credential tests).
        const std::string packed = Gzip(head + body);
        response = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\nContent-Length: " +
                   std::to_string(packed.size()) + "\r\n" + (close ? "Connection: close\r\n" : "") + "\r\n" + packed;
        if (!SendAll(fd, response)) return;
      } else if (path.starts_with("/chunked-echo")) {
        // The request echoed in chunks of 5 bytes: a value in it is cut by chunk framing.
        const std::string text = head + body;
        response = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n" +
                   std::string(close ? "Connection: close\r\n" : "") + "\r\n";
        for (size_t at = 0; at < text.size(); at += 5) {
          const std::string piece = text.substr(at, 5);
          response += std::to_string(piece.size()) + "\r\n" + piece + "\r\n";
        }
        response += "0\r\n\r\n";
        if (!SendAll(fd, response)) return;
      } else if (path.starts_with("/echo")) {
        // The request as received, in the body and its Authorization in a header: a server that
        // reflects what it got (the credential tests).
        std::string text = head + body;
        response = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Echo-Authorization: " +
                   Header(head, "authorization") + "\r\nContent-Length: " + std::to_string(text.size()) +
                   "\r\n" + (close ? "Connection: close\r\n" : "") + "\r\n" + text;
        if (!SendAll(fd, response)) return;
      } else if (path == "/chunked") {
        response =
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n7;ext=1\r\n "
            "chunky\r\n0\r\nX-Trailer: t\r\n\r\n";
        if (!SendAll(fd, response)) return;
      } else {
        std::string text = "hello from upstream: " + method + " " + path + " " +
                           std::to_string(body.size()) + "\n";
        response = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " +
                   std::to_string(method == "HEAD" ? 0 : text.size()) + "\r\n" +
                   (close ? "Connection: close\r\n" : "") + "\r\n" + (method == "HEAD" ? "" : text);
        if (!SendAll(fd, response)) return;
      }
      if (close) return;
    }
  }

  // gzip(1) of `text` (Essential on Debian; no compression library for the tests).
  static std::string Gzip(const std::string& text) {
    char path[] = "/tmp/warden-egress-gzip-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return "";
    SendAllToFile(fd, text);
    ::close(fd);
    std::string out;
    if (FILE* p = popen(("gzip -cn " + std::string(path)).c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
      pclose(p);
    }
    unlink(path);
    return out;
  }
  static void SendAllToFile(int fd, std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::write(fd, data.data(), data.size());
      if (n <= 0) return;
      data.remove_prefix(static_cast<size_t>(n));
    }
  }

  static bool Fill(int fd, std::string& buf, size_t n) {
    while (buf.size() < n) {
      char tmp[8192];
      ssize_t r = ::recv(fd, tmp, sizeof tmp, 0);
      if (r <= 0) return false;
      buf.append(tmp, static_cast<size_t>(r));
    }
    return true;
  }

  static bool ReadLine(int fd, std::string& buf, std::string& line) {
    size_t p;
    while ((p = buf.find("\r\n")) == std::string::npos) {
      if (!Fill(fd, buf, buf.size() + 1)) return false;
    }
    line = buf.substr(0, p);
    buf.erase(0, p + 2);
    return true;
  }

  static bool ReadBody(int fd, const std::string& head, std::string& buf, std::string& body) {
    std::string te = Header(head, "transfer-encoding");
    if (te == "chunked") {
      while (true) {
        std::string line;
        if (!ReadLine(fd, buf, line)) return false;
        size_t size = std::stoul(line, nullptr, 16);
        if (size == 0) {
          do {
            if (!ReadLine(fd, buf, line)) return false;
          } while (!line.empty());
          return true;
        }
        if (!Fill(fd, buf, size + 2)) return false;
        body += buf.substr(0, size);
        buf.erase(0, size + 2);
      }
    }
    std::string cl = Header(head, "content-length");
    if (cl.empty()) return true;
    size_t n = std::stoul(cl);
    if (!Fill(fd, buf, n)) return false;
    body = buf.substr(0, n);
    buf.erase(0, n);
    return true;
  }

  TestServer server_;
  std::mutex mu_;
  std::vector<std::string> heads_;
  std::vector<std::string> bodies_;
};

struct ProcessResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs a program with a clean environment (no proxy variables), capturing its output.
inline ProcessResult RunProgram(const std::vector<std::string>& argv,
                                std::chrono::seconds timeout = std::chrono::seconds(20)) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) return {};
  // posix_spawnp, not fork: the test process runs the proxy's threads, and a forked child that
  // allocates (building argv) can hang on an allocator lock another thread held at the fork
  // (seen under ASan: curl "killed after 20 s" although it never started).
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  char path_env[] = "PATH=/usr/local/bin:/usr/bin:/bin";
  char home_env[] = "HOME=/nonexistent";
  char* env[] = {path_env, home_env, nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), env);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) close(fd);
    ProcessResult failed;
    failed.exit_code = 127;
    failed.err = std::string("cannot run ") + args[0] + ": " + std::strerror(spawned);
    return failed;
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  ProcessResult r;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open = 2;
  while (open > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      kill(pid, SIGKILL);
      break;
    }
    if (poll(fds, 2, static_cast<int>(left.count())) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      char buf[65536];
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      } else {
        (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

inline bool HaveProgram(const std::string& name) {
  return RunProgram({"sh", "-c", "command -v " + name}).exit_code == 0;
}

// A proxy with `options` on a fresh loopback listener, started, its port in *port; a test
// failure (and null) when it cannot be. What the proxy fixtures' SetUp does.
inline std::unique_ptr<EgressProxy> StartProxy(ProxyOptions options, uint16_t* port) {
  auto proxy = std::make_unique<EgressProxy>(std::move(options));
  auto [fd, listen_port] = ListenTcp();
  EXPECT_TRUE(fd.valid());
  if (!fd.valid()) return nullptr;
  *port = listen_port;
  Status added = proxy->AddListener(std::move(fd));
  EXPECT_TRUE(added.ok()) << added.message();
  Status started = added.ok() ? proxy->Start() : added;
  EXPECT_TRUE(started.ok()) << started.message();
  return started.ok() ? std::move(proxy) : nullptr;
}

// What a callback on another thread hands over (records, log lines), and a wait for it.
template <typename T>
class Collected {
 public:
  void Add(const T& item) {
    std::lock_guard lock(mu_);
    items_.push_back(item);
  }
  // All items once there are at least `n` of them, or what came within 3 seconds.
  std::vector<T> Wait(size_t n) {
    for (int i = 0; i < 300; ++i) {
      {
        std::lock_guard lock(mu_);
        if (items_.size() >= n) return items_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::lock_guard lock(mu_);
    return items_;
  }

 private:
  std::mutex mu_;
  std::vector<T> items_;
};

}  // namespace warden::egress::testing
