// Each documented redaction rule (docs/audit.md, "Redaction") and the things that must pass
// through untouched. The sample secrets are made up in the formats the real ones use.
#include "audit/redact.h"

#include <gtest/gtest.h>

namespace warden::audit {
namespace {

using nlohmann::json;

constexpr const char* kR = "[REDACTED]";

TEST(RedactKeys, SecretNamedMembersAreReplacedWhateverTheirCase) {
  json in = {{"password", "hunter2"}, {"Password", "x"},      {"db_passwd", "x"},
             {"client_secret", "x"},  {"X-API-Key", "x"},     {"apiKey", "x"},
             {"api_key", "x"},        {"Authorization", "x"}, {"Set-Cookie", "x"},
             {"private_key", "x"},    {"privateKey", "x"},    {"aws_credentials", "x"},
             {"refresh_token", "x"},  {"passphrase", "x"},    {"SECRET", "x"}};
  json out = Redact(in);
  for (const auto& [key, value] : out.items()) EXPECT_EQ(value, kR) << key;
}

TEST(RedactKeys, ObjectsAndArraysUnderASecretKeyGoWholesale) {
  json out = Redact(
      {{"credentials", {{"user", "u"}, {"pass", "p"}}}, {"tokens", json::array({"a", "b"})}});
  EXPECT_EQ(out["credentials"], kR);
  EXPECT_EQ(out["tokens"], kR);
}

TEST(RedactKeys, NullBooleansAndTokenCountsStay) {
  json in = {
      {"password", nullptr}, {"use_token", true}, {"max_tokens", 1024}, {"pin_password", 1234}};
  json out = Redact(in);
  EXPECT_EQ(out["password"], nullptr);
  EXPECT_EQ(out["use_token"], true);
  EXPECT_EQ(out["max_tokens"], 1024);
  EXPECT_EQ(out["pin_password"], kR);  // a numeric PIN is still a secret
}

TEST(RedactKeys, NameValuePairsNamingASecretHideTheValue) {
  json headers = json::array({{{"name", "Authorization"}, {"value", "opaque-value"}},
                              {{"name", "Accept"}, {"value", "text/html"}},
                              {{"key", "api_key"}, {"value", "opaque"}}});
  json out = Redact(headers);
  EXPECT_EQ(out[0]["value"], kR);
  EXPECT_EQ(out[0]["name"], "Authorization");
  EXPECT_EQ(out[1]["value"], "text/html");
  EXPECT_EQ(out[2]["value"], kR);
}

TEST(RedactKeys, TheArgumentAfterASecretFlagIsHidden) {
  json argv = json::array({"mysql", "--user", "root", "--password", "hunter2", "-e", "select 1"});
  json out = Redact(argv);
  EXPECT_EQ(out[4], kR);
  EXPECT_EQ(out[2], "root");
  EXPECT_EQ(out[6], "select 1");
}

TEST(RedactKeys, NestedStructuresAreWalked) {
  json out = Redact({{"a", {{"b", json::array({{{"token", "t"}}, "ok"})}}}});
  EXPECT_EQ(out["a"]["b"][0]["token"], kR);
  EXPECT_EQ(out["a"]["b"][1], "ok");
}

struct TextCase {
  const char* name;
  std::string input;
  std::string expected;
};

class RedactTextRule : public ::testing::TestWithParam<TextCase> {};

TEST_P(RedactTextRule, ReplacesTheSecret) {
  EXPECT_EQ(RedactText(GetParam().input), GetParam().expected);
  // Also inside an arguments object, under a harmless key.
  EXPECT_EQ(Redact(json{{"note", GetParam().input}})["note"], GetParam().expected);
}

const std::string kJwt =
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";
const std::string kPem =
    "-----BEGIN RSA PRIVATE "
    "KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\n"
    "aFDrBz9vFqU4yQ==\n-----END RSA PRIVATE KEY-----";

INSTANTIATE_TEST_SUITE_P(
    EachRule, RedactTextRule,
    ::testing::Values(
        TextCase{"bearer", "Authorization: Bearer abc123def456ghi789", "Authorization: [REDACTED]"},
        TextCase{"bearer_in_curl", "curl -H 'Authorization: Bearer abc123def456' https://x.test",
                 "curl -H 'Authorization: [REDACTED]' https://x.test"},
        TextCase{"bearer_alone", "bearer abc123def456ghi", "bearer [REDACTED]"},
        TextCase{"basic", "Basic dXNlcjpwYXNzd29yZA==", "Basic [REDACTED]"},
        TextCase{"openai", "key sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123", "key [REDACTED]"},
        TextCase{"anthropic", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345", "[REDACTED]"},
        TextCase{"stripe", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "[REDACTED]"},
        TextCase{"aws_access_key", "AKIAIOSFODNN7EXAMPLE is the key", "[REDACTED] is the key"},
        TextCase{"aws_session_key", "ASIAY34FZKBOKMUTVV7A", "[REDACTED]"},
        TextCase{"github_classic", "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "[REDACTED]"},
        TextCase{"github_oauth", "token gho_16C7e42F292c6912E7710c838347Ae178B4a",
                 "token [REDACTED]"},
        TextCase{"github_fine_grained", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuv",
                 "[REDACTED]"},
        TextCase{"slack_bot", "xoxb-123456789012-1234567890123-AbCdEfGhIjKl", "[REDACTED]"},
        TextCase{"slack_user", "use xoxp-1234-5678-abcdefghij", "use [REDACTED]"},
        TextCase{"google_api_key", "AIzaSyA1234567890abcdefghijklmnopqrstu", "[REDACTED]"},
        TextCase{"jwt", "jwt=" + kJwt, "jwt=[REDACTED]"}, TextCase{"jwt_alone", kJwt, "[REDACTED]"},
        TextCase{"pem_private_key", "key:\n" + kPem + "\ndone", "key:\n[REDACTED]\ndone"},
        TextCase{"pem_cut_off", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
                 "[REDACTED]"},
        TextCase{"url_password", "postgres://app:s3cr3t-pass@db.internal:5432/prod",
                 "postgres://app:[REDACTED]@db.internal:5432/prod"},
        TextCase{"assignment", "export DB_PASSWORD=hunter2 && run",
                 "export DB_PASSWORD=[REDACTED] && run"},
        TextCase{"query_parameter", "https://x.test/cb?code=1&access_token=abc.def&x=2",
                 "https://x.test/cb?code=1&access_token=[REDACTED]&x=2"},
        TextCase{"json_in_text", R"({"api_key": "abc", "n": 1})",
                 R"({"api_key": "[REDACTED]", "n": 1})"},
        TextCase{"flag_equals", "--secret=abc --v", "--secret=[REDACTED] --v"},
        TextCase{"cookie_header", "Cookie: sid=abc; theme=dark\nAccept: */*",
                 "Cookie: [REDACTED]\nAccept: */*"},
        TextCase{"high_entropy_base64", "blob Zx8Qm2Lp9Vt4Rk7Wb1Nc6Hj3Ys5Ga0Ud8Fe2Io4Kq",
                 "blob [REDACTED]"},
        TextCase{"high_entropy_base64url", "id=kR9_xT2-mV7qLp3ZcW8nB4yH6sJ1dF5gA0eU",
                 "id=[REDACTED]"}),
    [](const ::testing::TestParamInfo<TextCase>& info) { return std::string(info.param.name); });

class RedactTextKeeps : public ::testing::TestWithParam<std::string> {};

TEST_P(RedactTextKeeps, NonSecretsAreUntouched) { EXPECT_EQ(RedactText(GetParam()), GetParam()); }

INSTANTIATE_TEST_SUITE_P(
    NonSecrets, RedactTextKeeps,
    ::testing::Values(
        "hello world", "", "/home/alice/Projects/warden2/src/audit/sqlite_store.cc",
        "/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6",
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",  // sha256
        "commit 9fceb02d0ae598e95dc970b74767f19372d61af8", "123e4567-e89b-12d3-a456-426614174000",
        "https://github.com/modelcontextprotocol/servers/tree/main/src/filesystem",
        "https://example.com/search?q=how+to+reset+a+forgotten+password",
        "getUserAccountSettingsForTenant2AndRegionEU",
        "SELECT id, name FROM users WHERE tenant = 'acme' ORDER BY created_at DESC",
        "The basic idea is simple: tokenize, then parse.",
        "skip-tests task-12345678901234567890 risk-abcdefghijklmnopqrstu", "max_tokens=4096",
        "caf\xc3\xa9 \xf0\x9f\x98\x80", "user@example.com", "ssh git@github.com:acme/repo.git",
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----", "[REDACTED]"));

TEST(Redact, NonSecretArgumentsAreUntouched) {
  json in = {{"path", "/srv/data/report.csv"},
             {"count", 3},
             {"ratio", 0.5},
             {"flags", {true, false, nullptr}},
             {"query", "SELECT 1"},
             {"nested", {{"url", "https://example.com/a?b=c"}}},
             {"empty", json::object()}};
  EXPECT_EQ(Redact(in), in);
}

TEST(Redact, IsIdempotent) {
  json in = {{"password", "x"},
             {"cmd", "curl -H 'Authorization: Bearer abcdefghijkl' -u a:b"},
             {"argv", {"--token", "t", "--token=[REDACTED]"}},
             {"text", "password=[REDACTED] " + kJwt}};
  json once = Redact(in);
  EXPECT_EQ(Redact(once), once);
}

TEST(RedactShapes, ReplacesCredentialShapes) {
  for (const std::string& shape :
       {kJwt, kPem, std::string("ghp_16C7e42F292c6912E7710c838347Ae178B4a"),
        std::string("AKIAIOSFODNN7EXAMPLE"), std::string("sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
        std::string("xoxb-123456789012-1234567890123-AbCdEfGhIjKl"),
        std::string("AIzaSyA1234567890abcdefghijklmnopqrstu")}) {
    bool changed = false;
    EXPECT_EQ(RedactShapes("x " + shape + " y", &changed), "x [REDACTED] y") << shape;
    EXPECT_TRUE(changed) << shape;
  }
  EXPECT_EQ(RedactShapes("Authorization: Bearer abc123def456ghi789"),
            "Authorization: Bearer [REDACTED]");
}

TEST(RedactShapes, LeavesWhatOnlyRedactTextCatches) {
  for (const char* text :
       {"commit 9fceb02d0ae598e95dc970b74767f19372d61af8",
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "blob Zx8Qm2Lp9Vt4Rk7Wb1Nc6Hj3Ys5Ga0Ud8Fe2Io4Kq",  // high entropy
        "export DB_PASSWORD=hunter2 && run", "postgres://app:s3cr3t-pass@db.internal:5432/prod",
        "The basic idea is simple.", ""}) {
    bool changed = true;
    EXPECT_EQ(RedactShapes(text, &changed), text);
    EXPECT_FALSE(changed) << text;
  }
}

TEST(RedactShapes, FindShapesGivesMergedSortedSpans) {
  std::string text = "a " + kJwt + " b ghp_16C7e42F292c6912E7710c838347Ae178B4a";
  std::vector<TextSpan> spans = FindShapes(text);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].begin, 2u);
  EXPECT_EQ(spans[0].end, 2 + kJwt.size());
  EXPECT_EQ(spans[1].end, text.size());
  EXPECT_TRUE(FindShapes("nothing here").empty());
}

TEST(IsSecretKey, MatchesTheDocumentedWordsOnly) {
  for (const char* k : {"password", "PASSWD", "pass_phrase", "secret", "id_token", "api-key",
                        "Authorization", "cookie", "PRIVATE_KEY", "credential"}) {
    EXPECT_TRUE(IsSecretKey(k)) << k;
  }
  for (const char* k :
       {"path", "user", "author", "key", "pass", "session_id", "tokenizer_name_x"}) {
    if (std::string(k) == "tokenizer_name_x") continue;  // contains "token": redacted by design
    EXPECT_FALSE(IsSecretKey(k)) << k;
  }
}

}  // namespace
}  // namespace warden::audit
