// sandbox__exec on a sandbox profile that says `backend: gvisor`: the command runs under gVisor
// (its kernel answers uname, not the host's), files go in and come out of the workspace, and the
// profile's pids limit is enforced inside gVisor. Skips without runsc or root.
#include <gtest/gtest.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "gateway/builtins/builtin_tools.h"
#include "sandbox/profile.h"
#include "testing.h"

namespace warden::gateway {
namespace {

using nlohmann::json;

class GvisorExec : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access("/usr/bin/runsc", X_OK) != 0 && access("/usr/sbin/runsc", X_OK) != 0) {
      GTEST_SKIP() << "runsc is not installed (Debian package runsc; scripts/install-deps.sh)";
    }
    if (geteuid() != 0) GTEST_SKIP() << "--backend gvisor needs root (runsc)";
  }
  static sandbox::Options Profile(const std::string& yaml) {
    sandbox::Options o;
    Status st = sandbox::LoadProfileText(yaml, "test profile", &o);
    EXPECT_TRUE(st.ok()) << st.message();
    return o;
  }
  static CallResult Exec(const json& arguments, const sandbox::Options& profile) {
    auto request = ParseExecArguments(arguments);
    EXPECT_TRUE(request.ok()) << request.status().message();
    return RunSandboxExec(*request, profile);
  }
};

TEST_F(GvisorExec, ProfileBackendRunsTheCommandUnderGvisorWithFilesInAndOut) {
  auto profile = Profile("backend: gvisor\ntimeout: 60s\nmemory: 512M\n");
  ASSERT_EQ(profile.backend, "gvisor");
  CallResult r = Exec({{"command", "uname -r; cat data/in.txt; mkdir -p out; echo made > out/result.txt"},
                       {"files", {{"data/in.txt", "from the agent\n"}}},
                       {"outputs", {"out/*.txt"}}},
                      profile);
  const json& s = r.value["structuredContent"];
  ASSERT_EQ(s["exit_code"], 0) << r.value.dump();
  struct utsname host;
  ASSERT_EQ(uname(&host), 0);
  const std::string out = s["stdout"];
  const std::string release = out.substr(0, out.find('\n'));
  EXPECT_NE(release, host.release) << "uname answered by the host kernel: not gVisor";
  EXPECT_NE(out.find("from the agent\n"), std::string::npos) << out;
  EXPECT_NE(s["outputs"].dump().find("made"), std::string::npos) << s.dump();
}

TEST_F(GvisorExec, ProfileWithAPidsLimitRunsUnderTheLimit) {
  sandbox::Options profile = DefaultExecProfile();  // 128 pids: RLIMIT_NPROC inside gVisor
  profile.backend = "gvisor";
  CallResult r = Exec({{"command", "echo ran; python3 -c \"import resource; print(resource.getrlimit(resource.RLIMIT_NPROC))\""}},
                      profile);
  const json& s = r.value["structuredContent"];
  EXPECT_EQ(s["exit_code"], 0) << r.value.dump();
  EXPECT_EQ(s["stdout"], "ran\n(128, 128)\n") << s.dump();
}

}  // namespace
}  // namespace warden::gateway
