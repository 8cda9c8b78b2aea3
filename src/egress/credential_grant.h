// Credentials for sandboxed code that the code never holds (docs/egress.md, "Credentials"): the
// sandbox sees a placeholder of the same length as the real value; the proxy puts the value in
// place of the placeholder in requests to the one destination the credential is granted for
// (plain HTTP to host:port, or HTTPS to it when `tls`, inside a tunnel the proxy terminates:
// tls_intercept.h), puts the placeholder back in place of the value in what that host answers,
// and refuses a request that carries the placeholder anywhere else. Pure code, no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace warden::egress {

struct EgressCredential {
  std::string name;         // the variable the sandbox sees it as (for messages and records)
  std::string host;         // normalised (ParseHost)
  uint16_t port = 80;
  bool tls = false;         // sent only inside an intercepted TLS tunnel to host:port
  std::string value;        // never enters the sandbox
  std::string placeholder;  // what the sandbox holds instead: random, value.size() characters
};

// Checks the value (at least kMinCredentialBytes, no control characters: it goes into header
// fields) and the host, and draws a fresh placeholder. Errors name the credential.
constexpr size_t kMinCredentialBytes = 8;
Result<EgressCredential> MakeEgressCredential(std::string name, std::string_view host,
                                              uint16_t port, std::string value, bool tls = false);
// "host:port", or "https://host:port" for a TLS credential: where it may go, for messages.
std::string CredentialDestination(const EgressCredential& c);

// Replaces byte strings by others of the same length in a stream cut into arbitrary pieces, so
// that a body's framing (Content-Length, chunk sizes) stays right; or, for a `refuse` rule,
// notes that the string went by. Keeps back the last (longest rule - 1) bytes of each piece,
// which could be the start of a match, until the next piece or Flush. Matches split by chunked
// framing are not seen (docs/egress.md).
class StreamRewriter {
 public:
  struct Rule {
    std::string from;
    std::string to;       // same length as `from`; ignored for refuse rules
    bool refuse = false;  // seeing `from` is a violation (refused() says which)
    std::string label;    // for refused()
  };
  explicit StreamRewriter(std::vector<Rule> rules);
  bool empty() const { return rules_.empty(); }
  // Appends to `out` what may be passed on now. After a refusal, appends nothing more.
  void Feed(std::string_view data, std::string* out);
  // Appends the bytes held back.
  void Flush(std::string* out);
  // The label of the first refuse rule seen, or empty.
  const std::string& refused() const { return refused_; }
  uint64_t replaced() const { return replaced_; }

 private:
  // Rewrites `text` in place; returns false on a refusal.
  bool Apply(std::string& text);
  std::vector<Rule> rules_;
  size_t keep_ = 0;
  std::string carry_;
  std::string refused_;
  uint64_t replaced_ = 0;
};

// What the proxy does with one request to host:port: plain HTTP (or a CONNECT head), or, with
// `tls`, a request inside an intercepted TLS tunnel.
struct GrantPlan {
  std::string refused;  // non-empty: the reason to refuse it (a placeholder going elsewhere)
  std::vector<StreamRewriter::Rule> request;   // placeholder -> value, and refusals
  std::vector<StreamRewriter::Rule> response;  // value -> placeholder
  std::vector<std::string> used;               // credentials whose placeholder the head carries
};
// `head` is the request head as the client sent it. Placeholders of credentials for another
// destination in it refuse the request; the body is checked by the `request` rules.
GrantPlan PlanGrants(const std::vector<EgressCredential>& credentials, std::string_view host,
                     uint16_t port, std::string_view head, bool tls = false);

// Every occurrence of each rule's `from` in `text` replaced (same-length rules only).
void ReplaceAll(const std::vector<StreamRewriter::Rule>& rules, std::string& text);

}  // namespace warden::egress
