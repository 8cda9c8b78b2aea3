// Milliseconds on the monotonic clock, for deadlines and wall-time figures that must not jump
// with the system clock.
#pragma once

#include <time.h>

#include <cstdint>

namespace warden {

inline uint64_t MonotonicMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

}  // namespace warden
