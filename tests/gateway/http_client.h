// A raw HTTP/1.1 client for the Streamable HTTP tests (http_*_test.cc): real TCP, every status
// code and header as a client sees it, reads that time out instead of hanging a test.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace warden::gateway::http_test {

using nlohmann::json;
namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using namespace std::chrono_literals;

// The Accept a Streamable HTTP client sends with a POST (MCP 2025-11-25).
inline constexpr char kAcceptBoth[] = "application/json, text/event-stream";

struct HttpReply {
  int status = 0;                              // 0: no response (the error is in body)
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;

  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
  json Json() const { return json::parse(body, nullptr, false); }
};

struct Req {
  std::string method = "POST";
  std::string path = "/mcp";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bool content_length = true;
  bool host_header = true;

  std::string Build() const {
    std::string out = method + " " + path + " HTTP/1.1\r\n";
    // Host: 127.0.0.1 unless the test sets its own (or sends none: host_header false).
    bool own_host = false;
    for (const auto& [name, value] : headers) own_host = own_host || name == "Host";
    if (!own_host && host_header) out += "Host: 127.0.0.1\r\n";
    for (const auto& [name, value] : headers) out += name + ": " + value + "\r\n";
    if (content_length && (method == "POST" || !body.empty())) {
      out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    }
    return out + "\r\n" + body;
  }
};

inline HttpReply FromBeast(const bhttp::response<bhttp::string_body>& res) {
  HttpReply reply;
  reply.status = static_cast<int>(res.result_int());
  for (const auto& field : res) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    reply.headers[name] = std::string(field.value());
  }
  reply.body = res.body();
  return reply;
}

// Beast's SyncReadStream over a socket with SO_RCVTIMEO: a read that times out fails instead of
// waiting forever (Asio's own blocking reads would poll again), so a test never hangs.
struct TimedReader {
  int fd;
  template <typename Buffers>
  std::size_t read_some(const Buffers& buffers, beast::error_code& ec) {
    net::mutable_buffer b = *net::buffer_sequence_begin(buffers);
    ssize_t n = ::recv(fd, b.data(), b.size(), 0);
    if (n > 0) {
      ec = {};
      return static_cast<std::size_t>(n);
    }
    ec = n == 0 ? beast::error_code(net::error::eof)
                : beast::error_code(errno, boost::system::system_category());
    return 0;
  }
  template <typename Buffers>
  std::size_t read_some(const Buffers& buffers) {
    beast::error_code ec;
    std::size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }
};

// One TCP connection to the server.
class Connection {
 public:
  // `may_be_gone`: the server may have been stopped on purpose (a crash test), so a refused
  // connection is an outcome to look at (connected()), not a failure of the test.
  explicit Connection(uint16_t port, bool may_be_gone = false) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    if (!may_be_gone) {
      EXPECT_TRUE(connected_) << strerror(errno);
    }
    SetTimeout(10s);
  }
  bool connected() const { return connected_; }
  ~Connection() { Close(); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void Write(const std::string& bytes) {
    std::size_t done = 0;
    while (done < bytes.size()) {  // the server may refuse before reading it all: stop then
      ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return;
      done += static_cast<std::size_t>(n);
    }
  }
  HttpReply Read() {
    SetTimeout(10s);
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(boost::none);
    beast::error_code ec;
    TimedReader reader{fd_};
    bhttp::read(reader, buffer_, parser, ec);
    if (ec) return HttpReply{0, {}, ec.message()};
    return FromBeast(parser.get());
  }
  HttpReply Send(const Req& req) {
    Write(req.Build());
    return Read();
  }
  // Reads raw bytes until `needle` appears, the peer closes, or the timeout; returns them.
  std::string ReadUntil(const std::string& needle, std::chrono::milliseconds timeout = 10s) {
    std::string got;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    SetTimeout(50ms);
    char chunk[4096];
    while (got.find(needle) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n == 0) break;
      if (n > 0) got.append(chunk, static_cast<std::size_t>(n));
    }
    return got;
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  void SetTimeout(std::chrono::milliseconds t) {
    timeval tv{static_cast<time_t>(t.count() / 1000),
               static_cast<suseconds_t>(t.count() % 1000 * 1000)};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  int fd_ = -1;
  bool connected_ = false;
  beast::flat_buffer buffer_;
};

// The JSON-RPC messages carried by an SSE body, in order.
inline std::vector<json> SseMessages(const std::string& body) {
  std::vector<json> out;
  std::size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    std::size_t end = body.find('\n', pos);
    std::string data = body.substr(pos + 6, end == std::string::npos ? end : end - pos - 6);
    json j = json::parse(data, nullptr, false);
    if (!j.is_discarded()) out.push_back(std::move(j));
    pos = end == std::string::npos ? body.size() : end;
  }
  return out;
}

inline json Rpc(int id, const std::string& method, json params = json::object()) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

inline json InitializeRequest(const std::string& version) {
  return Rpc(1, "initialize",
             {{"protocolVersion", version},
              {"capabilities", json::object()},
              {"clientInfo", {{"name", "http-test"}, {"version", "1"}}}});
}

}  // namespace warden::gateway::http_test
