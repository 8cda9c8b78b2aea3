// The exit statuses `warden kill|unkill` and `warden tools` share (kill_command.h,
// tools_command.h): 0 done; 1 the state changed but its audit entry could not be written; 2 bad
// input or the database could not be used.
#pragma once

namespace warden::cli {

inline constexpr int kExitUnaudited = 1;
inline constexpr int kExitError = 2;

}  // namespace warden::cli
