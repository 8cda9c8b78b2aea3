// sandbox__exec's tests again, each call on the default profile run in a pre-warmed sandbox of an
// ExecPool (a real `warden pool start --workspace` child), as `warden serve` runs them: a pooled
// call must give what a cold one gives. CMake discovers these under the prefix "Pooled.", and only
// the suites that run sandboxes.
#define WARDEN_EXEC_POOLED
#include "builtin_tools_test.cc"
