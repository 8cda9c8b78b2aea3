// The result summary an audit entry keeps of a tool's output: never the output itself.
#pragma once

#include <cstddef>
#include <string_view>

#include "audit/entry.h"

namespace warden::audit {

// Default excerpt length, in bytes.
inline constexpr size_t kDefaultExcerptBytes = 256;

// size and SHA-256 of all of `result`, and an excerpt: its start, redacted with RedactText,
// then cut to at most `excerpt_bytes` bytes on a UTF-8 character boundary ("..." marks a cut).
// Redaction runs before the cut, on a window larger than the excerpt, so that a secret that
// straddles the cut is still recognised whole.
ResultSummary SummarizeResult(std::string_view result, size_t excerpt_bytes = kDefaultExcerptBytes);

// `text` cut to at most `max_bytes` bytes without splitting a UTF-8 character; "..." appended
// (within the limit) when anything was cut.
std::string CapUtf8(std::string_view text, size_t max_bytes);

}  // namespace warden::audit
