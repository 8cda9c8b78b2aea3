// libFuzzer entry point for what the egress proxy reads from sandboxed code over HTTP: a request
// head, its target (CONNECT authority or absolute URL) and a chunked body. The input is the bytes
// a client sends: a head up to CRLFCRLF, then the body. Invariants, beyond not crashing:
//   * a parsed head has a token method, a target of visible ASCII, token field names and values
//     without control characters or surrounding whitespace;
//   * the head sent upstream parses back with the same method, the origin-form target, exactly one
//     Host (the URL's), no hop-by-hop or Proxy-* field, and the same body framing as the client's
//     head: the proxy and the server must agree where the body ends (request smuggling);
//   * an authority prints and parses back to the same host and port;
// (the head checks and the authority round trip hold for hosts the proxy goes on with: those
// ParseHost accepts. ParseAuthority itself takes "[[1]:80" as host "[1", which ParseHost refuses.)
//   * the chunked body tracker finds the same end whether the body comes at once or in pieces.
// Seed corpus: tests/fuzz/corpus/http_request/ (docs/testing-fuzz.md).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "egress/host_name.h"
#include "egress/http_message.h"
#include "fuzz_check.h"

namespace {

using namespace warden::egress::http;

bool Equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if ((a[i] | 0x20) != (b[i] | 0x20)) return false;  // field names are ASCII tokens
  }
  return true;
}

void CheckAuthorityRoundTrip(const Authority& authority) {
  const bool v6 = authority.host.find(':') != std::string::npos;
  const std::string text =
      (v6 ? "[" + authority.host + "]" : authority.host) + ":" + std::to_string(authority.port);
  auto again = ParseAuthority(text, std::nullopt);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->host == authority.host && again->port == authority.port);
}

void CheckHead(const RequestHead& head) {
  FUZZ_CHECK(!head.method.empty() && !head.target.empty());
  for (char c : head.target) FUZZ_CHECK(c > 0x20 && c < 0x7f);
  for (const auto& f : head.headers) {
    FUZZ_CHECK(!f.name.empty());
    for (char c : f.name) FUZZ_CHECK(c > 0x20 && c < 0x7f && c != ':');
    for (char c : f.value) FUZZ_CHECK(c != '\r' && c != '\n' && c != '\0');
    FUZZ_CHECK(f.value.empty() || (f.value.front() != ' ' && f.value.back() != ' '));
  }
}

void CheckUpstreamHead(const RequestHead& head, const AbsoluteUrl& url,
                       const warden::Result<BodyFraming>& framing, bool close) {
  const std::string out = BuildUpstreamRequestHead(head, url, close);
  FUZZ_CHECK(FindHeadEnd(out) == out.size());
  auto again = ParseRequestHead(out);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->method == head.method);
  FUZZ_CHECK(again->target == url.origin_form);
  FUZZ_CHECK(again->version_minor == head.version_minor);
  int hosts = 0;
  for (const auto& f : again->headers) {
    const std::string_view name = f.name;
    if (Equal(name, "host")) {
      ++hosts;
      auto host = ParseAuthority(f.value, 80);
      FUZZ_CHECK(host.ok() && host->host == url.authority.host && host->port == url.authority.port);
    }
    FUZZ_CHECK(name.size() < 6 || !Equal(name.substr(0, 6), "proxy-"));
    FUZZ_CHECK(!Equal(name, "keep-alive") && !Equal(name, "te") && !Equal(name, "upgrade"));
    if (Equal(name, "connection")) FUZZ_CHECK(close && f.value == "close");
  }
  FUZZ_CHECK(hosts == 1);
  FUZZ_CHECK(HeaderHasToken(again->headers, "connection", "close") == close);
  if (framing.ok()) {
    auto same = RequestBodyFraming(*again);
    FUZZ_CHECK(same.ok());
    FUZZ_CHECK(same->kind == framing->kind && same->length == framing->length);
  }
}

struct Tracked {
  bool ok = true;
  size_t consumed = 0;
  bool done = false;
};

// Feeds `body` in pieces of `piece` bytes (all at once when 0), as the proxy's reads would.
Tracked Track(std::string_view body, size_t piece) {
  ChunkedBodyTracker tracker;
  Tracked t;
  while (!body.empty() && !tracker.done()) {
    const std::string_view next = piece == 0 ? body : body.substr(0, piece);
    auto n = tracker.Consume(next);
    if (!n.ok()) {
      t.ok = false;
      return t;
    }
    FUZZ_CHECK(*n <= next.size());
    FUZZ_CHECK(*n == next.size() || tracker.done());  // it stops early only at the body's end
    t.consumed += *n;
    body.remove_prefix(*n);
  }
  t.done = tracker.done();
  return t;
}

void CheckChunkedBody(std::string_view body, size_t piece) {
  const Tracked whole = Track(body, 0);
  const Tracked split = Track(body, piece);
  FUZZ_CHECK(whole.ok == split.ok);
  if (!whole.ok) return;
  FUZZ_CHECK(whole.consumed == split.consumed && whole.done == split.done);
  if (whole.done) FUZZ_CHECK(body.substr(0, whole.consumed).ends_with("\r\n"));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t head_len = FindHeadEnd(input);
  if (head_len == 0) {
    (void)ParseRequestHead(input);  // never handed an incomplete head, but must not crash either
    return 0;
  }
  FUZZ_CHECK(head_len >= 4 && input.substr(head_len - 4, 4) == "\r\n\r\n");
  auto head = ParseRequestHead(input.substr(0, head_len));
  if (!head.ok()) return 0;
  CheckHead(*head);
  const auto framing = RequestBodyFraming(*head);
  if (head->method == "CONNECT") {
    auto authority = ParseAuthority(head->target, std::nullopt);
    if (authority.ok() && warden::egress::ParseHost(authority->host).ok())
      CheckAuthorityRoundTrip(*authority);
    return 0;
  }
  auto url = ParseAbsoluteHttpUrl(head->target);
  if (url.ok() && warden::egress::ParseHost(url->authority.host).ok()) {
    FUZZ_CHECK(!url->origin_form.empty() && url->origin_form.front() == '/');
    CheckAuthorityRoundTrip(url->authority);
    CheckUpstreamHead(*head, *url, framing, false);
    CheckUpstreamHead(*head, *url, framing, true);
  }
  if (framing.ok() && framing->kind == BodyFraming::Kind::kChunked) {
    // The first byte of the input (always the method's) chooses how the body is split.
    CheckChunkedBody(input.substr(head_len), 1 + static_cast<size_t>(data[0] % 7));
  }
  return 0;
}
