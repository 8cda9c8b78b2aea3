// The egress proxy as a sandbox's network: `warden run --net proxy --allow ...`. A listening
// socket on 127.0.0.1:3128 and a DNS stub on 127.0.0.1:53, both created inside the sandbox's
// network namespace (by its init, which hands them over) and served by an EgressProxy on a
// thread of the supervising process.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "egress/proxy.h"
#include "sandbox/net.h"

namespace warden::egress {

class SandboxNetwork : public sandbox::NetworkProvider {
 public:
  static constexpr uint16_t kProxyPort = 3128;
  static constexpr uint16_t kDnsPort = 53;

  // Validates the allow entries and --resolve mappings; the error names the bad entry.
  static Result<std::unique_ptr<SandboxNetwork>> Create(const std::vector<std::string>& allow,
                                                        const std::map<std::string, std::string>& resolve,
                                                        DecisionHook hook = {}, std::string session_id = "",
                                                        std::vector<EgressCredential> credentials = {});
  ~SandboxNetwork() override;

  std::map<std::string, std::string> Environment() const override;
  std::vector<uint16_t> AllowedTcpPorts() const override { return {kProxyPort}; }
  std::vector<sandbox::net::LoopbackSocket> Sockets() const override;
  Status Start(std::vector<UniqueFd> sockets) override;
  void Finish(sandbox::RunResult* result) override;

 private:
  explicit SandboxNetwork(ProxyOptions options) : options_(std::move(options)) {}
  ProxyOptions options_;
  // Notable proxy events (malformed requests, timeouts, limits), kept for the result's notes.
  std::shared_ptr<struct EventLog> events_;
  std::unique_ptr<EgressProxy> proxy_;
};

}  // namespace warden::egress
