#include "audit/result_summary.h"

#include "audit/redact.h"
#include "audit/sha256.h"

namespace warden::audit {

std::string CapUtf8(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  constexpr std::string_view kEllipsis = "...";
  if (max_bytes < kEllipsis.size()) return std::string(kEllipsis.substr(0, max_bytes));
  size_t cut = max_bytes - kEllipsis.size();
  // Back up over continuation bytes (10xxxxxx) to the start of the character being cut.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + std::string(kEllipsis);
}

ResultSummary SummarizeResult(std::string_view result, size_t excerpt_bytes) {
  ResultSummary summary;
  summary.size = result.size();
  summary.sha256 = Sha256Hex(result);
  // Enough beyond the excerpt to see any secret that begins inside it, bounded so that a huge
  // result costs no more than a few kilobytes of scanning.
  size_t window = excerpt_bytes + 8192;
  std::string redacted = RedactText(result.substr(0, std::min(window, result.size())));
  if (result.size() > window) redacted += "...";  // stays visible if redaction shortened the text
  summary.excerpt = CapUtf8(redacted, excerpt_bytes);
  return summary;
}

}  // namespace warden::audit
