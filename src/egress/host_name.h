// Destination hosts as clients name them: normalisation (lower case, no trailing dot) and the
// RFC 1123 validity check, with IP spellings recognised first (see ip_address.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "egress/ip_address.h"

namespace warden::egress {

struct Host {
  // Lower-case name without a trailing dot, or the canonical text of `address`.
  std::string name;
  // Set when the client's text spells an IP address, in any spelling.
  std::optional<IpAddress> address;
};

// Normalises and checks a host from a request (CONNECT target, URL, SOCKS5 domain).
// Error (naming the text) for: empty, not a valid name (RFC 1123 labels of 1-63 letters, digits
// and hyphens, no leading or trailing hyphen, 253 characters at most), numeric-looking text that
// is not a valid address ("1.2.3.4.5").
Result<Host> ParseHost(std::string_view raw);

// The RFC 1123 check alone, on an already lower-cased name without trailing dot.
// Error message says which label is wrong and why.
Status ValidateHostName(std::string_view name);

// `s` with A-Z lowered (names are ASCII once parsed; no locale).
std::string ToLowerAscii(std::string_view s);

// `text` made safe to put in a message or log line: quoted, non-printable bytes as \xNN, and cut
// at 100 characters. Client-supplied strings go through this before they reach any message.
std::string Quote(std::string_view text);
// The same without the quotes, for text that is ours but may carry odd bytes (a hook's reason,
// an exception's message): printable ASCII kept, anything else as \xNN, cut at 300 characters.
std::string Printable(std::string_view text);

}  // namespace warden::egress
