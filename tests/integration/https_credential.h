// One `warden run` with an HTTPS credential (docs/egress.md, "Over HTTPS"), as the egress tests
// of every backend make it: API_TOKEN granted for https://allowed.test:PORT of a
// LoopbackHttpsServer, warden trusting that server's CA, its trust-bundle directory under `tmpdir`.
#pragma once

#include <string>
#include <vector>

#include "harness.h"
#include "loopback_http.h"

namespace warden::testing {

struct HttpsCredentialRun {
  Outcome outcome;
  std::string placeholder;  // what $API_TOKEN was inside ("" when the script did not get that far)
};

// `flags` come before the command (--backend ...); `script` runs under sh after a line that
// prints the placeholder, and may use $URL (https://allowed.test:PORT).
inline HttpsCredentialRun RunWithHttpsCredential(const LoopbackHttpsServer& server,
                                                 const std::string& tmpdir,
                                                 const std::string& secret,
                                                 std::vector<std::string> flags,
                                                 const std::string& script) {
  const std::string url = "https://allowed.test:" + server.port_text();
  Invocation inv;
  inv.args = {"run"};
  inv.args.insert(inv.args.end(), flags.begin(), flags.end());
  inv.args.insert(inv.args.end(),
                  {"--allow", "allowed.test:" + server.port_text(), "--resolve", "allowed.test=127.0.0.1",
                   "--egress-credential", "API_TOKEN=" + url, "--env", "URL=" + url, "--", "sh", "-c",
                   "echo \"seen=$API_TOKEN\"; " + script});
  inv.extra_env = {{"API_TOKEN", secret}, {"SSL_CERT_FILE", server.ca_file()}, {"TMPDIR", tmpdir}};
  HttpsCredentialRun run{RunWarden(inv), ""};
  const auto seen = run.outcome.out.find("seen=");
  if (seen != std::string::npos) run.placeholder = run.outcome.out.substr(seen + 5, secret.size());
  return run;
}

}  // namespace warden::testing
