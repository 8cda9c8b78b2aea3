// `warden policy check` and `warden policy test`, run as functions on the example files.
#include "cli/policy_command.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace warden::cli {
namespace {

const std::string kExamples = WARDEN_POLICY_EXAMPLES;

std::string TempFile(const std::string& text) {
  char path[] = "/tmp/policy-cli-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << text;
  return path;
}

TEST(PolicyCheckTest, ExamplesAreValidAndRulesPrintInOrder) {
  for (const char* name : {"quickstart.yaml", "multi_tenant.yaml"}) {
    std::ostringstream out, err;
    EXPECT_EQ(PolicyCheck(kExamples + "/" + name, out, err), 0) << err.str();
    EXPECT_EQ(err.str(), "");
    const std::string text = out.str();
    size_t first = text.find("tools[0] "), second = text.find("tools[1] "),
           fallback = text.find("defaults.unknown_tool");
    ASSERT_NE(first, std::string::npos) << text;
    EXPECT_LT(first, second);
    EXPECT_LT(second, fallback);
    EXPECT_NE(text.find("is valid"), std::string::npos);
  }
}

TEST(PolicyCheckTest, MultiTenantSummaryNamesWhatMatters) {
  std::ostringstream out, err;
  ASSERT_EQ(PolicyCheck(kExamples + "/multi_tenant.yaml", out, err), 0) << err.str();
  const std::string text = out.str();
  EXPECT_NE(text.find("tenant acme"), std::string::npos);
  EXPECT_NE(text.find("user bob (approver)"), std::string::npos);
  EXPECT_NE(text.find("agent alice-coder acts for alice, profile coder, 1 key"), std::string::npos);
  EXPECT_NE(text.find("credentials env MAIL_TOKEN"), std::string::npos);
  EXPECT_NE(text.find("-> risk high, ask (by risk), access write, labels external_send"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("undo mail__recall_email"), std::string::npos);
}

TEST(PolicyCheckTest, ShadowedRulesAreFlagged) {
  std::string file = TempFile(
      "version: 1\ntools:\n  - { match: { tool: \"mail__*\" }, risk: low }\n  - { match: { tool: "
      "mail__send }, effect: deny }\n");
  std::ostringstream out, err;
  EXPECT_EQ(PolicyCheck(file, out, err), 0);
  EXPECT_NE(out.str().find("(never decides: tools[0] matches every call this one does)"),
            std::string::npos)
      << out.str();
  std::remove(file.c_str());
}

TEST(PolicyCheckTest, InvalidFileExitsOneWithFileAndLineOnStderr) {
  std::string file = TempFile("version: 1\ntools:\n  - match: { tool: x }\n    labels: [secret]\n");
  std::ostringstream out, err;
  EXPECT_EQ(PolicyCheck(file, out, err), 1);
  EXPECT_EQ(out.str(), "");
  EXPECT_NE(err.str().find(file + ":4: tools[0].labels[0]: expected untrusted_output"),
            std::string::npos)
      << err.str();
  std::remove(file.c_str());
}

TEST(PolicyTestCommandTest, ExampleCasesAllPass) {
  std::ostringstream out, err;
  EXPECT_EQ(PolicyTest(kExamples + "/multi_tenant.yaml", kExamples + "/cases.yaml", out, err), 0)
      << out.str() << err.str();
  const std::string text = out.str();
  EXPECT_EQ(text.find("FAIL"), std::string::npos) << text;
  EXPECT_NE(text.find("ok    mail to anyone else needs a person: ask, risk high, rule tools[3] "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("reason: "), std::string::npos);
  EXPECT_NE(text.find(" 0 not met"), std::string::npos) << text;
}

TEST(PolicyTestCommandTest, UnmetExpectationExitsOneAndSaysWhichField) {
  std::string cases = TempFile(
      "- name: wrong on purpose\n  tenant: acme\n  user: alice\n  tool: mail__read_inbox\n"
      "  expect: { effect: deny, risk: low, rule: \"tools[5]\" }\n"
      "- name: no expectation\n  tenant: acme\n  user: alice\n  tool: mail__read_inbox\n");
  std::ostringstream out, err;
  EXPECT_EQ(PolicyTest(kExamples + "/multi_tenant.yaml", cases, out, err), 1);
  const std::string text = out.str();
  EXPECT_NE(text.find("FAIL  wrong on purpose: allow, risk low"), std::string::npos) << text;
  EXPECT_NE(text.find("effect: expected deny, got allow"), std::string::npos) << text;
  EXPECT_NE(text.find("rule: expected tools[5], got tools[1] "), std::string::npos) << text;
  EXPECT_EQ(text.find("risk: expected"), std::string::npos) << "the risk matched";
  EXPECT_NE(text.find("-     no expectation: allow"), std::string::npos) << text;
  std::remove(cases.c_str());
}

TEST(PolicyTestCommandTest, BadCasesFileIsAnErrorWithItsLine) {
  std::string cases = TempFile("- name: typo\n  tenant: acme\n  tol: x\n");
  std::ostringstream out, err;
  EXPECT_EQ(PolicyTest(kExamples + "/multi_tenant.yaml", cases, out, err), 1);
  EXPECT_NE(err.str().find(cases + ":3: [0]: unknown key 'tol'"), std::string::npos) << err.str();
  std::remove(cases.c_str());
}

TEST(PolicyCommandTest, ParsesBothSubcommands) {
  CLI::App app{"warden"};
  PolicyCommand command(app);
  const char* argv[] = {"warden", "policy", "check", "/nonexistent.yaml"};
  app.parse(4, const_cast<char**>(argv));
  EXPECT_TRUE(command.parsed());
  testing::internal::CaptureStderr();
  EXPECT_EQ(command.Execute(), 1);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("/nonexistent.yaml"), std::string::npos);

  CLI::App app2{"warden"};
  PolicyCommand command2(app2);
  const char* argv2[] = {"warden", "policy", "test", "a.yaml"};
  EXPECT_THROW(app2.parse(4, const_cast<char**>(argv2)), CLI::ParseError) << "CASES is required";
}

}  // namespace
}  // namespace warden::cli
