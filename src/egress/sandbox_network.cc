#include "egress/sandbox_network.h"

#include "sandbox/result.h"

namespace warden::egress {

Result<std::unique_ptr<SandboxNetwork>> SandboxNetwork::Create(const std::vector<std::string>& allow,
                                                               const std::map<std::string, std::string>& resolve,
                                                               DecisionHook hook, std::string session_id) {
  auto list = AllowList::Parse(allow);
  if (!list) return list.status().Wrap("--allow");
  auto map = ResolveMap::Parse(resolve);
  if (!map) return map.status().Wrap("--resolve");
  ProxyOptions options;
  options.allow_list = std::move(*list);
  options.resolve = std::move(*map);
  options.hook = std::move(hook);
  options.session_id = std::move(session_id);
  return std::unique_ptr<SandboxNetwork>(new SandboxNetwork(std::move(options)));
}

SandboxNetwork::~SandboxNetwork() {
  if (proxy_) proxy_->Stop();
}

std::map<std::string, std::string> SandboxNetwork::Environment() const {
  const std::string http = "http://127.0.0.1:" + std::to_string(kProxyPort);
  const std::string socks = "socks5h://127.0.0.1:" + std::to_string(kProxyPort);
  // No NO_PROXY: inside, TCP connects reach the proxy's port only (Landlock), so even
  // "localhost" goes through the proxy, where the refusal names its reason.
  return {{"HTTP_PROXY", http}, {"http_proxy", http}, {"HTTPS_PROXY", http},
          {"https_proxy", http}, {"ALL_PROXY", socks}, {"all_proxy", socks}};
}

Status SandboxNetwork::SetUpInNamespace() {
  auto tcp = sandbox::net::ListenLoopbackTcp(kProxyPort);
  if (!tcp) return tcp.status().Wrap("egress proxy listener");
  auto udp = sandbox::net::BindLoopbackUdp(kDnsPort);
  if (!udp) return udp.status().Wrap("DNS stub");
  listener_ = std::move(*tcp);
  dns_ = std::move(*udp);
  return Status::Ok();
}

Status SandboxNetwork::Start() {
  proxy_ = std::make_unique<EgressProxy>(options_);
  WARDEN_RETURN_IF_ERROR(proxy_->AddListener(std::move(listener_)));
  WARDEN_RETURN_IF_ERROR(proxy_->AddDnsSocket(std::move(dns_)));
  return proxy_->Start();
}

void SandboxNetwork::Finish(sandbox::RunResult* result) {
  if (!proxy_) return;
  proxy_->Stop();
  for (const auto& record : proxy_->records()) result->egress.push_back(ToJson(record));
  nlohmann::json dns = nlohmann::json::array();
  for (const auto& q : proxy_->dns_records()) dns.push_back(q);
  result->dns = dns;
}

}  // namespace warden::egress
