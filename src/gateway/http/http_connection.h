// Internal to the Streamable HTTP server: one client TCP connection, serving its HTTP/1.1
// requests one after another (keep-alive) on its own strand. Not part of the public API; the
// behaviour it implements is HttpServer's (http_server.h) and docs/gateway.md's.
//
// Life cycle: the connection is kept alive by its outstanding asynchronous operations. While a
// POST waits for its replies, or a GET stream is open, a "watch" read stays outstanding on the
// socket: it notices the client going away (the connection then ends, and replies that arrive
// later are dropped) and keeps bytes of a pipelined next request for later. Callbacks handed to
// a session hold only a weak_ptr, so a session never keeps a dead connection alive.
#pragma once

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gateway/http/http_sessions.h"
#include "mcp/jsonrpc.h"
#include "mcp/modern.h"

namespace warden::gateway::http {

class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  HttpConnection(boost::asio::ip::tcp::socket socket, std::shared_ptr<ServerShared> shared);

  // Starts reading the first request.
  void Start();
  // Closes the socket at once (Stop, after the I/O threads are joined: no handler runs
  // concurrently). Pending handlers then complete with errors and do nothing more.
  void ForceClose();

 private:
  // What to do once a queued write has gone out.
  enum class After { kNothing, kNextRequest, kClose };
  struct Output {
    std::string bytes;
    After after = After::kNothing;
  };

  // A POST whose requests are being answered. Lives on the strand.
  struct PostState {
    bool is_batch = false;
    bool streaming = false;  // switched to SSE
    bool finished = false;
    std::vector<std::optional<std::string>> slots;  // one per reply, in input order
    std::vector<bool> answered;                     // per slot: its reply has come
    std::size_t remaining = 0;                      // replies still to come
    std::uint64_t stream = 0;  // the SSE stream's number once switched (http_replay.h)
    // The same, for reply callbacks on other threads: a streamed reply that comes after the
    // client went away is recorded for a resumption instead of being dropped.
    std::atomic<std::uint64_t> shared_stream{0};
    bool resumable = false;          // the session speaks 2025-11-25: prime streams, switch by time
    std::string session_id;          // the session the POST went to
    std::string new_session_id;      // set on a successful-so-far initialize
    bool initialize_failed = false;  // the initialize's reply was an error
    int retry_after = 0;  // seconds: the initialize was refused for a full upstream (503)
    bool modern = false;   // a 2026-07-28 request, served by a task context
    // 2026-07-28: the call the POST carries, cancelled when the client closes the stream first.
    std::mutex cancel_mu;
    std::shared_ptr<CancelToken> cancel;
    std::atomic<int> status{0};  // an HTTP status for a JSON reply other than 200 (2026 errors)
  };

  // This connection as other threads see it: what a session's callbacks and the admin host's
  // answer hold. Post runs fn(connection) on the connection's strand while the server runs, or
  // fn(nullptr) on the calling thread when the connection has ended (or the server is stopping).
  // Nothing that needs the io_context is held across threads: a strong reference dropped last
  // on a worker thread would destroy the connection and its timers after the server's
  // io_context, and so would a copy of the strand (ASan saw both when a test ended while a
  // worker was still leaving a reply callback). Both are taken only while the gate is open.
  class Remote {
   public:
    explicit Remote(HttpConnection& connection)
        : weak_(connection.weak_from_this()), shared_(connection.shared_) {}
    template <typename F>
    void Post(F fn) const {
      bool posted = false;
      shared_->gate.Post([&] {
        if (std::shared_ptr<HttpConnection> self = weak_.lock()) {
          auto executor = self->stream_.get_executor();
          boost::asio::post(executor,
                            [self = std::move(self), fn = std::move(fn)]() mutable { fn(self); });
          posted = true;
        }
      });
      if (!posted) fn(nullptr);
    }
    ServerShared& shared() const { return *shared_; }

   private:
    std::weak_ptr<HttpConnection> weak_;
    std::shared_ptr<ServerShared> shared_;
  };

  // Reading requests.
  void ReadHeader();
  void OnHeader(boost::beast::error_code ec);
  void ReadBody();
  void OnBody(boost::beast::error_code ec);
  bool KeepAliveAfterRefusal() const;

  // Routing and the three methods.
  void Route();
  void ServePost();
  void ServePostBody();
  void ServeGet();
  void ServeDelete();
  void ServePreflight(bool has_origin);
  void ServeApi();
  void ServeApiBody();
  // /api/: who calls (the Authorization header, else the console's cookie, else the host's
  // ambient caller), and the console's Origin and CSRF rules for the last two.
  void AuthenticateApi();
  // The console (console.h): pages, files, login, session, logout.
  void ServeConsoleRequest();
  void ServeConsoleRequestBody();
  // The values of every warden_console cookie the request carries.
  std::vector<std::string> ConsoleCookies() const;
  // Checks a present MCP-Protocol-Version header; on failure refuses and returns false.
  bool CheckProtocolVersionHeader();
  // 2026-07-28 (no session): the request's version, headers and task context.
  bool IsModernRequest(const mcp::ParseResult& parsed) const;
  void ServeModern(mcp::ParseResult parsed);
  // `modern`: the one 2026 request's envelope, read by ServeModern (a task context serves it).
  void HandleMessages(std::shared_ptr<McpSession> session, mcp::ParseResult parsed,
                      bool new_session, std::optional<mcp::RequestMeta> modern = std::nullopt);

  // Replies and related messages coming back from a session (on the strand).
  void OnReply(const std::shared_ptr<PostState>& post, std::size_t slot, std::string text,
               bool is_error);
  void OnRelated(const std::shared_ptr<PostState>& post, std::string text);
  void SwitchToSse(PostState& post);
  void FinishJson(PostState& post);
  void FinishPost(PostState& post);
  // Records an event of the POST's stream and writes it while this connection is its reader.
  void EmitPostEvent(PostState& post, std::string text, bool reply);

  // The GET stream: what the session sends on it and how it ends it (any thread), and the same
  // on the strand.
  MessageSink StreamSink(std::uint64_t token);
  std::function<void()> StreamEnd(std::uint64_t token);
  void OnStreamMessage(std::uint64_t token, std::string text);
  void EndStream(std::uint64_t token);
  void ArmKeepAlive();
  // GET with Last-Event-ID: the rest of an earlier stream.
  void ResumeStream(const std::shared_ptr<McpSession>& session, const std::string& last_event_id);
  void OnResumedEvent(std::uint64_t token, std::string event_id, std::string data);
  void EndResumed(std::uint64_t token);

  // Responses.
  using Headers = std::vector<std::pair<std::string, std::string>>;
  void Refuse(boost::beast::http::status status, int code, const std::string& message,
              bool keep_alive, const Headers& headers = {});
  void SendJson(boost::beast::http::status status, std::string body, bool keep_alive,
                const Headers& headers = {});
  void SendBody(boost::beast::http::status status, std::string_view content_type, std::string body,
                bool keep_alive, const Headers& headers = {});
  void SendEmpty(boost::beast::http::status status, bool keep_alive, const Headers& headers = {});
  // Queues the head of an SSE response; StreamBytes frames body bytes to match it.
  void StartSse(const Headers& headers);
  std::string StreamBytes(std::string_view data) const;
  void EndSse();
  void NextRequest();
  void Queue(std::string bytes, After after);
  void WriteNext();
  void OnWrite(boost::beast::error_code ec);

  // Watching for the client going away while a response is pending.
  void Watch();
  void OnWatch(boost::beast::error_code ec, std::size_t n);
  void Close();

  std::string Header(std::string_view name) const;

  boost::beast::tcp_stream stream_;
  std::shared_ptr<ServerShared> shared_;
  std::string peer_;
  // The address the client connected to, as a Host header would spell it ("10.0.0.5",
  // "[fe80::1]"): a server bound to 0.0.0.0 is reached by one of its addresses.
  std::string local_host_;
  boost::beast::flat_buffer buffer_;
  // The request being served; kept until the next one is read, so its headers stay readable.
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  unsigned request_version_ = 11;
  bool request_keep_alive_ = true;
  identity::Caller caller_;     // who sent the request being served
  bool api_ = false;            // the request is for the admin API (/api/...)
  bool console_ = false;        // the request is for the console (/, /approvals/ID, /console/...)
  std::size_t body_limit_ = 0;  // the largest body the request may have
  // CORS headers every response to the request carries (Vary; Allow-Origin for an allowed
  // Origin). Set by Route.
  std::vector<std::pair<std::string, std::string>> cors_;
  bool chunked_ = true;  // SSE bodies are chunked (HTTP/1.1) or end with the connection (1.0)

  std::deque<Output> out_;
  std::size_t out_bytes_ = 0;
  bool writing_ = false;
  bool closed_ = false;

  bool watching_ = false;
  bool read_after_watch_ = false;  // start reading the next request once the watch ends

  std::shared_ptr<PostState> post_;  // the POST being answered, if any

  std::string stream_session_;  // the GET stream's session, if one is open here
  std::uint64_t stream_token_ = 0;
  std::uint64_t stream_number_ = 0;  // the GET stream's number for event ids (http_replay.h)
  // A resumed POST stream this connection reads (GET with Last-Event-ID), if any.
  std::string resume_session_;
  std::uint64_t resume_stream_ = 0;
  std::uint64_t resume_token_ = 0;
  boost::asio::steady_timer keepalive_;
  boost::asio::steady_timer sse_timer_;  // switches a slow POST to SSE (resumable sessions)
};

}  // namespace warden::gateway::http
