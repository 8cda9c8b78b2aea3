// The queue and the worker. The event being delivered stays at the queue's front until it ends,
// so that overflow drops it like any other undelivered event (its worker notices and moves on),
// and `queued` counts it.
#include "notify/webhook.h"

#include <openssl/rand.h>
#include <spdlog/spdlog.h>
#include <time.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <random>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "common/guard.h"
#include "notify/http_post.h"
#include "upstream/http_url.h"

namespace warden::notify {
namespace {

using std::chrono::milliseconds;
using std::chrono::system_clock;

// RFC 3339 in UTC with milliseconds: "2026-12-02T14:20:12.123Z".
std::string Rfc3339(system_clock::time_point when) {
  const auto ms = std::chrono::duration_cast<milliseconds>(when.time_since_epoch()).count();
  const time_t seconds = static_cast<time_t>(ms / 1000);
  struct tm utc {};
  gmtime_r(&seconds, &utc);
  char text[64];  // room for any int the compiler cannot rule out
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(ms % 1000));
  return text;
}

// "evt_" and 128 random bits in hex: a receiver drops a retried event it already has by this id.
std::string RandomId() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) {
    std::random_device device;
    for (unsigned char& b : bytes) b = static_cast<unsigned char>(device());
  }
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string id = "evt_";
  for (unsigned char b : bytes) {
    id.push_back(kDigits[b >> 4]);
    id.push_back(kDigits[b & 0xf]);
  }
  return id;
}

// Event names go into a header: letters, digits, '.', '_' and '-' only.
bool IsEventName(std::string_view name) {
  return !name.empty() && name.size() <= 128 && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(system_clock::now().time_since_epoch())
      .count();
}

enum class Verdict { kDelivered, kRetry, kGiveUp };

// 2xx delivers; connection failures, timeouts, 5xx and 429 are worth another attempt; anything
// else (a redirect, which is never followed, or another 4xx) will not change by trying again.
Verdict Judge(const PostReply& reply) {
  if (reply.kind != PostReply::kAnswered) return Verdict::kRetry;
  if (reply.status / 100 == 2) return Verdict::kDelivered;
  if (reply.status / 100 == 5 || reply.status == 429) return Verdict::kRetry;
  return Verdict::kGiveUp;
}

std::string Describe(const PostReply& reply) {
  if (reply.kind == PostReply::kAnswered) return "HTTP " + std::to_string(reply.status);
  return reply.error;
}

}  // namespace

struct WebhookSender::Impl {
  struct Event {
    uint64_t seq = 0;
    std::string name;
    std::string id;
    std::string body;
  };

  WebhookOptions options;
  std::string endpoint;  // scheme://host[:port], for log lines: never the path or query
  std::unique_ptr<HttpPoster> poster;

  mutable std::mutex mu;
  std::condition_variable wake;  // an event queued, the front dropped, or stopping
  std::deque<std::shared_ptr<const Event>> queue;
  uint64_t next_seq = 0;
  bool stopping = false;
  WebhookStats stats;  // but `queued`, which is queue.size()
  std::thread worker;

  void Run();
  void Deliver(const Event& event);
  // Requires mu. False once the event was dropped (or the sender is stopping).
  bool StillFront(uint64_t seq) const {
    return !stopping && !queue.empty() && queue.front()->seq == seq;
  }
  milliseconds BackoffAfter(int attempt) const;
};

milliseconds WebhookSender::Impl::BackoffAfter(int attempt) const {
  const milliseconds cap = std::max(options.max_backoff, options.first_backoff);
  milliseconds delay = options.first_backoff;
  for (int i = 1; i < attempt && delay < cap; ++i) delay *= 2;
  return std::min(delay, cap);
}

void WebhookSender::Impl::Run() {
  for (;;) {
    std::shared_ptr<const Event> event;
    {
      std::unique_lock<std::mutex> lock(mu);
      wake.wait(lock, [this] { return stopping || !queue.empty(); });
      if (stopping) return;
      event = queue.front();
    }
    const bool returned =
        RunGuarded("webhook sender", "the event was given up", [&] { Deliver(*event); });
    if (!returned) {
      std::lock_guard<std::mutex> lock(mu);
      if (StillFront(event->seq)) {
        queue.pop_front();
        ++stats.failed;
      }
    }
  }
}

void WebhookSender::Impl::Deliver(const Event& event) {
  for (int attempt = 1;; ++attempt) {
    const std::vector<std::pair<std::string, std::string>> headers = {
        {"X-Warden-Event", event.name},
        {"X-Warden-Signature", SignatureHeader(options.secret, UnixSeconds(), event.body)},
    };
    const PostReply reply = poster->Post(headers, event.body, options.request_timeout);
    const Verdict verdict = Judge(reply);
    std::unique_lock<std::mutex> lock(mu);
    if (!StillFront(event.seq)) return;  // dropped meanwhile (counted there), or stopping
    if (verdict == Verdict::kDelivered) {
      queue.pop_front();
      ++stats.delivered;
      return;
    }
    if (verdict == Verdict::kGiveUp || attempt >= options.max_attempts) {
      queue.pop_front();
      ++stats.failed;
      lock.unlock();
      spdlog::warn(
          "webhook {}: gave up on event {} ({}) after {} attempt(s): {}", endpoint, event.id,
          event.name, attempt,
          verdict == Verdict::kGiveUp ? Describe(reply) + " is not retried" : Describe(reply));
      return;
    }
    const milliseconds delay = BackoffAfter(attempt);
    lock.unlock();  // Post waits on mu: never log under it
    spdlog::debug("webhook {}: event {} attempt {} failed ({}); retrying in {} ms", endpoint,
                  event.id, attempt, Describe(reply), delay.count());
    lock.lock();
    const auto until = std::chrono::steady_clock::now() + delay;
    wake.wait_until(lock, until, [&] { return !StillFront(event.seq); });
    if (!StillFront(event.seq)) return;
    ++stats.retried;
  }
}

WebhookSender::WebhookSender(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<WebhookSender>> WebhookSender::Create(WebhookOptions options) {
  auto url = upstream::ParseHttpUrl(options.url);
  if (!url) {
    // The parser speaks of upstreams; the problem with the URL is the same.
    std::string message = url.status().message();
    constexpr std::string_view kTheirs = "upstream URL ";
    if (message.starts_with(kTheirs)) message.replace(0, kTheirs.size(), "webhook URL ");
    return Status::Error(message);
  }
  if (options.secret.empty()) return Status::Error("webhook secret is empty");
  if (!url->tls && !options.ca_file.empty())
    return Status::Error("webhook ca_file is for https:// URLs only");
  if (options.max_attempts < 1) return Status::Error("webhook max_attempts must be at least 1");
  if (options.first_backoff.count() < 0 || options.max_backoff.count() < 0)
    return Status::Error("webhook backoff must not be negative");
  if (options.request_timeout.count() <= 0)
    return Status::Error("webhook request_timeout must be positive");
  if (options.queue_bound == 0) return Status::Error("webhook queue_bound must be at least 1");

  auto impl = std::make_unique<Impl>();
  impl->endpoint = (url->tls ? "https://" : "http://") + url->host_header;
  auto poster = HttpPoster::Create(*url, options.ca_file);
  if (!poster) return poster.status().Wrap("webhook " + impl->endpoint);
  impl->poster = std::move(*poster);
  impl->options = std::move(options);
  Impl* raw = impl.get();
  try {
    impl->worker = std::thread([raw] { raw->Run(); });
  } catch (const std::system_error& e) {
    return Status::Error(std::string("webhook: cannot start the sender thread: ") + e.what());
  }
  return std::unique_ptr<WebhookSender>(new WebhookSender(std::move(impl)));
}

WebhookSender::~WebhookSender() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->poster->Cancel();  // ends a request in progress; a backoff ends on the notify
  impl_->wake.notify_all();
  impl_->worker.join();
}

void WebhookSender::Post(std::string event, nlohmann::json payload) {
  if (!IsEventName(event)) {
    {
      std::lock_guard<std::mutex> lock(impl_->mu);
      ++impl_->stats.failed;
    }
    spdlog::error("webhook {}: refused an event with a malformed name", impl_->endpoint);
    return;
  }
  auto queued = std::make_shared<Impl::Event>();
  queued->id = RandomId();
  const nlohmann::json body = {{"event", event},
                               {"id", queued->id},
                               {"time", Rfc3339(system_clock::now())},
                               {"data", std::move(payload)}};
  // Invalid UTF-8 in a string is replaced (U+FFFD), not thrown.
  queued->body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  queued->name = std::move(event);
  std::string dropped_id;
  uint64_t dropped_total = 0;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stopping) return;
    queued->seq = impl_->next_seq++;
    if (impl_->queue.size() >= impl_->options.queue_bound) {
      dropped_id = impl_->queue.front()->id;
      impl_->queue.pop_front();
      dropped_total = ++impl_->stats.dropped;
    }
    impl_->queue.push_back(std::move(queued));
  }
  impl_->wake.notify_all();
  if (!dropped_id.empty())
    spdlog::warn("webhook {}: queue full ({} events), dropped the oldest, {} ({} dropped so far)",
                 impl_->endpoint, impl_->options.queue_bound, dropped_id, dropped_total);
}

WebhookStats WebhookSender::Stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  WebhookStats out = impl_->stats;
  out.queued = impl_->queue.size();
  return out;
}

}  // namespace warden::notify
