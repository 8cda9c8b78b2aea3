// A Server-Sent Events reader (the text/event-stream format of the HTML standard) for the
// Streamable HTTP transport: bytes in, events out. Pure: no I/O, no threads.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace warden::upstream {

struct SseEvent {
  std::string type;  // the `event:` field; empty means "message"
  std::string id;    // the last event id in force when the event was dispatched
  std::string data;  // `data:` lines joined with '\n'
};

class SseParser {
 public:
  // An event whose data grows over `max_event_bytes` is an error (the server is misbehaving or
  // hostile; the caller drops the connection).
  explicit SseParser(std::size_t max_event_bytes) : max_event_bytes_(max_event_bytes) {}

  // Feeds the next bytes of the stream (any split: a line or a CRLF may straddle two calls) and
  // calls `on_event` for every complete event with data. Events without data (comments, an
  // id-only priming event) only update last_event_id() and retry_ms().
  Status Feed(std::string_view bytes, const std::function<void(const SseEvent&)>& on_event);

  // The id to send as Last-Event-ID when resuming ("" when the server sent none).
  const std::string& last_event_id() const { return last_id_; }
  // The reconnection delay the server asked for with `retry:`, if any.
  std::optional<int> retry_ms() const { return retry_ms_; }

 private:
  void Line(std::string_view line, const std::function<void(const SseEvent&)>& on_event);

  std::size_t max_event_bytes_;
  std::string line_;
  bool after_cr_ = false;  // the last byte was CR: a following LF belongs to the same break
  bool at_start_ = true;   // a UTF-8 BOM at the very start is skipped
  bool has_data_ = false;
  SseEvent event_;
  std::string last_id_;
  std::optional<int> retry_ms_;
};

}  // namespace warden::upstream
