// The gateway's side of credentials (docs/credentials.md): the broker renders an upstream's
// templates for the authenticated caller from a real encrypted store and a real token minter;
// the credentials stage puts a call's headers in its state or refuses the call naming the
// secret; the redact stage and RedactMessage hide every value the store holds. The end-to-end
// test with real upstreams is tests/e2e/credentials.test.mjs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "credentials/master_key.h"
#include "credentials/redactor.h"
#include "credentials/secret_store.h"
#include "credentials/tokens.h"
#include "gateway/credentials/broker.h"
#include "gateway/stages/chain.h"
#include "testing.h"

namespace warden::gateway {
namespace {

using nlohmann::json;
using testing::PolicyFromText;
using testing::TempDir;

constexpr const char* kBrokerPolicy = R"(version: 1
identity:
  tenants:
    acme:
      users: { alice: {}, bob: {} }
credentials:
  master_key: { env: UNUSED_IN_THIS_TEST }
upstreams:
  h:
    url: http://127.0.0.1:9/mcp
    credentials:
      header: { Authorization: "Bearer {token:h}", X-Api-Key: "secret:api_key" }
      read: { header: { X-Scope: "secret:read_key" } }
      write: { header: { X-Scope: "secret:write_key" } }
  s:
    command: [/bin/true]
    credentials: { env: { TOKEN: "pre-{secret:svc}-post" } }
)";

// A store with a fresh key in `dir`, a minter over a fresh signing key, and a broker over both.
struct Fixture {
  TempDir dir;
  std::unique_ptr<credentials::SecretStore> store;
  std::unique_ptr<credentials::TokenMinter> minter;
  credentials::Redactor redactor;
  std::unique_ptr<CredentialBroker> broker;
  std::shared_ptr<const policy::Policy> policy = PolicyFromText(kBrokerPolicy);

  Fixture() {
    auto key = credentials::ParseMasterKey(std::string(64, 'a'), "test");
    EXPECT_TRUE(key.ok()) << key.status().message();
    credentials::KeyRing ring;
    ring.keys.push_back(*key);
    auto opened = credentials::SecretStore::Open({.path = dir.File("w.db")}, ring);
    EXPECT_TRUE(opened.ok()) << opened.status().message();
    store = std::move(*opened);
    auto signing = credentials::SigningKey::Generate();
    EXPECT_TRUE(signing.ok());
    std::vector<credentials::TokenMinter::KeyEntry> keys;
    keys.push_back({*signing, std::chrono::system_clock::now(), std::nullopt});
    auto m = credentials::TokenMinter::Create(std::move(keys), std::chrono::seconds(3600));
    EXPECT_TRUE(m.ok()) << m.status().message();
    minter = std::move(*m);
    broker = std::make_unique<CredentialBroker>(store.get(), minter.get(), redactor);
  }
  void Set(const std::string& tenant, const std::string& user, const std::string& name,
           const std::string& value) {
    ASSERT_TRUE(store->Set({tenant, user, ""}, name, value).ok());
  }
};

json Claims(const std::string& bearer) {
  const std::string jwt = bearer.substr(std::string("Bearer ").size());
  const size_t a = jwt.find('.'), b = jwt.find('.', a + 1);
  std::string payload = jwt.substr(a + 1, b - a - 1);
  for (char& c : payload) c = c == '-' ? '+' : c == '_' ? '/' : c;
  while (payload.size() % 4) payload += '=';
  // Decoded by hand: the test must not trust the minter's own helpers.
  static const std::string kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  int bits = 0, buffer = 0;
  for (char c : payload) {
    if (c == '=') break;
    buffer = (buffer << 6) | static_cast<int>(kAlphabet.find(c));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xff);
    }
  }
  return json::parse(out);
}

TEST(CredentialBroker, RendersTheCallersSecretsAndAReadOrWriteSet) {
  Fixture f;
  f.Set("acme", "alice", "api_key", "alice-api-key-123");
  f.Set("acme", "", "api_key", "tenant-api-key-123");
  f.Set("acme", "", "read_key", "tenant-read-key-1");
  f.Set("acme", "", "write_key", "tenant-write-key-1");

  auto read =
      f.broker->CallHeaders(*f.policy, "h", {"acme", "alice", "alice-bot"}, "h__get", false);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->at("X-Api-Key"), "alice-api-key-123");  // the user's beats the tenant's
  EXPECT_EQ(read->at("X-Scope"), "tenant-read-key-1");    // a read gets the read set alone
  json claims = Claims(read->at("Authorization"));
  EXPECT_EQ(claims["sub"], "alice");
  EXPECT_EQ(claims["act"], json({{"sub", "alice-bot"}}));
  EXPECT_EQ(claims["aud"], "http://127.0.0.1:9/mcp");
  EXPECT_EQ(claims["scope"], "read");
  EXPECT_EQ(claims["tool"], "h__get");
  EXPECT_EQ(claims["tenant"], "acme");

  auto write = f.broker->CallHeaders(*f.policy, "h", {"acme", "bob", "bob-bot"}, "h__put", true);
  ASSERT_TRUE(write.ok()) << write.status().message();
  EXPECT_EQ(write->at("X-Api-Key"), "tenant-api-key-123");  // bob has none of his own
  EXPECT_EQ(write->at("X-Scope"), "tenant-write-key-1");
  EXPECT_EQ(Claims(write->at("Authorization"))["scope"], "read write");

  // warden's own requests on an instance: no actor, a read scope, the same token until near
  // its expiry.
  auto own = f.broker->InstanceHeaders(*f.policy, "h", {"acme", "alice", ""});
  ASSERT_TRUE(own.ok()) << own.status().message();
  EXPECT_FALSE(Claims(own->at("Authorization")).contains("act"));
  EXPECT_EQ(own->count("X-Scope"), 0u);
  EXPECT_EQ(f.broker->InstanceHeaders(*f.policy, "h", {"acme", "alice", ""})->at("Authorization"),
            own->at("Authorization"));

  // Every value it handed out is now one the redactor hides.
  EXPECT_EQ(f.redactor.RedactText("x alice-api-key-123 y"), "x [REDACTED:api_key] y");
}

TEST(CredentialBroker, AMissingSecretNamesItselfAndHowToSetIt) {
  Fixture f;
  auto headers = f.broker->CallHeaders(*f.policy, "h", {"acme", "bob", "bob-bot"}, "h__get", false);
  ASSERT_FALSE(headers.ok());
  const std::string m = headers.status().message();
  EXPECT_NE(m.find("secret 'api_key' is not set for user 'bob' of tenant 'acme'"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("warden secrets set api_key --tenant acme --user bob"), std::string::npos) << m;
  EXPECT_NE(m.find("header X-Api-Key"), std::string::npos) << m;

  auto env = f.broker->Environment(*f.policy, "s", {"acme", "bob", ""});
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find("variable TOKEN: secret 'svc'"), std::string::npos);
  f.Set("acme", "bob", "svc", "bob-service-token");
  env = f.broker->Environment(*f.policy, "s", {"acme", "bob", ""});
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(env->at("TOKEN"), "pre-bob-service-token-post");
}

TEST(CredentialBroker, AValueThatWouldSplitAHeaderIsRefusedNotSent) {
  Fixture f;
  f.Set("acme", "alice", "api_key", "good\r\nX-Evil: 1");
  f.Set("acme", "", "read_key", "tenant-read-key-1");
  auto headers = f.broker->CallHeaders(*f.policy, "h", {"acme", "alice", "a"}, "h__get", false);
  ASSERT_FALSE(headers.ok());
  EXPECT_NE(headers.status().message().find("line break"), std::string::npos);
  EXPECT_EQ(headers.status().message().find("X-Evil"), std::string::npos)
      << "the value is never in the message";
}

TEST(CredentialBroker, RefreshHidesEverySecretOfEveryUser) {
  Fixture f;
  f.Set("acme", "alice", "api_key", "alice-only-secret-1");
  f.Set("acme", "bob", "api_key", "bob-only-secret-22");
  f.broker->Refresh();
  EXPECT_EQ(f.redactor.RedactText("alice-only-secret-1 bob-only-secret-22"),
            "[REDACTED:api_key] [REDACTED:api_key]");
}

TEST(CredentialBroker, ASigningKeyRotatedByAnotherProcessIsTakenUpWithoutARestart) {
  Fixture f;
  // The gateway's minter, as `warden serve` opens it: over the keys the store holds.
  auto first = credentials::SigningKey::Generate();
  ASSERT_TRUE(first.ok());
  const auto now_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  ASSERT_TRUE(f.store->AddSigningKey(first->kid(), first->PrivateDer(), now_ms()).ok());
  auto entries = credentials::SigningKeyEntries(*f.store);
  ASSERT_TRUE(entries.ok()) << entries.status().message();
  ASSERT_TRUE(f.minter->Replace(std::move(*entries)).ok());
  f.broker->Refresh();  // the first load
  ASSERT_EQ(f.minter->current_kid(), first->kid());

  // `warden secrets rotate --signing-key`: another connection to the same database.
  auto key = credentials::ParseMasterKey(std::string(64, 'a'), "test");
  ASSERT_TRUE(key.ok());
  credentials::KeyRing ring;
  ring.keys.push_back(*key);
  auto other = credentials::SecretStore::Open({.path = f.dir.File("w.db")}, ring);
  ASSERT_TRUE(other.ok()) << other.status().message();
  auto second = credentials::SigningKey::Generate();
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE((*other)->AddSigningKey(second->kid(), second->PrivateDer(), now_ms()).ok());

  std::this_thread::sleep_for(std::chrono::milliseconds(120));  // past Refresh's 100 ms throttle
  f.broker->Refresh();
  EXPECT_EQ(f.minter->current_kid(), second->kid()) << "new tokens are signed with the new key";
  std::set<std::string> published;
  const json jwks = f.minter->Jwks();
  for (const auto& k : jwks["keys"]) published.insert(k["kid"].get<std::string>());
  EXPECT_EQ(published, (std::set<std::string>{first->kid(), second->kid()}))
      << "the retired key stays published for the tokens it signed";
}

// A pipeline of the standard chain's stage `name` alone, over the fixture's broker.
std::unique_ptr<Pipeline> OneStage(Fixture& f, std::string_view name) {
  StageServices services;
  services.credentials = f.broker.get();
  std::vector<ChainLink> chain;
  for (const ChainLink& link : StandardChain())
    if (link.name == name) chain.push_back(link);
  EXPECT_EQ(chain.size(), 1u);
  return BuildPipeline(services, chain);
}

// alice-bot's call of h__get on upstream h.
void AliceCall(const Fixture& f, CallContext& call) {
  call.tenant = "acme";
  call.user = "alice";
  call.agent = "alice-bot";
  call.server = "h";
  call.tool = "h__get";
  call.policy = f.policy;
}

TEST(CredentialStages, TheCredentialsStageChoosesHeadersOrRefusesNamingTheSecret) {
  Fixture f;
  f.Set("acme", "", "read_key", "tenant-read-key-1");
  auto pipeline = OneStage(f, "credentials");
  CallContext call;
  AliceCall(f, call);
  StageOutcome out = pipeline->Run(call);
  EXPECT_EQ(out.result, StageResult::kDeny);
  EXPECT_EQ(out.refusal, Refusal::kDenied);
  EXPECT_NE(out.reason.find("secret 'api_key' is not set"), std::string::npos) << out.reason;
  EXPECT_EQ(call.state.Find<UpstreamCallHeaders>(), nullptr);

  f.Set("acme", "alice", "api_key", "alice-api-key-123");
  f.Set("acme", "", "write_key", "tenant-write-key-1");
  CallContext again;
  AliceCall(f, again);
  out = pipeline->Run(again);
  EXPECT_EQ(out.result, StageResult::kContinue) << out.reason;
  const auto* chosen = again.state.Find<UpstreamCallHeaders>();
  ASSERT_NE(chosen, nullptr);
  EXPECT_TRUE(chosen->set);
  EXPECT_EQ(chosen->headers.at("X-Api-Key"), "alice-api-key-123");
  // No decision: a write, as the policy's default access is.
  EXPECT_EQ(chosen->headers.at("X-Scope"), "tenant-write-key-1");
}

TEST(CredentialStages, TheRedactStageHidesResultsReasonsAndAuditedArguments) {
  Fixture f;
  f.Set("acme", "alice", "api_key", "alice-api-key-123");
  auto pipeline = OneStage(f, "redact");

  CallContext call;
  call.arguments = {{"note", "remember alice-api-key-123"}};
  call.result = CallResult::FromText(
      "key=alice-api-key-123 and " + std::string("ghp_") + std::string(36, 'x'), false);
  pipeline->Run(call);
  const std::string text = call.result->Text();
  EXPECT_EQ(text.find("alice-api-key-123"), std::string::npos) << text;
  EXPECT_NE(text.find("[REDACTED:api_key]"), std::string::npos) << text;
  EXPECT_EQ(text.find("ghp_"), std::string::npos) << text;
  EXPECT_EQ(call.arguments["note"], "remember [REDACTED:api_key]");

  mcp::Message error = mcp::ErrorResponse{mcp::Id(int64_t{1}), -32603, "bad alice-api-key-123",
                                          json{{"k", "alice-api-key-123"}}};
  RedactMessage(f.redactor, error);
  const auto& e = std::get<mcp::ErrorResponse>(error);
  EXPECT_EQ(e.message, "bad [REDACTED:api_key]");
  EXPECT_EQ((*e.data)["k"], "[REDACTED:api_key]");
  mcp::Message note =
      mcp::Notification{"notifications/message", json{{"data", "alice-api-key-123"}}};
  RedactMessage(f.redactor, note);
  EXPECT_EQ((*std::get<mcp::Notification>(note).params)["data"], "[REDACTED:api_key]");
}

}  // namespace
}  // namespace warden::gateway
