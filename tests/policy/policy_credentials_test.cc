// The policy's side of credentials (docs/credentials.md): the `credentials` section (where the
// master key is, never the key), the templates an upstream's credentials hold, and every mistake
// refused at load with the field that holds it.
#include <gtest/gtest.h>

#include <string>

#include "policy/credential_template.h"
#include "policy/policy.h"
#include "testing.h"

namespace warden::policy {
namespace {

using testing::MustLoad;

std::string CredentialsLoadError(const std::string& yaml) {
  auto p = LoadPolicyText(yaml, "test.yaml");
  return p.ok() ? "" : p.status().message();
}

#define EXPECT_CREDENTIALS_ERROR(yaml, fragment)                                  \
  do {                                                                            \
    std::string error = CredentialsLoadError(yaml);                               \
    EXPECT_NE(error.find(fragment), std::string::npos)                            \
        << "expected an error containing: " << (fragment) << "\n got: " << error; \
  } while (0)

TEST(CredentialTemplateTest, ParsesWholeSecretsReferencesAndLiterals) {
  auto whole = ParseTemplate("secret:mail_token");
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  ASSERT_EQ(whole->parts.size(), 1u);
  EXPECT_EQ(whole->parts[0].kind, TemplatePart::kSecret);
  EXPECT_EQ(whole->parts[0].text, "mail_token");

  auto bearer = ParseTemplate("Bearer {token:tracker} and {secret:k.1} {{x}}");
  ASSERT_TRUE(bearer.ok()) << bearer.status().message();
  EXPECT_TRUE(bearer->uses_token());
  EXPECT_TRUE(bearer->uses_secret());
  EXPECT_EQ(bearer->tokens(), (std::vector<std::string>{"tracker"}));
  EXPECT_EQ(bearer->secrets(), (std::vector<std::string>{"k.1"}));
  auto rendered = Render(*bearer, [](const TemplatePart& p) -> Result<std::string> {
    return p.kind == TemplatePart::kToken ? std::string("T") : std::string("S");
  });
  ASSERT_TRUE(rendered.ok());
  EXPECT_EQ(*rendered, "Bearer T and S {x}");

  // A literal is a literal: "secret:" is only special as the whole value.
  auto literal = ParseTemplate("token secret:x");
  ASSERT_TRUE(literal.ok());
  EXPECT_FALSE(literal->uses_secret());

  // The first lookup error is the render's.
  auto failed = Render(*bearer, [](const TemplatePart&) -> Result<std::string> {
    return Status::Error("secret 'k.1' is not set");
  });
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message(), "secret 'k.1' is not set");
}

TEST(CredentialTemplateTest, RefusesMalformedReferences) {
  for (const char* bad :
       {"{secret:}", "{secret:-x}", "{cookie:x}", "{}", "Bearer {token:x", "a } b", "{secret:a{b}",
        "{nothing}", "secret:", "secret:a b", "{token:a/b}"}) {
    EXPECT_FALSE(ParseTemplate(bad).ok()) << bad;
  }
  EXPECT_TRUE(ValidSecretName("github.token-2_x"));
  EXPECT_FALSE(ValidSecretName(std::string(65, 'a')));
  EXPECT_FALSE(ValidSecretName(".hidden"));
}

const std::string kHead =
    "version: 1\n"
    "credentials:\n"
    "  master_key: { env: WARDEN_MASTER_KEY }\n";

TEST(PolicyCredentialsTest, SectionLoads) {
  Policy p = MustLoad(kHead +
                      "  previous_keys: [ { file: /etc/warden/old.key } ]\n"
                      "  tokens: { issuer: https://warden.example, lifetime: 2m }\n"
                      "upstreams:\n"
                      "  tracker:\n"
                      "    url: https://tracker.example/mcp\n"
                      "    credentials:\n"
                      "      header: { Authorization: \"Bearer {token:tracker}\" }\n"
                      "      read: { header: { X-Key: \"secret:tracker_read\" } }\n"
                      "      write: { header: { X-Key: \"secret:tracker_write\" } }\n"
                      "      audience: https://tracker.example\n"
                      "  mail:\n"
                      "    command: [node, mail.mjs]\n"
                      "    credentials: { env: { MAIL_TOKEN: \"secret:mail_token\" } }\n");
  EXPECT_TRUE(p.credentials.set);
  EXPECT_EQ(p.credentials.master_key.env, "WARDEN_MASTER_KEY");
  ASSERT_EQ(p.credentials.previous_keys.size(), 1u);
  EXPECT_EQ(p.credentials.previous_keys[0].file, "/etc/warden/old.key");
  EXPECT_EQ(p.credentials.token_issuer, "https://warden.example");
  EXPECT_EQ(p.credentials.token_lifetime_ms, 120000u);
  const UpstreamCredentials& t = p.upstreams.at("tracker").credentials;
  EXPECT_TRUE(t.uses_tokens);
  EXPECT_TRUE(t.uses_secrets);
  EXPECT_EQ(t.read.header.at("X-Key"), "secret:tracker_read");
  EXPECT_EQ(t.write.header.at("X-Key"), "secret:tracker_write");
  EXPECT_EQ(t.audience, "https://tracker.example");
  EXPECT_TRUE(p.upstreams.at("mail").credentials.uses_secrets);
  EXPECT_FALSE(p.upstreams.at("mail").credentials.uses_tokens);
}

TEST(PolicyCredentialsTest, MistakesAreRefusedWhereWritten) {
  EXPECT_CREDENTIALS_ERROR("version: 1\ncredentials: { previous_keys: [] }\n",
                           "credentials: missing 'master_key'");
  EXPECT_CREDENTIALS_ERROR(
      "version: 1\ncredentials:\n  master_key: 0123abcd\n",
      "test.yaml:3: credentials.master_key: expected {env: VAR} or {file: PATH}");
  EXPECT_CREDENTIALS_ERROR("version: 1\ncredentials:\n  master_key: { env: A, file: b }\n",
                           "credentials.master_key: expected {env: VAR} or {file: PATH}");
  EXPECT_CREDENTIALS_ERROR("version: 1\ncredentials:\n  master_key: { env: \"A-B\" }\n",
                           "credentials.master_key.env: expected an environment variable's name");
  EXPECT_CREDENTIALS_ERROR(kHead + "  tokens: { lifetime: 2h }\n",
                           "credentials.tokens.lifetime: expected a duration from 10s to 1h");
  EXPECT_CREDENTIALS_ERROR(kHead + "  tokens: { audience: x }\n",
                           "credentials.tokens: unknown key 'audience'");

  // A secret or a token without the section: the policy must not run without its credentials.
  EXPECT_CREDENTIALS_ERROR(
      "version: 1\nupstreams:\n  m:\n    command: [x]\n"
      "    credentials: { env: { T: \"secret:t\" } }\n",
      "test.yaml:5: upstreams.m.credentials.env.T: names a secret, but the policy has no "
      "'credentials' section");
  EXPECT_CREDENTIALS_ERROR(
      "version: 1\nupstreams:\n  h:\n    url: http://127.0.0.1:1/mcp\n"
      "    credentials: { header: { Authorization: \"Bearer {token:h}\" } }\n",
      "names a token, but the policy has no 'credentials' section");

  const std::string up = kHead + "upstreams:\n";
  EXPECT_CREDENTIALS_ERROR(
      up + "  h:\n    url: http://127.0.0.1:1/mcp\n"
           "    credentials: { header: { Authorization: \"Bearer {token:nope}\" } }\n",
      "upstreams.h.credentials.header.Authorization: {token:nope} names no upstream");
  EXPECT_CREDENTIALS_ERROR(up + "  m:\n    command: [x]\n"
                                "    credentials: { env: { T: \"{token:m}\" } }\n",
                           "upstreams.m.credentials.env.T: a token lives minutes");
  EXPECT_CREDENTIALS_ERROR(
      up + "  m:\n    command: [x]\n"
           "    credentials: { header: { X: \"secret:a\" } }\n",
      "upstreams.m.credentials: a 'command' upstream gets its credentials as 'env'");
  EXPECT_CREDENTIALS_ERROR(
      up + "  h:\n    url: http://127.0.0.1:1/mcp\n"
           "    credentials: { env: { X: \"secret:a\" } }\n",
      "upstreams.h.credentials.env: environment variables are for a 'command'");
  EXPECT_CREDENTIALS_ERROR(up + "  h:\n    url: http://127.0.0.1:1/mcp\n    instances: shared\n"
                                "    credentials: { header: { X: \"secret:a\" } }\n",
                           "cannot be 'instances: shared'");
  EXPECT_CREDENTIALS_ERROR(up + "  h:\n    url: http://127.0.0.1:1/mcp\n"
                                "    credentials: { header: { \"Bad Name\": \"secret:a\" } }\n",
                           "upstreams.h.credentials.header.Bad Name: expected a header name");
  EXPECT_CREDENTIALS_ERROR(up + "  h:\n    url: http://127.0.0.1:1/mcp\n"
                                "    credentials: { header: { Host: \"secret:a\" } }\n",
                           "upstreams.h.credentials.header.Host: warden sets this header itself");
  EXPECT_CREDENTIALS_ERROR(
      up + "  h:\n    url: http://127.0.0.1:1/mcp\n"
           "    credentials: { header: { X: \"{cookie:a}\" } }\n",
      "upstreams.h.credentials.header.X: '{cookie:a}': unknown reference kind");
  EXPECT_CREDENTIALS_ERROR(up + "  h:\n    url: http://127.0.0.1:1/mcp\n"
                                "    credentials: { header: { X: \"a\\r\\nEvil: 1\" } }\n",
                           "a line break cannot be part of a header");
  EXPECT_CREDENTIALS_ERROR(up + "  h:\n    url: http://127.0.0.1:1/mcp\n"
                                "    credentials: { read: { env: { X: a } } }\n",
                           "upstreams.h.credentials.read: unknown key 'env'");
}

TEST(PolicyCredentialsTest, TokenExchangeLoadsAndItsMistakesAreRefused) {
  Policy p = MustLoad(kHead +
                      "  token_exchange:\n"
                      "    endpoint: https://idp.example/token\n"
                      "    client_id: warden\n"
                      "    client_secret: \"secret:idp_client\"\n"
                      "    subject: \"secret:user_token\"\n"
                      "    timeout: 5s\n"
                      "upstreams:\n  x:\n    url: http://127.0.0.1:1/mcp\n"
                      "    credentials: { header: { Authorization: \"Bearer {exchange:x}\" } }\n");
  ASSERT_TRUE(p.credentials.token_exchange.has_value());
  EXPECT_EQ(p.credentials.token_exchange->endpoint, "https://idp.example/token");
  EXPECT_EQ(p.credentials.token_exchange->subject, "secret:user_token");
  EXPECT_EQ(p.credentials.token_exchange->timeout_ms, 5000u);
  EXPECT_TRUE(p.upstreams.at("x").credentials.uses_tokens);

  EXPECT_CREDENTIALS_ERROR(
      kHead +
          "upstreams:\n  x:\n    url: http://127.0.0.1:1/mcp\n"
          "    credentials: { header: { A: \"{exchange:x}\" } }\n",
      "names {exchange:...}, but the policy has no credentials.token_exchange");
  const std::string x = kHead + "  token_exchange:\n    endpoint: https://idp.example/token\n";
  EXPECT_CREDENTIALS_ERROR(x, "credentials.token_exchange: missing 'client_id'");
  const std::string literal =
      CredentialsLoadError(x + "    client_id: w\n    client_secret: s3cr3t-literal\n");
  EXPECT_NE(literal.find("expected secret:NAME"), std::string::npos) << literal;
  EXPECT_EQ(literal.find("s3cr3t-literal"), std::string::npos) << literal;
  EXPECT_CREDENTIALS_ERROR(x + "    client_id: w\n    subject: jwt\n",
                           "expected minted (a token warden signs for the user) or secret:NAME");
  EXPECT_CREDENTIALS_ERROR(kHead + "  token_exchange:\n    endpoint: ftp://x\n    client_id: w\n",
                           "expected the token endpoint's http:// or https:// URL");
}

TEST(PolicyCredentialsTest, ALiteralValueIsNeverEchoedInErrors) {
  // A header value written in the file (a mistake, but it happens) stays out of the message.
  const std::string error =
      CredentialsLoadError(kHead +
                           "upstreams:\n  h:\n    url: http://127.0.0.1:1/mcp\n"
                           "    credentials: { header: { X: \"sk-live-abcdef {oops\" } }\n");
  ASSERT_FALSE(error.empty());
  EXPECT_EQ(error.find("sk-live-abcdef"), std::string::npos) << error;
}

TEST(PolicyCredentialsTest, SandboxProfileCredentialsNeedAStoredSecret) {
  const std::string section = "credentials:\n  master_key: { env: WARDEN_TEST_KEY }\n";
  const std::string profile =
      "sandbox:\n  profiles:\n    coder:\n      allow: [\"api.example.com:80\"]\n"
      "      credentials: [{ env: API_TOKEN, host: api.example.com, port: 80, secret: api_token }]\n";
  Policy p = MustLoad("version: 1\n" + section + profile);
  const auto& c = p.sandbox.profiles.at("coder").egress_credentials;
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].env, "API_TOKEN");
  EXPECT_EQ(c[0].host, "api.example.com");
  EXPECT_EQ(c[0].port, 80);
  EXPECT_EQ(c[0].secret, "api_token");

  EXPECT_CREDENTIALS_ERROR("version: 1\n" + profile,
                           "sandbox.profiles.coder.credentials: credential API_TOKEN names a secret, but the "
                           "policy has no 'credentials' section");
  std::string no_secret = profile;
  no_secret.replace(no_secret.find(", secret: api_token"), 19, "");
  EXPECT_CREDENTIALS_ERROR("version: 1\n" + section + no_secret,
                           "credential API_TOKEN needs 'secret: NAME'");
  std::string no_net = "version: 1\n" + section +
                       "sandbox:\n  profiles:\n    coder:\n"
                       "      credentials: [{ env: API_TOKEN, host: api.example.com, secret: t }]\n";
  EXPECT_CREDENTIALS_ERROR(no_net, "needs --net proxy");
  EXPECT_CREDENTIALS_ERROR("version: 1\n" + section +
                               "sandbox:\n  profiles:\n    coder:\n      allow: [a.example]\n"
                               "      credentials: [{ env: T, host: a.example, colour: red }]\n",
                           "unknown key 'credentials.colour'");
}

}  // namespace
}  // namespace warden::policy
