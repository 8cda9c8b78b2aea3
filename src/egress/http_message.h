// HTTP/1.1 message heads and body framing, as much as a forwarding proxy needs: strict parsing of
// request and response heads (anything ambiguous is refused, because a proxy and a server that
// read one message two ways is how request smuggling works), the upstream request head in origin
// form, and a tracker that finds where a chunked body ends while its bytes pass through unchanged.
// Pure functions, no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace warden::egress::http {

struct HeaderField {
  std::string name;   // as received
  std::string value;  // leading and trailing whitespace removed
};

struct RequestHead {
  std::string method;
  std::string target;     // the request-target as received
  int version_minor = 1;  // HTTP/1.0 or HTTP/1.1
  std::vector<HeaderField> headers;
};

struct ResponseHead {
  int version_minor = 1;
  int status = 0;
  std::string reason;
  std::vector<HeaderField> headers;
};

// The length of the head at the start of `buffer` including its final CRLFCRLF, or 0 when the
// head is not complete yet.
size_t FindHeadEnd(std::string_view buffer);

// Parse a complete head (as delimited by FindHeadEnd). Errors say what is malformed; they are
// meant for a 400 (request) or 502 (response) body. Refused: bare LF line ends, obsolete line
// folding, whitespace before a header's colon, control characters, versions other than 1.0/1.1.
Result<RequestHead> ParseRequestHead(std::string_view head);
Result<ResponseHead> ParseResponseHead(std::string_view head);

// Whether `s` is a non-empty RFC 9110 token (what a field name must be).
bool IsToken(std::string_view s);
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

// The value of the first field named `name` (case-insensitive), or nullopt.
std::optional<std::string_view> FindHeader(const std::vector<HeaderField>& headers,
                                           std::string_view name);
// Whether a comma-separated header (e.g. Connection) contains `token` (case-insensitive).
bool HeaderHasToken(const std::vector<HeaderField>& headers, std::string_view name,
                    std::string_view token);

struct BodyFraming {
  enum class Kind { kNone, kLength, kChunked, kUntilClose };
  Kind kind = Kind::kNone;
  uint64_t length = 0;  // kLength only
};
// Requests: Content-Length, or Transfer-Encoding exactly "chunked", or no body. Both headers,
// several different lengths, or another transfer coding: error.
Result<BodyFraming> RequestBodyFraming(const RequestHead& head);
// Responses (RFC 9112 section 6.3), given the request method (HEAD has no response body).
Result<BodyFraming> ResponseBodyFraming(const ResponseHead& head, std::string_view request_method);

// A CONNECT target or URL authority: host text (brackets removed) and port.
struct Authority {
  std::string host;
  uint16_t port = 0;
};
// "host:port" or "[v6]:port"; without a port, `default_port` is used, or it is an error.
Result<Authority> ParseAuthority(std::string_view text, std::optional<uint16_t> default_port);

// An absolute-form "http://host[:port]/path?query" target. https and other schemes, userinfo
// ("user@host") and fragments are refused.
struct AbsoluteUrl {
  Authority authority;
  std::string origin_form;  // "/path?query" ("/" when empty)
};
Result<AbsoluteUrl> ParseAbsoluteHttpUrl(std::string_view target);

// The head to send upstream: origin-form target, the client's HTTP version, Host set from the
// URL (any Host the client sent is dropped), Proxy-* and hop-by-hop fields (Connection and the
// fields it names, Keep-Alive, TE, Upgrade) removed, and "Connection: close" when `close`. The
// Host field leaves out `default_port` (80; 443 inside a TLS tunnel).
std::string BuildUpstreamRequestHead(const RequestHead& head, const AbsoluteUrl& url, bool close,
                                     uint16_t default_port = 80);
// The head to send the client: "HTTP/1.1 status reason", hop-by-hop fields removed,
// Content-Length dropped when Transfer-Encoding is present, "Connection: close" when `close`.
std::string BuildClientResponseHead(const ResponseHead& head, bool close);

// Finds the end of a chunked body in a stream of bytes, without changing them.
class ChunkedBodyTracker {
 public:
  // Looks at the next bytes of the body and returns how many of them belong to it (all of
  // `data` unless the body ends inside it). Errors on malformed framing or a size/trailer
  // line over the limits. With `payload`, appends the chunks' data (framing, extensions and
  // trailers left out) to it.
  Result<size_t> Consume(std::string_view data, std::string* payload = nullptr);
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State {
    kSize,
    kSizeExt,
    kSizeLf,
    kData,
    kDataCr,
    kDataLf,
    kTrailer,
    kTrailerLf,
    kDone
  };
  State state_ = State::kSize;
  uint64_t remaining_ = 0;
  size_t size_digits_ = 0;
  size_t line_bytes_ = 0;
  size_t trailer_bytes_ = 0;
  bool trailer_line_empty_ = true;
};

}  // namespace warden::egress::http
