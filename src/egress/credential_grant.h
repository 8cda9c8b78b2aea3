// Credentials for sandboxed code that the code never holds (docs/egress.md, "Credentials"): the
// sandbox sees a placeholder of the same length as the real value. The proxy itself puts the
// value in one header field (`header`, as `value_template` with the value for its "{}") of every
// request to the one destination the credential is granted for (plain HTTP to host:port, or
// HTTPS to it when `tls`, inside a tunnel the proxy terminates: tls_intercept.h), replacing what
// the code sent in that field; it refuses a request that carries the placeholder anywhere else
// (request target, other fields, body, tunnels, other destinations), asks that destination for
// unencoded answers and refuses an encoded one, and puts the placeholder back in place of the
// value in what it answers. Pure code, no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "egress/http_message.h"
#include "sandbox/options.h"

namespace warden::egress {

// Where the value goes and its checks: sandbox::CheckCredentialPlacement (one rule for the CLI,
// the profile and the proxy).
using sandbox::kDefaultAuthorizationTemplate;
using sandbox::kDefaultCredentialHeader;

struct EgressCredential {
  std::string name;         // the variable the sandbox sees it as (for messages and records)
  std::string host;         // normalised (ParseHost)
  uint16_t port = 80;
  bool tls = false;         // sent only inside an intercepted TLS tunnel to host:port
  std::string header;       // the one field the value goes in (sandbox::CredentialPlacement)
  std::string value_template;  // that field's value: "{}" stands for the value
  std::string value;        // never enters the sandbox
  std::string placeholder;  // what the sandbox holds instead: random, value.size() characters
};

// Checks the value (at least kMinCredentialBytes, no control characters: it goes into a header
// field), the host and the placement, and draws a fresh placeholder. Errors name the credential
// and never hold the value.
constexpr size_t kMinCredentialBytes = 8;
Result<EgressCredential> MakeEgressCredential(std::string name, std::string_view host,
                                              uint16_t port, std::string value, bool tls = false,
                                              std::string header = "",
                                              std::string value_template = "");
// "host:port", or "https://host:port" for a TLS credential: where it may go, for messages.
std::string CredentialDestination(const EgressCredential& c);

// Replaces byte strings by others of the same length in a stream cut into arbitrary pieces, so
// that a body of known length keeps its framing; or, for a `refuse` rule, notes that the string
// went by. Keeps back the last (longest rule - 1) bytes of each piece, which could be the start
// of a match, until the next piece or Flush: a refused string never passes, not even in part.
// Chunked bodies are fed decoded (the proxy frames them anew), so chunk boundaries hide nothing.
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

// What the proxy does with one HTTP request to host:port (plain, or with `tls` inside an
// intercepted TLS tunnel).
struct GrantPlan {
  std::string refused;  // non-empty: the reason to refuse it (a placeholder out of place)
  // The fields the proxy sets (the value inside), replacing any of the same name the code sent.
  std::vector<http::HeaderField> headers;
  std::vector<StreamRewriter::Rule> request;   // refusals: every placeholder, in the body
  std::vector<StreamRewriter::Rule> response;  // value -> placeholder, in the answers
  std::vector<std::string> used;               // credentials put in
};
// `head` is the request head as the client sent it. Every placeholder anywhere in it refuses the
// request, except a granted credential's in that credential's own header (which is replaced).
GrantPlan PlanGrants(const std::vector<EgressCredential>& credentials, std::string_view host,
                     uint16_t port, const http::RequestHead& head, bool tls = false);
// A tunnel's request (a CONNECT head, a SOCKS5 request's host): the reason to refuse it when it
// carries any placeholder, else empty. Nothing is put into a tunnel.
std::string RefuseTunnel(const std::vector<EgressCredential>& credentials, std::string_view request,
                         std::string_view where);

// The head to send upstream for a request the plan allows: as http::BuildUpstreamRequestHead,
// with the fields the plan sets in place of the code's, and, when the plan puts a value in,
// "Accept-Encoding: identity" in place of the code's (answers must come unencoded to be masked).
std::string BuildGrantedRequestHead(const GrantPlan& plan, http::RequestHead head,
                                    const http::AbsoluteUrl& url, bool close,
                                    uint16_t default_port);
// Why an answer to a request the plan put a value in cannot be masked (a Content-Encoding other
// than identity, a transfer coding other than one "chunked"), or empty when it can.
std::string UnmaskableResponse(const http::ResponseHead& head);

// Every occurrence of each rule's `from` in `text` replaced (same-length rules only).
void ReplaceAll(const std::vector<StreamRewriter::Rule>& rules, std::string& text);

}  // namespace warden::egress
