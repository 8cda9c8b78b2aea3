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

http::RequestHead Head(const std::string& text) {
  auto h = http::ParseRequestHead(text + "\r\n\r\n");
  EXPECT_TRUE(h.ok()) << h.status().message();
  return h.ok() ? *h : http::RequestHead{};
}

TEST(EgressCredential, TheHeaderAndTemplateAreCheckedAndDefaulted) {
  EgressCredential plain = MustMake("T", "api.example.com", 80);
  EXPECT_EQ(plain.header, "Authorization");
  EXPECT_EQ(plain.value_template, "Bearer {}");
  auto key = MakeEgressCredential("T", "api.example.com", 80, kSecret, false, "X-Api-Key");
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(key->value_template, "{}");
  for (const char* bad : {"X Api", "Host", "content-length", "Transfer-Encoding", "Proxy-Authorization",
                          "Accept-Encoding", "Connection", "X-Key\r\nEvil"}) {
    auto c = MakeEgressCredential("T", "api.example.com", 80, kSecret, false, bad);
    EXPECT_FALSE(c.ok()) << bad;
  }
  for (const char* bad : {"Bearer", "{} and {}", "Bearer {}\r\nX-Evil: 1", "a;{}"}) {
    auto c = MakeEgressCredential("T", "api.example.com", 80, kSecret, false, "", bad);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_NE(c.status().message().find("credential T: "), std::string::npos) << c.status().message();
    EXPECT_EQ(c.status().message().find(kSecret), std::string::npos);
  }
}

TEST(GrantPlan, TheValueGoesOnlyInTheNamedHeaderOfTheGrantedDestination) {
  std::vector<EgressCredential> cs = {MustMake("A", "a.test", 80), MustMake("B", "b.test", 8080)};
  // The code's own Authorization, placeholder or not, is replaced.
  GrantPlan here = PlanGrants(cs, "a.test", 80, Head("GET http://a.test/ HTTP/1.1\r\nAuthorization: Bearer " + cs[0].placeholder));
  EXPECT_TRUE(here.refused.empty()) << here.refused;
  EXPECT_EQ(here.used, std::vector<std::string>{"A"});
  ASSERT_EQ(here.headers.size(), 1u);
  EXPECT_EQ(here.headers[0].name, "Authorization");
  EXPECT_EQ(here.headers[0].value, "Bearer " + kSecret);
  ASSERT_EQ(here.response.size(), 1u);
  EXPECT_EQ(here.response[0].from, kSecret);
  // The body refuses every placeholder, the granted one too.
  ASSERT_EQ(here.request.size(), 2u);
  for (const auto& rule : here.request) EXPECT_TRUE(rule.refuse);
  GrantPlan bare = PlanGrants(cs, "a.test", 80, Head("GET http://a.test/ HTTP/1.1"));
  EXPECT_TRUE(bare.refused.empty());
  EXPECT_EQ(bare.headers.size(), 1u) << "put in whether or not the code asked";
}

TEST(GrantPlan, ThePlaceholderAnywhereElseIsRefusedSayingWhere) {
  std::vector<EgressCredential> cs = {MustMake("A", "a.test", 80), MustMake("B", "b.test", 8080)};
  const std::string& p = cs[0].placeholder;
  struct Case {
    std::string host;
    uint16_t port;
    std::string head;
    std::string where;
  } cases[] = {
      {"a.test", 80, "POST http://a.test/notes?q=" + p + " HTTP/1.1", "(it was in the request line)"},
      {"a.test", 80, "GET http://a.test/ HTTP/1.1\r\nX-Note: " + p, "(it was in header X-Note)"},
      {"a.test", 80, "GET http://a.test/ HTTP/1.1\r\nProxy-Authorization: " + p, "(it was in header Proxy-Authorization)"},
      {"b.test", 8080, "GET http://b.test:8080/ HTTP/1.1\r\nAuthorization: Bearer " + p, "(it was in header Authorization)"},
      {"b.test", 80, "GET http://b.test/ HTTP/1.1\r\nX-Key: " + cs[1].placeholder, "(it was in header X-Key)"},
      {"evil.test", 80, "GET http://evil.test/?k=" + p + " HTTP/1.1", "(it was in the request line)"},
  };
  for (const auto& c : cases) {
    GrantPlan plan = PlanGrants(cs, c.host, c.port, Head(c.head));
    EXPECT_NE(plan.refused.find("may only go to "), std::string::npos) << c.head;
    EXPECT_NE(plan.refused.find(c.where), std::string::npos) << plan.refused;
    EXPECT_EQ(plan.refused.find(kSecret), std::string::npos);
  }
  EXPECT_EQ(PlanGrants(cs, "b.test", 80, Head("GET http://b.test/ HTTP/1.1\r\nX-Key: " + cs[1].placeholder)).refused,
            "the placeholder of credential B may only go to b.test:8080, in its Authorization header, where the proxy "
            "puts the value (it was in header X-Key)");
  EXPECT_NE(RefuseTunnel(cs, "CONNECT a.test:443 HTTP/1.1\r\nX-K: " + p + "\r\n\r\n", "the CONNECT request")
                .find("(it was in the CONNECT request)"),
            std::string::npos);
  EXPECT_EQ(RefuseTunnel(cs, "CONNECT a.test:443 HTTP/1.1\r\n\r\n", "the CONNECT request"), "");
}

TEST(GrantPlan, TheUpstreamHeadCarriesTheValueInItsHeaderAndAsksForIdentity) {
  EgressCredential c = MustMake("A", "a.test", 80);
  auto key = MakeEgressCredential("K", "a.test", 80, "key-0123456789", false, "X-Api-Key", "Key {}");
  ASSERT_TRUE(key.ok());
  http::RequestHead head = Head("GET http://a.test/x HTTP/1.1\r\nauthorization: Bearer attacker-account\r\n"
                                "X-API-KEY: attacker\r\nAccept-Encoding: gzip, br\r\nAccept: */*");
  GrantPlan plan = PlanGrants({c, *key}, "a.test", 80, head);
  ASSERT_TRUE(plan.refused.empty()) << plan.refused;
  auto url = http::ParseAbsoluteHttpUrl(head.target);
  ASSERT_TRUE(url.ok());
  const std::string out = BuildGrantedRequestHead(plan, head, *url, false, 80);
  EXPECT_EQ(out, "GET /x HTTP/1.1\r\nHost: a.test\r\nAccept: */*\r\nAuthorization: Bearer " + kSecret +
                     "\r\nX-Api-Key: Key key-0123456789\r\nAccept-Encoding: identity\r\n\r\n");
  // Elsewhere, nothing is added or removed.
  GrantPlan other = PlanGrants({c}, "b.test", 80, head);
  EXPECT_EQ(BuildGrantedRequestHead(other, head, *url, false, 80), http::BuildUpstreamRequestHead(head, *url, false));
}

TEST(GrantPlan, AnEncodedAnswerCannotBeMasked) {
  auto resp = [](const std::string& fields) {
    auto r = http::ParseResponseHead("HTTP/1.1 200 OK\r\n" + fields + "\r\n\r\n");
    EXPECT_TRUE(r.ok());
    return *r;
  };
  EXPECT_EQ(UnmaskableResponse(resp("Content-Length: 3")), "");
  EXPECT_EQ(UnmaskableResponse(resp("Content-Encoding: identity\r\nTransfer-Encoding: chunked")), "");
  for (const char* f : {"Content-Encoding: gzip", "Content-Encoding: identity, br", "content-encoding: deflate",
                        "Transfer-Encoding: gzip, chunked", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked"}) {
    EXPECT_NE(UnmaskableResponse(resp(f)).find("cannot be masked"), std::string::npos) << f;
  }
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

// Everything the stand-in host received, heads and bodies: the value may be in it only as the
// Authorization line the proxy wrote, the placeholder never.
void ExpectTheValueOnlyInItsHeader(testing::HttpOrigin& origin, const std::string& placeholder) {
  for (const auto& got : origin.heads()) {
    std::string rest = got;
    const std::string line = "\r\nAuthorization: Bearer " + kSecret + "\r\n";
    if (size_t at = rest.find(line); at != std::string::npos) rest.erase(at, line.size());
    EXPECT_EQ(rest.find(kSecret), std::string::npos) << got;
    EXPECT_EQ(got.find(placeholder), std::string::npos) << got;
    EXPECT_EQ(got.find("attacker-account"), std::string::npos) << got;
  }
  for (const auto& body : origin.bodies()) {
    EXPECT_EQ(body.find(kSecret), std::string::npos) << body;
    EXPECT_EQ(body.find(placeholder), std::string::npos) << body;
  }
}

TEST_F(CredentialProxyTest, TheProxyPutsTheValueInItsHeaderAndTheEchoComesBackMasked) {
  auto r = Curl({"-H", "Authorization: Bearer " + P(), Url("allowed.test", "/echo")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto bare = Curl({Url("allowed.test", "/echo")});  // put in even when the code did not ask
  ASSERT_EQ(bare.exit_code, 0) << bare.err;
  auto heads = origin_.heads();
  ASSERT_EQ(heads.size(), 2u);
  for (const auto& head : heads) {
    EXPECT_NE(head.find("\r\nAuthorization: Bearer " + kSecret + "\r\n"), std::string::npos) << head;
    EXPECT_NE(head.find("\r\nAccept-Encoding: identity\r\n"), std::string::npos) << head;
  }
  ExpectTheValueOnlyInItsHeader(origin_, P());
  // The client, whose server echoed it in a header and in the body, sees only the placeholder.
  EXPECT_EQ(r.out.find(kSecret), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("X-Echo-Authorization: Bearer " + P()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Authorization: Bearer " + P()), std::string::npos) << r.out;
  EXPECT_EQ(bare.out.find(kSecret), std::string::npos) << bare.out;
  auto records = Records(2);
  ASSERT_EQ(records.size(), 2u);
  for (const auto& rec : records) {
    EXPECT_TRUE(rec.allowed);
    EXPECT_NE(rec.rule_or_reason.find("(credential API_TOKEN)"), std::string::npos) << rec.rule_or_reason;
  }
}

// The attack of issue 31: injected code sends the placeholder where the granted host stores what
// it gets (query, body, another header) under its own Authorization (the attacker's account).
TEST_F(CredentialProxyTest, InjectedCodeCannotPlantTheValueInTheAttackersAccount) {
  const std::string own = "Authorization: Bearer attacker-account";
  struct Attack {
    std::vector<std::string> curl;
    std::string where;
  } attacks[] = {
      {{"-H", own, "--data-binary", "note=x", Url("allowed.test", "/echo?q=" + P())}, "(it was in the request line)"},
      {{"-H", own, "--data-binary", "note=" + P(), Url("allowed.test", "/echo")}, "(it was in the request body)"},
      {{"-H", own, "-H", "Transfer-Encoding: chunked", "--data-binary", "note=" + P(), Url("allowed.test", "/echo")},
       "(it was in the request body)"},
      {{"-H", own, "-H", "X-Note: " + P(), Url("allowed.test", "/echo")}, "(it was in header X-Note)"},
      {{"-p", "--proxy-header", "X-Note: " + P(), Url("allowed.test", "/echo")}, "(it was in the CONNECT request)"},
  };
  for (const auto& a : attacks) {
    auto r = Curl(a.curl);
    EXPECT_NE((r.out + r.err).find("403"), std::string::npos) << r.out << r.err;
    EXPECT_EQ(r.out.find(kSecret), std::string::npos) << r.out;
    if (a.curl[0] != "-p") {
      EXPECT_NE(r.out.find(a.where), std::string::npos) << r.out;
    }
  }
  // A chunked body whose chunk boundary cuts the placeholder in two.
  UniqueFd c = testing::ConnectTcp(proxy_port_);
  ASSERT_TRUE(c.valid());
  const std::string half = P().substr(0, 10), rest = P().substr(10);
  char sizes[64];
  std::snprintf(sizes, sizeof sizes, "%zx", ("note=" + half).size());
  testing::SendAll(c.get(), "POST " + Url("allowed.test", "/echo") + " HTTP/1.1\r\nHost: allowed.test\r\n" + own +
                                "\r\nTransfer-Encoding: chunked\r\n\r\n" + sizes + "\r\nnote=" + half + "\r\n");
  std::snprintf(sizes, sizeof sizes, "%zx", rest.size());
  testing::SendAll(c.get(), std::string(sizes) + "\r\n" + rest + "\r\n0\r\n\r\n");
  std::string reply = testing::ReadFor(c.get(), 5s, "\r\n\r\n");
  EXPECT_NE(reply.find("403"), std::string::npos) << reply;
  // The attacker's own Authorization is replaced by the user's: the host cannot tell it apart.
  auto plain = Curl({"-H", own, "--data-binary", "note=hello", Url("allowed.test", "/echo")});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_FALSE(origin_.heads().empty());
  EXPECT_NE(origin_.heads().back().find("Authorization: Bearer " + kSecret), std::string::npos);
  ExpectTheValueOnlyInItsHeader(origin_, P());
  for (const auto& rec : Records(7)) {
    if (rec.allowed) continue;
    EXPECT_NE(rec.rule_or_reason.find("the placeholder of credential API_TOKEN may only go to allowed.test"),
              std::string::npos)
        << rec.rule_or_reason;
  }
}

// The value echoed back compressed (the server ignores Accept-Encoding: identity) is refused, and
// echoed in chunks that cut it is masked all the same.
TEST_F(CredentialProxyTest, TheValueCannotBeReadBackCompressedOrCutByChunks) {
  auto gz = Curl({"--compressed", Url("allowed.test", "/gzip-echo")});
  EXPECT_NE(gz.out.find("502"), std::string::npos) << gz.out << gz.err;
  EXPECT_NE(gz.out.find("cannot be masked"), std::string::npos) << gz.out;
  EXPECT_EQ(gz.out.find(kSecret), std::string::npos) << gz.out;
  auto chunked = Curl({"-H", "Authorization: Bearer " + P(), Url("allowed.test", "/chunked-echo")});
  ASSERT_EQ(chunked.exit_code, 0) << chunked.err;
  EXPECT_EQ(chunked.out.find(kSecret), std::string::npos) << chunked.out;
  EXPECT_NE(chunked.out.find("Authorization: Bearer " + P()), std::string::npos) << chunked.out;
  auto heads = origin_.heads();
  ASSERT_EQ(heads.size(), 2u);
  EXPECT_NE(heads[0].find("Accept-Encoding: identity"), std::string::npos) << heads[0];
  EXPECT_EQ(heads[0].find("deflate"), std::string::npos) << heads[0];  // curl --compressed asked for it
  auto records = Records(2);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_NE(records[0].error.find("cannot be masked"), std::string::npos) << records[0].error;
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
  EXPECT_NE(reply.find("(it was in the request body)"), std::string::npos) << reply;
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
