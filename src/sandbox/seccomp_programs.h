// The seccomp programs compiled at build time (by tools/seccomp_bpf_gen from the refusal table),
// ready to load. A test checks they equal what CompileProgram() makes at run time.
#pragma once

#include <linux/filter.h>

#include <vector>

namespace warden::sandbox::seccomp {

const std::vector<sock_filter>& PrecompiledProgram(bool notify);

}  // namespace warden::sandbox::seccomp
