// Internal to the Streamable HTTP server: what makes an SSE stream resumable (MCP 2025-11-25,
// "Resumability and redelivery"). Every SSE stream the server opens (a POST answered as SSE, the
// GET stream) has a number unique in the server, and its events are numbered 1, 2, 3... (0 is
// the priming event); an event id is "STREAM-SEQ", so it names its stream and its place in it.
// The events of each stream are kept in a bounded ReplayBuffer, so a client whose connection
// dropped can send GET with `Last-Event-ID: STREAM-SEQ` and receive what came after, on that
// stream only, then whatever comes next (for a POST stream: the replies still pending).
// docs/gateway.md "Resumable streams".
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace warden::gateway::http {

// The events of one stream, oldest first, with at most `max_events` of them and at most
// `max_bytes` of data (the oldest go first; the newest is always kept). Not thread-safe.
class ReplayBuffer {
 public:
  ReplayBuffer(std::size_t max_events, std::size_t max_bytes)
      : max_events_(max_events == 0 ? 1 : max_events), max_bytes_(max_bytes) {}

  // Appends `data` as the next event and returns its sequence number (1, 2, ...).
  std::uint64_t Append(std::string data);

  // The events after `seq`, in order, as {seq, data}. nullopt when `seq` is not an event this
  // stream has sent (after the last one), or when some of the events after it have been
  // dropped to stay within the caps: the client cannot be given a gapless continuation.
  // After(0) (the priming event) is every event, when none has been dropped.
  std::optional<std::vector<std::pair<std::uint64_t, std::string>>> After(std::uint64_t seq) const;

  std::uint64_t last() const { return next_ - 1; }  // 0 when nothing was appended
  std::size_t size() const { return events_.size(); }
  std::size_t bytes() const { return bytes_; }

 private:
  std::size_t max_events_, max_bytes_;
  std::deque<std::pair<std::uint64_t, std::string>> events_;
  std::size_t bytes_ = 0;
  std::uint64_t next_ = 1;
};

// "STREAM-SEQ" -> {STREAM, SEQ}; nullopt for anything else (both decimal, no sign, STREAM > 0).
std::optional<std::pair<std::uint64_t, std::uint64_t>> ParseEventId(std::string_view id);
std::string EventId(std::uint64_t stream, std::uint64_t seq);

// The priming event of a stream: its id and an empty data field (so a client has an id to
// resume from before any message came), with the reconnection delay `retry_ms` it should use.
std::string SsePrimingEvent(std::string_view id, std::uint64_t retry_ms);

}  // namespace warden::gateway::http
