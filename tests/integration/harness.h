// Runs the real `warden` binary as a user would and captures what it did. Used by every
// end-to-end test; nothing here is a test double.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace warden::testing {

struct Outcome {
  int exit_code = -1;      // warden's exit status (128+N if warden itself died of signal N)
  std::string out, err;    // what warden wrote to stdout and stderr (stderr minus the JSON line)
  nlohmann::json record;   // the --json record (null when none was written)
  pid_t pid = 0;           // warden's pid (names its cgroups: warden-<pid>-<n>)
};

struct Invocation {
  std::vector<std::string> args;      // after "warden"
  std::string stdin_data;             // fed through a pipe, then closed
  std::map<std::string, std::string> extra_env;  // added to warden's environment
  bool json = true;                   // add --json FILE and parse it
  std::vector<int> inherit_fds;       // left open (not close-on-exec) in warden
  uid_t uid = 0;                      // run warden as this user when not 0 (tests run as root);
                                      // 0: TestUid()
  int kill_after_ms = 0;              // SIGKILL warden itself after this long (leftover tests)
};

// Runs `warden ARGS...` to completion. When inv.json is set, "--json FILE" is inserted right
// after the subcommand.
Outcome RunWarden(const Invocation& inv);
// Shorthand: `warden run [FLAGS...] -- sh -c SCRIPT`.
Outcome RunSh(const std::string& script, const std::vector<std::string>& flags = {});

// A fresh host directory (under /tmp) removed with its contents when the object goes away.
class TempDir {
 public:
  TempDir();
  // Under `parent` instead (e.g. /var/tmp: a host directory outside /tmp, which a sandbox covers
  // with its new root while it builds it).
  explicit TempDir(const std::string& parent);
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string Write(const std::string& rel, const std::string& content, mode_t mode = 0644) const;

 private:
  std::string path_;
};

// Host-side observations for leftover checks.
std::vector<pid_t> PidsWithCmdline(const std::string& needle);
std::vector<std::string> WardenCgroupDirs();  // every warden-* cgroup directory on the host
int MountCount();                              // entries in the host's /proc/self/mountinfo
// A /proc file's text read with read(2) ("" when it cannot be read: the process may be gone), and
// a process's parent from its stat (0 when unknown).
std::string ReadProcText(const std::string& path);
pid_t ParentPid(pid_t pid);

bool IsRoot();
// The user every run is made as unless an Invocation names one: WARDEN_TEST_AS_UID when the tests
// run as root (CMake registers the escape and egress suites a second time with it set to 65534),
// else 0 (the tests' own user). TempDir hands its directories to that user.
uid_t TestUid();
// WARDEN_BIN, or for another user a copy every user can execute (the build tree may be
// unreachable for them).
std::string WardenBinaryFor(uid_t uid);

}  // namespace warden::testing
