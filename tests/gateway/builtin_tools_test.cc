// sandbox__exec: argument checking, and real runs in a real sandbox (files in and out, the
// interpreters, cancellation, and the attacks on output collection).
#include "gateway/builtins/builtin_tools.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "gateway/builtins/exec_pool.h"
#include "gateway/builtins/web_fetch.h"
#include "testing.h"

namespace warden::gateway {
namespace {

// builtin_tools_pooled_test.cc compiles this file again with a pre-warmed pool (ExecPool) for
// the default profile, as `warden serve` runs sandbox__exec: every test then also runs pooled.
#ifdef WARDEN_EXEC_POOLED
std::unique_ptr<ExecPool>& PoolSlot() {
  static std::unique_ptr<ExecPool> pool;
  return pool;
}
const ExecPool* ExecPoolForTests() { return PoolSlot().get(); }
class ExecPoolEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    PoolSlot() = testing::StartReadyExecPool(DefaultExecProfile(), 2);
    ASSERT_NE(PoolSlot(), nullptr);
  }
  void TearDown() override { PoolSlot().reset(); }
};
[[maybe_unused]] ::testing::Environment* const kPoolEnvironment =
    ::testing::AddGlobalTestEnvironment(new ExecPoolEnvironment);
#else
const ExecPool* ExecPoolForTests() { return nullptr; }
#endif

using nlohmann::json;

// Checks `value` against the subset of JSON Schema the tools' outputSchemas use (type, properties,
// required, items, enum); returns "" or what does not conform.
std::string SchemaViolation(const json& value, const json& schema, const std::string& where) {
  std::string type = schema.value("type", "");
  bool ok = type.empty() || (type == "object" && value.is_object()) ||
            (type == "array" && value.is_array()) || (type == "string" && value.is_string()) ||
            (type == "boolean" && value.is_boolean()) ||
            (type == "integer" && value.is_number_integer()) ||
            (type == "number" && value.is_number());
  if (!ok) return where + " is not " + type + ": " + value.dump().substr(0, 80);
  if (schema.contains("enum") &&
      std::find(schema["enum"].begin(), schema["enum"].end(), value) == schema["enum"].end())
    return where + " is not in the enum";
  if (value.is_object() && schema.contains("required")) {
    for (const json& key : schema["required"]) {
      if (!value.contains(key.get<std::string>()))
        return where + "." + key.get<std::string>() + " is missing";
    }
  }
  if (value.is_object() && schema.contains("properties")) {
    for (const auto& [key, sub] : schema["properties"].items()) {
      if (!value.contains(key)) continue;
      std::string v = SchemaViolation(value[key], sub, where + "." + key);
      if (!v.empty()) return v;
    }
  }
  if (value.is_array() && schema.contains("items")) {
    for (size_t i = 0; i < value.size(); ++i) {
      std::string v =
          SchemaViolation(value[i], schema["items"], where + "[" + std::to_string(i) + "]");
      if (!v.empty()) return v;
    }
  }
  return "";
}

void ExpectConforms(const CallResult& r) {
  EXPECT_EQ(SchemaViolation(r.value["structuredContent"],
                            SandboxExecDefinition()["outputSchema"], "structuredContent"),
            "");
}

TEST(ExecArguments, CommandRunsThroughShC) {
  auto r = ParseExecArguments({{"command", "echo hi"}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->argv, (std::vector<std::string>{"/bin/sh", "-c", "echo hi"}));
  EXPECT_FALSE(r->input.has_value());
}

TEST(ExecArguments, ArgvStdinAndTimeout) {
  auto r = ParseExecArguments({{"argv", {"cat", "-"}}, {"stdin", "x"}, {"timeout_s", 1.5}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->argv, (std::vector<std::string>{"cat", "-"}));
  EXPECT_EQ(r->input, "x");
  EXPECT_EQ(r->timeout_ms, 1500u);
}

TEST(ExecArguments, RefusesWhatTheSchemaRefuses) {
  for (const json& bad :
       {json::array(), json::object(), json{{"command", ""}}, json{{"command", 5}},
        json{{"argv", json::array()}}, json{{"argv", {"ls", 3}}}, json{{"argv", {""}}},
        json{{"command", "ls"}, {"argv", {"ls"}}}, json{{"command", "ls"}, {"stdin", 1}},
        json{{"command", "ls"}, {"timeout_s", 0}}, json{{"command", "ls"}, {"timeout_s", -1}},
        json{{"command", "ls"}, {"timeout_s", "5"}}, json{{"command", "ls"}, {"env", "X=1"}}}) {
    EXPECT_FALSE(ParseExecArguments(bad).ok()) << bad.dump();
  }
}

TEST(ExecDefinition, DeclaresTheInputSchema) {
  json def = SandboxExecDefinition();
  EXPECT_EQ(def["name"], "sandbox__exec");
  EXPECT_EQ(def["inputSchema"]["type"], "object");
  EXPECT_EQ(def["inputSchema"]["additionalProperties"], false);
  for (const char* key :
       {"command", "argv", "stdin", "timeout_s", "files", "outputs", "language", "code"})
    EXPECT_TRUE(def["inputSchema"]["properties"].contains(key)) << key;
  EXPECT_EQ(def["outputSchema"]["type"], "object");
  EXPECT_EQ(def["outputSchema"]["required"].size(), 7u);
}

CallResult Exec(const json& arguments, sandbox::Options profile = DefaultExecProfile()) {
  auto request = ParseExecArguments(arguments);
  EXPECT_TRUE(request.ok()) << request.status().message();
  CallResult r = RunSandboxExec(*request, profile, nullptr, ExecPoolForTests());
  // Pooled exactly when the pool holds the profile; cold otherwise (a profile of its own).
  const bool pooled = ExecPoolForTests() != nullptr && ExecPoolForTests()->Serves(profile);
  EXPECT_EQ(r.execution, pooled ? "pre-warmed pool" : "") << arguments.dump();
  return r;
}

TEST(SandboxExec, EchoReturnsItsOutputAsTextAndStructuredContent) {
  CallResult r = Exec({{"command", "echo hi"}});
  const json& s = r.value["structuredContent"];
  ASSERT_EQ(s["reason"], "exited") << r.value.dump();
  EXPECT_EQ(s["exit_code"], 0);
  EXPECT_EQ(s["stdout"], "hi\n");
  EXPECT_EQ(s["stderr"], "");
  EXPECT_TRUE(s["wall_ms"].is_number());
  EXPECT_FALSE(r.is_error);
  EXPECT_EQ(r.value["isError"], false);
  EXPECT_EQ(r.value["content"][0]["type"], "text");
  EXPECT_EQ(r.value["content"][0]["text"], "hi\n");
}

TEST(SandboxExec, StdinReachesTheCommand) {
  CallResult r = Exec({{"argv", {"cat"}}, {"stdin", "from the agent"}});
  EXPECT_EQ(r.value["structuredContent"]["stdout"], "from the agent") << r.value.dump();
}

TEST(SandboxExec, NoStdinMeansEmptyInputNotTheGatewaysOwnStdin) {
  CallResult r = Exec({{"command", "wc -c"}});
  EXPECT_EQ(r.value["structuredContent"]["stdout"], "0\n") << r.value.dump();
}

TEST(SandboxExec, NonZeroExitIsAnErrorResultWithStderr) {
  CallResult r = Exec({{"command", "echo oops >&2; exit 3"}});
  EXPECT_TRUE(r.is_error);
  EXPECT_EQ(r.value["isError"], true);
  EXPECT_EQ(r.value["structuredContent"]["exit_code"], 3);
  EXPECT_EQ(r.value["structuredContent"]["stderr"], "oops\n");
  EXPECT_NE(r.Text().find("[exit code 3"), std::string::npos) << r.Text();
}

TEST(SandboxExec, TimeoutShortensTheProfilesLimit) {
  CallResult r = Exec({{"command", "sleep 10"}, {"timeout_s", 0.3}});
  EXPECT_EQ(r.value["structuredContent"]["reason"], "timeout") << r.value.dump();
  EXPECT_EQ(r.value["structuredContent"]["exit_code"], 124);
  EXPECT_LT(r.value["structuredContent"]["wall_ms"].get<uint64_t>(), 5000u);
}

TEST(SandboxExec, TimeoutCannotLengthenTheProfilesLimit) {
  sandbox::Options profile = DefaultExecProfile();
  profile.timeout_ms = 300;
  CallResult r = Exec({{"command", "sleep 10"}, {"timeout_s", 60}}, profile);
  EXPECT_EQ(r.value["structuredContent"]["reason"], "timeout") << r.value.dump();
}

TEST(SandboxExec, OutputIsCutAtTheCap) {
  sandbox::Options profile = DefaultExecProfile();
  profile.output_limit_bytes = 1000;
  CallResult r = Exec({{"command", "yes a | head -c 5000"}}, profile);
  const json& s = r.value["structuredContent"];
  EXPECT_EQ(s["stdout"].get<std::string>().size(), 1000u) << r.value.dump().substr(0, 300);
  EXPECT_EQ(s["stdout_truncated"], true);
}

TEST(SandboxExec, HasNoNetwork) {
  CallResult r = Exec({{"command", "cat /proc/net/dev | grep -c ':'"}});
  // Only loopback exists in the sandbox's network namespace.
  EXPECT_EQ(r.value["structuredContent"]["stdout"], "1\n") << r.value.dump();
}

TEST(BuiltinToolSet, HoldsSandboxExecUnderTheSandboxServer) {
  BuiltinTools tools = BuiltinTools::Default();
  const BuiltinTool* t = tools.Find("sandbox__exec");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->server, "sandbox");
  EXPECT_FALSE(t->run(json{{"nope", 1}}, ToolEnv{.profile = DefaultExecProfile()}).ok());
}

TEST(BuiltinToolSet, HoldsWebFetchUnderTheWebServerDeniedWithoutAPolicy) {
  BuiltinTools tools = BuiltinTools::Default();
  const BuiltinTool* t = tools.Find("web__fetch");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->server, "web");
  EXPECT_EQ(t->definition["name"], "web__fetch");
  EXPECT_FALSE(t->run(json{{"url", 5}}, ToolEnv{}).ok());
  // No policy in force: no egress allow-list, so every host is refused (as a tool result).
  auto r = t->run(json{{"url", "http://example.com/"}}, ToolEnv{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->is_error);
  EXPECT_NE(r->Text().find("no egress allow-list"), std::string::npos) << r->Text();
  EXPECT_EQ(r->value["structuredContent"]["egress"][0]["allowed"], false);
}

TEST(BuiltinToolSet, WebFetchTakesTheAllowListFromThePolicy) {
  BuiltinTools tools = BuiltinTools::Default();
  policy::Policy p;
  p.egress_allow = {"docs.example.org"};
  ToolEnv env{.policy = &p};
  auto r = tools.Find("web__fetch")->run(json{{"url", "http://other.example.org/"}}, env);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->is_error);
  EXPECT_NE(r->Text().find("other.example.org is not on the allow-list"), std::string::npos)
      << r->Text();
}

// ---- files, outputs, language ----

TEST(ExecArguments, FilesOutputsAndLanguage) {
  auto r = ParseExecArguments({{"language", "python"},
                               {"code", "print(1)"},
                               {"files", {{"data/in.txt", "x"}}},
                               {"outputs", {"out/*.txt", "result.json"}}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->argv, (std::vector<std::string>{"/usr/bin/python3", "main.py"}));
  EXPECT_EQ(r->files.at("main.py"), "print(1)");
  EXPECT_EQ(r->files.at("data/in.txt"), "x");
  EXPECT_EQ(r->outputs, (std::vector<std::string>{"out/*.txt", "result.json"}));
  EXPECT_TRUE(r->wants_workspace());
  EXPECT_FALSE(ParseExecArguments({{"command", "ls"}})->wants_workspace());
}

TEST(ExecArguments, RefusesUnsafeOrOversizedFilesNamingTheMember) {
  std::string big(kExecMaxInputBytes / 2 + 1, 'a');
  json many = json::object();
  for (int i = 0; i <= 64; ++i) many["f" + std::to_string(i)] = "";
  struct Case {
    json files;
    const char* says;
  } cases[] = {
      {{{"../escape", "x"}}, "must not contain .."},
      {{{"a/../../escape", "x"}}, "must not contain .."},
      {{{"/etc/passwd", "x"}}, "must be relative"},
      {{{std::string("a\0b", 3), "x"}}, "NUL"},
      {{{"a//b", "x"}}, "empty component"},
      {{{"./a", "x"}}, "must not contain ."},
      {{{"", "x"}}, "empty"},
      {{{"a", 5}}, "must be a string"},
      {json::array(), "files must be an object"},
      {many, "more than 64 files"},
      {{{"a", big}, {"b", big}}, "over the 8 MiB limit"},
  };
  for (const Case& c : cases) {
    auto r = ParseExecArguments({{"command", "ls"}, {"files", c.files}});
    ASSERT_FALSE(r.ok()) << c.files.dump().substr(0, 80);
    EXPECT_NE(r.status().message().find("files"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().message();
  }
}

TEST(ExecArguments, RefusesBadOutputsAndLanguageCombinations) {
  json seventeen = json::array();
  for (int i = 0; i < 17; ++i) seventeen.push_back("f" + std::to_string(i));
  for (const json& bad : {
           json{{"command", "ls"}, {"outputs", "out.txt"}},
           json{{"command", "ls"}, {"outputs", {"../x"}}},
           json{{"command", "ls"}, {"outputs", {"/etc/shadow"}}},
           json{{"command", "ls"}, {"outputs", {1}}},
           json{{"command", "ls"}, {"outputs", seventeen}},
           json{{"language", "ruby"}, {"code", "puts 1"}},
           json{{"language", "python"}},
           json{{"code", "print(1)"}},
           json{{"language", "sh"}, {"code", "echo"}, {"command", "ls"}},
           json{{"language", "sh"}, {"code", "echo"}, {"files", {{"main.sh", "x"}}}},
           json{{"language", "python"}, {"code", 3}},
       }) {
    EXPECT_FALSE(ParseExecArguments(bad).ok()) << bad.dump();
  }
}

TEST(SandboxExec, FilesAreWrittenIntoTheWorkingDirectory) {
  CallResult r = Exec({{"command", "pwd; cat a.txt sub/dir/b.txt"},
                       {"files", {{"a.txt", "first\n"}, {"sub/dir/b.txt", "second\n"}}}});
  EXPECT_EQ(r.value["structuredContent"]["stdout"], "/work\nfirst\nsecond\n")
      << r.value.dump();
  ExpectConforms(r);
}

TEST(SandboxExec, RunsPythonShAndNodeCode) {
  struct {
    const char* language;
    const char* code;
  } cases[] = {{"python", "import sys\nprint('py', sys.version_info[0])"},
               {"sh", "echo sh $0"},
               {"node", "console.log('node', typeof process.version)"}};
  const char* expected[] = {"py 3\n", "sh main.sh\n", "node string\n"};
  for (size_t i = 0; i < 3; ++i) {
    CallResult r = Exec({{"language", cases[i].language}, {"code", cases[i].code}});
    EXPECT_EQ(r.value["structuredContent"]["stdout"], expected[i]) << r.value.dump();
    EXPECT_FALSE(r.is_error) << cases[i].language;
  }
}

TEST(SandboxExec, OutputsAreCollectedByPathAndGlob) {
  CallResult r = Exec({{"command",
                        "mkdir -p out && echo one > out/1.txt && echo two > out/2.txt && "
                        "echo skip > out/3.log && printf '\\377\\000\\001' > blob.bin && "
                        "echo '{\"k\":1}' > result.json"},
                       {"outputs", {"out/*.txt", "result.json", "blob.bin", "absent.txt"}}});
  const json& s = r.value["structuredContent"];
  ASSERT_EQ(s["exit_code"], 0) << r.value.dump();
  ASSERT_EQ(s["outputs"].size(), 4u) << s.dump();
  EXPECT_EQ(s["outputs"][0]["path"], "out/1.txt");
  EXPECT_EQ(s["outputs"][0]["content"], "one\n");
  EXPECT_EQ(s["outputs"][0]["encoding"], "utf-8");
  EXPECT_EQ(s["outputs"][1]["path"], "out/2.txt");
  EXPECT_EQ(s["outputs"][2]["content"], "{\"k\":1}\n");
  EXPECT_EQ(s["outputs"][3]["path"], "blob.bin");
  EXPECT_EQ(s["outputs"][3]["encoding"], "base64");
  EXPECT_EQ(s["outputs"][3]["content"], "/wAB");
  EXPECT_EQ(s["outputs"][3]["bytes"], 3);
  ASSERT_EQ(s["outputs_skipped"].size(), 1u) << s.dump();
  EXPECT_EQ(s["outputs_skipped"][0]["path"], "absent.txt");
  EXPECT_EQ(s["outputs_skipped"][0]["reason"], "not found");
  EXPECT_NE(r.Text().find("[output out/1.txt, 4 bytes]\none\n"), std::string::npos) << r.Text();
  ExpectConforms(r);
}

TEST(SandboxExec, OutputFilesAreCutAtOneMebibyteAndSixteenFiles) {
  CallResult r = Exec({{"command",
                        "head -c 1500000 /dev/zero | tr '\\0' a > big.txt; "
                        "for i in $(seq 10 29); do echo $i > n$i.txt; done"},
                       {"outputs", {"big.txt", "n*.txt"}}});
  const json& s = r.value["structuredContent"];
  ASSERT_EQ(s["outputs"].size(), kExecMaxOutputFiles) << r.value.dump().substr(0, 400);
  EXPECT_EQ(s["outputs"][0]["content"].get<std::string>().size(), kExecOutputFileCapBytes);
  EXPECT_EQ(s["outputs"][0]["truncated"], true);
  EXPECT_EQ(s["outputs"][0]["bytes"], 1500000);
  // big.txt and n10..n24 fit; n25..n29 are reported as over the limit.
  EXPECT_EQ(s["outputs"][15]["path"], "n24.txt");
  ASSERT_EQ(s["outputs_skipped"].size(), 5u) << s["outputs_skipped"].dump();
  EXPECT_NE(s["outputs_skipped"][0]["reason"].get<std::string>().find("more than 16"),
            std::string::npos);
}

// The attack: the command plants a symlink at an output path hoping the gateway (root) reads
// the host's /etc/shadow through it.
TEST(SandboxExecAttack, SymlinkPlantedAtAnOutputPathIsNotFollowed) {
  CallResult r = Exec({{"command",
                        "ln -s /etc/shadow out.txt && ln -s /etc linked && "
                        "ln -s /etc/passwd also.txt && mkdir d && ln -s /etc/hostname d/x.txt"},
                       {"outputs", {"out.txt", "linked/shadow", "linked/*", "*.txt", "d/*.txt"}}});
  const json& s = r.value["structuredContent"];
  ASSERT_EQ(s["exit_code"], 0) << r.value.dump();
  EXPECT_EQ(s["outputs"].size(), 0u) << s.dump();
  std::string dump = r.value.dump();
  EXPECT_EQ(dump.find("root:"), std::string::npos) << "host file content leaked: " << dump;
  ASSERT_FALSE(s["outputs_skipped"].empty());
  for (const json& skipped : s["outputs_skipped"])
    EXPECT_EQ(skipped["reason"], "a symbolic link (not followed)") << skipped.dump();
}

// Sets $TMPDIR for the life of the object.
class ScopedTmpdir {
 public:
  explicit ScopedTmpdir(const std::string& path) {
    const char* old = getenv("TMPDIR");
    if (old) saved_ = old;
    setenv("TMPDIR", path.c_str(), 1);
  }
  ~ScopedTmpdir() {
    if (saved_)
      setenv("TMPDIR", saved_->c_str(), 1);
    else
      unsetenv("TMPDIR");
  }

 private:
  std::optional<std::string> saved_;
};

TEST(SandboxExec, WorkspaceIsPrivateAndRemovedAfterTheCall) {
  testing::TempDir tmp;
  // As root the sandbox's user is 65534, which must be able to search its way to the workspace.
  chmod(tmp.path().c_str(), 0711);
  ScopedTmpdir scoped(tmp.path());
  // The command leaves a deep tree, a read-only directory and a link to the outside behind.
  CallResult r = Exec({{"command",
                        "mkdir -p a/b/c && echo x > a/b/c/f && chmod 500 a/b/c && chmod 500 a && "
                        "ln -s / root && stat -c %a /work"},
                       {"files", {{"keep.txt", "k"}}},
                       {"outputs", {"*.txt", "a/*/c/*"}}});
  EXPECT_EQ(r.value["structuredContent"]["stdout"], "700\n") << r.value.dump();
  EXPECT_EQ(r.value["structuredContent"]["outputs"].size(), 2u) << r.value.dump();
  size_t left = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path())) {
    ++left;
    ADD_FAILURE() << "left behind: " << e.path();
  }
  EXPECT_EQ(left, 0u);
  EXPECT_TRUE(std::filesystem::exists("/usr/bin")) << "removal followed the planted link";
}

TEST(SandboxExec, TmpdirTheSandboxUserCannotReachIsASetupErrorSayingSo) {
  if (geteuid() != 0) GTEST_SKIP() << "only as root is the sandbox's user someone else";
  if (ExecPoolForTests())
    GTEST_SKIP() << "a pooled workspace is made by the pool when it starts, not under the call's "
                    "TMPDIR (pool_workspace_test covers where it goes)";
  testing::TempDir tmp;  // 0700, root's
  ScopedTmpdir scoped(tmp.path());
  CallResult r = Exec({{"command", "true"}, {"files", {{"a", "b"}}}});
  EXPECT_EQ(r.value["structuredContent"]["reason"], "setup_error");
  EXPECT_NE(r.Text().find("is not searchable by the sandbox's user"), std::string::npos) << r.Text();
}

TEST(SandboxExec, ProtectedPathsDoNotApplyInTheFreshWorkspace) {
  ASSERT_FALSE(DefaultExecProfile().protect.empty());
  CallResult r = Exec({{"command", "echo more >> .git/config && cat .git/config"},
                       {"files", {{".git/config", "start\n"}}}});
  EXPECT_EQ(r.value["structuredContent"]["stdout"], "start\nmore\n") << r.value.dump();
}

TEST(SandboxExec, NoWorkspaceWithoutFilesOutputsOrLanguage) {
  CallResult r = Exec({{"command", "pwd; ls -A /work 2>/dev/null && echo has-work || echo no-work"}});
  // A pooled sandbox always has its (empty) workspace: it was bound when the sandbox was built.
  EXPECT_EQ(r.value["structuredContent"]["stdout"],
            ExecPoolForTests() ? "/tmp\nhas-work\n" : "/tmp\nno-work\n")
      << r.value.dump();
  EXPECT_FALSE(r.value["structuredContent"].contains("outputs"));
  ExpectConforms(r);
}

// ---- cancellation ----

// Whether a process whose argv is exactly `argv` (NUL-separated) exists on the host.
bool ProcessWithArgvExists(const std::string& argv) {
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::ifstream in(e.path() / "cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline == argv) return true;
  }
  return false;
}

TEST(SandboxExecCancel, CancelFromAnotherThreadKillsTheSandboxAtOnce) {
  auto cancel = std::make_shared<CancelToken>();
  auto request = ParseExecArguments({{"argv", {"sleep", "30.4171"}}});
  ASSERT_TRUE(request.ok());
  std::thread canceller([cancel] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    cancel->Cancel("client sent notifications/cancelled");
  });
  auto start = std::chrono::steady_clock::now();
  CallResult r = RunSandboxExec(*request, DefaultExecProfile(), cancel, ExecPoolForTests());
  auto took = std::chrono::steady_clock::now() - start;
  canceller.join();
  const json& s = r.value["structuredContent"];
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_EQ(s["reason"], "signaled") << r.value.dump();
  EXPECT_EQ(s["exit_code"], 137);
  EXPECT_NE(s["error"].get<std::string>().find("client sent notifications/cancelled"),
            std::string::npos);
  EXPECT_TRUE(r.is_error);
  ExpectConforms(r);
  // The sandbox's tree dies with its launcher (the sandbox's init has PDEATHSIG).
  std::string argv(
      "sleep\0"
      "30.4171\0",
      14);
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {
    gone = !ProcessWithArgvExists(argv);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(gone) << "the sandboxed sleep outlived the cancel";
}

TEST(SandboxExecCancel, AlreadyCancelledCallDoesNotRun) {
  auto cancel = std::make_shared<CancelToken>();
  cancel->Cancel("kill switch");
  auto request = ParseExecArguments({{"command", "sleep 5"}, {"files", {{"f", ""}}}});
  auto start = std::chrono::steady_clock::now();
  CallResult r = RunSandboxExec(*request, DefaultExecProfile(), cancel, ExecPoolForTests());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(r.value["structuredContent"]["reason"], "signaled") << r.value.dump();
  EXPECT_EQ(r.value["structuredContent"]["wall_ms"], 0);
  EXPECT_NE(r.Text().find("kill switch"), std::string::npos) << r.Text();
}

}  // namespace
}  // namespace warden::gateway
