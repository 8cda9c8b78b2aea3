// libFuzzer entry point for the SSE reader: the text/event-stream an upstream MCP server sends
// over Streamable HTTP. The first input byte picks how the rest is split into Feed calls and the
// event size limit; the rest is the stream. Invariants, beyond not crashing:
//   * the events, the status, last_event_id() and retry_ms() are the same whether the stream
//     comes in one piece or in many (a CRLF or a BOM may straddle two reads);
//   * no event is over the limit, and no id holds a NUL;
//   * the events written back as a stream (event:, id:, data: lines) read back as the same events.
// Seed corpus: tests/fuzz/corpus/sse/ (docs/testing-fuzz.md).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "upstream/sse.h"

namespace {

using warden::upstream::SseEvent;
using warden::upstream::SseParser;

struct Outcome {
  bool ok = true;
  std::vector<SseEvent> events;
  std::string last_id;
  std::optional<int> retry_ms;
};

bool Same(const std::vector<SseEvent>& a, const std::vector<SseEvent>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].type != b[i].type || a[i].id != b[i].id || a[i].data != b[i].data) return false;
  }
  return true;
}

// Feeds `stream` in pieces of `piece` bytes (0: all at once); stops at the first error, as the
// client drops the connection then.
Outcome Read(std::string_view stream, size_t piece, size_t limit) {
  SseParser parser(limit);
  Outcome out;
  auto on_event = [&](const SseEvent& e) { out.events.push_back(e); };
  do {
    const std::string_view next = piece == 0 ? stream : stream.substr(0, piece);
    stream.remove_prefix(next.size());
    if (!parser.Feed(next, on_event).ok()) {
      out.ok = false;
      break;
    }
  } while (!stream.empty());
  out.last_id = parser.last_event_id();
  out.retry_ms = parser.retry_ms();
  return out;
}

std::string Write(const std::vector<SseEvent>& events) {
  std::string out;
  for (const auto& e : events) {
    if (!e.type.empty()) out += "event: " + e.type + "\n";
    out += "id: " + e.id + "\n";
    size_t start = 0;
    while (true) {
      const size_t nl = e.data.find('\n', start);
      out += "data: " + e.data.substr(start, nl - start) + "\n";
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
    out += "\n";
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 8;
  const size_t limit = (data[0] & 0x80) ? 64 : 1 << 20;
  const std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);

  const Outcome whole = Read(stream, 0, limit);
  const Outcome split = Read(stream, piece, limit);
  // The parser works byte by byte: even when the limit is hit, it is hit at the same byte.
  FUZZ_CHECK(whole.ok == split.ok);
  FUZZ_CHECK(Same(whole.events, split.events));
  FUZZ_CHECK(whole.last_id == split.last_id && whole.retry_ms == split.retry_ms);
  for (const auto& e : whole.events) {
    FUZZ_CHECK(e.data.size() <= limit);
    FUZZ_CHECK(e.id.find('\0') == std::string::npos);
    FUZZ_CHECK(e.type.find_first_of("\r\n") == std::string::npos);
    FUZZ_CHECK(e.data.find('\r') == std::string::npos);
  }
  if (whole.retry_ms) FUZZ_CHECK(*whole.retry_ms >= 0);

  const Outcome again = Read(Write(whole.events), 0, SIZE_MAX);
  FUZZ_CHECK(again.ok && Same(again.events, whole.events));
  return 0;
}
