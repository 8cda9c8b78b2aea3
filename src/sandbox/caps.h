// Capabilities: everything dropped before the command runs (bounding, ambient, inheritable,
// permitted, effective), securebits locked so no later exec can regain any, no_new_privs set.
#pragma once

#include "common/status.h"

namespace warden::sandbox::caps {

// Child side, after the root is built and before Landlock and seccomp.
Status DropAllFromChild();

}  // namespace warden::sandbox::caps
