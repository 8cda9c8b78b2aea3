// sandbox__exec: argument checking, and real runs in a real sandbox.
#include "gateway/builtin_tools.h"

#include <gtest/gtest.h>

namespace warden::gateway {
namespace {

using nlohmann::json;

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
  for (const char* key : {"command", "argv", "stdin", "timeout_s"})
    EXPECT_TRUE(def["inputSchema"]["properties"].contains(key)) << key;
}

ToolResult Exec(const json& arguments, sandbox::Options profile = DefaultExecProfile()) {
  auto request = ParseExecArguments(arguments);
  EXPECT_TRUE(request.ok()) << request.status().message();
  return RunSandboxExec(*request, profile);
}

TEST(SandboxExec, EchoReturnsItsOutputAsTextAndStructuredContent) {
  ToolResult r = Exec({{"command", "echo hi"}});
  const json& s = r.mcp_result["structuredContent"];
  ASSERT_EQ(s["reason"], "exited") << r.mcp_result.dump();
  EXPECT_EQ(s["exit_code"], 0);
  EXPECT_EQ(s["stdout"], "hi\n");
  EXPECT_EQ(s["stderr"], "");
  EXPECT_TRUE(s["wall_ms"].is_number());
  EXPECT_FALSE(r.is_error);
  EXPECT_EQ(r.mcp_result["isError"], false);
  EXPECT_EQ(r.mcp_result["content"][0]["type"], "text");
  EXPECT_EQ(r.mcp_result["content"][0]["text"], "hi\n");
}

TEST(SandboxExec, StdinReachesTheCommand) {
  ToolResult r = Exec({{"argv", {"cat"}}, {"stdin", "from the agent"}});
  EXPECT_EQ(r.mcp_result["structuredContent"]["stdout"], "from the agent") << r.mcp_result.dump();
}

TEST(SandboxExec, NoStdinMeansEmptyInputNotTheGatewaysOwnStdin) {
  ToolResult r = Exec({{"command", "wc -c"}});
  EXPECT_EQ(r.mcp_result["structuredContent"]["stdout"], "0\n") << r.mcp_result.dump();
}

TEST(SandboxExec, NonZeroExitIsAnErrorResultWithStderr) {
  ToolResult r = Exec({{"command", "echo oops >&2; exit 3"}});
  EXPECT_TRUE(r.is_error);
  EXPECT_EQ(r.mcp_result["isError"], true);
  EXPECT_EQ(r.mcp_result["structuredContent"]["exit_code"], 3);
  EXPECT_EQ(r.mcp_result["structuredContent"]["stderr"], "oops\n");
  EXPECT_NE(r.text.find("[exit code 3"), std::string::npos) << r.text;
}

TEST(SandboxExec, TimeoutShortensTheProfilesLimit) {
  ToolResult r = Exec({{"command", "sleep 10"}, {"timeout_s", 0.3}});
  EXPECT_EQ(r.mcp_result["structuredContent"]["reason"], "timeout") << r.mcp_result.dump();
  EXPECT_EQ(r.mcp_result["structuredContent"]["exit_code"], 124);
  EXPECT_LT(r.mcp_result["structuredContent"]["wall_ms"].get<uint64_t>(), 5000u);
}

TEST(SandboxExec, TimeoutCannotLengthenTheProfilesLimit) {
  sandbox::Options profile = DefaultExecProfile();
  profile.timeout_ms = 300;
  ToolResult r = Exec({{"command", "sleep 10"}, {"timeout_s", 60}}, profile);
  EXPECT_EQ(r.mcp_result["structuredContent"]["reason"], "timeout") << r.mcp_result.dump();
}

TEST(SandboxExec, OutputIsCutAtTheCap) {
  sandbox::Options profile = DefaultExecProfile();
  profile.output_limit_bytes = 1000;
  ToolResult r = Exec({{"command", "yes a | head -c 5000"}}, profile);
  const json& s = r.mcp_result["structuredContent"];
  EXPECT_EQ(s["stdout"].get<std::string>().size(), 1000u) << r.mcp_result.dump().substr(0, 300);
  EXPECT_EQ(s["stdout_truncated"], true);
}

TEST(SandboxExec, HasNoNetwork) {
  ToolResult r = Exec({{"command", "cat /proc/net/dev | grep -c ':'"}});
  // Only loopback exists in the sandbox's network namespace.
  EXPECT_EQ(r.mcp_result["structuredContent"]["stdout"], "1\n") << r.mcp_result.dump();
}

TEST(BuiltinToolSet, HoldsSandboxExecUnderTheSandboxServer) {
  BuiltinTools tools = BuiltinTools::Default();
  const BuiltinTool* t = tools.Find("sandbox__exec");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->server, "sandbox");
  EXPECT_EQ(tools.Find("web__fetch"), nullptr);
  EXPECT_FALSE(t->run(json{{"nope", 1}}, DefaultExecProfile()).ok());
}

}  // namespace
}  // namespace warden::gateway
