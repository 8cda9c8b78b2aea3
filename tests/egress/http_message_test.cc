#include "egress/http_message.h"

#include <gtest/gtest.h>

#include "egress/socks5.h"

namespace warden::egress::http {
namespace {

RequestHead MustParseRequest(const std::string& head) {
  auto r = ParseRequestHead(head);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : RequestHead{};
}

TEST(HttpHead, FindsTheEndOfAHead) {
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\r\nHost: a\r\n\r\nbody"), 27u);
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\r\nHost: a\r\n"), 0u);
}

TEST(HttpHead, ParsesAnAbsoluteFormRequest) {
  RequestHead h =
      MustParseRequest("GET http://a.test:8080/p?q=1 HTTP/1.1\r\nHost: a.test\r\nX-A:  b \r\n\r\n");
  EXPECT_EQ(h.method, "GET");
  EXPECT_EQ(h.target, "http://a.test:8080/p?q=1");
  EXPECT_EQ(h.version_minor, 1);
  ASSERT_EQ(h.headers.size(), 2u);
  EXPECT_EQ(FindHeader(h.headers, "x-a").value_or(""), "b");
}

TEST(HttpHead, RefusesAmbiguousOrMalformedHeads) {
  for (const char* bad : {
           "GET / HTTP/1.1\nHost: a\n\n",                   // bare LF
           "GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",  // obsolete folding
           "GET / HTTP/1.1\r\nHost : a\r\n\r\n",            // space before colon
           "GET / HTTP/2.0\r\n\r\n",                        // version
           "GET  / HTTP/1.1\r\n\r\n",                       // double space
           "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
           "G@T / HTTP/1.1\r\n\r\n",
           "GET /\x01 HTTP/1.1\r\n\r\n",
           "GET / HTTP/1.1\r\nX: a\x01z\r\n\r\n",
       }) {
    EXPECT_FALSE(ParseRequestHead(bad).ok()) << bad;
  }
}

TEST(HttpHead, RequestSmugglingFramingIsRefused) {
  auto both = MustParseRequest(
      "POST http://a/ HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n");
  EXPECT_FALSE(RequestBodyFraming(both).ok());
  auto two_lengths =
      MustParseRequest("POST http://a/ HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n");
  EXPECT_FALSE(RequestBodyFraming(two_lengths).ok());
  auto odd_te =
      MustParseRequest("POST http://a/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
  EXPECT_FALSE(RequestBodyFraming(odd_te).ok());
  auto bad_length = MustParseRequest("POST http://a/ HTTP/1.1\r\nContent-Length: +5\r\n\r\n");
  EXPECT_FALSE(RequestBodyFraming(bad_length).ok());
  auto ok =
      MustParseRequest("POST http://a/ HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n");
  ASSERT_TRUE(RequestBodyFraming(ok).ok());
  EXPECT_EQ(RequestBodyFraming(ok)->length, 5u);
}

TEST(HttpHead, ResponseFramingFollowsRfc9112) {
  auto resp = [](const std::string& s) { return *ParseResponseHead(s); };
  EXPECT_EQ(ResponseBodyFraming(resp("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n"), "HEAD")->kind,
            BodyFraming::Kind::kNone);
  EXPECT_EQ(ResponseBodyFraming(resp("HTTP/1.1 204 No Content\r\n\r\n"), "GET")->kind,
            BodyFraming::Kind::kNone);
  EXPECT_EQ(ResponseBodyFraming(resp("HTTP/1.1 200 OK\r\n\r\n"), "GET")->kind,
            BodyFraming::Kind::kUntilClose);
  EXPECT_EQ(ResponseBodyFraming(resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
                                "GET")
                ->kind,
            BodyFraming::Kind::kChunked);
  EXPECT_EQ(
      ResponseBodyFraming(resp("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n"), "GET")->length, 7u);
  EXPECT_EQ(ResponseBodyFraming(resp("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n"), "GET")->kind,
            BodyFraming::Kind::kNone);
  EXPECT_FALSE(ParseResponseHead("HTTP/1.1 20 OK\r\n\r\n").ok());
  EXPECT_FALSE(ParseResponseHead("ICY 200 OK\r\n\r\n").ok());
}

TEST(HttpUrl, ParsesAbsoluteHttpUrls) {
  auto u = ParseAbsoluteHttpUrl("http://A.test:8080/x/y?z=1");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->authority.host, "A.test");
  EXPECT_EQ(u->authority.port, 8080);
  EXPECT_EQ(u->origin_form, "/x/y?z=1");
  EXPECT_EQ(ParseAbsoluteHttpUrl("http://a.test")->origin_form, "/");
  EXPECT_EQ(ParseAbsoluteHttpUrl("http://a.test")->authority.port, 80);
  EXPECT_EQ(ParseAbsoluteHttpUrl("http://a.test?q")->origin_form, "/?q");
  EXPECT_EQ(ParseAbsoluteHttpUrl("http://[::1]:81/")->authority.host, "::1");
}

TEST(HttpUrl, RefusesWhatAProxyMustNotGuess) {
  EXPECT_FALSE(ParseAbsoluteHttpUrl("/relative").ok());
  EXPECT_FALSE(ParseAbsoluteHttpUrl("https://a.test/").ok());
  EXPECT_FALSE(ParseAbsoluteHttpUrl("ftp://a.test/").ok());
  EXPECT_FALSE(ParseAbsoluteHttpUrl("http://allowed.test@evil.test/").ok());
  EXPECT_FALSE(ParseAbsoluteHttpUrl("http://a.test/#frag").ok());
  EXPECT_FALSE(ParseAbsoluteHttpUrl("http://a.test:99999/").ok());
  EXPECT_FALSE(ParseAbsoluteHttpUrl("http://:80/").ok());
}

TEST(HttpAuthority, ConnectTargetsNeedAPort) {
  EXPECT_FALSE(ParseAuthority("a.test", std::nullopt).ok());
  EXPECT_EQ(ParseAuthority("a.test:443", std::nullopt)->port, 443);
  EXPECT_EQ(ParseAuthority("[::1]:443", std::nullopt)->host, "::1");
  EXPECT_FALSE(ParseAuthority("::1:443", std::nullopt).ok());
  EXPECT_FALSE(ParseAuthority("a.test:0", std::nullopt).ok());
}

TEST(HttpForward, UpstreamHeadIsOriginFormWithoutProxyOrHopByHopFields) {
  RequestHead h = MustParseRequest(
      "POST http://a.test:8080/p?q HTTP/1.1\r\nHost: evil.test\r\nProxy-Authorization: Basic "
      "eA==\r\n"
      "Proxy-Connection: keep-alive\r\nConnection: keep-alive, X-Secret\r\nX-Secret: s\r\n"
      "Keep-Alive: 5\r\nContent-Length: 3\r\nAccept: */*\r\n\r\n");
  auto url = ParseAbsoluteHttpUrl(h.target);
  std::string out = BuildUpstreamRequestHead(h, *url, /*close=*/true);
  EXPECT_EQ(out,
            "POST /p?q HTTP/1.1\r\nHost: a.test:8080\r\nContent-Length: 3\r\nAccept: */*\r\n"
            "Connection: close\r\n\r\n");
}

TEST(HttpForward, ClientResponseHeadDropsHopByHopFields) {
  auto resp = *ParseResponseHead(
      "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n"
      "Transfer-Encoding: chunked\r\nContent-Length: 10\r\nX-A: b\r\n\r\n");
  EXPECT_EQ(BuildClientResponseHead(resp, false),
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: b\r\n\r\n");
}

TEST(ChunkedBody, FindsTheEndAcrossArbitrarySplits) {
  const std::string body = "5\r\nhello\r\n7;ext=1\r\n chunky\r\n0\r\nX-T: 1\r\n\r\n";
  const std::string next = "GET http://next/ HTTP/1.1\r\n\r\n";
  for (size_t split = 0; split <= body.size(); ++split) {
    ChunkedBodyTracker t;
    std::string all = body + next;
    auto a = t.Consume(std::string_view(all).substr(0, split));
    ASSERT_TRUE(a.ok());
    size_t used = *a;
    if (!t.done()) {
      auto b = t.Consume(std::string_view(all).substr(split));
      ASSERT_TRUE(b.ok());
      used += *b;
    }
    EXPECT_TRUE(t.done());
    EXPECT_EQ(used, body.size()) << "split at " << split;
  }
}

TEST(ChunkedBody, RefusesMalformedFraming) {
  for (const char* bad :
       {"x\r\n", "5\nhello\r\n", "5\r\nhelloXX", "1234567890abcdef0\r\n", "0\r\nX: y\n"}) {
    ChunkedBodyTracker t;
    EXPECT_FALSE(t.Consume(bad).ok()) << bad;
  }
}

TEST(Socks5Messages, ParsesGreetingAndRequests) {
  using namespace socks5;
  EXPECT_EQ(ParseGreeting(std::string("\x05", 1)).status, ParseStatus::kNeedMore);
  Greeting g = ParseGreeting(std::string("\x05\x02\x02\x00", 4));
  EXPECT_EQ(g.status, ParseStatus::kDone);
  EXPECT_TRUE(g.offers_no_auth);
  EXPECT_FALSE(ParseGreeting(std::string("\x05\x01\x02", 3)).offers_no_auth);
  EXPECT_EQ(ParseGreeting(std::string("\x04\x01\x00", 3)).status, ParseStatus::kBad);

  Request d =
      ParseRequest(std::string("\x05\x01\x00\x03\x08"
                               "a.test:x"
                               "\x01\xbb",
                               15));
  EXPECT_EQ(d.status, ParseStatus::kDone);
  EXPECT_EQ(d.host, "a.test:x");
  EXPECT_EQ(d.port, 443);
  Request v4 = ParseRequest(std::string("\x05\x01\x00\x01\x7f\x00\x00\x01\x00\x50", 10));
  EXPECT_EQ(v4.host, "127.0.0.1");
  EXPECT_EQ(v4.port, 80);
  std::string v6req("\x05\x01\x00\x04", 4);
  v6req += std::string(15, '\0') + "\x01" + std::string("\x1f\x90", 2);
  Request v6 = ParseRequest(v6req);
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, 8080);
  Request bad_type = ParseRequest(std::string("\x05\x01\x00\x09\x00\x00", 6));
  EXPECT_EQ(bad_type.status, ParseStatus::kBad);
  EXPECT_EQ(bad_type.error, Reply::kAddressTypeNotSupported);
  EXPECT_EQ(ParseRequest(std::string("\x05\x01\x00\x03\x08"
                                     "a.te",
                                     9))
                .status,
            ParseStatus::kNeedMore);
}

}  // namespace
}  // namespace warden::egress::http
