// Stand-ins on the host's 127.0.0.1 for the egress tests of every backend: an HTTP server (an
// outside server; the tests map names to it with --resolve), an HTTPS one with a CA of its own,
// and a UDP socket that must receive nothing from a sandbox.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
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

// An HTTPS server for `name` on 127.0.0.1 (Python's ssl module, run as its own process), with a
// CA of its own made by the openssl command in `dir`: warden is told to trust it with
// SSL_CERT_FILE=ca_file(); or, with `tls` false, the same server over plain HTTP. It answers
// every request with the request (head and body) it received, gzip-compressed with
// Content-Encoding: gzip when the path holds "gzip" (whatever the client accepts), and keeps
// every request, even one cut short, in log_file(). port_text() is empty when it could not start.
class LoopbackHttpsServer {
 public:
  LoopbackHttpsServer(const std::string& dir, const std::string& name, bool tls = true) : dir_(dir) {
    const std::string gen =
        "cd " + dir + " && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 "
        "-subj /CN=origin-ca -addext basicConstraints=critical,CA:TRUE -keyout ca.key -out ca.pem && "
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=" + name +
        " -keyout leaf.key -out leaf.csr && printf 'subjectAltName=DNS:" + name + "\\n' > ext && "
        "openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 -extfile ext "
        "-out leaf.pem >/dev/null 2>&1";
    if (tls && std::system(gen.c_str()) != 0) return;
    if (tls) chmod(ca_file().c_str(), 0644);
    {
      std::ofstream py(dir + "/https_server.py");
      py << R"PY(
import gzip, os, re, socket, ssl, sys
ctx = None
if sys.argv[1] != "-":
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[1], sys.argv[2])
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
open(sys.argv[3] + ".tmp", "w").write(str(s.getsockname()[1]))
os.rename(sys.argv[3] + ".tmp", sys.argv[3])

def read_request(f):
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        line = f.readline()
        if not line:
            return head, b""
        head += line
    lower = head.lower()
    body = b""
    m = re.search(rb"\r\ncontent-length: *(\d+)", lower)
    if m:
        body = f.read(int(m.group(1)))
    elif re.search(rb"\r\ntransfer-encoding: *chunked", lower):
        while True:
            line = f.readline()
            if not line.strip():
                break
            size = int(line.split(b";")[0].strip(), 16)
            if size == 0:
                while f.readline() not in (b"\r\n", b""):
                    pass
                break
            body += f.read(size)
            f.readline()
    return head, body

while True:
    c, _ = s.accept()
    try:
        t = ctx.wrap_socket(c, server_side=True) if ctx else c
        head, body = read_request(t.makefile("rb"))
        with open(sys.argv[4], "ab") as log:
            log.write(head + body + b"--\n")
        data = head + body
        extra = b""
        path = head.split(b" ")[1] if b" " in head else b""
        if b"gzip" in path:
            data = gzip.compress(data)
            extra = b"Content-Encoding: gzip\r\n"
        t.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%bConnection: close\r\n\r\n" % (len(data), extra) + data)
        t.close()
    except Exception:
        c.close()
)PY";
    }
    const std::string port_file = dir + "/https_port";
    pid_ = fork();
    if (pid_ == 0) {
      std::freopen("/dev/null", "w", stdout);
      std::freopen("/dev/null", "w", stderr);
      execlp("python3", "python3", (dir + "/https_server.py").c_str(), tls ? (dir + "/leaf.pem").c_str() : "-",
             (dir + "/leaf.key").c_str(), port_file.c_str(), log_file().c_str(), nullptr);
      _exit(127);
    }
    for (int i = 0; i < 200 && port_.empty(); ++i) {
      usleep(50 * 1000);
      std::ifstream in(port_file);
      std::getline(in, port_);
    }
  }
  ~LoopbackHttpsServer() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  LoopbackHttpsServer(const LoopbackHttpsServer&) = delete;
  LoopbackHttpsServer& operator=(const LoopbackHttpsServer&) = delete;

  const std::string& port_text() const { return port_; }
  std::string ca_file() const { return dir_ + "/ca.pem"; }
  std::string log_file() const { return dir_ + "/https_requests.log"; }
  // Every request (head and body) received so far, each followed by "--\n".
  std::string log() const {
    std::ifstream in(log_file());
    std::string s;
    std::getline(in, s, '\0');
    return s;
  }

 private:
  std::string dir_;
  std::string port_;
  pid_t pid_ = -1;
};

}  // namespace warden::testing
