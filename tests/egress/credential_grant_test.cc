// Credentials the sandboxed code uses but never holds (credential_grant.h): the placeholder, the
// stream rewriter, and the proxy putting the value in for its one destination, masking it in what
// that destination echoes, and refusing the placeholder anywhere else. Proxy cases run against
// real servers on loopback, with curl and raw sockets as clients.
#include "egress/credential_grant.h"

#include <gtest/gtest.h>

#include "egress/proxy.h"
#include "test_support.h"

namespace warden::egress {
namespace {

using namespace std::chrono_literals;

const std::string kSecret = "sk-live-0123456789abcdefSECRET";

EgressCredential MustMake(const std::string& name, const std::string& host, uint16_t port,
                          const std::string& value = kSecret) {
  auto c = MakeEgressCredential(name, host, port, value);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : EgressCredential{};
}

// ---- The placeholder -----------------------------------------------------------------------

TEST(EgressCredential, PlaceholderIsRandomLettersAndDigitsOfTheValuesLength) {
  EgressCredential a = MustMake("API_TOKEN", "Api.Example.COM.", 80);
  EgressCredential b = MustMake("API_TOKEN", "api.example.com", 80);
  EXPECT_EQ(a.host, "api.example.com");  // normalised as the proxy normalises targets
  EXPECT_EQ(a.placeholder.size(), kSecret.size());
  EXPECT_NE(a.placeholder, b.placeholder);
  EXPECT_NE(a.placeholder, kSecret);
  for (char c : a.placeholder) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << a.placeholder;
}

TEST(EgressCredential, RefusesValuesThatCannotBeStoodInForSafely) {
  auto short_value = MakeEgressCredential("T", "api.example.com", 80, "1234567");
  ASSERT_FALSE(short_value.ok());
  EXPECT_NE(short_value.status().message().find("credential T: the value is 7 bytes"), std::string::npos)
      << short_value.status().message();
  auto crlf = MakeEgressCredential("T", "api.example.com", 80, "abcdefgh\r\nX-Evil: 1");
  ASSERT_FALSE(crlf.ok());
  EXPECT_NE(crlf.status().message().find("control character"), std::string::npos);
  auto host = MakeEgressCredential("T", "bad_host!", 80, kSecret);
  ASSERT_FALSE(host.ok());
  EXPECT_NE(host.status().message().find("credential T: host"), std::string::npos);
  // The value is never part of an error.
  EXPECT_EQ(crlf.status().message().find("abcdefgh"), std::string::npos);
}

// ---- The stream rewriter -------------------------------------------------------------------

TEST(StreamRewriter, ReplacesAMatchSplitAtEveryPointAndKeepsTheLength) {
  const std::string from = "PLACEHOLDER-0123", to = "the-real-value-9";
  const std::string text = "a=" + from + "&b=" + from + "&c=end";
  std::string expected = "a=" + to + "&b=" + to + "&c=end";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    for (size_t cut2 = cut; cut2 <= text.size(); cut2 += 3) {
      StreamRewriter r({{from, to, false, "X"}});
      std::string out;
      r.Feed(std::string_view(text).substr(0, cut), &out);
      r.Feed(std::string_view(text).substr(cut, cut2 - cut), &out);
      r.Feed(std::string_view(text).substr(cut2), &out);
      r.Flush(&out);
      ASSERT_EQ(out, expected) << "cut at " << cut << "," << cut2;
      EXPECT_EQ(r.replaced(), 2u);
    }
  }
}

TEST(StreamRewriter, ARefusedStringStopsTheStreamAndSaysWhichRule) {
  StreamRewriter r({{"OTHER-PLACEHOLDER", "", true, "credential B may only go to b.test:80"}});
  std::string out;
  r.Feed("harmless prefix OTHER-PLACE", &out);
  EXPECT_TRUE(r.refused().empty());
  r.Feed("HOLDER and more", &out);
  EXPECT_EQ(r.refused(), "credential B may only go to b.test:80");
  const std::string before = out;
  r.Feed("later bytes", &out);
  r.Flush(&out);
  EXPECT_EQ(out, before);  // nothing more goes out
  EXPECT_EQ(out.find("OTHER"), std::string::npos);
}

TEST(StreamRewriter, WithoutRulesEverythingPassesAtOnce) {
  StreamRewriter r({});
  std::string out;
  r.Feed("abc", &out);
  EXPECT_EQ(out, "abc");
}

TEST(GrantPlan, HeadCarryingAnotherDestinationsPlaceholderIsRefused) {
  std::vector<EgressCredential> cs = {MustMake("A", "a.test", 80), MustMake("B", "b.test", 8080)};
  GrantPlan here = PlanGrants(cs, "a.test", 80, "GET http://a.test/ HTTP/1.1\r\nAuthorization: " + cs[0].placeholder);
  EXPECT_TRUE(here.refused.empty());
  EXPECT_EQ(here.used, std::vector<std::string>{"A"});
  ASSERT_EQ(here.response.size(), 1u);
  EXPECT_EQ(here.response[0].from, kSecret);
  GrantPlan wrong_port = PlanGrants(cs, "b.test", 80, "X-Key: " + cs[1].placeholder);
  EXPECT_EQ(wrong_port.refused, "the placeholder of credential B may only go to b.test:8080");
  GrantPlan elsewhere = PlanGrants(cs, "evil.test", 80, "GET http://evil.test/?k=" + cs[0].placeholder);
  EXPECT_EQ(elsewhere.refused, "the placeholder of credential A may only go to a.test:80");
  EXPECT_TRUE(elsewhere.response.empty());
}

// ---- Through the proxy ---------------------------------------------------------------------

class CredentialProxyTest : public ::testing::Test {
 protected:
  // allowed.test and other.test both reach `origin_` (the --resolve mapping); the credential is
  // granted for allowed.test at the origin's port.
  void SetUp() override {
    const std::string port = std::to_string(origin_.port());
    credential_ = MustMake("API_TOKEN", "allowed.test", origin_.port());
    ProxyOptions options;
    auto list = AllowList::Parse({"allowed.test:" + port, "other.test:" + port});
    ASSERT_TRUE(list.ok());
    options.allow_list = *list;
    auto resolve = ResolveMap::Parse({{"allowed.test", "127.0.0.1"}, {"other.test", "127.0.0.1"}});
    ASSERT_TRUE(resolve.ok());
    options.resolve = *resolve;
    options.credentials = {credential_};
    options.recorder = [this](const EgressRecord& r) { records_.Add(r); };
    proxy_ = testing::StartProxy(std::move(options), &proxy_port_);
    ASSERT_NE(proxy_, nullptr);
  }
  void TearDown() override {
    if (proxy_) proxy_->Stop();
  }

  std::string Url(const std::string& host, const std::string& path) const {
    return "http://" + host + ":" + std::to_string(origin_.port()) + path;
  }
  testing::ProcessResult Curl(std::vector<std::string> args) {
    std::vector<std::string> argv = {"curl", "-sS", "--max-time", "10", "-x",
                                     "http://127.0.0.1:" + std::to_string(proxy_port_), "-i"};
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::RunProgram(argv);
  }
  std::vector<EgressRecord> Records(size_t n) { return records_.Wait(n); }
  const std::string& P() const { return credential_.placeholder; }

  testing::HttpOrigin origin_;
  EgressCredential credential_;
  std::unique_ptr<EgressProxy> proxy_;
  uint16_t proxy_port_ = 0;
  testing::Collected<EgressRecord> records_;
};

TEST_F(CredentialProxyTest, ThePlaceholderBecomesTheValueForItsHostAndTheEchoComesBackMasked) {
  auto r = Curl({"-H", "Authorization: Bearer " + P(), Url("allowed.test", "/echo?key=" + P())});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The server got the value, in the header and in the query.
  auto heads = origin_.heads();
  ASSERT_EQ(heads.size(), 1u);
  EXPECT_NE(heads[0].find("Authorization: Bearer " + kSecret), std::string::npos) << heads[0];
  EXPECT_NE(heads[0].find("GET /echo?key=" + kSecret + " "), std::string::npos) << heads[0];
  EXPECT_EQ(heads[0].find(P()), std::string::npos);
  // The client, whose server echoed both in a header and in the body, sees only the placeholder.
  EXPECT_EQ(r.out.find(kSecret), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("X-Echo-Authorization: Bearer " + P()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Authorization: Bearer " + P()), std::string::npos) << r.out;
  auto records = Records(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_TRUE(records[0].allowed);
  EXPECT_NE(records[0].rule_or_reason.find("(credential API_TOKEN)"), std::string::npos)
      << records[0].rule_or_reason;
  EXPECT_EQ(records[0].http_target.find(kSecret), std::string::npos);  // records hold the placeholder
}

TEST_F(CredentialProxyTest, BodiesGetTheValueWithLengthAndChunkedFraming) {
  const std::string body = "{\"token\":\"" + P() + "\",\"n\":1}";
  auto sized = Curl({"--data-binary", body, Url("allowed.test", "/echo")});
  ASSERT_EQ(sized.exit_code, 0) << sized.err;
  auto chunked = Curl({"-H", "Transfer-Encoding: chunked", "--data-binary", body, Url("allowed.test", "/echo")});
  ASSERT_EQ(chunked.exit_code, 0) << chunked.err;
  auto bodies = origin_.bodies();
  ASSERT_EQ(bodies.size(), 2u);
  const std::string real = "{\"token\":\"" + kSecret + "\",\"n\":1}";
  EXPECT_EQ(bodies[0], real);
  EXPECT_EQ(bodies[1], real);
  EXPECT_EQ(sized.out.find(kSecret), std::string::npos);
  EXPECT_EQ(chunked.out.find(kSecret), std::string::npos);
  EXPECT_NE(sized.out.find(body), std::string::npos) << sized.out;  // the echo, masked again
}

TEST_F(CredentialProxyTest, ThePlaceholderSentAnywhereElseIsRefusedAndRecorded) {
  // Another allowed host, in a header; and in the query.
  auto header = Curl({"-H", "X-Key: " + P(), Url("other.test", "/echo")});
  EXPECT_NE(header.out.find("403"), std::string::npos) << header.out;
  EXPECT_NE(header.out.find("denied: the placeholder of credential API_TOKEN may only go to allowed.test:" +
                            std::to_string(origin_.port())),
            std::string::npos)
      << header.out;
  auto query = Curl({Url("other.test", "/echo?leak=" + P())});
  EXPECT_NE(query.out.find("403"), std::string::npos) << query.out;
  // Through CONNECT (its head) to another host.
  auto tunnel = Curl({"-p", "--proxy-header", "X-Key: " + P(), Url("other.test", "/echo")});
  EXPECT_NE(tunnel.err.find("403"), std::string::npos) << tunnel.out << tunnel.err;
  EXPECT_TRUE(origin_.heads().empty()) << "nothing reached the server";
  auto records = Records(3);
  ASSERT_EQ(records.size(), 3u);
  for (const auto& rec : records) {
    EXPECT_FALSE(rec.allowed);
    EXPECT_EQ(rec.host, "other.test");
    EXPECT_NE(rec.rule_or_reason.find("credential API_TOKEN"), std::string::npos) << rec.rule_or_reason;
  }
}

TEST_F(CredentialProxyTest, ThePlaceholderInABodyForAnotherHostCutsTheRequest) {
  UniqueFd c = testing::ConnectTcp(proxy_port_);
  ASSERT_TRUE(c.valid());
  const std::string body = "exfil=" + P();
  testing::SendAll(c.get(), "POST " + Url("other.test", "/echo") + " HTTP/1.1\r\nHost: other.test\r\nContent-Length: " +
                                std::to_string(body.size()) + "\r\n\r\n" + body);
  std::string reply = testing::ReadFor(c.get(), 5s);
  EXPECT_NE(reply.find("403"), std::string::npos) << reply;
  EXPECT_NE(reply.find("(in the request body)"), std::string::npos) << reply;
  for (const auto& b : origin_.bodies()) EXPECT_EQ(b.find(P()), std::string::npos) << b;
  auto records = Records(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_FALSE(records[0].allowed);
  EXPECT_NE(records[0].rule_or_reason.find("credential API_TOKEN may only go to allowed.test"), std::string::npos)
      << records[0].rule_or_reason;
}

TEST_F(CredentialProxyTest, ATunnelToTheGrantedHostCarriesBytesUntouched) {
  // Nothing is put into a tunnel (it would be TLS): the server gets the placeholder as sent.
  auto r = Curl({"-p", "-H", "X-Key: " + P(), Url("allowed.test", "/echo")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto heads = origin_.heads();
  ASSERT_EQ(heads.size(), 1u);
  EXPECT_NE(heads[0].find("X-Key: " + P()), std::string::npos) << heads[0];
  EXPECT_EQ(heads[0].find(kSecret), std::string::npos);
}

}  // namespace
}  // namespace warden::egress
