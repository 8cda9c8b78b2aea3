// The gvisor backend's OCI bundle: what config.json grants (read-only system mounts, no
// capabilities, no_new_privs, sized /tmp, protected paths re-bound read-only) and how the command
// is found inside the sandbox's mounts before runsc runs (127 / 126 as native).
#include "sandbox/gvisor_bundle.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace warden::sandbox::gvisor {
namespace {

class TempTree {
 public:
  TempTree() {
    char tmpl[] = "/tmp/warden-test-gvbundle-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempTree() { std::filesystem::remove_all(path_); }
  std::string Write(const std::string& rel, const std::string& text, mode_t mode) const {
    std::string p = path_ + "/" + rel;
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    std::ofstream(p) << text;
    chmod(p.c_str(), mode);
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

mnt::Plan PlanFor(const Options& o) {
  auto plan = mnt::PlanFromParent(o, 65534, 65534);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  return plan.ok() ? *plan : mnt::Plan{};
}

const nlohmann::json* MountAt(const nlohmann::json& config, const std::string& inside) {
  for (const auto& m : config["mounts"]) {
    if (m["destination"] == inside) return &m;
  }
  return nullptr;
}

bool HasOption(const nlohmann::json& mount, const std::string& option) {
  for (const auto& o : mount["options"]) {
    if (o == option) return true;
  }
  return false;
}

TEST(GvisorConfig, SystemDirsReadOnlyNoCapabilitiesNoNewPrivs) {
  Options o;
  o.tmpfs_bytes = 1 << 20;
  o.hostname = "box";
  o.open_files = 64;
  o.file_size_bytes = 4096;
  ProcessSpec p{{"/bin/true"}, {"PATH=/usr/bin"}, "/tmp", 65534, 65534};
  auto config = MakeConfig(o, PlanFor(o), p);
  const auto* usr = MountAt(config, "/usr");
  ASSERT_NE(usr, nullptr) << config.dump(1);
  EXPECT_TRUE(HasOption(*usr, "ro"));
  EXPECT_TRUE(HasOption(*usr, "nosuid"));
  const auto* tmp = MountAt(config, "/tmp");
  ASSERT_NE(tmp, nullptr);
  EXPECT_EQ(tmp->at("type"), "tmpfs");
  EXPECT_TRUE(HasOption(*tmp, "size=1048576"));
  EXPECT_EQ(config["root"]["readonly"], true);
  EXPECT_EQ(config["hostname"], "box");
  EXPECT_EQ(config["process"]["noNewPrivileges"], true);
  for (const char* set : {"bounding", "effective", "permitted", "inheritable", "ambient"}) {
    EXPECT_TRUE(config["process"]["capabilities"][set].empty()) << set;
  }
  EXPECT_EQ(config["process"]["user"]["uid"], 65534);
  bool nofile = false, fsize = false;
  for (const auto& r : config["process"]["rlimits"]) {
    nofile |= r["type"] == "RLIMIT_NOFILE" && r["hard"] == 64;
    fsize |= r["type"] == "RLIMIT_FSIZE" && r["hard"] == 4096;
  }
  EXPECT_TRUE(nofile && fsize) << config["process"]["rlimits"].dump();
  // No host /etc file but the few native binds (never shadow, passwd or hostname from the host).
  for (const auto& m : config["mounts"]) {
    const std::string source = m.value("source", "");
    EXPECT_NE(source, "/etc/shadow");
    EXPECT_NE(source, "/etc/passwd");
    EXPECT_NE(source, "/etc");
  }
}

TEST(GvisorConfig, PidsLimitIsRlimitNprocOfTheCommand) {
  Options o;
  ProcessSpec p{{"/bin/true"}, {"PATH=/usr/bin"}, "/tmp", 65534, 65534};
  auto config = MakeConfig(o, PlanFor(o), p);
  for (const auto& r : config["process"]["rlimits"]) EXPECT_NE(r["type"], "RLIMIT_NPROC") << "no --pids, no limit";
  o.pids = 20;
  config = MakeConfig(o, PlanFor(o), p);
  bool nproc = false;
  for (const auto& r : config["process"]["rlimits"]) nproc |= r["type"] == "RLIMIT_NPROC" && r["hard"] == 20 && r["soft"] == 20;
  EXPECT_TRUE(nproc) << config["process"]["rlimits"].dump();
  // Never a cgroup pids limit: runsc would apply it to the host cgroup, which counts gVisor's threads.
  EXPECT_FALSE(config["linux"].contains("resources")) << config["linux"].dump();
}

bool HasNamespace(const nlohmann::json& config, const std::string& type) {
  for (const auto& n : config["linux"]["namespaces"]) {
    if (n["type"] == type) return true;
  }
  return false;
}

TEST(GvisorConfig, OwnNetworkNamespaceUnlessTheProxyNamespaceIsUsed) {
  Options o;
  ProcessSpec p{{"/bin/true"}, {"PATH=/usr/bin"}, "/tmp", 65534, 65534};
  EXPECT_TRUE(HasNamespace(MakeConfig(o, PlanFor(o), p), "network"));
  // With --net proxy runsc stays in the private namespace warden made (loopback + the proxy):
  // a namespace of its own would have no way to the proxy.
  o.net = NetMode::kProxy;
  auto config = MakeConfig(o, PlanFor(o), p);
  EXPECT_FALSE(HasNamespace(config, "network")) << config["linux"].dump();
  for (const char* type : {"pid", "ipc", "uts", "mount"}) EXPECT_TRUE(HasNamespace(config, type)) << type;
}

TEST(GvisorConfig, ProtectedPathsInRwBindsAreReboundReadOnly) {
  TempTree ws;
  ws.Write(".git/config", "[core]\n", 0644);
  Options o;
  o.binds.push_back({ws.path(), "/work", true});
  o.protect = {".git", ".absent"};
  auto config = MakeConfig(o, PlanFor(o), {{"/bin/true"}, {}, "/work", 65534, 65534});
  const auto* work = MountAt(config, "/work");
  ASSERT_NE(work, nullptr);
  EXPECT_TRUE(HasOption(*work, "rw"));
  const auto* git = MountAt(config, "/work/.git");
  ASSERT_NE(git, nullptr) << config["mounts"].dump(1);
  EXPECT_TRUE(HasOption(*git, "ro"));
  EXPECT_EQ(MountAt(config, "/work/.absent"), nullptr);
}

TEST(GvisorCommand, FoundThroughPathAndMountsAs127Or126) {
  TempTree dir;
  dir.Write("tool", "#!/bin/sh\n", 0755);
  dir.Write("data.txt", "x", 0644);
  Options o;
  o.binds.push_back({dir.path(), "/opt/t", false});
  auto plan = PlanFor(o);
  EXPECT_EQ(CheckCommand(plan, "sh", "/usr/bin:/bin"), 0);
  EXPECT_EQ(CheckCommand(plan, "/bin/sh", ""), 0);  // through the merged-/usr link
  EXPECT_EQ(CheckCommand(plan, "tool", "/usr/bin:/opt/t"), 0);
  EXPECT_EQ(CheckCommand(plan, "/opt/t/tool", ""), 0);
  EXPECT_EQ(CheckCommand(plan, "no-such-tool", "/usr/bin:/opt/t"), ENOENT);
  EXPECT_EQ(CheckCommand(plan, "/opt/t/data.txt", ""), EACCES);
  EXPECT_EQ(CheckCommand(plan, "/usr/bin", ""), EACCES);
  // The host has it, the sandbox does not: not found.
  EXPECT_EQ(CheckCommand(plan, dir.path() + "/tool", ""), ENOENT);
  EXPECT_EQ(HostPathFor(plan, "/opt/t/tool"), dir.path() + "/tool");
  EXPECT_EQ(HostPathFor(plan, "/tmp/x"), "");
}

TEST(GvisorBundle, WritesConfigAndRootWithMountPoints) {
  TempTree out;
  TempTree ws;
  Options o;
  o.binds.push_back({ws.path(), "/deep/work", true});
  auto plan = PlanFor(o);
  ASSERT_TRUE(WriteBundle(out.path(), o, plan, {{"/bin/true"}, {}, "/deep/work", 65534, 65534}).ok());
  struct stat st;
  EXPECT_EQ(stat((out.path() + "/config.json").c_str(), &st), 0);
  EXPECT_EQ(stat((out.path() + "/rootfs/deep/work").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  std::ifstream passwd(out.path() + "/rootfs/etc/passwd");
  std::string text((std::istreambuf_iterator<char>(passwd)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("sandbox:x:65534"), std::string::npos) << text;
  EXPECT_EQ(text.find("root:x:0:0:root:/root"), std::string::npos) << "the host's passwd leaked";
}

}  // namespace
}  // namespace warden::sandbox::gvisor
