// The pure parts of the upstream client: SSE reading, URL parsing, the stderr tail, and the checks
// Client::Create makes before anything runs.
#include <gtest/gtest.h>

#include "testing.h"
#include "upstream/client.h"
#include "upstream/http_url.h"
#include "upstream/sse.h"
#include "upstream/stderr_tail.h"

namespace warden::upstream {
namespace {

std::vector<SseEvent> FeedAll(SseParser& parser, const std::vector<std::string>& pieces) {
  std::vector<SseEvent> events;
  for (const auto& piece : pieces) {
    Status st = parser.Feed(piece, [&](const SseEvent& e) { events.push_back(e); });
    EXPECT_TRUE(st.ok()) << st.message();
  }
  return events;
}

TEST(Sse, EventsSplitAnywhereAreReassembled) {
  SseParser parser(1024);
  auto events =
      FeedAll(parser, {"id: 7\nda", "ta: {\"a\":", "1}\r", "\n\r\n", "data: two\ndata: lines\n\n"});
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].data, "{\"a\":1}");
  EXPECT_EQ(events[0].id, "7");
  EXPECT_EQ(events[1].data, "two\nlines");
  EXPECT_EQ(events[1].id, "7");  // the last event id persists
}

TEST(Sse, CommentsAndPrimingEventsDispatchNothingButKeepIdAndRetry) {
  SseParser parser(1024);
  auto events =
      FeedAll(parser, {": keep-alive\n\n", "id: prime-1\nretry: 250\ndata:\n\n", "id: x\n\n"});
  // An empty data line still makes an event with empty data (the HTML standard); MCP servers use
  // it to prime resumption. The caller ignores events whose data is empty.
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data, "");
  EXPECT_EQ(parser.last_event_id(), "x");
  EXPECT_EQ(parser.retry_ms(), 250);
}

TEST(Sse, BomIsSkippedAndCrAloneEndsALine) {
  SseParser parser(1024);
  auto events = FeedAll(parser, {"\xEF\xBB",
                                 "\xBF"
                                 "data: x\r\r"});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data, "x");
}

TEST(Sse, EventOverTheLimitIsAnError) {
  SseParser parser(100);
  Status st = parser.Feed("data: " + std::string(200, 'a'), [](const SseEvent&) {});
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "an SSE event is over 100 bytes");
}

TEST(HttpUrlParse, AcceptsHostPortPathAndIpv6) {
  auto u = ParseHttpUrl("http://example.com:8080/mcp?x=1#frag");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "example.com");
  EXPECT_EQ(u->port, "8080");
  EXPECT_EQ(u->target, "/mcp?x=1");
  EXPECT_EQ(u->host_header, "example.com:8080");
  auto v6 = ParseHttpUrl("http://[::1]:9/");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, "9");
  auto bare = ParseHttpUrl("http://h");
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE(bare->tls);
  EXPECT_EQ(bare->port, "80");
  EXPECT_EQ(bare->target, "/");
  auto secure = ParseHttpUrl("https://h/mcp");
  ASSERT_TRUE(secure.ok());
  EXPECT_TRUE(secure->tls);
  EXPECT_EQ(secure->port, "443");
  EXPECT_EQ(secure->host_header, "h");
}

TEST(HttpUrlParse, RefusesWhatItCannotOrMustNotUse) {
  EXPECT_EQ(ParseHttpUrl("ftp://h/").status().message(),
            "upstream URL 'ftp://h/': must start with http:// or https://");
  EXPECT_EQ(
      ParseHttpUrl("http://user:pw@h/").status().message(),
      "upstream URL 'http://user:pw@h/': user info is not allowed; put credentials in headers");
  EXPECT_EQ(ParseHttpUrl("http://h:99999/").status().message(),
            "upstream URL 'http://h:99999/': bad port '99999'");
  EXPECT_EQ(ParseHttpUrl("http://h/a b").status().message(),
            "upstream URL 'http://h/a b': contains spaces or control characters");
  EXPECT_FALSE(ParseHttpUrl("http:///x").ok());
}

TEST(StderrTailTest, KeepsTheLastLineAndABoundedTail) {
  StderrTail tail(64);
  for (int i = 0; i < 100; ++i) tail.Append("line " + std::to_string(i) + "\n");
  tail.Append("Traceback: it broke\n\n  \n");
  EXPECT_EQ(tail.LastLine(), "Traceback: it broke");
  EXPECT_LE(tail.Text().size(), 64u);
  EXPECT_EQ(StderrTail().LastLine(), "");
}

Status CreateStatus(Spec spec, ClientOptions options = {}) {
  auto made = Client::Create(std::move(spec), {}, options);
  return made.ok() ? Status::Ok() : made.status();
}

TEST(CreateChecks, RefusesSpecsThatCannotWork) {
  Spec none;
  none.name = "x";
  EXPECT_EQ(CreateStatus(none).message(),
            "upstream 'x': give exactly one of a command (stdio) or a url (Streamable HTTP)");
  Spec both = none;
  both.command = {"true"};
  both.url = "http://h/";
  EXPECT_FALSE(CreateStatus(both).ok());
  Spec unnamed;
  unnamed.command = {"true"};
  EXPECT_EQ(CreateStatus(unnamed).message(), "upstream: the name is empty");
  Spec bad_url = none;
  bad_url.url = "ws://h/";
  EXPECT_EQ(CreateStatus(bad_url).message(),
            "upstream 'x': upstream URL 'ws://h/': must start with http:// or https://");
}

TEST(CreateChecks, HeaderInjectionIsRefused) {
  Spec spec;
  spec.name = "h";
  spec.url = "http://127.0.0.1:1/mcp";
  spec.headers = {{"X-Ok", "a\r\nX-Injected: 1"}};
  EXPECT_EQ(CreateStatus(spec).message(),
            "upstream 'h': header 'X-Ok' has a CR, LF or NUL in its value");
  spec.headers = {{"Bad Name", "v"}};
  EXPECT_EQ(CreateStatus(spec).message(),
            "upstream 'h': header name 'Bad Name' is not an HTTP token");
  spec.headers = {{"mcp-session-id", "stolen"}};
  EXPECT_EQ(CreateStatus(spec).message(),
            "upstream 'h': header 'mcp-session-id' is set by the transport and cannot be given");
  spec.headers = {{"Authorization", "Bearer t"}};
  EXPECT_TRUE(CreateStatus(spec).ok());
}

TEST(CreateChecks, RefusesNonsenseOptions) {
  Spec spec;
  spec.name = "o";
  spec.url = "http://127.0.0.1:1/mcp";
  ClientOptions o;
  o.backoff_initial = std::chrono::milliseconds(500);
  o.backoff_max = std::chrono::milliseconds(100);
  EXPECT_EQ(CreateStatus(spec, o).message(),
            "upstream 'o': backoff needs 0 < backoff_initial <= backoff_max");
  o = {};
  o.request_timeout = std::chrono::milliseconds(0);
  EXPECT_EQ(CreateStatus(spec, o).message(), "upstream 'o': request_timeout must be positive");
}

TEST(StateNames, AreStable) {
  EXPECT_STREQ(StateName(State::kStarting), "starting");
  EXPECT_STREQ(StateName(State::kReady), "ready");
  EXPECT_STREQ(StateName(State::kRestarting), "restarting");
  EXPECT_STREQ(StateName(State::kStopped), "stopped");
}

}  // namespace
}  // namespace warden::upstream
