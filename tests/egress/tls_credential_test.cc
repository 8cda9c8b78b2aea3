// Credentials over HTTPS (tls_intercept.h, docs/egress.md "Credentials over HTTPS"): the CA a
// sandbox trusts, and the proxy terminating TLS for the one granted host, putting the value in
// and masking it on the way back, verifying the real host, and refusing the placeholder in clear
// text. Real TLS on both sides: curl as the client, OpenSSL in front of an HttpOrigin as the
// server (tls_front.h).
#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "egress/proxy.h"
#include "egress/tls_intercept.h"
#include "test_support.h"
#include "tls_front.h"

namespace warden::egress {
namespace {

using namespace std::chrono_literals;

const std::string kTlsSecret = "ghp_TlsValue0123456789abcdefXYZ";

struct X509Free {
  void operator()(X509* c) const { X509_free(c); }
};
using CertPtr = std::unique_ptr<X509, X509Free>;

CertPtr ReadCert(const std::string& pem) {
  BIO* b = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  CertPtr c(PEM_read_bio_X509(b, nullptr, nullptr, nullptr));
  BIO_free(b);
  return c;
}

// Whether `leaf_pem` (its first certificate) verifies under `ca_pem` for `host`.
bool Verifies(const std::string& leaf_pem, const std::string& ca_pem, const std::string& host) {
  CertPtr leaf = ReadCert(leaf_pem), ca = ReadCert(ca_pem);
  if (!leaf || !ca) return false;
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca.get());
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, leaf.get(), nullptr);
  X509_VERIFY_PARAM_set1_host(X509_STORE_CTX_get0_param(ctx), host.c_str(), 0);
  const bool ok = X509_verify_cert(ctx) == 1;
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  return ok;
}

std::string Text(X509* cert) {
  BIO* b = BIO_new(BIO_s_mem());
  X509_print(b, cert);
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(b);
  return out;
}

// ---- The authority -------------------------------------------------------------------------

TEST(InterceptAuthority, TheLeafVerifiesForItsHostOnlyAndTheCaIsConstrainedToIt) {
  auto a = MakeInterceptAuthority({{"api.example.com", 443}});
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_EQ(a->intercepts.size(), 1u);
  const TlsIntercept& t = a->intercepts[0];
  EXPECT_EQ(t.host, "api.example.com");
  EXPECT_TRUE(Verifies(t.cert_pem, a->ca_pem, "api.example.com"));
  EXPECT_FALSE(Verifies(t.cert_pem, a->ca_pem, "evil.example.com"));
  EXPECT_FALSE(Verifies(t.cert_pem, a->ca_pem, "example.com"));
  // What the sandbox holds is a certificate, never a key.
  EXPECT_EQ(a->ca_pem.find("PRIVATE KEY"), std::string::npos);
  EXPECT_NE(t.key_pem.find("PRIVATE KEY"), std::string::npos);
  CertPtr ca = ReadCert(a->ca_pem);
  ASSERT_TRUE(ca);
  const std::string text = Text(ca.get());
  EXPECT_NE(text.find("X509v3 Name Constraints: critical"), std::string::npos) << text;
  EXPECT_NE(text.find("DNS:api.example.com"), std::string::npos) << text;
  EXPECT_NE(text.find("Excluded:"), std::string::npos) << text;
  EXPECT_NE(text.find("CA:TRUE, pathlen:0"), std::string::npos) << text;
  // Every authority is new: another sandbox's leaf does not verify under this CA.
  auto b = MakeInterceptAuthority({{"api.example.com", 443}});
  ASSERT_TRUE(b.ok());
  EXPECT_NE(a->ca_pem, b->ca_pem);
  EXPECT_FALSE(Verifies(b->intercepts[0].cert_pem, a->ca_pem, "api.example.com"));
}

TEST(InterceptAuthority, AddressesAndUnnormalisedNamesAreRefused) {
  auto ip = MakeInterceptAuthority({{"127.0.0.1", 443}});
  ASSERT_FALSE(ip.ok());
  EXPECT_NE(ip.status().message().find("host names only"), std::string::npos) << ip.status().message();
  auto upper = MakeInterceptAuthority({{"API.example.com", 443}});
  ASSERT_FALSE(upper.ok());
  EXPECT_NE(upper.status().message().find("not normalised"), std::string::npos);
  EXPECT_FALSE(MakeInterceptAuthority({}).ok());
  auto tls_ip = MakeEgressCredential("T", "10.0.0.1", 443, kTlsSecret, /*tls=*/true);
  ASSERT_FALSE(tls_ip.ok());
  EXPECT_NE(tls_ip.status().message().find("needs a host name"), std::string::npos);
}

TEST(InterceptAuthority, TheTrustBundleKeepsTheSystemsCertificatesAndAddsTheCa) {
  EXPECT_EQ(TrustBundle("SYSTEM", "CA\n"), "SYSTEM\nCA\n");
  EXPECT_EQ(TrustBundle("", "CA\n"), "CA\n");
}

TEST(GrantPlan, ATlsCredentialIsPutInOnlyInsideTls) {
  auto c = MakeEgressCredential("T", "api.test", 443, kTlsSecret, /*tls=*/true);
  ASSERT_TRUE(c.ok());
  auto head = http::ParseRequestHead("GET / HTTP/1.1\r\nAuthorization: " + c->placeholder + "\r\n\r\n");
  ASSERT_TRUE(head.ok());
  GrantPlan inside = PlanGrants({*c}, "api.test", 443, *head, /*tls=*/true);
  EXPECT_TRUE(inside.refused.empty());
  EXPECT_EQ(inside.used, std::vector<std::string>{"T"});
  ASSERT_EQ(inside.headers.size(), 1u);
  EXPECT_EQ(inside.headers[0].value, "Bearer " + kTlsSecret);
  GrantPlan clear = PlanGrants({*c}, "api.test", 443, *head, /*tls=*/false);
  EXPECT_NE(clear.refused.find("the placeholder of credential T may only go to https://api.test:443"), std::string::npos)
      << clear.refused;
  EXPECT_TRUE(clear.headers.empty());
}

// ---- Through the proxy ---------------------------------------------------------------------

// A private directory for the CA files, removed with the test.
class ScratchDir {
 public:
  ScratchDir() {
    std::string t = "/tmp/warden-egress-test-XXXXXX";
    if (mkdtemp(t.data()) != nullptr) path_ = t;
  }
  ~ScratchDir() {
    if (!path_.empty()) std::filesystem::remove_all(path_);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string WriteFile(const ScratchDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.path() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

class TlsCredentialProxyTest : public ::testing::Test {
 protected:
  // The real server: allowed.test behind a TLS front whose certificate comes from an authority
  // of its own (the "public" CA the proxy trusts). The sandbox's authority is another one.
  void SetUp() override {
    auto origin_ca = MakeInterceptAuthority({{"allowed.test", 443}, {"other.test", 443}});
    ASSERT_TRUE(origin_ca.ok()) << origin_ca.status().message();
    origin_ca_file_ = WriteFile(dir_, "origin-ca.pem", origin_ca->ca_pem);
    front_ = std::make_unique<testing::TlsFront>(origin_ca->intercepts[0].cert_pem,
                                                 origin_ca->intercepts[0].key_pem, origin_.port());
    wrong_name_front_ = std::make_unique<testing::TlsFront>(
        origin_ca->intercepts[1].cert_pem, origin_ca->intercepts[1].key_pem, origin_.port());
    auto c = MakeEgressCredential("API_TOKEN", "allowed.test", front_->port(), kTlsSecret, true);
    ASSERT_TRUE(c.ok());
    credential_ = *c;
    auto sandbox_ca = MakeInterceptAuthority({{"allowed.test", front_->port()}});
    ASSERT_TRUE(sandbox_ca.ok());
    sandbox_ca_file_ = WriteFile(dir_, "sandbox-ca.pem", sandbox_ca->ca_pem);
    intercepts_ = sandbox_ca->intercepts;
  }
  void Start(const std::string& upstream_ca_file, const std::string& target_host = "allowed.test") {
    const uint16_t port = target_host == "allowed.test" ? front_->port() : wrong_name_front_->port();
    ProxyOptions options;
    auto list = AllowList::Parse({"allowed.test:" + std::to_string(front_->port()),
                                  "allowed.test:" + std::to_string(wrong_name_front_->port()),
                                  "other.test:" + std::to_string(front_->port())});
    ASSERT_TRUE(list.ok());
    options.allow_list = *list;
    auto resolve = ResolveMap::Parse({{"allowed.test", "127.0.0.1"}, {"other.test", "127.0.0.1"}});
    ASSERT_TRUE(resolve.ok());
    options.resolve = *resolve;
    EgressCredential c = credential_;
    c.port = port;
    options.credentials = {c};
    std::vector<TlsIntercept> intercepts = intercepts_;
    intercepts[0].port = port;
    options.tls_intercepts = intercepts;
    options.upstream_ca_file = upstream_ca_file;
    options.recorder = [this](const EgressRecord& r) { records_.Add(r); };
    proxy_ = testing::StartProxy(std::move(options), &proxy_port_);
    ASSERT_NE(proxy_, nullptr);
  }
  void TearDown() override {
    if (proxy_) proxy_->Stop();
  }
  testing::ProcessResult Curl(std::vector<std::string> args, bool trust_sandbox_ca = true) {
    std::vector<std::string> argv = {"curl", "-sS", "--max-time", "10", "-x",
                                     "http://127.0.0.1:" + std::to_string(proxy_port_), "-i"};
    if (trust_sandbox_ca) {
      argv.push_back("--cacert");
      argv.push_back(sandbox_ca_file_);
    }
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::RunProgram(argv);
  }
  std::string Url(const std::string& path, uint16_t port = 0) const {
    return "https://allowed.test:" + std::to_string(port ? port : front_->port()) + path;
  }
  std::vector<EgressRecord> Records(size_t n) { return records_.Wait(n); }
  const std::string& P() const { return credential_.placeholder; }

  ScratchDir dir_;
  testing::HttpOrigin origin_;
  std::unique_ptr<testing::TlsFront> front_;
  std::unique_ptr<testing::TlsFront> wrong_name_front_;
  std::string origin_ca_file_;
  std::string sandbox_ca_file_;
  EgressCredential credential_;
  std::vector<TlsIntercept> intercepts_;
  std::unique_ptr<EgressProxy> proxy_;
  uint16_t proxy_port_ = 0;
  testing::Collected<EgressRecord> records_;
};

TEST_F(TlsCredentialProxyTest, InsideTheTunnelTheProxyPutsTheValueInItsHeaderAndTheEchoIsMasked) {
  Start(origin_ca_file_);
  auto r = Curl({"-H", "Authorization: Bearer " + P(), Url("/echo"), "--next", "-x",
                 "http://127.0.0.1:" + std::to_string(proxy_port_), "--cacert", sandbox_ca_file_,
                 "-H", "Transfer-Encoding: chunked", "--data-binary", "{\"n\":1}", Url("/chunked-echo")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto heads = origin_.heads();
  ASSERT_EQ(heads.size(), 2u);
  for (const auto& head : heads) {
    EXPECT_NE(head.find("\r\nAuthorization: Bearer " + kTlsSecret + "\r\n"), std::string::npos) << head;
    EXPECT_EQ(head.find(P()), std::string::npos) << head;
  }
  EXPECT_NE(heads[0].find("Host: allowed.test:" + std::to_string(front_->port())), std::string::npos) << heads[0];
  EXPECT_EQ(origin_.bodies()[1], "{\"n\":1}");
  // The client saw only placeholders, the echoes (one cut in 5-byte chunks) included.
  EXPECT_EQ(r.out.find(kTlsSecret), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("X-Echo-Authorization: Bearer " + P()), std::string::npos) << r.out;
  // Two requests, one tunnel, one handshake with the real server.
  EXPECT_EQ(front_->handshakes(), 1);
  auto records = Records(3);
  ASSERT_EQ(records.size(), 3u);
  int https = 0;
  for (const auto& rec : records) {
    EXPECT_TRUE(rec.allowed) << rec.rule_or_reason;
    EXPECT_EQ(rec.host, "allowed.test");
    if (rec.protocol == Protocol::kHttps) {
      ++https;
      EXPECT_NE(rec.rule_or_reason.find("(credential API_TOKEN)"), std::string::npos) << rec.rule_or_reason;
      EXPECT_EQ(rec.http_status, 200);
    } else {
      EXPECT_EQ(rec.protocol, Protocol::kConnect);
      EXPECT_NE(rec.rule_or_reason.find("TLS terminated for credentials"), std::string::npos);
    }
  }
  EXPECT_EQ(https, 2);
}

// Issue 31's attack inside the terminated TLS: the placeholder in the query, the body or another
// header under the attacker's own Authorization is refused; a compressed echo is refused.
TEST_F(TlsCredentialProxyTest, InsideTheTunnelInjectedCodeCannotPlantOrReadBackTheValue) {
  Start(origin_ca_file_);
  const std::string own = "Authorization: Bearer attacker-account";
  const std::vector<std::vector<std::string>> attacks = {
      {"-H", own, "--data-binary", "note=x", Url("/echo?q=" + P())},
      {"-H", own, "--data-binary", "note=" + P(), Url("/echo")},
      {"-H", own, "-H", "Transfer-Encoding: chunked", "--data-binary", "note=" + P(), Url("/echo")},
      {"-H", own, "-H", "X-Note: " + P(), Url("/echo")},
  };
  for (const auto& a : attacks) {
    auto r = Curl(a);
    EXPECT_NE(r.out.find("403"), std::string::npos) << r.out << r.err;
    EXPECT_NE(r.out.find("may only go to https://allowed.test:"), std::string::npos) << r.out;
  }
  auto gz = Curl({"--compressed", "-H", own, Url("/gzip-echo")});
  EXPECT_NE(gz.out.find("502"), std::string::npos) << gz.out << gz.err;
  EXPECT_EQ(gz.out.find(kTlsSecret), std::string::npos) << gz.out;
  for (const auto& head : origin_.heads()) {
    std::string rest = head;
    const std::string line = "\r\nAuthorization: Bearer " + kTlsSecret + "\r\n";
    if (size_t at = rest.find(line); at != std::string::npos) rest.erase(at, line.size());
    EXPECT_EQ(rest.find(kTlsSecret), std::string::npos) << head;
    EXPECT_EQ(head.find(P()), std::string::npos) << head;
    EXPECT_EQ(head.find("attacker-account"), std::string::npos) << head;
  }
  for (const auto& body : origin_.bodies()) {
    EXPECT_EQ(body.find(kTlsSecret), std::string::npos) << body;
    EXPECT_EQ(body.find(P()), std::string::npos) << body;
  }
}

TEST_F(TlsCredentialProxyTest, ThePlaceholderInClearTextToTheSameHostIsRefused) {
  Start(origin_ca_file_);
  auto r = Curl({"-H", "X-Key: " + P(), "http://allowed.test:" + std::to_string(front_->port()) + "/echo"});
  EXPECT_NE(r.out.find("403"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("may only go to https://allowed.test:" + std::to_string(front_->port())), std::string::npos)
      << r.out;
  EXPECT_TRUE(origin_.heads().empty());
}

TEST_F(TlsCredentialProxyTest, ARealHostThatDoesNotVerifyGetsNothing) {
  // The proxy trusts only the sandbox's CA, which did not sign the real server's certificate:
  // a server in the middle (say, after DNS was spoofed) must not receive the value.
  Start(sandbox_ca_file_);
  auto r = Curl({"-H", "Authorization: Bearer " + P(), Url("/echo")});
  EXPECT_NE(r.out.find("502"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("certificate not trusted"), std::string::npos) << r.out;
  EXPECT_TRUE(origin_.heads().empty());
  auto records = Records(1);
  ASSERT_GE(records.size(), 1u);
  EXPECT_NE(records[0].error.find("certificate not trusted"), std::string::npos) << records[0].error;
}

TEST_F(TlsCredentialProxyTest, ARealHostWithAnotherNamesCertificateGetsNothing) {
  // Trusted CA, but the certificate is for other.test: the name check refuses it.
  Start(origin_ca_file_, "wrong-name");
  auto r = Curl({"-H", "Authorization: Bearer " + P(), Url("/echo", wrong_name_front_->port())});
  EXPECT_NE(r.out.find("502"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("hostname mismatch"), std::string::npos) << r.out;
  EXPECT_TRUE(origin_.heads().empty());
}

TEST_F(TlsCredentialProxyTest, AClientThatDoesNotTrustTheSandboxCaStopsAtTheHandshake) {
  Start(origin_ca_file_);
  auto r = Curl({"-H", "Authorization: Bearer " + P(), Url("/echo")}, /*trust_sandbox_ca=*/false);
  EXPECT_EQ(r.exit_code, 60) << r.out << r.err;  // curl: peer certificate cannot be authenticated
  EXPECT_TRUE(origin_.heads().empty());
  auto records = Records(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_NE(records[0].error.find("TLS with the sandbox"), std::string::npos) << records[0].error;
}

TEST_F(TlsCredentialProxyTest, ATunnelToAnotherHostIsNotOpenedAndCarriesThePlaceholderAsSent) {
  Start(origin_ca_file_);
  // other.test has no credential: a plain tunnel; the client sees the real certificate (it
  // verifies under the origin's CA, for other.test's name it does not: -k), and the
  // placeholder, worthless anywhere, arrives as it was sent.
  auto r = Curl({"-k", "-H", "X-Key: " + P(), "https://other.test:" + std::to_string(front_->port()) + "/echo"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto heads = origin_.heads();
  ASSERT_EQ(heads.size(), 1u);
  EXPECT_NE(heads[0].find("X-Key: " + P()), std::string::npos) << heads[0];
  EXPECT_EQ(heads[0].find(kTlsSecret), std::string::npos);
  auto records = Records(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].protocol, Protocol::kConnect);
  EXPECT_EQ(records[0].rule_or_reason.find("TLS terminated"), std::string::npos);
}

TEST_F(TlsCredentialProxyTest, ABadInterceptCertificateRefusesToServe) {
  ProxyOptions options;
  options.tls_intercepts = {{"allowed.test", 443, "not a certificate", "not a key"}};
  EgressProxy proxy(std::move(options));
  auto [fd, port] = testing::ListenTcp();
  Status st = proxy.AddListener(std::move(fd));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("the certificate for allowed.test:443"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace warden::egress
