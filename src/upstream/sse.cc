#include "upstream/sse.h"

#include <algorithm>
#include <cctype>

namespace warden::upstream {

Status SseParser::Feed(std::string_view bytes,
                       const std::function<void(const SseEvent&)>& on_event) {
  if (at_start_) {
    // The BOM may itself be split; wait for three bytes before deciding.
    static constexpr std::string_view kBom = "\xEF\xBB\xBF";
    line_.append(bytes);
    if (line_.size() < kBom.size() && kBom.substr(0, line_.size()) == line_) return Status::Ok();
    at_start_ = false;
    std::string pending = std::move(line_);
    line_.clear();
    std::string_view view = pending;
    if (view.substr(0, kBom.size()) == kBom) view.remove_prefix(kBom.size());
    return Feed(view, on_event);
  }
  for (char c : bytes) {
    if (c == '\n' && after_cr_) {  // the LF of a CRLF already handled at the CR
      after_cr_ = false;
      continue;
    }
    after_cr_ = (c == '\r');
    if (c == '\r' || c == '\n') {
      Line(line_, on_event);
      line_.clear();
    } else {
      line_.push_back(c);
    }
    if (line_.size() + event_.data.size() > max_event_bytes_)
      return Status::Error("an SSE event is over " + std::to_string(max_event_bytes_) + " bytes");
  }
  return Status::Ok();
}

void SseParser::Line(std::string_view line, const std::function<void(const SseEvent&)>& on_event) {
  if (line.empty()) {  // a blank line dispatches
    if (has_data_) {
      event_.id = last_id_;
      on_event(event_);
    }
    event_ = SseEvent{};
    has_data_ = false;
    return;
  }
  if (line.front() == ':') return;  // a comment (keep-alive)
  const size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value =
      colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "data") {
    if (has_data_) event_.data.push_back('\n');
    event_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    event_.type = std::string(value);
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) last_id_ = std::string(value);
  } else if (field == "retry") {
    if (!value.empty() && value.size() <= 9 &&
        std::all_of(value.begin(), value.end(), [](unsigned char c) { return std::isdigit(c); }))
      retry_ms_ = std::stoi(std::string(value));
  }
}

}  // namespace warden::upstream
