// One HTTP(S) POST and its status line (and, when asked, a bounded reply body), bounded in time and
// cancellable from another thread: what a webhook attempt and an OAuth token request need, and
// nothing more (no redirects, no keep-alive). The only file here that includes Asio and Beast
// (slow to compile). Used by src/notify's webhooks and the gateway's token exchange.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "upstream/http_url.h"

namespace warden::notify {

struct PostReply {
  enum Kind {
    kAnswered,   // the server sent a status line: `status`
    kFailed,     // resolve, connect, TLS, write or read failed, or the timeout passed: `error`
    kCancelled,  // Cancel() was called
  } kind = kFailed;
  unsigned status = 0;
  std::string error;
  std::string body;  // the reply's body, when PostOptions::read_body_bytes asked for it
};

struct PostOptions {
  std::string content_type = "application/json";
  // 0: the body is not read (a webhook needs the status alone). Else up to this many bytes are
  // read; a longer body fails the exchange (kFailed, naming the bound).
  std::size_t read_body_bytes = 0;
};

class HttpPoster {
 public:
  // For https: the peer is verified against `ca_file` (PEM), or the system's store when empty.
  static Result<std::unique_ptr<HttpPoster>> Create(upstream::HttpUrl url,
                                                    const std::string& ca_file);
  ~HttpPoster();
  HttpPoster(const HttpPoster&) = delete;
  HttpPoster& operator=(const HttpPoster&) = delete;

  // POSTs `body` as options.content_type with `headers` (name, value) and waits for the reply's
  // status line, at most `timeout` for the whole exchange. Not thread-safe (one caller at a time).
  PostReply Post(const std::vector<std::pair<std::string, std::string>>& headers,
                 const std::string& body, std::chrono::milliseconds timeout,
                 const PostOptions& options = {});

  // Thread-safe: ends a Post in progress at once, and makes every later one return kCancelled.
  void Cancel();

 private:
  struct Impl;
  explicit HttpPoster(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// One POST of `body` as text/plain to `url` (http:// or https://, verified against `ca_file` or
// the system's store) within `timeout`; any 2xx is success. Errors: a bad URL or CA file, or
// "SCHEME://HOST:PORT: HTTP N" / "SCHEME://HOST:PORT: why" (never the path and query, which may
// hold a token). What a checkpoint's --post and storage.checkpoints.post do.
Status PostText(const std::string& url, const std::string& ca_file, const std::string& body,
                std::chrono::milliseconds timeout);

}  // namespace warden::notify
