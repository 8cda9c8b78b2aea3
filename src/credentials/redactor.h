// Redaction of secrets on their way to an agent, a log or the audit log (docs/credentials.md,
// "Redaction"). Two kinds:
//  - known values: every secret value warden holds or minted for a call. Each is matched as is
//    and in the encodings a tool's output is likely to carry it in, cheaply: JSON string escapes
//    (handled by matching decoded strings, and the escaped form in raw text), base64 (standard
//    and URL-safe alphabets, at each of the three alignments), percent-encoding (upper- and
//    lower-case hex) and lower-case hex. A match reads "[REDACTED:NAME]".
//  - well-known shapes (audit::RedactShapes): PEM private key blocks, JWTs, AWS access key ids,
//    bearer credentials, GitHub, Slack, Stripe and OpenAI style tokens, Google API keys. A match
//    reads "[REDACTED]". Generic high-entropy runs are not redacted from results (commit ids and
//    hashes are ordinary tool output); the audit log keeps its own stricter rules.
// A value shorter than kMinValueBytes is not matched as a known value (it would hit ordinary
// text everywhere); Add reports that so the operator hears of it.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace warden::credentials {

class Redactor {
 public:
  static constexpr size_t kMinValueBytes = 8;

  // Adds a known value under `name` (the marker's NAME: a secret's name, or "token" for a
  // minted token). False, and nothing added, when the value is shorter than kMinValueBytes.
  // Adding the same value twice keeps one entry. Thread-safe with every other member.
  bool Add(const std::string& name, std::string_view value);
  // Forgets a value (a token that expired, a secret that was removed).
  void Remove(std::string_view value);
  size_t size() const;

  // `text` with every known value (in each encoding) and every well-known shape replaced.
  // Longest match first; overlapping matches merge into one marker. Linear in text.size() times
  // the number of distinct first bytes of the patterns (Aho-Corasick would do better; the
  // pattern count is small). True in *changed when anything was replaced.
  std::string RedactText(std::string_view text, bool* changed = nullptr) const;
  // Every string (and every object key) in `value` through RedactText, in place. True when
  // anything changed.
  bool RedactJson(nlohmann::json& value) const;

  // The longest pattern, in bytes: how much a stream must hold back (StreamRedactor).
  size_t longest() const;

 private:
  friend class StreamRedactor;  // matches under mu_ to choose where a chunk may end
  struct Pattern {
    std::string bytes;
    std::string marker;
    std::string value;  // the raw value it stands for (Remove)
  };
  mutable std::mutex mu_;
  std::vector<Pattern> patterns_;  // sorted longest first
};

// Redacts a byte stream that arrives in chunks (sandbox output read in pieces): a value split
// across two chunks is still caught. Holds back at most redactor.longest() - 1 bytes (and any
// partial shape, up to max(longest() - 1, 8192) bytes in all) until the next chunk or Finish.
class StreamRedactor {
 public:
  explicit StreamRedactor(const Redactor& redactor) : redactor_(redactor) {}
  // What may be emitted now.
  std::string Feed(std::string_view chunk);
  // The rest.
  std::string Finish();

 private:
  const Redactor& redactor_;
  std::string pending_;
};

}  // namespace warden::credentials
