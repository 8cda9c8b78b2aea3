// https:// webhooks: the receiver's certificate is checked against the configured CA file and
// the URL's host, and an event goes nowhere when either check fails.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "hook_server.h"
#include "notify/webhook.h"

namespace warden::notify {
namespace {

using namespace std::chrono_literals;
using testing::HookServer;
using testing::ScriptedReply;
using testing::TempFile;

constexpr const char* kTlsSecret = "whsec_tls_test_secret";

WebhookOptions TlsOptions(const std::string& url, const std::string& ca_file) {
  WebhookOptions options;
  options.url = url;
  options.secret = kTlsSecret;
  options.ca_file = ca_file;
  options.first_backoff = 5ms;
  options.max_attempts = 2;
  options.request_timeout = 2s;
  return options;
}

// Runs one event through a sender made of `options`; returns its stats once it has ended.
WebhookStats SendOne(const WebhookOptions& options) {
  auto made = WebhookSender::Create(options);
  EXPECT_TRUE(made.ok()) << made.status().message();
  if (!made.ok()) return {};
  (*made)->Post("tls.test", {{"over", "tls"}});
  testing::Eventually([&] { return (*made)->Stats().queued == 0; }, 5s);
  return (*made)->Stats();
}

TEST(WebhookTls, DeliversToAReceiverTheCaFileVouchesFor) {
  const testing::TlsIdentity identity = testing::MakeSelfSigned("IP:127.0.0.1,DNS:localhost");
  const TempFile ca(identity.cert_pem);
  HookServer server([](size_t) { return ScriptedReply{200, false, {}}; }, identity);
  const WebhookStats stats = SendOne(TlsOptions(server.Url(), ca.path()));
  EXPECT_EQ(stats.delivered, 1u);
  ASSERT_EQ(server.Count(), 1u);
  const auto req = server.Requests()[0];
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  EXPECT_TRUE(
      VerifySignature(kTlsSecret, req.headers.at("x-warden-signature"), req.body, now, 60s));
  EXPECT_EQ(nlohmann::json::parse(req.body)["data"]["over"], "tls");
}

TEST(WebhookTls, DeliversByNameWhenTheCertificateNamesTheHost) {
  const testing::TlsIdentity identity = testing::MakeSelfSigned("DNS:localhost");
  const TempFile ca(identity.cert_pem);
  HookServer server([](size_t) { return ScriptedReply{200, false, {}}; }, identity);
  const std::string url = "https://localhost:" + std::to_string(server.port()) + "/hook";
  EXPECT_EQ(SendOne(TlsOptions(url, ca.path())).delivered, 1u);
}

TEST(WebhookTls, AReceiverWithAnUntrustedCertificateGetsNothing) {
  // The system's store does not know the test's self-signed CA.
  const testing::TlsIdentity identity = testing::MakeSelfSigned("IP:127.0.0.1");
  HookServer server([](size_t) { return ScriptedReply{200, false, {}}; }, identity);
  const WebhookStats stats = SendOne(TlsOptions(server.Url(), ""));
  EXPECT_EQ(stats.delivered, 0u);
  EXPECT_EQ(stats.failed, 1u);
  EXPECT_EQ(server.Count(), 0u);
}

TEST(WebhookTls, ACertificateForAnotherHostGetsNothing) {
  // Trusted CA, but the certificate names another host than the URL's address.
  const testing::TlsIdentity identity = testing::MakeSelfSigned("DNS:hooks.example.com");
  const TempFile ca(identity.cert_pem);
  HookServer server([](size_t) { return ScriptedReply{200, false, {}}; }, identity);
  const WebhookStats stats = SendOne(TlsOptions(server.Url(), ca.path()));
  EXPECT_EQ(stats.failed, 1u);
  EXPECT_EQ(server.Count(), 0u);
}

}  // namespace
}  // namespace warden::notify
