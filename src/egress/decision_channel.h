// The session check across a process boundary (docs/trifecta.md, "Sandbox egress"): the gateway
// that starts a sandbox for a call (sandbox__exec) keeps one end of a socket pair, and the
// `warden run` child that supervises the sandbox gets the other (`--decision-fd`). The child's
// egress proxy asks through it about every attempt its allow-list lets through (AsyncCheck); the
// gateway answers from the calling session's trifecta state. The sandboxed code never holds
// either end (the child keeps it close-on-exec, and the sandbox closes everything above stdio).
//
// Wire: SOCK_SEQPACKET, one message per attempt and one per answer, so that nothing is ever half
// read. An attempt is a JSON object {"id", "host", "port", "protocol", "target",
// "headers_bytes"}, a newline, then the header lines and the body start as raw bytes (the first
// headers_bytes of them are the headers). An answer is {"id", "allow", "reason"}.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <utility>

#include "common/status.h"
#include "common/unique_fd.h"
#include "egress/decision.h"

namespace warden::egress {

// The largest message either side sends or takes: a request head (ProxyLimits::max_header_bytes
// is 16 KiB by default, target and headers both come from it) and ProxyOptions::check_body_bytes.
inline constexpr size_t kMaxDecisionMessage = 192 * 1024;

// A connected pair, both ends close-on-exec: first the gateway's, then the child's.
Result<std::pair<UniqueFd, UniqueFd>> MakeDecisionChannel();

// The child's end: check() asks, a thread of its own (started by the first check, so that the
// process is still single-threaded until its proxy runs) reads the answers. Every attempt asked after
// the gateway closed its end, or whose message cannot be sent at once (the channel is full), is
// refused at once; every attempt still waiting when the channel closes is refused then.
class DecisionClient {
 public:
  // Error: `fd` is not a SOCK_SEQPACKET socket.
  static Result<std::unique_ptr<DecisionClient>> Open(UniqueFd fd);
  // Closes the channel (what still waits is refused) and joins the reader.
  ~DecisionClient();
  DecisionClient(const DecisionClient&) = delete;
  DecisionClient& operator=(const DecisionClient&) = delete;

  // For ProxyOptions::check. Stays safe to call after this object is gone (it refuses).
  AsyncCheck check() const;

  struct Shared;

 private:
  explicit DecisionClient(std::shared_ptr<Shared> shared);
  static void ReadAnswers(Shared& shared);
  std::shared_ptr<Shared> shared_;
};

// The gateway's end: a thread that answers every attempt with `decide` (a throw refuses) until the
// child closes its end or Stop().
class DecisionServer {
 public:
  DecisionServer(UniqueFd fd, std::function<Decision(const Attempt&)> decide);
  ~DecisionServer();  // Stop()
  DecisionServer(const DecisionServer&) = delete;
  DecisionServer& operator=(const DecisionServer&) = delete;

  // Stops answering and joins the thread. Idempotent.
  void Stop();
  uint64_t answered() const { return answered_.load(); }
  uint64_t malformed() const { return malformed_.load(); }

 private:
  void Serve();
  UniqueFd fd_;
  std::function<Decision(const Attempt&)> decide_;
  std::atomic<uint64_t> answered_{0};
  std::atomic<uint64_t> malformed_{0};
  std::thread thread_;
};

// The wire format, for the two ends and their tests.
std::string EncodeAttempt(uint64_t id, const Attempt& attempt);
Result<std::pair<uint64_t, Attempt>> DecodeAttempt(std::string_view message);

}  // namespace warden::egress
