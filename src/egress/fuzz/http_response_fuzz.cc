// libFuzzer entry point for what the egress proxy reads from an upstream server (which sandboxed
// code may run, on an allowed host): a response head. The input is the head up to CRLFCRLF.
// Invariants, beyond not crashing: the head the client gets parses back with the same status and
// reason, without hop-by-hop fields, and frames its body the same way as the upstream's head for
// the same request method (a client that reads a body's end elsewhere than the proxy does would
// take body bytes for the next response); a body that runs until the upstream closes makes the
// client head say "Connection: close". Seed corpus: tests/fuzz/corpus/http_response/.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "egress/http_message.h"
#include "fuzz_check.h"

namespace {

using namespace warden::egress::http;

void CheckClientHead(const ResponseHead& head, std::string_view method) {
  const auto framing = ResponseBodyFraming(head, method);
  if (!framing.ok()) return;  // the proxy answers 502
  const bool until_close = framing->kind == BodyFraming::Kind::kUntilClose;
  const std::string out = BuildClientResponseHead(head, until_close);
  FUZZ_CHECK(FindHeadEnd(out) == out.size());
  auto again = ParseResponseHead(out);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->status == head.status && again->reason == head.reason);
  for (const char* hop : {"keep-alive", "te", "upgrade", "proxy-connection"}) {
    FUZZ_CHECK(!FindHeader(again->headers, hop).has_value());
  }
  if (until_close) {
    FUZZ_CHECK(HeaderHasToken(again->headers, "connection", "close"));
    return;
  }
  FUZZ_CHECK(!FindHeader(again->headers, "connection").has_value());
  auto same = ResponseBodyFraming(*again, method);
  FUZZ_CHECK(same.ok());
  FUZZ_CHECK(same->kind == framing->kind && same->length == framing->length);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t head_len = FindHeadEnd(input);
  auto head = ParseResponseHead(head_len == 0 ? input : input.substr(0, head_len));
  if (!head.ok() || head_len == 0) return 0;
  FUZZ_CHECK(head->status >= 100 && head->status <= 999);
  for (const char* method : {"GET", "HEAD", "POST"}) CheckClientHead(*head, method);
  return 0;
}
