#include "egress/http_message.h"

#include "common/http_token.h"
#include "egress/host_name.h"

namespace warden::egress::http {

namespace {

constexpr size_t kMaxChunkLine = 4096;
constexpr size_t kMaxTrailerBytes = 16 * 1024;


char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

bool IsToken(std::string_view s) { return IsHttpToken(s); }

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Lower(a[i]) != Lower(b[i])) return false;
  }
  return true;
}

namespace {

bool StartsWithIgnoreCase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && EqualsIgnoreCase(s.substr(0, prefix.size()), prefix);
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits a head into CRLF-terminated lines (the final empty line excluded). Refuses bare CR or LF.
Result<std::vector<std::string_view>> SplitLines(std::string_view head) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < head.size()) {
    size_t cr = head.find_first_of("\r\n", start);
    if (cr == std::string_view::npos || head[cr] != '\r' || cr + 1 >= head.size() ||
        head[cr + 1] != '\n') {
      return Status::Error("line not terminated by CRLF");
    }
    if (cr == start) break;  // the empty line that ends the head
    lines.push_back(head.substr(start, cr - start));
    start = cr + 2;
  }
  if (lines.empty()) return Status::Error("empty head");
  return lines;
}

Result<std::vector<HeaderField>> ParseFields(const std::vector<std::string_view>& lines) {
  std::vector<HeaderField> fields;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    if (line.front() == ' ' || line.front() == '\t') {
      return Status::Error("obsolete header line folding is not accepted");
    }
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) return Status::Error("header line without ':'");
    std::string_view name = line.substr(0, colon);
    if (!IsToken(name)) return Status::Error("invalid header name " + Quote(name));
    std::string_view value = TrimOws(line.substr(colon + 1));
    for (char c : value) {
      unsigned char u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\t') || u == 0x7f) {
        return Status::Error("control character in header " + Quote(name));
      }
    }
    fields.push_back({std::string(name), std::string(value)});
  }
  return fields;
}

Result<int> ParseVersion(std::string_view v) {
  if (v == "HTTP/1.1") return 1;
  if (v == "HTTP/1.0") return 0;
  return Status::Error("unsupported HTTP version " + Quote(v));
}

Result<uint64_t> ParseContentLength(const std::vector<HeaderField>& headers) {
  std::optional<uint64_t> length;
  for (const auto& f : headers) {
    if (!EqualsIgnoreCase(f.name, "content-length")) continue;
    if (f.value.empty() || f.value.size() > 18) return Status::Error("invalid Content-Length");
    uint64_t v = 0;
    for (char c : f.value) {
      if (c < '0' || c > '9') return Status::Error("invalid Content-Length");
      v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    if (length && *length != v) return Status::Error("conflicting Content-Length headers");
    length = v;
  }
  return length.value_or(UINT64_MAX);
}

bool IsHopByHop(const std::vector<HeaderField>& headers, std::string_view name) {
  static constexpr std::string_view kAlways[] = {"connection", "keep-alive", "te", "upgrade",
                                                 "proxy-connection"};
  for (auto h : kAlways) {
    if (EqualsIgnoreCase(name, h)) return true;
  }
  // Fields named in Connection are hop-by-hop too, except the framing ones we forward as is.
  if (EqualsIgnoreCase(name, "transfer-encoding") || EqualsIgnoreCase(name, "content-length")) {
    return false;
  }
  return HeaderHasToken(headers, "connection", name);
}

}  // namespace

size_t FindHeadEnd(std::string_view buffer) {
  size_t pos = buffer.find("\r\n\r\n");
  return pos == std::string_view::npos ? 0 : pos + 4;
}

Result<RequestHead> ParseRequestHead(std::string_view head) {
  auto lines = SplitLines(head);
  if (!lines.ok()) return lines.status();
  std::string_view line = lines->front();
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return Status::Error("malformed request line");
  }
  RequestHead req;
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (!IsToken(method)) return Status::Error("invalid method");
  if (target.empty()) return Status::Error("empty request target");
  for (char c : target) {
    if (c <= 0x20 || c >= 0x7f) return Status::Error("invalid character in request target");
  }
  auto version = ParseVersion(line.substr(sp2 + 1));
  if (!version.ok()) return version.status();
  auto fields = ParseFields(*lines);
  if (!fields.ok()) return fields.status();
  req.method = std::string(method);
  req.target = std::string(target);
  req.version_minor = *version;
  req.headers = std::move(fields).value();
  return req;
}

Result<ResponseHead> ParseResponseHead(std::string_view head) {
  auto lines = SplitLines(head);
  if (!lines.ok()) return lines.status();
  std::string_view line = lines->front();
  if (line.size() < 12 || line[8] != ' ' || (line.size() > 12 && line[12] != ' ')) {
    return Status::Error("malformed status line");
  }
  auto version = ParseVersion(line.substr(0, 8));
  if (!version.ok()) return version.status();
  ResponseHead resp;
  resp.version_minor = *version;
  for (size_t i = 9; i < 12; ++i) {
    if (line[i] < '0' || line[i] > '9') return Status::Error("malformed status code");
    resp.status = resp.status * 10 + (line[i] - '0');
  }
  if (resp.status < 100) return Status::Error("malformed status code");
  resp.reason = line.size() > 13 ? std::string(line.substr(13)) : std::string();
  for (char c : resp.reason) {
    unsigned char u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) return Status::Error("control character in reason");
  }
  auto fields = ParseFields(*lines);
  if (!fields.ok()) return fields.status();
  resp.headers = std::move(fields).value();
  return resp;
}

std::optional<std::string_view> FindHeader(const std::vector<HeaderField>& headers,
                                           std::string_view name) {
  for (const auto& f : headers) {
    if (EqualsIgnoreCase(f.name, name)) return std::string_view(f.value);
  }
  return std::nullopt;
}

bool HeaderHasToken(const std::vector<HeaderField>& headers, std::string_view name,
                    std::string_view token) {
  for (const auto& f : headers) {
    if (!EqualsIgnoreCase(f.name, name)) continue;
    std::string_view v = f.value;
    while (!v.empty()) {
      size_t comma = v.find(',');
      std::string_view item = TrimOws(v.substr(0, comma));
      if (EqualsIgnoreCase(item, token)) return true;
      if (comma == std::string_view::npos) break;
      v.remove_prefix(comma + 1);
    }
  }
  return false;
}

Result<BodyFraming> RequestBodyFraming(const RequestHead& head) {
  auto te = FindHeader(head.headers, "transfer-encoding");
  auto length = ParseContentLength(head.headers);
  if (!length.ok()) return length.status();
  if (te) {
    if (*length != UINT64_MAX) {
      return Status::Error("both Transfer-Encoding and Content-Length are present");
    }
    int te_count = 0;
    for (const auto& f : head.headers) te_count += EqualsIgnoreCase(f.name, "transfer-encoding");
    if (te_count != 1 || !EqualsIgnoreCase(*te, "chunked") || head.version_minor == 0) {
      return Status::Error("unsupported Transfer-Encoding (only a single \"chunked\" is accepted)");
    }
    return BodyFraming{BodyFraming::Kind::kChunked, 0};
  }
  if (*length == UINT64_MAX || *length == 0) return BodyFraming{BodyFraming::Kind::kNone, 0};
  return BodyFraming{BodyFraming::Kind::kLength, *length};
}

Result<BodyFraming> ResponseBodyFraming(const ResponseHead& head, std::string_view request_method) {
  if (request_method == "HEAD" || head.status < 200 || head.status == 204 || head.status == 304) {
    return BodyFraming{BodyFraming::Kind::kNone, 0};
  }
  bool has_te = false;
  bool last_is_chunked = false;
  for (const auto& f : head.headers) {
    if (!EqualsIgnoreCase(f.name, "transfer-encoding")) continue;
    has_te = true;
    std::string_view v = f.value;
    size_t comma = v.rfind(',');
    std::string_view last = TrimOws(comma == std::string_view::npos ? v : v.substr(comma + 1));
    last_is_chunked = EqualsIgnoreCase(last, "chunked");
  }
  if (has_te) {
    return BodyFraming{last_is_chunked && head.version_minor == 1 ? BodyFraming::Kind::kChunked
                                                                  : BodyFraming::Kind::kUntilClose,
                       0};
  }
  auto length = ParseContentLength(head.headers);
  if (!length.ok()) return length.status();
  if (*length == UINT64_MAX) return BodyFraming{BodyFraming::Kind::kUntilClose, 0};
  if (*length == 0) return BodyFraming{BodyFraming::Kind::kNone, 0};
  return BodyFraming{BodyFraming::Kind::kLength, *length};
}

Result<Authority> ParseAuthority(std::string_view text, std::optional<uint16_t> default_port) {
  Authority out;
  std::string_view port_text;
  bool has_port = false;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return Status::Error("unclosed '[' in " + Quote(text));
    out.host = std::string(text.substr(1, close - 1));
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return Status::Error("malformed authority " + Quote(text));
      port_text = rest.substr(1);
      has_port = true;
    }
  } else {
    size_t colon = text.rfind(':');
    if (colon != std::string_view::npos) {
      if (text.find(':') != colon) {
        return Status::Error("IPv6 address without brackets in " + Quote(text));
      }
      port_text = text.substr(colon + 1);
      has_port = true;
      text = text.substr(0, colon);
    }
    out.host = std::string(text);
  }
  if (out.host.empty()) return Status::Error("no host in " + Quote(text));
  if (!has_port) {
    if (!default_port) return Status::Error("no port in " + Quote(text));
    out.port = *default_port;
    return out;
  }
  if (port_text.empty() || port_text.size() > 5)
    return Status::Error("invalid port " + Quote(port_text));
  uint32_t port = 0;
  for (char c : port_text) {
    if (c < '0' || c > '9') return Status::Error("invalid port " + Quote(port_text));
    port = port * 10 + static_cast<uint32_t>(c - '0');
  }
  if (port == 0 || port > 65535) return Status::Error("invalid port " + Quote(port_text));
  out.port = static_cast<uint16_t>(port);
  return out;
}

Result<AbsoluteUrl> ParseAbsoluteHttpUrl(std::string_view target) {
  if (!StartsWithIgnoreCase(target, "http://")) {
    if (StartsWithIgnoreCase(target, "https://")) {
      return Status::Error("https URLs go through CONNECT, not a plain request");
    }
    if (!target.empty() && target.front() == '/') {
      return Status::Error("this is a proxy: the request target must be an absolute http:// URL");
    }
    return Status::Error("unsupported request target " + Quote(target));
  }
  std::string_view rest = target.substr(7);
  size_t end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, end);
  if (authority.find('@') != std::string_view::npos) {
    return Status::Error("URLs with user information are not accepted");
  }
  if (end != std::string_view::npos && rest[end] == '#') {
    return Status::Error("fragments are not accepted in a request target");
  }
  auto auth = ParseAuthority(authority, 80);
  if (!auth.ok()) return auth.status();
  AbsoluteUrl url;
  url.authority = std::move(auth).value();
  std::string_view path = end == std::string_view::npos ? std::string_view() : rest.substr(end);
  if (path.find('#') != std::string_view::npos) {
    return Status::Error("fragments are not accepted in a request target");
  }
  url.origin_form =
      path.empty() ? "/" : (path.front() == '?' ? "/" + std::string(path) : std::string(path));
  return url;
}

std::string BuildUpstreamRequestHead(const RequestHead& head, const AbsoluteUrl& url, bool close,
                                     uint16_t default_port) {
  std::string out;
  out.reserve(512);
  out += head.method;
  out += ' ';
  out += url.origin_form;
  out += head.version_minor == 1 ? " HTTP/1.1\r\nHost: " : " HTTP/1.0\r\nHost: ";
  bool v6 = url.authority.host.find(':') != std::string::npos;
  out += v6 ? "[" + url.authority.host + "]" : url.authority.host;
  if (url.authority.port != default_port) out += ":" + std::to_string(url.authority.port);
  out += "\r\n";
  for (const auto& f : head.headers) {
    if (EqualsIgnoreCase(f.name, "host") || StartsWithIgnoreCase(f.name, "proxy-") ||
        IsHopByHop(head.headers, f.name)) {
      continue;
    }
    out += f.name;
    out += ": ";
    out += f.value;
    out += "\r\n";
  }
  if (close) out += "Connection: close\r\n";
  out += "\r\n";
  return out;
}

std::string BuildClientResponseHead(const ResponseHead& head, bool close) {
  std::string out = "HTTP/1.1 " + std::to_string(head.status) + " " + head.reason + "\r\n";
  const bool has_te = FindHeader(head.headers, "transfer-encoding").has_value();
  for (const auto& f : head.headers) {
    if (IsHopByHop(head.headers, f.name)) continue;
    if (has_te && EqualsIgnoreCase(f.name, "content-length")) continue;
    out += f.name;
    out += ": ";
    out += f.value;
    out += "\r\n";
  }
  if (close) out += "Connection: close\r\n";
  out += "\r\n";
  return out;
}

Result<size_t> ChunkedBodyTracker::Consume(std::string_view data, std::string* payload) {
  size_t i = 0;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    c = Lower(c);
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  while (i < data.size() && state_ != State::kDone) {
    const char c = data[i];
    switch (state_) {
      case State::kSize: {
        int h = hex(c);
        if (h >= 0) {
          if (++size_digits_ > 15) return Status::Error("chunk size too large");
          remaining_ = remaining_ * 16 + static_cast<uint64_t>(h);
        } else if (size_digits_ == 0) {
          return Status::Error("malformed chunk size");
        } else if (c == ';' || c == ' ' || c == '\t') {
          state_ = State::kSizeExt;
        } else if (c == '\r') {
          state_ = State::kSizeLf;
        } else {
          return Status::Error("malformed chunk size");
        }
        ++i;
        break;
      }
      case State::kSizeExt:
        if (c == '\r') {
          state_ = State::kSizeLf;
        } else if (c == '\n' || (static_cast<unsigned char>(c) < 0x20 && c != '\t')) {
          return Status::Error("malformed chunk extension");
        } else if (++line_bytes_ > kMaxChunkLine) {
          return Status::Error("chunk extension too long");
        }
        ++i;
        break;
      case State::kSizeLf:
        if (c != '\n') return Status::Error("chunk size line not terminated by CRLF");
        ++i;
        size_digits_ = 0;
        line_bytes_ = 0;
        state_ = remaining_ == 0 ? State::kTrailer : State::kData;
        trailer_line_empty_ = true;
        break;
      case State::kData: {
        size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, data.size() - i));
        if (payload != nullptr) payload->append(data.substr(i, n));
        i += n;
        remaining_ -= n;
        if (remaining_ == 0) state_ = State::kDataCr;
        break;
      }
      case State::kDataCr:
        if (c != '\r') return Status::Error("chunk data not followed by CRLF");
        ++i;
        state_ = State::kDataLf;
        break;
      case State::kDataLf:
        if (c != '\n') return Status::Error("chunk data not followed by CRLF");
        ++i;
        state_ = State::kSize;
        break;
      case State::kTrailer:
        if (c == '\r') {
          state_ = State::kTrailerLf;
        } else if (c == '\n') {
          return Status::Error("trailer line not terminated by CRLF");
        } else {
          trailer_line_empty_ = false;
          if (++trailer_bytes_ > kMaxTrailerBytes)
            return Status::Error("trailer section too large");
        }
        ++i;
        break;
      case State::kTrailerLf:
        if (c != '\n') return Status::Error("trailer line not terminated by CRLF");
        ++i;
        if (trailer_line_empty_) {
          state_ = State::kDone;
        } else {
          trailer_line_empty_ = true;
          state_ = State::kTrailer;
        }
        break;
      case State::kDone:
        break;
    }
  }
  return i;
}

}  // namespace warden::egress::http
