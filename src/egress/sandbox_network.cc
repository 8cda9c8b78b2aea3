#include "egress/sandbox_network.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>

#include "common/write_file.h"
#include "egress/host_name.h"
#include "sandbox/result.h"

namespace warden::egress {

struct EventLog {
  static constexpr size_t kMax = 50;
  std::mutex mu;
  std::vector<std::string> lines;
  uint64_t dropped = 0;
};

Result<std::unique_ptr<SandboxNetwork>> SandboxNetwork::Create(const std::vector<std::string>& allow,
                                                               const std::map<std::string, std::string>& resolve,
                                                               DecisionHook hook, std::string session_id,
                                                               std::vector<EgressCredential> credentials,
                                                               AsyncCheck check) {
  auto list = AllowList::Parse(allow);
  if (!list) return list.status().Wrap("--allow");
  auto map = ResolveMap::Parse(resolve);
  if (!map) return map.status().Wrap("--resolve");
  // A credential's destination must be one the sandbox may reach at all (the hook, when there is
  // one, still decides each request).
  for (const EgressCredential& c : credentials) {
    auto host = ParseHost(c.host);
    if (!host || !list->Permits(*host, c.port).allowed) {
      return Status::Error("--egress-credential " + c.name + ": " + c.host + ":" + std::to_string(c.port) +
                           " is not on the allow list (add --allow " + c.host + ":" + std::to_string(c.port) + ")");
    }
  }
  // Credentials over HTTPS: a CA for this sandbox alone, constrained to their hosts.
  std::vector<InterceptTarget> tls_targets;
  for (const EgressCredential& c : credentials) {
    if (c.tls) tls_targets.push_back({c.host, c.port});
  }
  std::optional<InterceptAuthority> authority;
  if (!tls_targets.empty()) {
    auto made = MakeInterceptAuthority(tls_targets);
    if (!made) return made.status().Wrap("--egress-credential");
    authority = std::move(*made);
  }
  ProxyOptions options;
  if (authority) options.tls_intercepts = authority->intercepts;
  options.allow_list = std::move(*list);
  options.resolve = std::move(*map);
  options.hook = std::move(hook);
  options.check = std::move(check);
  options.session_id = std::move(session_id);
  options.credentials = std::move(credentials);
  auto events = std::make_shared<EventLog>();
  options.log = [events](std::string_view line) {
    std::lock_guard<std::mutex> lock(events->mu);
    if (events->lines.size() < EventLog::kMax) events->lines.emplace_back(line);
    else ++events->dropped;
  };
  auto network = std::unique_ptr<SandboxNetwork>(new SandboxNetwork(std::move(options)));
  network->events_ = std::move(events);
  if (authority) {
    WARDEN_RETURN_IF_ERROR(network->WriteTrustBundle(authority->ca_pem));
  }
  return network;
}

Status SandboxNetwork::WriteTrustBundle(const std::string& ca_pem) {
  // mkdtemp: a fresh directory nobody else can have planted anything in; 0755 so that the
  // sandbox's user (any uid) can read the bundle through the bind. Nothing in it is secret.
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp != nullptr && *tmp == '/' ? tmp : "/tmp") + "/warden-egress-ca-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) return Status::FromErrno("--egress-credential: create the CA bundle's directory", errno);
  bundle_dir_ = templ;
  if (chmod(bundle_dir_.c_str(), 0755) != 0) return Status::FromErrno("--egress-credential: chmod " + bundle_dir_, errno);
  std::string system;
  {
    std::ifstream in("/etc/ssl/certs/ca-certificates.crt", std::ios::binary);
    std::ostringstream buf;
    if (in) buf << in.rdbuf();
    system = buf.str();
  }
  const std::string bundle = TrustBundle(system, ca_pem);
  const std::string path = bundle_dir_ + "/ca.pem";
  WARDEN_RETURN_IF_ERROR(CreateFileWith(path, bundle, 0644, /*sync=*/false).Wrap("--egress-credential"));
  bundle_path_ = path;
  return Status::Ok();
}

SandboxNetwork::~SandboxNetwork() {
  if (proxy_) proxy_->Stop();
  if (!bundle_path_.empty()) unlink(bundle_path_.c_str());
  if (!bundle_dir_.empty()) rmdir(bundle_dir_.c_str());
}

std::map<std::string, std::string> SandboxNetwork::Environment() const {
  const std::string http = "http://127.0.0.1:" + std::to_string(kProxyPort);
  const std::string socks = "socks5h://127.0.0.1:" + std::to_string(kProxyPort);
  // No NO_PROXY: inside, TCP connects reach the proxy's port only (Landlock), so even
  // "localhost" goes through the proxy, where the refusal names its reason.
  std::map<std::string, std::string> env = {{"HTTP_PROXY", http},  {"http_proxy", http},
                                            {"HTTPS_PROXY", http}, {"https_proxy", http},
                                            {"ALL_PROXY", socks},  {"all_proxy", socks}};
  if (!bundle_path_.empty()) {
    // OpenSSL (and Python, Ruby, wget), curl, requests, Node and git each read their own.
    for (const char* name : {"SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE",
                             "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO"}) {
      env[name] = kTrustBundleInside;
    }
  }
  return env;
}

std::vector<sandbox::net::LoopbackSocket> SandboxNetwork::Sockets() const {
  return {{SOCK_STREAM, kProxyPort}, {SOCK_DGRAM, kDnsPort}};
}

Status SandboxNetwork::Start(std::vector<UniqueFd> sockets) {
  if (sockets.size() != 2 || !sockets[0].valid() || !sockets[1].valid()) {
    return Status::Error("egress proxy: expected its listener and the DNS stub's socket, got " +
                         std::to_string(sockets.size()) + " sockets");
  }
  proxy_ = std::make_unique<EgressProxy>(options_);
  WARDEN_RETURN_IF_ERROR(proxy_->AddListener(std::move(sockets[0])).Wrap("egress proxy listener"));
  WARDEN_RETURN_IF_ERROR(proxy_->AddDnsSocket(std::move(sockets[1])).Wrap("DNS stub"));
  return proxy_->Start();
}

void SandboxNetwork::Finish(sandbox::RunResult* result) {
  if (!proxy_) return;
  proxy_->Stop();
  for (const auto& record : proxy_->records()) result->egress.push_back(ToJson(record));
  nlohmann::json dns = nlohmann::json::array();
  for (const auto& q : proxy_->dns_records()) dns.push_back(q);
  result->dns = dns;
  std::lock_guard<std::mutex> lock(events_->mu);
  for (const auto& line : events_->lines) result->notes.push_back(line);  // lines start "egress: "
  if (events_->dropped) result->notes.push_back("egress: " + std::to_string(events_->dropped) + " more events not shown");
}

}  // namespace warden::egress
