// A real HTTP(S) server on 127.0.0.1 for the tests of what fetches (web__fetch, and the
// trifecta's redirect checks through the pipeline): python3's http.server with a few paths, each
// a behaviour the tests need, started by the test and stopped (SIGKILL) with it.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "testing.h"

namespace warden::gateway::testing {

inline constexpr const char* kPython = "/usr/bin/python3";

// The server: a few paths, each a behaviour the tests need (/count: how many requests to the
// others it has had). Prints its port, then serves.
inline constexpr const char* kServerScript = R"PY(
import http.server, socketserver, ssl, sys, threading, time, urllib.parse

hits = [0]
hits_lock = threading.Lock()

class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def send(self, status, body, ctype="text/plain; charset=utf-8", extra=None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        if url.path == "/count":
            with hits_lock:
                self.send(200, str(hits[0]).encode())
            return
        with hits_lock:
            hits[0] += 1
        if url.path == "/text":
            self.send(200, b"hello from the test server\n")
        elif url.path == "/echo-host":
            self.send(200, self.headers.get("Host", "").encode())
        elif url.path == "/big":
            self.send(200, b"a" * int(q["n"]))
        elif url.path == "/slow":
            time.sleep(float(q.get("s", "5")))
            self.send(200, b"late\n")
        elif url.path == "/redirect":
            self.send(302, b"", extra={"Location": q["to"]})
        elif url.path == "/chain":
            n = int(q["n"])
            if n == 0:
                self.send(200, b"end of chain\n")
            else:
                self.send(302, b"", extra={"Location": "/chain?n=%d" % (n - 1)})
        elif url.path == "/binary":
            self.send(200, b"\x89PNG\r\n\x1a\n\x00\x00", ctype="image/png")
        elif url.path == "/latin1":
            self.send(200, b"caf\xe9\n", ctype="text/plain; charset=iso-8859-1")
        else:
            self.send(404, b"no such page\n")

class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

server = Server(("127.0.0.1", 0), Handler)
if len(sys.argv) > 2:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[1], sys.argv[2])
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
)PY";

// A python3 HTTP(S) server on 127.0.0.1, stopped (SIGKILL) on destruction.
class TestServer {
 public:
  explicit TestServer(const std::string& cert = "", const std::string& key = "") {
    script_ = dir_.File("server.py");
    testing::WriteFile(script_, kServerScript);
    int out[2];
    if (pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      close(out[0]);
      close(out[1]);
      if (cert.empty()) {
        execl(kPython, kPython, script_.c_str(), nullptr);
      } else {
        execl(kPython, kPython, script_.c_str(), cert.c_str(), key.c_str(), nullptr);
      }
      _exit(127);
    }
    close(out[1]);
    FILE* f = fdopen(out[0], "r");
    if (f == nullptr || fscanf(f, "%d", &port_) != 1) port_ = 0;
    if (f) fclose(f);
  }
  ~TestServer() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  int port() const { return port_; }
  std::string Url(const std::string& path, const std::string& scheme = "http") const {
    return scheme + "://127.0.0.1:" + std::to_string(port_) + path;
  }
  // The allow entry that reaches it: loopback is allowed only by naming the address literally.
  std::string AllowEntry() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  testing::TempDir dir_;
  std::string script_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace warden::gateway::testing
