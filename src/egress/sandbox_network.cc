#include "egress/sandbox_network.h"

#include <sys/socket.h>

#include <mutex>

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
                                                               std::vector<EgressCredential> credentials) {
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
  ProxyOptions options;
  options.allow_list = std::move(*list);
  options.resolve = std::move(*map);
  options.hook = std::move(hook);
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
  return network;
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
