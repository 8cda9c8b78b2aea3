// The top of a thread or of a job posted to a pool: an exception that reaches it is logged (one
// line on stderr, in one write) and stops there, never std::terminate for the whole process.
// Code below still reports failures as Status values; this is the net under library surprises
// (std::bad_alloc, a throwing stream, a JSON accessor used on the wrong type).
#pragma once

#include <unistd.h>

#include <exception>
#include <string>

namespace warden {

// Runs `fn()`. Returns true when it returned, false when it threw (after logging
// "warden: WHERE: uncaught exception: WHAT; CONSEQUENCE").
template <typename F>
bool RunGuarded(const char* where, const char* consequence, F&& fn) noexcept {
  std::string what;
  try {
    fn();
    return true;
  } catch (const std::exception& e) {
    try {
      what = e.what();
    } catch (...) {
    }
  } catch (...) {
    what = "(not a std::exception)";
  }
  std::string line;
  try {
    line = std::string("warden: ") + where + ": uncaught exception: " + what + "; " +
           consequence + "\n";
  } catch (...) {
    line = "warden: uncaught exception (and no memory to describe it)\n";
  }
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
  return false;
}

}  // namespace warden
