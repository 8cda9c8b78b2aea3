// Redaction of secrets before they reach the audit log. The rules are a documented list
// (docs/audit.md, "Redaction") and each has a test in tests/audit/redact_test.cc; a rule added
// here without both is a rule nobody can rely on.
//
// Redaction is best effort by nature: it catches the usual shapes of credentials, not every
// secret a tool argument can hold. Its failures are therefore biased towards hiding too much.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace warden::audit {

// What replaces a secret.
inline constexpr std::string_view kRedacted = "[REDACTED]";

// True when an object key names a secret: after lower-casing and dropping '_', '-', '.' and
// spaces it contains password, passwd, passphrase, secret, token, apikey, authorization,
// cookie, privatekey or credential.
bool IsSecretKey(std::string_view key);

// `text` with every secret-looking part replaced by kRedacted: PEM private key blocks, the
// credential after "Bearer " or "Basic ", sk-..., sk_live_/rk_live_..., AKIA/ASIA access key
// ids, ghp_/gho_/ghu_/ghs_/ghr_/github_pat_ tokens, Slack xox?- tokens, Google AIza keys, JWTs,
// the password in a URL's user:password@, the value in "secret_word=value" or
// "secret_word: value", and high-entropy runs of 32 characters or more.
std::string RedactText(std::string_view text);

// A copy of `value` with secrets replaced by kRedacted:
//  - a member whose key IsSecretKey has its value replaced, whatever its type (objects and
//    arrays wholesale), except null and booleans (a bit is not a secret) and numbers under keys
//    containing "tokens" (counts such as max_tokens);
//  - an object {"name"|"key"|"header": <secret key>, "value": V} has V replaced;
//  - in an array, the element after a string flag like "--password" or "-api-key" is replaced;
//  - every other string goes through RedactText.
// Idempotent: Redact(Redact(v)) == Redact(v).
nlohmann::json Redact(const nlohmann::json& value);

}  // namespace warden::audit
