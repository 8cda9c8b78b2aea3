#include "audit/time_format.h"

#include <cctype>
#include <cstdio>
#include <ctime>

namespace warden::audit {
namespace {

using std::chrono::microseconds;
using std::chrono::system_clock;

// Reads exactly `n` digits at text[*pos], advancing *pos; false when they are not all digits.
bool Digits(std::string_view text, size_t* pos, size_t n, int* out) {
  if (*pos + n > text.size()) return false;
  int v = 0;
  for (size_t i = 0; i < n; ++i) {
    char c = text[*pos + i];
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    v = v * 10 + (c - '0');
  }
  *pos += n;
  *out = v;
  return true;
}

bool Expect(std::string_view text, size_t* pos, std::string_view chars) {
  if (*pos >= text.size() || chars.find(text[*pos]) == std::string_view::npos) return false;
  ++*pos;
  return true;
}

Result<system_clock::time_point> ParseAge(std::string_view text, system_clock::time_point now) {
  uint64_t n = 0;
  size_t i = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    if (n > 100'000'000) return Status::Error("age too large");
    n = n * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  if (i == 0 || i + 1 != text.size()) return Status::Error("not an age");
  int64_t seconds = 0;
  switch (text[i]) {
    case 's':
      seconds = static_cast<int64_t>(n);
      break;
    case 'm':
      seconds = static_cast<int64_t>(n) * 60;
      break;
    case 'h':
      seconds = static_cast<int64_t>(n) * 3600;
      break;
    case 'd':
      seconds = static_cast<int64_t>(n) * 86400;
      break;
    default:
      return Status::Error("not an age");
  }
  return now - std::chrono::seconds(seconds);
}

Result<system_clock::time_point> ParseRfc3339(std::string_view text) {
  std::tm tm{};
  size_t pos = 0;
  int year, month, day, hour = 0, minute = 0, second = 0;
  if (!Digits(text, &pos, 4, &year) || !Expect(text, &pos, "-") || !Digits(text, &pos, 2, &month) ||
      !Expect(text, &pos, "-") || !Digits(text, &pos, 2, &day)) {
    return Status::Error("not a date");
  }
  int64_t micros = 0;
  int offset_seconds = 0;
  if (pos < text.size()) {
    if (!Expect(text, &pos, "Tt ") || !Digits(text, &pos, 2, &hour) || !Expect(text, &pos, ":") ||
        !Digits(text, &pos, 2, &minute) || !Expect(text, &pos, ":") ||
        !Digits(text, &pos, 2, &second)) {
      return Status::Error("not a time");
    }
    if (pos < text.size() && text[pos] == '.') {
      ++pos;
      int scale = 100000, digits = 0;
      while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
        micros += (text[pos] - '0') * scale;  // digits past the sixth are dropped
        scale /= 10;
        ++pos, ++digits;
      }
      if (digits == 0) return Status::Error("empty fraction");
    }
    if (Expect(text, &pos, "Zz")) {
    } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
      int sign = text[pos++] == '-' ? -1 : 1, oh, om;
      if (!Digits(text, &pos, 2, &oh) || !Expect(text, &pos, ":") || !Digits(text, &pos, 2, &om)) {
        return Status::Error("bad offset");
      }
      offset_seconds = sign * (oh * 3600 + om * 60);
    } else {
      return Status::Error("missing Z or offset");
    }
    if (pos != text.size()) return Status::Error("trailing text");
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return Status::Error("field out of range");
  }
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  time_t t = timegm(&tm);
  return system_clock::from_time_t(t - offset_seconds) + microseconds(micros);
}

}  // namespace

std::string FormatTime(system_clock::time_point when) {
  auto us = std::chrono::duration_cast<microseconds>(when.time_since_epoch()).count();
  int64_t secs = us / 1'000'000, frac = us % 1'000'000;
  if (frac < 0) frac += 1'000'000, --secs;
  time_t t = static_cast<time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[96];  // ample for any int fields gmtime_r can produce
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<long long>(frac));
  return buf;
}

std::string NowRfc3339() { return FormatTime(system_clock::now()); }

Result<std::string> ParseTimeBound(std::string_view text, system_clock::time_point now) {
  if (auto age = ParseAge(text, now)) return FormatTime(*age);
  auto when = ParseRfc3339(text);
  if (!when) {
    return Status::Error("bad time '" + std::string(text) + "' (" + when.status().message() +
                         "; expected RFC 3339 like 2025-01-02T03:04:05Z, a date like 2025-01-02, "
                         "or an age like 15m, 2h, 7d)");
  }
  return FormatTime(*when);
}

}  // namespace warden::audit
