#include "gateway/http/http_replay.h"

#include <charconv>

namespace warden::gateway::http {

std::uint64_t ReplayBuffer::Append(std::string data) {
  const std::uint64_t seq = next_++;
  bytes_ += data.size();
  events_.emplace_back(seq, std::move(data));
  while (events_.size() > 1 && (events_.size() > max_events_ || bytes_ > max_bytes_)) {
    bytes_ -= events_.front().second.size();
    events_.pop_front();
  }
  return seq;
}

std::optional<std::vector<std::pair<std::uint64_t, std::string>>> ReplayBuffer::After(
    std::uint64_t seq) const {
  if (seq >= next_) return std::nullopt;  // never sent: not this stream's id
  // The first event wanted is seq + 1: it must still be here (or not exist yet).
  const std::uint64_t first_kept = events_.empty() ? next_ : events_.front().first;
  if (seq + 1 < first_kept) return std::nullopt;
  std::vector<std::pair<std::uint64_t, std::string>> out;
  for (const auto& event : events_) {
    if (event.first > seq) out.push_back(event);
  }
  return out;
}

std::optional<std::pair<std::uint64_t, std::uint64_t>> ParseEventId(std::string_view id) {
  auto dash = id.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == id.size()) return std::nullopt;
  auto number = [](std::string_view text) -> std::optional<std::uint64_t> {
    std::uint64_t value = 0;
    for (char c : text)
      if (c < '0' || c > '9') return std::nullopt;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
  };
  auto stream = number(id.substr(0, dash));
  auto seq = number(id.substr(dash + 1));
  if (!stream || !seq || *stream == 0) return std::nullopt;
  return std::pair{*stream, *seq};
}

std::string EventId(std::uint64_t stream, std::uint64_t seq) {
  return std::to_string(stream) + "-" + std::to_string(seq);
}

std::string SsePrimingEvent(std::string_view id, std::uint64_t retry_ms) {
  std::string out = "id: ";
  out += id;
  out += "\nretry: " + std::to_string(retry_ms) + "\ndata: \n\n";
  return out;
}

}  // namespace warden::gateway::http
