// Entry times: RFC 3339 in UTC with exactly six fractional digits, "2025-01-02T03:04:05.123456Z".
// That fixed width makes the text order the time order, so stores compare times as strings.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "common/status.h"

namespace warden::audit {

std::string FormatTime(std::chrono::system_clock::time_point when);
std::string NowRfc3339();

// A time bound for a query, as the canonical form above. Accepts
//   RFC 3339 with any fraction and Z or an offset ("2025-01-02T03:04:05+02:00"),
//   a date ("2025-01-02", midnight UTC),
//   an age ("90s", "15m", "2h", "7d"), meaning that long before `now`.
Result<std::string> ParseTimeBound(std::string_view text,
                                   std::chrono::system_clock::time_point now);

}  // namespace warden::audit
