// The last few KiB a stdio server wrote to stderr: kept so that "exited with status 1" can say
// why. Not thread-safe (one reader thread owns it).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace warden::upstream {

class StderrTail {
 public:
  explicit StderrTail(std::size_t keep = 4096) : keep_(keep) {}

  void Append(std::string_view bytes) {
    text_.append(bytes);
    // Trim in batches: erasing from the front on every append would be quadratic.
    if (text_.size() > 2 * keep_) text_.erase(0, text_.size() - keep_);
  }

  // Everything kept (at most ~2x keep bytes; the oldest part may start mid-line).
  std::string Text() const {
    return text_.size() > keep_ ? text_.substr(text_.size() - keep_) : text_;
  }

  // The last non-blank line, without surrounding whitespace, cut at 300 bytes; "" if none.
  std::string LastLine() const {
    const std::string text = Text();
    size_t end = text.find_last_not_of(" \t\r\n");
    if (end == std::string::npos) return "";
    size_t begin = text.find_last_of("\r\n", end);
    begin = begin == std::string::npos ? 0 : begin + 1;
    std::string line = text.substr(begin, end + 1 - begin);
    const size_t first = line.find_first_not_of(" \t");
    line.erase(0, first);
    if (line.size() > 300) line = line.substr(0, 300) + "...";
    return line;
  }

 private:
  std::size_t keep_;
  std::string text_;
};

}  // namespace warden::upstream
