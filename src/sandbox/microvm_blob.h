// The microVM guest's init, embedded in warden (microvm_blob.cc).
#pragma once

#include <string_view>

namespace warden::sandbox::microvm {

// The static executable that runs as PID 1 in every microVM (src/sandbox/microvm_init/init.cc).
std::string_view InitBinary();

}  // namespace warden::sandbox::microvm
