#include "sandbox/options.h"

#include <gtest/gtest.h>

#include "sandbox/profile.h"

namespace warden::sandbox {
namespace {

TEST(ParseSize, AcceptsUnitsCaseInsensitively) {
  EXPECT_EQ(*ParseSize("512M"), 512ull << 20);
  EXPECT_EQ(*ParseSize("1g"), 1ull << 30);
  EXPECT_EQ(*ParseSize("64k"), 64ull << 10);
  EXPECT_EQ(*ParseSize("1048576"), 1ull << 20);
  EXPECT_EQ(*ParseSize("1.5K"), 1536u);
  EXPECT_EQ(*ParseSize("2GiB"), 2ull << 30);
}

TEST(ParseSize, RejectsGarbageNamingIt) {
  for (const char* bad : {"", "M", "12Q", "-1", "1..2M", "1e9", " 5"}) {
    auto r = ParseSize(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string("'") + bad + "'"), std::string::npos) << r.status().message();
  }
}

TEST(ParseDuration, BareNumbersAreSeconds) {
  EXPECT_EQ(*ParseDuration("30"), 30000u);
  EXPECT_EQ(*ParseDuration("1.5s"), 1500u);
  EXPECT_EQ(*ParseDuration("500ms"), 500u);
  EXPECT_EQ(*ParseDuration("2m"), 120000u);
  EXPECT_EQ(*ParseDuration("1h"), 3600000u);
  EXPECT_FALSE(ParseDuration("5x").ok());
  EXPECT_FALSE(ParseDuration("soon").ok());
}

Options WithCommand() {
  Options o;
  o.argv = {"true"};
  return o;
}

TEST(Validate, RequiresACommand) {
  Options o;
  EXPECT_NE(Validate(o).message().find("no command"), std::string::npos);
  EXPECT_TRUE(Validate(WithCommand()).ok());
}

TEST(Validate, RefusesImpossibleLimits) {
  Options o = WithCommand();
  o.memory_bytes = 1024;
  EXPECT_NE(Validate(o).message().find("too small"), std::string::npos);
  o = WithCommand();
  o.pids = 1;
  EXPECT_FALSE(Validate(o).ok());
  o = WithCommand();
  o.tmpfs_bytes = 10;
  EXPECT_FALSE(Validate(o).ok());
}

TEST(Validate, RefusesRelativeOrDotDotInsidePaths) {
  Options o = WithCommand();
  o.binds = {ParseBindSpec("/usr:relative", false)};
  EXPECT_NE(Validate(o).message().find("must be absolute"), std::string::npos);
  o.binds = {ParseBindSpec("/usr:/a/../etc", false)};
  EXPECT_NE(Validate(o).message().find("'..'"), std::string::npos);
  o.binds = {ParseBindSpec("/usr:/dev", true)};
  EXPECT_NE(Validate(o).message().find("managed by warden"), std::string::npos);
}

TEST(Validate, ReservedInsidePathsAreRefusedInEverySpelling) {
  for (const char* inside : {"/proc/", "/dev/.", "//", "/./", "/proc//", "//dev", "/./proc/.", "/proc/self"}) {
    Options o = WithCommand();
    o.binds = {{.host = "/usr", .inside = inside, .writable = true}};
    EXPECT_NE(Validate(o).message().find("managed by warden"), std::string::npos) << inside;
  }
  Options o = WithCommand();
  o.binds = {{.host = "/usr", .inside = "/a/./..//etc", .writable = false}};
  EXPECT_NE(Validate(o).message().find("'..'"), std::string::npos);
  o.binds = {{.host = "/usr", .inside = "/work//sub/./", .writable = true}};
  EXPECT_TRUE(Validate(o).ok()) << Validate(o).message();
}

TEST(NormalInsidePath, RemovesEmptyAndDotComponents) {
  EXPECT_EQ(NormalInsidePath("/proc/"), "/proc");
  EXPECT_EQ(NormalInsidePath("/dev/."), "/dev");
  EXPECT_EQ(NormalInsidePath("//"), "/");
  EXPECT_EQ(NormalInsidePath("/./a//b/./c/"), "/a/b/c");
  EXPECT_EQ(NormalInsidePath("/a/../b"), "/a/../b");  // '..' is Validate's to refuse
  EXPECT_EQ(NormalInsidePath("relative/"), "relative/");
  EXPECT_EQ(NormalInsidePath(""), "");
}

TEST(Validate, RefusesEscapingProtectPaths) {
  Options o = WithCommand();
  o.protect = {"../outside"};
  EXPECT_FALSE(Validate(o).ok());
  o.protect = {"/abs"};
  EXPECT_FALSE(Validate(o).ok());
  o.protect = {".git/hooks"};
  EXPECT_TRUE(Validate(o).ok());
}

TEST(Validate, UnknownBackendNamesTheChoices) {
  Options o = WithCommand();
  o.backend = "docker";
  EXPECT_NE(Validate(o).message().find("native, gvisor or microvm"), std::string::npos);
  for (const char* known : {"native", "gvisor", "microvm"}) {
    o.backend = known;
    EXPECT_TRUE(Validate(o).ok()) << known;
  }
}

TEST(ParseBindSpec, SplitsHostAndInside) {
  Bind b = ParseBindSpec("/data:/in", true);
  EXPECT_EQ(b.host, "/data");
  EXPECT_EQ(b.inside, "/in");
  EXPECT_TRUE(b.writable);
  Bind same = ParseBindSpec("./rel", false);
  EXPECT_EQ(same.host, "./rel");
  EXPECT_EQ(same.inside, "");
}

TEST(Profile, EveryOptionCanBeSaid) {
  Options o;
  Status st = LoadProfileText(R"(
timeout: 30s
memory: 512M
pids: 64
cpu: 10s
output_limit: 1M
tmpfs_size: 32M
file_size: 1G
open_files: 256
ro: ["/usr/share:/share"]
rw: ["/tmp/ws:/work"]
protect: [".git/hooks", ".envrc"]
workdir: /work
env: {A: "1"}
net: none
resolve: {"x.test": 127.0.0.1}
backend: native
hostname: box
accept_missing: [landlock, cgroups]
)", "p.yaml", &o);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(o.timeout_ms, 30000u);
  EXPECT_EQ(o.memory_bytes, 512ull << 20);
  EXPECT_EQ(o.pids, 64u);
  EXPECT_EQ(o.cpu_ms, 10000u);
  EXPECT_EQ(o.output_limit_bytes, 1u << 20);
  EXPECT_EQ(o.tmpfs_bytes, 32u << 20);
  EXPECT_EQ(o.file_size_bytes, 1ull << 30);
  EXPECT_EQ(o.open_files, 256u);
  ASSERT_EQ(o.binds.size(), 2u);
  EXPECT_EQ(o.binds[1].inside, "/work");
  EXPECT_TRUE(o.binds[1].writable);
  EXPECT_EQ(o.protect, (std::vector<std::string>{".git/hooks", ".envrc"}));
  EXPECT_EQ(o.workdir, "/work");
  EXPECT_EQ(o.env["A"], "1");
  EXPECT_EQ(o.resolve["x.test"], "127.0.0.1");
  EXPECT_EQ(o.hostname, "box");
  EXPECT_TRUE(o.degrade.allow_no_landlock);
  EXPECT_TRUE(o.degrade.allow_no_cgroups);
}

TEST(Profile, UnknownKeyNamesFileLineAndKnownKeys) {
  Options o;
  o.timeout_ms = 7;
  Status st = LoadProfileText("timeout: 1s\nmemroy: 1G\n", "bad.yaml", &o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("bad.yaml:2: unknown key 'memroy'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("memory"), std::string::npos);
  EXPECT_EQ(o.timeout_ms, 7u) << "a bad profile must leave the options untouched";
}

TEST(Profile, WrongTypesAndValuesAreErrors) {
  Options o;
  EXPECT_NE(LoadProfileText("memory: lots\n", "p", &o).message().find("p:1"), std::string::npos);
  EXPECT_NE(LoadProfileText("ro: /usr\n", "p", &o).message().find("must be a list"), std::string::npos);
  EXPECT_NE(LoadProfileText("net: wifi\n", "p", &o).message().find("none or proxy"), std::string::npos);
  EXPECT_NE(LoadProfileText("pids: -3\n", "p", &o).message().find("whole number"), std::string::npos);
  EXPECT_NE(LoadProfileText("a: [\n", "p", &o).message().find("invalid YAML"), std::string::npos);
  EXPECT_NE(LoadProfileText("accept_missing: [seccomp]\n", "p", &o).message().find("landlock or cgroups"), std::string::npos);
}

TEST(Profile, AllowImpliesProxy) {
  Options o;
  ASSERT_TRUE(LoadProfileText("allow: [example.com]\n", "p", &o).ok());
  EXPECT_EQ(o.net, NetMode::kProxy);
}

TEST(EgressCredentialSpec, ParsesHostPortAndRefusesWhatIsNotOne) {
  auto plain = ParseEgressCredentialSpec("API_TOKEN=api.example.com");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->env, "API_TOKEN");
  EXPECT_EQ(plain->host, "api.example.com");
  EXPECT_EQ(plain->port, 80);
  auto v6 = ParseEgressCredentialSpec("T=[2001:db8::1]:8080");
  ASSERT_TRUE(v6.ok()) << v6.status().message();
  EXPECT_EQ(v6->host, "2001:db8::1");
  EXPECT_EQ(v6->port, 8080);
  EXPECT_EQ(EgressCredentialArg(*v6), "T=[2001:db8::1]:8080");
  EXPECT_EQ(EgressCredentialArg(*plain), "API_TOKEN=api.example.com:80");
  for (const char* bad : {"NOHOST", "=host", "T=", "T=host:0", "T=host:99999", "T=host:x"}) {
    auto r = ParseEgressCredentialSpec(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("--egress-credential"), std::string::npos);
    }
  }
}

TEST(EgressCredentialSpec, HeaderAndTemplateAreParsedCheckedAndPassedOn) {
  auto key = ParseEgressCredentialSpec("T=https://api.example.com;header=X-Api-Key;template=key={}");
  ASSERT_TRUE(key.ok()) << key.status().message();
  EXPECT_EQ(key->host, "api.example.com");
  EXPECT_EQ(key->port, 443);
  EXPECT_EQ(key->header, "X-Api-Key");
  EXPECT_EQ(key->value_template, "key={}");
  EXPECT_EQ(EgressCredentialArg(*key), "T=https://api.example.com:443;header=X-Api-Key;template=key={}");
  auto again = ParseEgressCredentialSpec(EgressCredentialArg(*key));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *key);
  for (const char* bad : {"T=h;header=Bad Name", "T=h;header=Host", "T=h;header=Proxy-Authorization",
                          "T=h;template=Bearer", "T=h;template={}{}", "T=h;colour=red", "T=h;header=A;header=B",
                          "T=h;header="}) {
    auto r = ParseEgressCredentialSpec(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  Options o;
  o.argv = {"/bin/true"};
  o.net = NetMode::kProxy;
  o.egress_credentials = {{"A", "api.example.com", 80, ""}, {"B", "api.example.com", 80, "", false, "authorization"}};
  EXPECT_NE(Validate(o).message().find("already goes in header authorization"), std::string::npos) << Validate(o).message();
  o.egress_credentials[1].header = "X-Api-Key";
  EXPECT_TRUE(Validate(o).ok()) << Validate(o).message();
  Options profile;
  ASSERT_TRUE(LoadProfileText("credentials:\n  - { env: T, host: h, header: X-Api-Key, template: \"k {}\" }\n", "p.yaml",
                              &profile)
                  .ok());
  EXPECT_EQ(profile.egress_credentials[0].header, "X-Api-Key");
  EXPECT_EQ(profile.egress_credentials[0].value_template, "k {}");
}

TEST(EgressCredentialSpec, ValidateWantsAProxyNetworkAndAVariableTheSandboxDoesNotGetOtherwise) {
  Options o;
  o.argv = {"/bin/true"};
  o.egress_credentials = {{"API_TOKEN", "api.example.com", 80, ""}};
  EXPECT_NE(Validate(o).message().find("needs --net proxy"), std::string::npos);
  o.net = NetMode::kProxy;
  o.allow = {"api.example.com"};
  EXPECT_TRUE(Validate(o).ok()) << Validate(o).message();
  o.env["API_TOKEN"] = "x";
  EXPECT_NE(Validate(o).message().find("the sandbox may only see the placeholder"), std::string::npos);
  o.env.clear();
  o.egress_credentials.push_back(o.egress_credentials[0]);
  EXPECT_NE(Validate(o).message().find("named twice"), std::string::npos);
  o.egress_credentials = {{"9BAD", "api.example.com", 80, ""}};
  EXPECT_NE(Validate(o).message().find("expected a variable name"), std::string::npos);
}

TEST(EgressCredentialSpec, ProfileKeyReadsEntriesAndRefusesMistakesByLine) {
  Options o;
  Status st = LoadProfileText(
      "allow: [api.example.com]\ncredentials:\n  - { env: API_TOKEN, host: api.example.com, port: 8080, secret: t }\n",
      "p.yaml", &o);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(o.egress_credentials.size(), 1u);
  EXPECT_EQ(o.egress_credentials[0], (EgressCredentialSpec{"API_TOKEN", "api.example.com", 8080, "t"}));
  Options bad;
  EXPECT_NE(LoadProfileText("credentials:\n  - { env: T, port: 80 }\n", "p.yaml", &bad).message().find(
                "p.yaml:2: credential T needs 'host'"),
            std::string::npos);
  EXPECT_NE(LoadProfileText("credentials:\n  - { env: T, host: h, port: 70000 }\n", "p.yaml", &bad).message().find(
                "'credentials.port' must be 1 to 65535"),
            std::string::npos);
  EXPECT_NE(LoadProfileText("credentials: API_TOKEN\n", "p.yaml", &bad).message().find("must be a list"),
            std::string::npos);
  EXPECT_TRUE(bad.egress_credentials.empty());
  Options tls;
  ASSERT_TRUE(LoadProfileText("allow: [api.example.com:443]\ncredentials:\n  - { env: T, host: api.example.com, tls: true, secret: s }\n",
                              "p.yaml", &tls)
                  .ok());
  EXPECT_EQ(tls.egress_credentials[0], (EgressCredentialSpec{"T", "api.example.com", 443, "s", true}));
  EXPECT_NE(LoadProfileText("credentials:\n  - { env: T, host: h, tls: yes-please }\n", "p.yaml", &bad).message().find(
                "'credentials.tls' must be true or false"),
            std::string::npos);
}

TEST(EgressCredentialSpec, HttpsFormSelectsTlsAndPort443AndNeedsAName) {
  auto a = ParseEgressCredentialSpec("T=https://api.example.com");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(*a, (EgressCredentialSpec{"T", "api.example.com", 443, "", true}));
  auto b = ParseEgressCredentialSpec("T=https://api.example.com:8443/");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->port, 8443);
  EXPECT_EQ(EgressCredentialArg(*b), "T=https://api.example.com:8443");
  EXPECT_EQ(*ParseEgressCredentialSpec(EgressCredentialArg(*b)), *b);  // the launcher's round trip
  auto ftp = ParseEgressCredentialSpec("T=ftp://api.example.com");
  ASSERT_FALSE(ftp.ok());
  EXPECT_NE(ftp.status().message().find("the only scheme is https://"), std::string::npos);
  Options o;
  o.argv = {"/bin/true"};
  o.net = NetMode::kProxy;
  o.allow = {"10.1.2.3:443"};
  o.egress_credentials = {*ParseEgressCredentialSpec("T=https://10.1.2.3")};
  EXPECT_NE(Validate(o).message().find("needs a host name"), std::string::npos) << Validate(o).message();
}

}  // namespace
}  // namespace warden::sandbox
