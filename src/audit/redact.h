// Redaction of secrets before they reach the audit log. The rules are a documented list
// (docs/audit.md, "Redaction") and each has a test in tests/audit/redact_test.cc; a rule added
// here without both is a rule nobody can rely on.
//
// Redaction is best effort by nature: it catches the usual shapes of credentials, not every
// secret a tool argument can hold. Its failures are therefore biased towards hiding too much.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

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

// A byte range [begin, end) of a text.
struct TextSpan {
  size_t begin = 0;
  size_t end = 0;
};

// The credential shapes only, for text that is ordinary tool output rather than tool arguments
// (credentials::Redactor): PEM private key blocks, the credential after "Bearer " or "Basic ",
// sk-..., sk_live_/rk_live_..., AKIA/ASIA access key ids, ghp_/gho_/ghu_/ghs_/ghr_/github_pat_
// tokens, Slack xox?- tokens, Google AIza keys and JWTs, each replaced by kRedacted. Unlike
// RedactText it leaves URL passwords, "secret_word=value" and high-entropy runs alone: commit
// ids, hashes and base64 payloads are what tools print, and a result mangled on a guess is worse
// than a log entry that hides too much. True in *changed when anything was replaced.
std::string RedactShapes(std::string_view text, bool* changed = nullptr);

// Where RedactShapes replaces: sorted by begin, overlapping or touching spans merged into one.
// For callers that combine the shapes with matches of their own (credentials::Redactor).
std::vector<TextSpan> FindShapes(std::string_view text);

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
