// The login name of the effective user, from the password database (getpwuid_r: safe on any
// thread); `fallback` when the database has no entry for the uid (a container's arbitrary uid).
#pragma once

#include <pwd.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace warden {

inline std::string LoginName(const std::string& fallback) {
  long hint = sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buffer(hint > 0 ? static_cast<size_t>(hint) : 4096);
  passwd entry{};
  passwd* found = nullptr;
  if (getpwuid_r(geteuid(), &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr ||
      found->pw_name == nullptr)
    return fallback;
  return found->pw_name;
}

}  // namespace warden
