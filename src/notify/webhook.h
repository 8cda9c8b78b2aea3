// Signed webhooks: events POSTed to an operator's HTTP(S) endpoint from a thread of their own.
//
//   auto sender = notify::WebhookSender::Create({.url = "https://hooks.example.com/warden",
//                                                .secret = secret});
//   if (!sender.ok()) return sender.status();
//   (*sender)->Post("approval.created", {{"approval", record}});   // never waits on the network
//
// Each event is one POST of `{"event": EVENT, "id": "evt_<32 hex>", "time": RFC 3339, "data":
// PAYLOAD}` with `Content-Type: application/json`, `X-Warden-Event: EVENT` and
// `X-Warden-Signature: t=UNIX_SECONDS,v1=HEX`, HEX = lower-case hex of HMAC-SHA256(secret,
// "UNIX_SECONDS." + body). The body (and so `id`, by which a receiver drops duplicates) is the same
// on every attempt; `t` is the time of the attempt.
//
// The URL is an operator's setting (the policy file's), not an agent's: it is not subject to the
// egress allow-list, and nothing an agent sends can choose it. The secret is never logged, nor is
// a body, nor the URL's path and query (webhook URLs often carry a token there): log lines name
// the endpoint as scheme://host:port.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/status.h"

namespace warden::notify {

struct WebhookOptions {
  std::string url;       // http:// or https://; no user info
  std::string secret;    // the HMAC key (bytes); must not be empty
  std::string ca_file;   // https: PEM file of the CAs to trust ("": the system's store)
  int max_attempts = 5;  // per event, the first included (>= 1)
  std::chrono::milliseconds first_backoff{1000};     // before the 2nd attempt; doubles after each
  std::chrono::milliseconds max_backoff{60000};      // the doubling stops here
  std::chrono::milliseconds request_timeout{10000};  // one attempt: resolve, connect, TLS, reply
  std::size_t queue_bound = 1000;  // undelivered events kept; past it the oldest is dropped
};

// Counters since Create: an event ends as exactly one of delivered, failed and dropped.
struct WebhookStats {
  uint64_t delivered = 0;  // answered 2xx
  uint64_t retried = 0;    // attempts after an event's first
  uint64_t failed = 0;     // given up: a 3xx or 4xx other than 429, max_attempts used up, or
                           // refused by Post (a malformed event name)
  uint64_t dropped = 0;    // pushed out of a full queue before it was delivered (one pushed out
                           // during its attempt may still have reached the receiver)
  std::size_t queued = 0;  // now waiting, the one being delivered included
};

// Post and Stats may be called from any thread.
class WebhookSender {
 public:
  // Checks the options (the message names what is wrong: the URL, the CA file...) and starts the
  // worker thread.
  static Result<std::unique_ptr<WebhookSender>> Create(WebhookOptions options);
  // Stops the worker promptly: a backoff is not waited out and a request in progress is cancelled.
  // Events still queued are not sent.
  ~WebhookSender();
  WebhookSender(const WebhookSender&) = delete;
  WebhookSender& operator=(const WebhookSender&) = delete;

  // Queues one event and returns: it never waits on the network. When the queue is full, the
  // oldest undelivered event (even one being retried) is dropped, counted and logged. Events are
  // delivered one at a time, in the order posted. `event` becomes a header, so it must be 1 to 128
  // of [A-Za-z0-9._-] ("approval.created"); another is refused (logged, counted as failed).
  void Post(std::string event, nlohmann::json payload);

  WebhookStats Stats() const;

 private:
  struct Impl;
  explicit WebhookSender(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "t=UNIX_SECONDS,v1=HEX": the X-Warden-Signature of `body` signed at `unix_seconds`.
std::string SignatureHeader(std::string_view secret, int64_t unix_seconds, std::string_view body);

// For receivers (and tests): true when `header` is a valid X-Warden-Signature of `body` under
// `secret` (compared in constant time) and its timestamp is within `tolerance` of
// `now_unix_seconds`, either side.
bool VerifySignature(std::string_view secret, std::string_view header, std::string_view body,
                     int64_t now_unix_seconds, std::chrono::seconds tolerance);

}  // namespace warden::notify
