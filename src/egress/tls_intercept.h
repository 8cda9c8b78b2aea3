// Certificates for the hosts whose TLS the egress proxy terminates, so that it can put a
// credential into HTTPS requests (docs/egress.md, "Credentials over HTTPS"). One authority per
// sandbox: a fresh P-256 CA whose certificate is name-constrained (critical) to exactly the
// granted host names and to no IP address, which signs one leaf per host and is then forgotten:
// its private key is freed before this returns, so not even warden can issue another
// certificate under it. The sandbox trusts the CA's certificate; the leaves' keys stay in the
// proxy. OpenSSL only, no I/O.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace warden::egress {

// A host:port whose tunnels the proxy terminates, and what it shows the sandbox there.
struct TlsIntercept {
  std::string host;  // normalised host name (never an address)
  uint16_t port = 443;
  std::string cert_pem;  // the leaf, then the CA
  std::string key_pem;   // the leaf's key: stays in warden's memory
};

struct InterceptAuthority {
  std::string ca_pem;  // the certificate the sandbox trusts
  std::vector<TlsIntercept> intercepts;
};

struct InterceptTarget {
  std::string host;
  uint16_t port = 443;
};

// Errors name the host. Hosts must be names (ParseHost-normalised), not addresses.
Result<InterceptAuthority> MakeInterceptAuthority(
    const std::vector<InterceptTarget>& targets,
    std::chrono::seconds lifetime = std::chrono::hours(24 * 30));

// The PEM bundle a sandbox gets as SSL_CERT_FILE and the like: the system's CA certificates
// (`system_bundle`'s contents, when readable) followed by `ca_pem`, so that hosts reached
// through plain tunnels still verify.
std::string TrustBundle(const std::string& system_bundle, const std::string& ca_pem);

}  // namespace warden::egress
