// The egress proxy against real servers on loopback, with curl and raw sockets as clients.
// Local servers are reached as "allowed.test" through a --resolve style mapping.
#include "egress/proxy.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace warden::egress {
namespace {

using namespace std::chrono_literals;
using testing::ClosedWithin;
using testing::ConnectTcp;
using testing::HttpOrigin;
using testing::ReadExactly;
using testing::ReadFor;
using testing::RunProgram;
using testing::SendAll;
using testing::TestServer;

class ProxyTest : public ::testing::Test {
 protected:
  // Starts a proxy allowing `allow`, with allowed.test (and other.test) mapped to loopback.
  void StartProxy(const std::vector<std::string>& allow, ProxyLimits limits = {},
                  DecisionHook hook = nullptr) {
    ProxyOptions options;
    auto list = AllowList::Parse(allow);
    ASSERT_TRUE(list.ok()) << list.status().message();
    options.allow_list = *list;
    auto resolve = ResolveMap::Parse({{"allowed.test", "127.0.0.1"}, {"other.test", "127.0.0.1"}});
    ASSERT_TRUE(resolve.ok());
    options.resolve = *resolve;
    options.session_id = "sess-1";
    options.hook = std::move(hook);
    options.limits = limits;
    options.zero_copy = zero_copy_;
    options.recorder = [this](const EgressRecord& r) { records_.Add(r); };
    proxy_ = testing::StartProxy(std::move(options), &proxy_port_);
    ASSERT_NE(proxy_, nullptr);
  }

  void TearDown() override {
    if (proxy_) proxy_->Stop();
  }

  std::string ProxyUrl() const { return "http://127.0.0.1:" + std::to_string(proxy_port_); }

  testing::ProcessResult Curl(std::vector<std::string> args) {
    std::vector<std::string> argv = {"curl", "-sS", "--max-time", "10", "-w", "\n%{http_code}"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProgram(argv);
  }

  // Waits until `n` records were delivered (they come when each connection ends).
  std::vector<EgressRecord> WaitForRecords(size_t n) { return records_.Wait(n); }

  // Sends `request` on a new connection; reads until the proxy closes, `until` shows up, or
  // `timeout` passes.
  std::string RawExchange(const std::string& request, std::chrono::milliseconds timeout = 3s,
                          std::string_view until = {}) {
    UniqueFd c = ConnectTcp(proxy_port_);
    EXPECT_TRUE(c.valid());
    SendAll(c.get(), request);
    return ReadFor(c.get(), timeout, until);
  }

  std::unique_ptr<EgressProxy> proxy_;
  uint16_t proxy_port_ = 0;
  bool zero_copy_ = true;
  testing::Collected<EgressRecord> records_;
};

std::string Socks5Connect(int fd, uint8_t atyp, const std::string& addr, uint16_t port,
                          uint8_t command = 1) {
  SendAll(fd, std::string("\x05\x01\x00", 3));
  std::string method = ReadExactly(fd, 2, 3s);
  if (method != std::string("\x05\x00", 2)) return "method:" + method;
  std::string req = {5, static_cast<char>(command), 0, static_cast<char>(atyp)};
  if (atyp == 3) req += static_cast<char>(addr.size());
  req += addr;
  req += static_cast<char>(port >> 8);
  req += static_cast<char>(port & 0xff);
  SendAll(fd, req);
  return ReadExactly(fd, 10, 3s);
}

// ---- Plain HTTP ----------------------------------------------------------------------------

TEST_F(ProxyTest, PlainHttpToAnAllowedHostReachesTheServerInOriginForm) {
  HttpOrigin origin;
  StartProxy({"allowed.test:" + std::to_string(origin.port())});
  auto r = Curl({"-x", ProxyUrl(), "-H", "Proxy-Authorization: Basic c2VjcmV0",
                 "http://allowed.test:" + std::to_string(origin.port()) + "/hello?x=1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello from upstream: GET /hello?x=1 0\n\n200");
  auto heads = origin.heads();
  ASSERT_EQ(heads.size(), 1u);
  EXPECT_EQ(heads[0].rfind("GET /hello?x=1 HTTP/1.1\r\n", 0), 0u) << heads[0];
  EXPECT_NE(heads[0].find("Host: allowed.test:" + std::to_string(origin.port())),
            std::string::npos);
  EXPECT_EQ(heads[0].find("Proxy-"), std::string::npos) << heads[0];

  auto records = WaitForRecords(1);
  ASSERT_EQ(records.size(), 1u);
  const EgressRecord& rec = records[0];
  EXPECT_EQ(rec.protocol, Protocol::kHttp);
  EXPECT_TRUE(rec.allowed);
  EXPECT_EQ(rec.host, "allowed.test");
  EXPECT_EQ(rec.port, origin.port());
  EXPECT_EQ(rec.resolved_address, "127.0.0.1");
  EXPECT_EQ(rec.rule_or_reason, "allowed.test:" + std::to_string(origin.port()) +
                                    " (--resolve allowed.test=127.0.0.1)");
  EXPECT_EQ(rec.http_method, "GET");
  EXPECT_EQ(rec.http_target, "/hello?x=1");
  EXPECT_EQ(rec.http_status, 200);
  EXPECT_GT(rec.bytes_up, 20u);
  EXPECT_GT(rec.bytes_down, 40u);
  EXPECT_EQ(rec.session_id, "sess-1");
  EXPECT_TRUE(rec.error.empty()) << rec.error;
}

TEST_F(ProxyTest, DeniedHostGets403NamingTheReason) {
  StartProxy({"allowed.test"});
  auto r = Curl({"-x", ProxyUrl(), "http://evil.test/"});
  EXPECT_EQ(r.out, "warden egress: denied: host evil.test is not on the allow-list\n\n403");
  auto records = WaitForRecords(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_FALSE(records[0].allowed);
  EXPECT_EQ(records[0].host, "evil.test");
  EXPECT_EQ(records[0].rule_or_reason, "host evil.test is not on the allow-list");
  EXPECT_EQ(records[0].http_status, 403);
}

TEST_F(ProxyTest, KeepAliveServesSeveralRequestsOnOneConnectionEachRecorded) {
  HttpOrigin origin;
  StartProxy({"allowed.test:" + std::to_string(origin.port())});
  const std::string base = "http://allowed.test:" + std::to_string(origin.port());
  auto r = Curl(
      {"-x", ProxyUrl(), base + "/one", base + "/two", base + "/chunked", base + "/big?100000"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("GET /one 0"), std::string::npos);
  EXPECT_NE(r.out.find("GET /two 0"), std::string::npos);
  EXPECT_NE(r.out.find("hello chunky"), std::string::npos);
  EXPECT_NE(r.out.find(std::string(100000, 'x')), std::string::npos);
  EXPECT_EQ(origin.connections(), 1);  // the upstream connection was kept alive too
  auto records = WaitForRecords(4);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[3].http_target, "/big?100000");
  EXPECT_GT(records[3].bytes_down, 100000u);
}

TEST_F(ProxyTest, RequestBodiesAreForwardedWithLengthAndChunked) {
  HttpOrigin origin;
  StartProxy({"allowed.test:" + std::to_string(origin.port())});
  const std::string url = "http://allowed.test:" + std::to_string(origin.port()) + "/post";
  auto r = Curl({"-x", ProxyUrl(), "--data-binary", std::string(5000, 'b'), url});
  EXPECT_EQ(r.out, "hello from upstream: POST /post 5000\n\n200");
  auto c =
      Curl({"-x", ProxyUrl(), "-H", "Transfer-Encoding: chunked", "--data-binary", "abcdef", url});
  EXPECT_EQ(c.out, "hello from upstream: POST /post 6\n\n200");
  auto bodies = origin.bodies();
  ASSERT_EQ(bodies.size(), 2u);
  EXPECT_EQ(bodies[1], "abcdef");
}

TEST_F(ProxyTest, OriginFormAndSmuggledRequestsAreRefused) {
  StartProxy({"allowed.test"});
  EXPECT_EQ(RawExchange("GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n").rfind("HTTP/1.1 400", 0),
            0u);
  EXPECT_EQ(RawExchange("POST http://allowed.test/ HTTP/1.1\r\nContent-Length: 3\r\n"
                        "Transfer-Encoding: chunked\r\n\r\n")
                .rfind("HTTP/1.1 400", 0),
            0u);
  EXPECT_EQ(
      RawExchange("GET http://allowed.test@evil.test/ HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 400", 0),
      0u);
  std::string bad_name = RawExchange("GET http://bad_name.test/ HTTP/1.1\r\n\r\n");
  EXPECT_EQ(bad_name.rfind("HTTP/1.1 400", 0), 0u) << bad_name;
  EXPECT_NE(bad_name.find("warden egress: bad request: host name \"bad_name.test\" contains \"_\""),
            std::string::npos)
      << bad_name;
}

// ---- CONNECT -------------------------------------------------------------------------------

TEST_F(ProxyTest, ConnectSplicesBytesBothWaysAndRecordsThem) {
  TestServer echo(testing::EchoHandler);
  StartProxy({"allowed.test:" + std::to_string(echo.port())});
  UniqueFd c = ConnectTcp(proxy_port_);
  // The first payload bytes travel right behind the request, as TLS clients often send them.
  SendAll(c.get(), "CONNECT allowed.test:" + std::to_string(echo.port()) + " HTTP/1.1\r\n\r\nping");
  std::string reply = ReadFor(c.get(), 3s, "ping");
  EXPECT_EQ(reply, "HTTP/1.1 200 Connection established\r\n\r\nping");
  SendAll(c.get(), std::string(100000, 'z'));
  EXPECT_EQ(ReadExactly(c.get(), 100000, 3s), std::string(100000, 'z'));
  c.reset();
  auto records = WaitForRecords(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].protocol, Protocol::kConnect);
  EXPECT_TRUE(records[0].allowed);
  EXPECT_EQ(records[0].bytes_up, 100004u);
  EXPECT_EQ(records[0].bytes_down, 100004u);
  EXPECT_EQ(records[0].resolved_address, "127.0.0.1");
  nlohmann::json j = records[0];
  EXPECT_EQ(j["protocol"], "connect");
  EXPECT_EQ(j["bytes_up"], 100004);
  EXPECT_EQ(j["host"], "allowed.test");
  EXPECT_EQ(j["allowed"], true);
  EXPECT_TRUE(j["time"].get<std::string>().ends_with("Z"));
}

TEST_F(ProxyTest, CopyingForwarderWorksWhenZeroCopyIsOff) {
  zero_copy_ = false;
  TestServer echo(testing::EchoHandler);
  HttpOrigin origin;
  StartProxy({"allowed.test:" + std::to_string(echo.port()),
              "allowed.test:" + std::to_string(origin.port())});
  UniqueFd c = ConnectTcp(proxy_port_);
  SendAll(c.get(), "CONNECT allowed.test:" + std::to_string(echo.port()) + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(ReadFor(c.get(), 3s, "\r\n\r\n"), "HTTP/1.1 200 Connection established\r\n\r\n");
  SendAll(c.get(), std::string(300000, 'q'));
  EXPECT_EQ(ReadExactly(c.get(), 300000, 3s), std::string(300000, 'q'));
  const std::string base = "http://allowed.test:" + std::to_string(origin.port());
  auto r = Curl({"-x", ProxyUrl(), base + "/big?1000000", base + "/chunked"});
  EXPECT_NE(r.out.find(std::string(1000000, 'x') + "\n200hello chunky\n200"), std::string::npos);
}

TEST_F(ProxyTest, ConnectDecidesOnTheTargetNeverOnTheHostHeader) {
  StartProxy({"allowed.test"});
  std::string r = RawExchange("CONNECT evil.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 403 Forbidden\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("warden egress: denied: host evil.test is not on the allow-list"),
            std::string::npos)
      << r;
}

TEST_F(ProxyTest, ConnectToAPortNotAllowedIsDenied) {
  StartProxy({"allowed.test"});
  std::string r = RawExchange("CONNECT allowed.test:22 HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 403", 0), 0u) << r;
  EXPECT_NE(r.find("port 22 is not allowed for allowed.test"), std::string::npos) << r;
}

TEST_F(ProxyTest, ConnectWithTlsToALocalServerThroughCurl) {
  if (!testing::HaveProgram("openssl")) GTEST_SKIP() << "openssl CLI not installed";
  char dir_template[] = "/tmp/warden-egress-tls-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  auto gen = RunProgram({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                         "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", dir + "/key.pem",
                         "-out", dir + "/cert.pem", "-subj", "/CN=allowed.test", "-days", "1",
                         "-addext", "subjectAltName=DNS:allowed.test"});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  // s_server picks a free port and tells us which ("ACCEPT 127.0.0.1:PORT").
  int out_pipe[2];
  ASSERT_EQ(pipe2(out_pipe, O_CLOEXEC), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    dup2(out_pipe[1], 2);
    execlp("openssl", "openssl", "s_server", "-accept", "127.0.0.1:0", "-cert",
           (dir + "/cert.pem").c_str(), "-key", (dir + "/key.pem").c_str(), "-www", nullptr);
    _exit(127);
  }
  close(out_pipe[1]);
  struct Cleanup {
    pid_t pid;
    int fd;
    std::string dir;
    ~Cleanup() {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      close(fd);
      RunProgram({"rm", "-rf", dir});
    }
  } cleanup{pid, out_pipe[0], dir};
  std::string banner;
  for (int i = 0; i < 50 && banner.find('\n', banner.find("ACCEPT")) == std::string::npos; ++i) {
    banner += ReadFor(out_pipe[0], 100ms, "\n");
  }
  banner = banner.substr(banner.find("ACCEPT") == std::string::npos ? 0 : banner.find("ACCEPT"));
  const size_t colon = banner.rfind(':');
  ASSERT_NE(colon, std::string::npos) << banner;
  const int tls_port = std::atoi(banner.c_str() + colon + 1);
  ASSERT_GT(tls_port, 0) << banner;

  StartProxy({"allowed.test:" + std::to_string(tls_port)});
  auto r = Curl({"--proxy", ProxyUrl(), "--cacert", dir + "/cert.pem",
                 "https://allowed.test:" + std::to_string(tls_port) + "/"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("s_server"), std::string::npos) << r.out;
  EXPECT_TRUE(r.out.ends_with("200")) << r.out;
  auto records = WaitForRecords(1);
  ASSERT_GE(records.size(), 1u);
  EXPECT_EQ(records[0].protocol, Protocol::kConnect);
  EXPECT_TRUE(records[0].allowed);
  EXPECT_GT(records[0].bytes_up, 200u);    // at least a ClientHello
  EXPECT_GT(records[0].bytes_down, 500u);  // certificate and page
}

// ---- SSRF and the address guard --------------------------------------------------------------

TEST_F(ProxyTest, AddressSpellingsOfInternalTargetsAreRefusedEvenWhenTheHookAllowsAll) {
  StartProxy({}, {}, [](const Attempt&) { return Decision::Allow("everything"); });
  struct Case {
    std::string target;
    std::string reason;
  } cases[] = {
      {"127.0.0.1:80", "address 127.0.0.1 is loopback"},
      {"169.254.169.254:80", "address 169.254.169.254 is link-local"},
      {"10.0.0.1:80", "address 10.0.0.1 is private (RFC 1918)"},
      {"[::1]:80", "address ::1 is loopback"},
      {"[::ffff:127.0.0.1]:80", "address ::ffff:127.0.0.1 is loopback"},
      {"0.0.0.0:80", "address 0.0.0.0 is unspecified"},
      {"2130706433:80", "address 127.0.0.1 is loopback"},
      {"0x7f000001:80", "address 127.0.0.1 is loopback"},
      {"0177.0.0.1:80", "address 127.0.0.1 is loopback"},
      {"127.1:80", "address 127.0.0.1 is loopback"},
  };
  for (const auto& c : cases) {
    std::string r = RawExchange("CONNECT " + c.target + " HTTP/1.1\r\n\r\n");
    EXPECT_EQ(r.rfind("HTTP/1.1 403", 0), 0u) << c.target << ": " << r;
    EXPECT_NE(r.find(c.reason), std::string::npos) << c.target << ": " << r;
  }
  std::string r = RawExchange("GET http://2130706433/ HTTP/1.1\r\n\r\n");
  EXPECT_NE(r.find("address 127.0.0.1 is loopback"), std::string::npos) << r;
}

TEST_F(ProxyTest, AllowedNameThatResolvesToLoopbackIsRefused) {
  // "localhost" resolves through the system resolver to a loopback address: DNS rebinding in
  // miniature. Being on the allow-list does not let it through the address guard.
  StartProxy({"localhost:8080"});
  std::string r = RawExchange("CONNECT localhost:8080 HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 403", 0), 0u) << r;
  EXPECT_NE(r.find("is loopback"), std::string::npos) << r;
  auto records = WaitForRecords(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_FALSE(records[0].allowed);
  EXPECT_FALSE(records[0].resolved_address.empty());
}

TEST_F(ProxyTest, LiteralAllowEntryReachesThatAddressInAnySpelling) {
  TestServer echo(testing::EchoHandler);
  const std::string port = std::to_string(echo.port());
  StartProxy({"127.0.0.1:" + port});
  for (const std::string host : {"127.0.0.1", "2130706433"}) {
    UniqueFd c = ConnectTcp(proxy_port_);
    SendAll(c.get(), "CONNECT " + host + ":" + port + " HTTP/1.1\r\n\r\nhi");
    EXPECT_EQ(ReadFor(c.get(), 3s, "hi"), "HTTP/1.1 200 Connection established\r\n\r\nhi") << host;
  }
  auto records = WaitForRecords(2);
  ASSERT_GE(records.size(), 1u);
  EXPECT_EQ(records[0].rule_or_reason,
            "127.0.0.1:" + port + " (allow entry 127.0.0.1:" + port + ")");
}

// ---- SOCKS5 --------------------------------------------------------------------------------

TEST_F(ProxyTest, Socks5WithDomainNamesThroughCurl) {
  HttpOrigin origin;
  StartProxy({"allowed.test:" + std::to_string(origin.port())});
  auto r = Curl({"--socks5-hostname", "127.0.0.1:" + std::to_string(proxy_port_),
                 "http://allowed.test:" + std::to_string(origin.port()) + "/via-socks"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello from upstream: GET /via-socks 0\n\n200");
  auto denied =
      Curl({"--socks5-hostname", "127.0.0.1:" + std::to_string(proxy_port_), "http://evil.test/"});
  EXPECT_NE(denied.exit_code, 0);
  auto records = WaitForRecords(2);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].protocol, Protocol::kSocks5);
  EXPECT_TRUE(records[0].allowed);
  EXPECT_GT(records[0].bytes_down, 0u);
  EXPECT_FALSE(records[1].allowed);
  EXPECT_EQ(records[1].rule_or_reason, "host evil.test is not on the allow-list");
}

TEST_F(ProxyTest, Socks5RepliesWithProtocolCorrectCodes) {
  TestServer echo(testing::EchoHandler);
  TestServer echo6(testing::EchoHandler, "::1");
  // Bound, never listening: refused, and no other process can take the port meanwhile.
  auto [refusing_fd, closed_port] = testing::ListenTcp("127.0.0.1", /*listen_too=*/false);
  StartProxy({"allowed.test:" + std::to_string(echo.port()),
              "allowed.test:" + std::to_string(closed_port),
              "127.0.0.1:" + std::to_string(echo.port()), "[::1]:" + std::to_string(echo6.port())});
  auto reply_code = [&](uint8_t atyp, const std::string& addr, uint16_t port, uint8_t cmd = 1) {
    UniqueFd c = ConnectTcp(proxy_port_);
    std::string r = Socks5Connect(c.get(), atyp, addr, port, cmd);
    return r.size() == 10 ? static_cast<int>(static_cast<uint8_t>(r[1])) : -1;
  };
  EXPECT_EQ(reply_code(3, "allowed.test", echo.port()), 0x00);
  EXPECT_EQ(reply_code(3, "evil.test", echo.port()), 0x02);
  EXPECT_EQ(reply_code(3, "allowed.test", 22), 0x02);
  EXPECT_EQ(reply_code(3, "allowed.test", closed_port), 0x05);
  EXPECT_EQ(reply_code(3, "allowed.test", echo.port(), /*BIND*/ 2), 0x07);
  EXPECT_EQ(reply_code(1, std::string("\x7f\x00\x00\x01", 4), echo.port()), 0x00);
  EXPECT_EQ(reply_code(1, std::string("\x0a\x00\x00\x01", 4), 443), 0x02);
  EXPECT_EQ(reply_code(4, std::string(15, '\0') + "\x01", echo6.port()), 0x00);
  {
    UniqueFd c = ConnectTcp(proxy_port_);
    SendAll(c.get(), std::string("\x05\x01\x00", 3));
    ReadExactly(c.get(), 2, 3s);
    SendAll(c.get(), std::string("\x05\x01\x00\x07\x00\x00", 6));
    std::string r = ReadExactly(c.get(), 10, 3s);
    ASSERT_EQ(r.size(), 10u);
    EXPECT_EQ(r[1], 0x08);
  }
  {
    UniqueFd c = ConnectTcp(proxy_port_);
    SendAll(c.get(), std::string("\x05\x01\x02", 3));  // username/password only
    EXPECT_EQ(ReadExactly(c.get(), 2, 3s), std::string("\x05\xff", 2));
  }
  // A working tunnel carries data.
  UniqueFd c = ConnectTcp(proxy_port_);
  ASSERT_EQ(Socks5Connect(c.get(), 3, "allowed.test", echo.port())[1], 0);
  SendAll(c.get(), "through socks");
  EXPECT_EQ(ReadExactly(c.get(), 13, 3s), "through socks");
}

// ---- Decision hook -------------------------------------------------------------------------

TEST_F(ProxyTest, HookIsAskedFirstAndCanAllowDenyOrDefer) {
  TestServer echo(testing::EchoHandler);
  const std::string port = std::to_string(echo.port());
  std::mutex seen_mu;
  std::vector<Attempt> seen;
  StartProxy({"allowed.test:" + port}, {}, [&](const Attempt& a) {
    {
      std::lock_guard lock(seen_mu);
      seen.push_back(a);
    }
    if (a.host == "other.test") return Decision::Allow("approved by test");
    if (a.host == "allowed.test" && a.protocol == Protocol::kSocks5)
      return Decision::Deny("trifecta");
    if (a.host == "boom.test") throw std::runtime_error("hook bug");
    return Decision::Defer();
  });
  EXPECT_EQ(RawExchange("CONNECT other.test:" + port + " HTTP/1.1\r\n\r\n", 3s, "\r\n\r\n")
                .rfind("HTTP/1.1 200", 0),
            0u);
  EXPECT_EQ(RawExchange("CONNECT allowed.test:" + port + " HTTP/1.1\r\n\r\n", 3s, "\r\n\r\n")
                .rfind("HTTP/1.1 200", 0),
            0u);
  std::string thrown = RawExchange("CONNECT boom.test:443 HTTP/1.1\r\n\r\n");
  EXPECT_NE(thrown.find("403"), std::string::npos);
  EXPECT_NE(thrown.find("decision hook failed: hook bug"), std::string::npos) << thrown;
  UniqueFd c = ConnectTcp(proxy_port_);
  EXPECT_EQ(Socks5Connect(c.get(), 3, "allowed.test", echo.port())[1], 0x02);
  c.reset();
  auto records = WaitForRecords(4);
  ASSERT_EQ(records.size(), 4u);
  std::lock_guard lock(seen_mu);
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].session_id, "sess-1");
  EXPECT_EQ(seen[0].port, echo.port());
  bool saw_hook_allow = false, saw_hook_deny = false;
  for (const auto& r : records) {
    saw_hook_allow |= r.allowed && r.rule_or_reason.starts_with("hook: approved by test");
    saw_hook_deny |= !r.allowed && r.rule_or_reason == "hook: trifecta";
  }
  EXPECT_TRUE(saw_hook_allow);
  EXPECT_TRUE(saw_hook_deny);
}

// ---- Limits --------------------------------------------------------------------------------

TEST_F(ProxyTest, HugeHeaderLineIsCutOffWhileAnotherClientIsServed) {
  HttpOrigin origin;
  StartProxy({"allowed.test:" + std::to_string(origin.port())});
  UniqueFd attacker = ConnectTcp(proxy_port_);
  std::thread flood([&] {
    SendAll(attacker.get(), "GET http://allowed.test:" + std::to_string(origin.port()) +
                                "/ HTTP/1.1\r\nX-Big: " + std::string(1 << 20, 'a') + "\r\n\r\n");
  });
  auto r =
      Curl({"-x", ProxyUrl(), "http://allowed.test:" + std::to_string(origin.port()) + "/fine"});
  EXPECT_EQ(r.out, "hello from upstream: GET /fine 0\n\n200");
  bool closed = false;
  std::string got = ReadFor(attacker.get(), 3s, {}, &closed);
  EXPECT_TRUE(closed);
  if (!got.empty()) {
    EXPECT_EQ(got.rfind("HTTP/1.1 431", 0), 0u) << got.substr(0, 100);
  }
  flood.join();
  EXPECT_EQ(origin.heads().size(), 1u);  // only the good request reached the server
  EXPECT_GE(proxy_->stats().bad_requests, 1u);
}

TEST_F(ProxyTest, SlowlorisClientIsCutOffAtTheHeaderTimeout) {
  HttpOrigin origin;
  ProxyLimits limits;
  limits.header_timeout = 400ms;
  StartProxy({"allowed.test:" + std::to_string(origin.port())}, limits);
  UniqueFd slow = ConnectTcp(proxy_port_);
  const auto start = std::chrono::steady_clock::now();
  const std::string request = "GET http://allowed.test/ HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaa";
  bool cut = false;
  for (char ch : request) {
    if (!SendAll(slow.get(), std::string(1, ch))) {
      cut = true;
      break;
    }
    if (ClosedWithin(slow.get(), 50ms)) {
      cut = true;
      break;
    }
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(cut);
  EXPECT_LT(elapsed, 1500ms);
  EXPECT_GE(elapsed, 350ms);
  auto r = Curl({"-x", ProxyUrl(), "http://allowed.test:" + std::to_string(origin.port()) + "/ok"});
  EXPECT_EQ(r.out, "hello from upstream: GET /ok 0\n\n200");
  EXPECT_EQ(proxy_->stats().header_timeouts, 1u);
}

TEST_F(ProxyTest, SilentClientIsCutOffAtTheHeaderTimeout) {
  ProxyLimits limits;
  limits.header_timeout = 200ms;
  StartProxy({"allowed.test"}, limits);
  UniqueFd silent = ConnectTcp(proxy_port_);
  EXPECT_TRUE(ClosedWithin(silent.get(), 2s));
}

TEST_F(ProxyTest, IdleTunnelIsClosedAndRecordedWithTheReason) {
  TestServer echo(testing::EchoHandler);
  ProxyLimits limits;
  limits.idle_timeout = 300ms;
  StartProxy({"allowed.test:" + std::to_string(echo.port())}, limits);
  UniqueFd c = ConnectTcp(proxy_port_);
  SendAll(c.get(), "CONNECT allowed.test:" + std::to_string(echo.port()) + " HTTP/1.1\r\n\r\n");
  ReadFor(c.get(), 2s, "\r\n\r\n");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(ClosedWithin(c.get(), 3s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  auto records = WaitForRecords(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].error, "idle timeout");
}

TEST_F(ProxyTest, LifetimeLimitEndsABusyTunnel) {
  TestServer echo(testing::EchoHandler);
  ProxyLimits limits;
  limits.max_lifetime = 500ms;
  StartProxy({"allowed.test:" + std::to_string(echo.port())}, limits);
  UniqueFd c = ConnectTcp(proxy_port_);
  SendAll(c.get(), "CONNECT allowed.test:" + std::to_string(echo.port()) + " HTTP/1.1\r\n\r\n");
  ReadFor(c.get(), 2s, "\r\n\r\n");
  bool closed = false;
  for (int i = 0; i < 40 && !closed; ++i) {
    closed = !SendAll(c.get(), "tick") || ClosedWithin(c.get(), 50ms);
  }
  EXPECT_TRUE(closed);
  auto records = WaitForRecords(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].error, "connection lifetime limit reached");
}

TEST_F(ProxyTest, ConnectionsBeyondTheCapGet503OrSocksGeneralFailure) {
  TestServer echo(testing::EchoHandler);
  ProxyLimits limits;
  limits.max_connections = 2;
  StartProxy({"allowed.test:" + std::to_string(echo.port())}, limits);
  std::vector<UniqueFd> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(ConnectTcp(proxy_port_));
    SendAll(held.back().get(),
            "CONNECT allowed.test:" + std::to_string(echo.port()) + " HTTP/1.1\r\n\r\n");
    EXPECT_EQ(ReadFor(held.back().get(), 2s, "\r\n\r\n").rfind("HTTP/1.1 200", 0), 0u);
  }
  std::string over =
      RawExchange("CONNECT allowed.test:" + std::to_string(echo.port()) + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(over.rfind("HTTP/1.1 503", 0), 0u) << over;
  EXPECT_NE(over.find("too many connections (limit 2)"), std::string::npos) << over;
  {
    UniqueFd c = ConnectTcp(proxy_port_);
    EXPECT_EQ(Socks5Connect(c.get(), 3, "allowed.test", echo.port())[1], 0x01);
  }
  held.clear();  // free the slots
  std::this_thread::sleep_for(100ms);
  std::string after = RawExchange(
      "CONNECT allowed.test:" + std::to_string(echo.port()) + " HTTP/1.1\r\n\r\n", 3s, "\r\n\r\n");
  EXPECT_EQ(after.rfind("HTTP/1.1 200", 0), 0u) << after;
  EXPECT_GE(proxy_->stats().connections_over_limit, 2u);
}

TEST_F(ProxyTest, UnreachableAllowedDestinationGets502AndIsRecorded) {
  auto [refusing_fd, closed_port] = testing::ListenTcp("127.0.0.1", /*listen_too=*/false);
  StartProxy({"allowed.test:" + std::to_string(closed_port)});
  std::string r =
      RawExchange("CONNECT allowed.test:" + std::to_string(closed_port) + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 502", 0), 0u) << r;
  EXPECT_NE(r.find("refused"), std::string::npos) << r;
  auto records = WaitForRecords(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_TRUE(records[0].allowed);
  EXPECT_NE(records[0].error.find("connect failed"), std::string::npos) << records[0].error;
}

TEST_F(ProxyTest, StopEndsOpenTunnelsAndKeepsTheirRecords) {
  TestServer echo(testing::EchoHandler);
  StartProxy({"allowed.test:" + std::to_string(echo.port())});
  UniqueFd c = ConnectTcp(proxy_port_);
  SendAll(c.get(), "CONNECT allowed.test:" + std::to_string(echo.port()) + " HTTP/1.1\r\n\r\nabc");
  ReadFor(c.get(), 2s, "abc");
  const auto start = std::chrono::steady_clock::now();
  proxy_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_TRUE(ClosedWithin(c.get(), 1s));
  auto records = proxy_->records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].error, "proxy stopped");
  EXPECT_EQ(records[0].bytes_up, 3u);
  EXPECT_EQ(records[0].bytes_down, 3u);
}

TEST_F(ProxyTest, MalformedInputNeverWedgesTheProxy) {
  HttpOrigin origin;
  StartProxy({"allowed.test:" + std::to_string(origin.port())});
  const std::vector<std::string> junk = {
      std::string("\x05\x00", 2),
      std::string("\x05\xff\x00", 3),
      std::string("\x16\x03\x01\x00", 4),
      "\r\n\r\n",
      "GET\r\n\r\n",
      std::string(5000, '\0'),
      "CONNECT [::1 HTTP/1.1\r\n\r\n",
      "CONNECT a.test:99999 HTTP/1.1\r\n\r\n",
  };
  for (const auto& j : junk) RawExchange(j, 200ms);
  auto r =
      Curl({"-x", ProxyUrl(), "http://allowed.test:" + std::to_string(origin.port()) + "/still"});
  EXPECT_EQ(r.out, "hello from upstream: GET /still 0\n\n200");
}

// ---- DNS stub -------------------------------------------------------------------------------

TEST_F(ProxyTest, DnsStubOnAUdpSocketAnswersAtOnceAndRecordsEveryQuery) {
  StartProxy({"*.example.test"});
  UniqueFd udp(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(bind(udp.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  getsockname(udp.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  ASSERT_TRUE(proxy_->AddDnsSocket(std::move(udp)).ok());

  UniqueFd client(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  ASSERT_EQ(connect(client.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  auto query = [&](uint16_t id, const std::string& name) {
    std::string q = {
        static_cast<char>(id >> 8), static_cast<char>(id), 1, 0, 0, 1, 0, 0, 0, 0, 0, 0};
    size_t start = 0;
    while (start < name.size()) {
      size_t dot = std::min(name.find('.', start), name.size());
      q += static_cast<char>(dot - start);
      q += name.substr(start, dot - start);
      start = dot + 1;
    }
    q += std::string("\0\0\x01\0\x01", 5);
    return q;
  };
  SendAll(client.get(), "garbage");  // ignored
  SendAll(client.get(), query(0x0101, "a.example.test"));
  std::string reply = testing::RecvDatagram(client.get(), 2s);
  ASSERT_GE(reply.size(), 12u);
  EXPECT_EQ(reply.substr(0, 2), "\x01\x01");
  EXPECT_EQ(reply[3] & 0x0f, DnsStubOptions::kRefused);
  SendAll(client.get(), query(0x0202, "exfil-data.evil.test"));
  reply = testing::RecvDatagram(client.get(), 2s);
  ASSERT_GE(reply.size(), 12u);
  EXPECT_EQ(reply.substr(0, 2), "\x02\x02");
  proxy_->Stop();
  auto records = proxy_->dns_records();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_TRUE(records[0].allowed);
  EXPECT_EQ(records[0].name, "a.example.test");
  EXPECT_FALSE(records[1].allowed);
  EXPECT_EQ(records[1].name, "exfil-data.evil.test");
  EXPECT_EQ(proxy_->stats().dns_queries, 2u);
}

TEST_F(ProxyTest, AddListenerRefusesSocketsThatAreNotListening) {
  StartProxy({"allowed.test"});
  UniqueFd not_listening(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  Status st = proxy_->AddListener(std::move(not_listening));
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not listening"), std::string::npos) << st.message();
  UniqueFd udp(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  EXPECT_FALSE(proxy_->AddListener(std::move(udp)).ok());
}

}  // namespace
}  // namespace warden::egress
