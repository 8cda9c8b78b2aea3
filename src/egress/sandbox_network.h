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
                                                        std::vector<EgressCredential> credentials = {},
                                                        AsyncCheck check = {});
  ~SandboxNetwork() override;

  // Where the CA bundle is inside the sandbox when a credential goes over HTTPS: the system's
  // CA certificates and the sandbox's own CA (tls_intercept.h). The caller binds
  // trust_bundle_path() there, read-only; Environment() points the usual variables at it.
  static constexpr const char* kTrustBundleInside = "/run/warden/egress-ca.pem";
  const std::string& trust_bundle_path() const { return bundle_path_; }

  std::map<std::string, std::string> Environment() const override;
  std::vector<uint16_t> AllowedTcpPorts() const override { return {kProxyPort}; }
  std::vector<sandbox::net::LoopbackSocket> Sockets() const override;
  Status Start(std::vector<UniqueFd> sockets) override;
  void Finish(sandbox::RunResult* result) override;

 private:
  explicit SandboxNetwork(ProxyOptions options) : options_(std::move(options)) {}
  Status WriteTrustBundle(const std::string& ca_pem);
  ProxyOptions options_;
  // Notable proxy events (malformed requests, timeouts, limits), kept for the result's notes.
  std::shared_ptr<struct EventLog> events_;
  std::unique_ptr<EgressProxy> proxy_;
  // A private directory of this process holding the bundle; removed with the network.
  std::string bundle_dir_;
  std::string bundle_path_;
};

}  // namespace warden::egress
