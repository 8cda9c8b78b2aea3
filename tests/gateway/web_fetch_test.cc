// web__fetch against a real HTTP server on 127.0.0.1 (python3's http.server, started by the
// test): the allow-list and the address guard on every hop, redirects, limits, cancellation,
// TLS verification, and the argument checks.
#include "gateway/builtins/web_fetch.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <thread>

#include "http_test_server.h"
#include "testing.h"

namespace warden::gateway {
namespace {

using nlohmann::json;

using testing::kPython;
using testing::TestServer;

// Checks `value` against the subset of JSON Schema web__fetch's outputSchema uses.
std::string SchemaViolation(const json& value, const json& schema, const std::string& where) {
  std::string type = schema.value("type", "");
  bool ok = type.empty() || (type == "object" && value.is_object()) ||
            (type == "array" && value.is_array()) || (type == "string" && value.is_string()) ||
            (type == "boolean" && value.is_boolean()) ||
            (type == "integer" && value.is_number_integer());
  if (!ok) return where + " is not " + type + ": " + value.dump().substr(0, 80);
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

class WebFetch : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " is needed for the test server";
    ASSERT_NE(server_.port(), 0) << "the test server did not start";
  }

  // Fetches with `allow` as the policy's egress.allow; checks the result against the schema.
  CallResult Fetch(const json& arguments, std::vector<std::string> allow,
                   std::shared_ptr<CancelToken> cancel = nullptr,
                   std::function<std::optional<std::string>(const std::string&)> check = {}) {
    auto request = ParseFetchArguments(arguments);
    EXPECT_TRUE(request.ok()) << request.status().message();
    if (!request.ok()) return {};
    CallResult r = RunWebFetch(
        *request, FetchEgress{.allow = &allow, .redirect_check = std::move(check)}, cancel);
    EXPECT_EQ(SchemaViolation(r.value["structuredContent"],
                              WebFetchDefinition()["outputSchema"], "structuredContent"),
              "");
    EXPECT_EQ(r.value["isError"], r.is_error);
    EXPECT_EQ(r.value["content"][0]["text"], r.Text());
    return r;
  }
  static const json& S(const CallResult& r) { return r.value["structuredContent"]; }

  TestServer server_;
};

TEST_F(WebFetch, FetchesAnAllowedLoopbackServerNamedByItsAddress) {
  CallResult r = Fetch({{"url", server_.Url("/text")}}, {server_.AllowEntry()});
  ASSERT_FALSE(r.is_error) << r.Text();
  EXPECT_EQ(S(r)["status"], 200);
  EXPECT_EQ(S(r)["body"], "hello from the test server\n");
  EXPECT_EQ(S(r)["content_type"], "text/plain; charset=utf-8");
  EXPECT_EQ(S(r)["truncated"], false);
  EXPECT_EQ(S(r)["bytes"], 27);
  EXPECT_EQ(S(r)["final_url"], server_.Url("/text"));
  ASSERT_EQ(S(r)["egress"].size(), 1u);
  const json& d = S(r)["egress"][0];
  EXPECT_EQ(d["allowed"], true);
  EXPECT_EQ(d["host"], "127.0.0.1");
  EXPECT_EQ(d["port"], server_.port());
  EXPECT_EQ(d["address"], "127.0.0.1");
  EXPECT_EQ(d["reason"], server_.AllowEntry());
  EXPECT_NE(r.Text().find("HTTP 200"), std::string::npos) << r.Text();
  EXPECT_NE(r.Text().find("hello from the test server"), std::string::npos) << r.Text();
}

TEST_F(WebFetch, SendsTheHostHeaderWithTheNonDefaultPort) {
  CallResult r = Fetch({{"url", server_.Url("/echo-host")}}, {server_.AllowEntry()});
  EXPECT_EQ(S(r)["body"], "127.0.0.1:" + std::to_string(server_.port())) << r.Text();
}

TEST_F(WebFetch, HostNotOnTheAllowListIsRefusedBeforeAnyConnection) {
  CallResult r = Fetch({{"url", "http://not-allowed.example/"}}, {server_.AllowEntry()});
  EXPECT_TRUE(r.is_error);
  EXPECT_NE(r.Text().find("not-allowed.example is not on the allow-list"), std::string::npos)
      << r.Text();
  EXPECT_NE(r.Text().find("egress.allow"), std::string::npos) << r.Text();
  ASSERT_EQ(S(r)["egress"].size(), 1u);
  EXPECT_EQ(S(r)["egress"][0]["allowed"], false);
  EXPECT_EQ(S(r)["egress"][0]["address"], "");
  EXPECT_EQ(S(r)["status"], 0);
}

TEST_F(WebFetch, PortNotOnTheAllowListIsRefused) {
  CallResult r = Fetch({{"url", "http://127.0.0.1:" + std::to_string(server_.port() + 1) + "/"}},
                       {server_.AllowEntry()});
  EXPECT_TRUE(r.is_error);
  EXPECT_NE(r.Text().find("port"), std::string::npos) << r.Text();
}

TEST_F(WebFetch, NoPolicyMeansEveryHostIsRefused) {
  auto request = ParseFetchArguments({{"url", server_.Url("/text")}});
  CallResult r = RunWebFetch(*request, FetchEgress{}, nullptr);
  EXPECT_TRUE(r.is_error);
  EXPECT_NE(r.Text().find("no egress allow-list is in force"), std::string::npos) << r.Text();
  EXPECT_NE(r.Text().find("\"127.0.0.1:" + std::to_string(server_.port()) + "\""), std::string::npos)
      << "the message says what to allow: " << r.Text();
}

// The attack: an allowed name that resolves to loopback. Only an entry naming the address
// itself reaches loopback.
TEST_F(WebFetch, LoopbackThroughANameNotAllowedLiterallyIsRefused) {
  std::string port = std::to_string(server_.port());
  CallResult r = Fetch({{"url", "http://localhost:" + port + "/text"}}, {"localhost:" + port});
  EXPECT_TRUE(r.is_error);
  EXPECT_NE(r.Text().find("loopback"), std::string::npos) << r.Text();
  EXPECT_EQ(S(r)["body"], "");
  ASSERT_FALSE(S(r)["egress"].empty());
  for (const json& d : S(r)["egress"]) {
    EXPECT_EQ(d["allowed"], false) << d.dump();
    EXPECT_NE(d["address"], "") << d.dump();
  }
}

TEST_F(WebFetch, OtherSpellingsOfTheAllowedAddressMeanTheSameAddress) {
  // 127.1 is 127.0.0.1 (inet_aton): the same address, the same decision.
  CallResult r = Fetch({{"url", "http://127.1:" + std::to_string(server_.port()) + "/text"}},
                       {server_.AllowEntry()});
  EXPECT_FALSE(r.is_error) << r.Text();
  EXPECT_EQ(S(r)["final_url"], server_.Url("/text"));
}

TEST_F(WebFetch, FollowsRedirects) {
  CallResult r = Fetch({{"url", server_.Url("/redirect?to=/text")}}, {server_.AllowEntry()});
  ASSERT_FALSE(r.is_error) << r.Text();
  EXPECT_EQ(S(r)["final_url"], server_.Url("/text"));
  EXPECT_EQ(S(r)["url"], server_.Url("/redirect?to=/text"));
  EXPECT_EQ(S(r)["egress"].size(), 2u);
  CallResult five = Fetch({{"url", server_.Url("/chain?n=5")}}, {server_.AllowEntry()});
  EXPECT_EQ(S(five)["body"], "end of chain\n") << five.Text();
}

TEST_F(WebFetch, MoreThanFiveRedirectsFail) {
  CallResult r = Fetch({{"url", server_.Url("/chain?n=6")}}, {server_.AllowEntry()});
  EXPECT_TRUE(r.is_error);
  EXPECT_NE(r.Text().find("more than 5 redirects"), std::string::npos) << r.Text();
}

// A redirect to another host is another send (docs/trifecta.md, "Redirects"): the session's
// check sees the URL first and can refuse it before any connection; a redirect on the same host
// and port is not put to it (that server chose the URL and has seen it).
TEST_F(WebFetch, ARedirectToAnotherHostIsPutToTheCheckFirst) {
  const std::string other = "http://127.0.0.2:" + std::to_string(server_.port()) + "/text";
  const std::vector<std::string> allow = {server_.AllowEntry(),
                                          "127.0.0.2:" + std::to_string(server_.port())};
  std::vector<std::string> asked;
  auto refuse = [&asked](const std::string& url) -> std::optional<std::string> {
    asked.push_back(url);
    return "trifecta: not now";
  };
  CallResult r = Fetch({{"url", server_.Url("/redirect?to=" + other)}}, allow, nullptr, refuse);
  EXPECT_TRUE(r.is_error);
  EXPECT_NE(r.Text().find("redirect to " + other + " refused: trifecta: not now"),
            std::string::npos)
      << r.Text();
  EXPECT_EQ(asked, std::vector<std::string>{other});
  ASSERT_EQ(S(r)["egress"].size(), 2u) << S(r).dump();
  EXPECT_EQ(S(r)["egress"][0]["allowed"], true);
  EXPECT_EQ(S(r)["egress"][1]["allowed"], false);
  EXPECT_EQ(S(r)["egress"][1]["host"], "127.0.0.2");
  EXPECT_EQ(S(r)["egress"][1]["address"], "");  // refused before any address was tried
  EXPECT_EQ(S(r)["egress"][1]["reason"], "trifecta: not now");
  EXPECT_EQ(S(r)["final_url"], other);
  EXPECT_EQ(S(r)["body"], "");

  // The same host: followed without asking.
  asked.clear();
  CallResult same = Fetch({{"url", server_.Url("/chain?n=3")}}, allow, nullptr, refuse);
  EXPECT_FALSE(same.is_error) << same.Text();
  EXPECT_EQ(S(same)["body"], "end of chain\n");
  EXPECT_TRUE(asked.empty());

  // A check that lets it go: the hop goes on to the allow-list and the connection (nothing
  // listens on 127.0.0.2, so it ends in a connection error, after the hop was allowed).
  CallResult let = Fetch({{"url", server_.Url("/redirect?to=" + other)}}, allow, nullptr,
                         [&asked](const std::string& url) -> std::optional<std::string> {
                           asked.push_back(url);
                           return std::nullopt;
                         });
  EXPECT_EQ(asked, std::vector<std::string>{other});
  ASSERT_EQ(S(let)["egress"].size(), 2u) << S(let).dump();
  EXPECT_EQ(S(let)["egress"][1]["allowed"], true) << S(let).dump();
}

// The attack: an allowed server redirects to the cloud metadata service.
TEST_F(WebFetch, RedirectToTheMetadataAddressIsRefused) {
  for (const char* target : {"http://169.254.169.254/latest/meta-data/",
                             "http://2852039166/latest/meta-data/",  // the same, as one number
                             "http://[::ffff:169.254.169.254]/"}) {
    CallResult r = Fetch({{"url", server_.Url(std::string("/redirect?to=") + target)}},
                         {server_.AllowEntry()});
    EXPECT_TRUE(r.is_error) << target;
    ASSERT_EQ(S(r)["egress"].size(), 2u) << S(r).dump();
    EXPECT_EQ(S(r)["egress"][0]["allowed"], true);
    EXPECT_EQ(S(r)["egress"][1]["allowed"], false) << target;
    EXPECT_EQ(S(r)["body"], "");
  }
}

// The attack: a redirect to a name the allow-list permits but that resolves to loopback; the
// address guard runs on every hop, not only the first. (The literal entry 127.0.0.1:PORT lifts
// the guard for that address and port only, whatever name led there: port 80 stays refused.)
TEST_F(WebFetch, RedirectToAnAllowedNameResolvingToLoopbackIsRefused) {
  CallResult r = Fetch({{"url", server_.Url("/redirect?to=http://localhost/text")}},
                       {server_.AllowEntry(), "localhost"});
  EXPECT_TRUE(r.is_error);
  EXPECT_NE(r.Text().find("loopback"), std::string::npos) << r.Text();
  ASSERT_GE(S(r)["egress"].size(), 2u);
  EXPECT_EQ(S(r)["egress"][0]["allowed"], true);
  const json& last = S(r)["egress"].back();
  EXPECT_EQ(last["allowed"], false);
  EXPECT_EQ(last["host"], "localhost");
  EXPECT_NE(last["reason"].get<std::string>().find("loopback"), std::string::npos);
}

TEST_F(WebFetch, BodyIsCutAtMaxBytes) {
  CallResult r =
      Fetch({{"url", server_.Url("/big?n=50000")}, {"max_bytes", 1000}}, {server_.AllowEntry()});
  ASSERT_FALSE(r.is_error) << r.Text();
  EXPECT_EQ(S(r)["body"], std::string(1000, 'a'));
  EXPECT_EQ(S(r)["truncated"], true);
  EXPECT_EQ(S(r)["bytes"], 1000);
  EXPECT_NE(r.Text().find("cut at 1000 bytes"), std::string::npos) << r.Text().substr(0, 200);
  CallResult whole =
      Fetch({{"url", server_.Url("/big?n=1000")}, {"max_bytes", 1000}}, {server_.AllowEntry()});
  EXPECT_EQ(S(whole)["truncated"], false);
}

TEST_F(WebFetch, TimeoutEndsTheFetch) {
  auto start = std::chrono::steady_clock::now();
  CallResult r =
      Fetch({{"url", server_.Url("/slow?s=5")}, {"timeout_s", 0.5}}, {server_.AllowEntry()});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_TRUE(r.is_error);
  EXPECT_NE(r.Text().find("timed out"), std::string::npos) << r.Text();
  EXPECT_NE(S(r)["error"].get<std::string>().find("limit 500 ms"), std::string::npos);
}

TEST_F(WebFetch, CancelFromAnotherThreadEndsTheFetch) {
  auto cancel = std::make_shared<CancelToken>();
  std::thread canceller([cancel] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cancel->Cancel("session closed");
  });
  auto start = std::chrono::steady_clock::now();
  CallResult r = Fetch({{"url", server_.Url("/slow?s=10")}}, {server_.AllowEntry()}, cancel);
  canceller.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_TRUE(r.is_error);
  EXPECT_NE(r.Text().find("cancelled (session closed)"), std::string::npos) << r.Text();
}

TEST_F(WebFetch, NotFoundIsAnErrorWithTheBody) {
  CallResult r = Fetch({{"url", server_.Url("/missing")}}, {server_.AllowEntry()});
  EXPECT_TRUE(r.is_error);
  EXPECT_EQ(S(r)["status"], 404);
  EXPECT_EQ(S(r)["body"], "no such page\n");
  EXPECT_NE(r.Text().find("HTTP 404"), std::string::npos) << r.Text();
}

TEST_F(WebFetch, NonTextContentIsDescribedNotReturned) {
  CallResult r = Fetch({{"url", server_.Url("/binary")}}, {server_.AllowEntry()});
  EXPECT_FALSE(r.is_error) << r.Text();
  EXPECT_EQ(S(r)["body"], "");
  EXPECT_EQ(S(r)["content_type"], "image/png");
  EXPECT_EQ(S(r)["bytes"], 10);
  EXPECT_NE(r.Text().find("non-text content, not shown"), std::string::npos) << r.Text();
}

TEST_F(WebFetch, Latin1TextIsReturnedAsUtf8) {
  CallResult r = Fetch({{"url", server_.Url("/latin1")}}, {server_.AllowEntry()});
  EXPECT_EQ(S(r)["body"], "caf\xC3\xA9\n");
}

TEST_F(WebFetch, ConnectionRefusedIsAnError) {
  // A port nothing listens on (the server's port + 1 is very likely free: checked by connect).
  std::string entry = "127.0.0.1:" + std::to_string(server_.port() + 1);
  CallResult r = Fetch({{"url", "http://" + entry + "/"}}, {entry});
  EXPECT_TRUE(r.is_error);
  EXPECT_NE(r.Text().find("connecting to 127.0.0.1"), std::string::npos) << r.Text();
  EXPECT_EQ(S(r)["egress"][0]["allowed"], true);
}

TEST_F(WebFetch, BadUrlsAreErrorResults) {
  for (const char* url :
       {"ftp://127.0.0.1/", "http://user:pw@127.0.0.1/", "http:///x", "http://127.0.0.1:99999/",
        "http://a b/", "file:///etc/passwd", "http://1.2.3.4.5/"}) {
    CallResult r = Fetch({{"url", url}}, {server_.AllowEntry()});
    EXPECT_TRUE(r.is_error) << url;
    EXPECT_NE(r.Text().find("bad url"), std::string::npos) << url << ": " << r.Text();
    EXPECT_TRUE(S(r)["egress"].empty()) << url;
  }
}

// Certificates are verified against the system store: a self-signed server is refused.
TEST(WebFetchTls, SelfSignedCertificateIsRefused) {
  if (access(kPython, X_OK) != 0 || access("/usr/bin/openssl", X_OK) != 0)
    GTEST_SKIP() << "python3 and openssl are needed";
  testing::TempDir dir;
  std::string cert = dir.File("cert.pem"), key = dir.File("key.pem");
  std::string cmd =
      "/usr/bin/openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1"
      " -addext subjectAltName=IP:127.0.0.1 -keyout " +
      key + " -out " + cert + " >/dev/null 2>&1";
  ASSERT_EQ(system(cmd.c_str()), 0);
  TestServer server(cert, key);
  ASSERT_NE(server.port(), 0);
  std::vector<std::string> allow{server.AllowEntry()};
  auto request = ParseFetchArguments({{"url", server.Url("/text", "https")}});
  CallResult r = RunWebFetch(*request, FetchEgress{.allow = &allow}, nullptr);
  EXPECT_TRUE(r.is_error);
  EXPECT_NE(r.Text().find("TLS handshake"), std::string::npos) << r.Text();
  EXPECT_NE(r.Text().find("certificate"), std::string::npos) << r.Text();
  EXPECT_EQ(r.value["structuredContent"]["body"], "");
}

TEST(FetchArguments, AcceptsUrlWithOptionalLimitsAndCapsThem) {
  auto r = ParseFetchArguments({{"url", "https://example.com/"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->max_bytes, kFetchDefaultMaxBytes);
  EXPECT_EQ(r->timeout_ms, kFetchDefaultTimeoutMs);
  r = ParseFetchArguments({{"url", "http://x.test/"}, {"max_bytes", 5000000}, {"timeout_s", 100}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->max_bytes, kFetchMaxBytesCap);
  EXPECT_EQ(r->timeout_ms, kFetchTimeoutCapMs);
  r = ParseFetchArguments({{"url", "http://x.test/"}, {"max_bytes", 10}, {"timeout_s", 1.5}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->max_bytes, 10u);
  EXPECT_EQ(r->timeout_ms, 1500u);
}

TEST(FetchArguments, RefusesBadArgumentsNamingTheMember) {
  struct {
    json arguments;
    const char* member;
  } cases[] = {
      {json::array(), "arguments"},
      {json::object(), "url"},
      {{{"url", 5}}, "url"},
      {{{"url", ""}}, "url"},
      {{{"url", "http://x/"}, {"max_bytes", 0}}, "max_bytes"},
      {{{"url", "http://x/"}, {"max_bytes", -5}}, "max_bytes"},
      {{{"url", "http://x/"}, {"max_bytes", 1.5}}, "max_bytes"},
      {{{"url", "http://x/"}, {"max_bytes", "10"}}, "max_bytes"},
      {{{"url", "http://x/"}, {"timeout_s", 0}}, "timeout_s"},
      {{{"url", "http://x/"}, {"timeout_s", "1"}}, "timeout_s"},
      {{{"url", "http://x/"}, {"method", "POST"}}, "method"},
  };
  for (const auto& c : cases) {
    auto r = ParseFetchArguments(c.arguments);
    ASSERT_FALSE(r.ok()) << c.arguments.dump();
    EXPECT_NE(r.status().message().find(c.member), std::string::npos) << r.status().message();
  }
}

TEST(FetchDefinition, DeclaresInputAndOutputSchemas) {
  json def = WebFetchDefinition();
  EXPECT_EQ(def["name"], "web__fetch");
  EXPECT_EQ(def["inputSchema"]["required"], json({"url"}));
  EXPECT_EQ(def["inputSchema"]["additionalProperties"], false);
  for (const char* key :
       {"url", "final_url", "status", "content_type", "body", "truncated", "bytes", "egress"})
    EXPECT_TRUE(def["outputSchema"]["properties"].contains(key)) << key;
}

}  // namespace
}  // namespace warden::gateway
