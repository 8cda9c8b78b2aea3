// The values an upstream's `credentials` may hold (docs/credentials.md, "References"):
//   "secret:NAME"            the whole value is the calling user's secret NAME (else the tenant's)
//   "... {secret:NAME} ..."  the secret inside a template ("Bearer {secret:tracker_key}")
//   "... {token:UPSTREAM} ..." a token minted for this call, audience UPSTREAM
//   "... {exchange:UPSTREAM} ..." a token the identity provider issued for this call in
//                            exchange for the user's and the agent's (RFC 8693)
//   "{{" and "}}"            a literal brace
// Anything else is literal text. Parsing is the policy loader's (errors at load, naming the
// field); resolving is the gateway's, at call time.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace warden::policy {

struct TemplatePart {
  enum Kind { kLiteral, kSecret, kToken, kExchange } kind = kLiteral;
  std::string text;  // the literal text, the secret's name, or the token's upstream
};

struct Template {
  std::vector<TemplatePart> parts;
  bool uses_secret() const;
  bool uses_token() const;     // {token:...} or {exchange:...}
  bool uses_exchange() const;  // {exchange:...}
  std::vector<std::string> secrets() const;  // the names, in order, without repeats
  std::vector<std::string> tokens() const;   // the upstreams of {token:} and {exchange:}
};

// Secret names: 1 to 64 of [A-Za-z0-9_.-], starting with a letter or digit.
bool ValidSecretName(std::string_view name);

// Errors: an unclosed or empty {...}, an unknown kind ("{cookie:x}"), a bad secret name, a
// lone "}".
Result<Template> ParseTemplate(std::string_view text);

// Fills a parsed template; `lookup` gives each secret's and token's value or an error, which is
// returned as is (the first one).
template <class Lookup>
Result<std::string> Render(const Template& t, Lookup&& lookup) {
  std::string out;
  for (const TemplatePart& part : t.parts) {
    if (part.kind == TemplatePart::kLiteral) {
      out += part.text;
      continue;
    }
    Result<std::string> value = lookup(part);
    if (!value) return value.status();
    out += *value;
  }
  return out;
}

}  // namespace warden::policy
