// The session check (ProxyOptions::check, decision.h) and its channel across processes
// (decision_channel.h): what the proxy asks, that it never waits past the timeout, that a refusal
// reaches the client and the record, and that the channel fails closed when either end goes.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "egress/decision_channel.h"
#include "test_support.h"

namespace warden::egress {
namespace {

using namespace std::chrono_literals;
using testing::ConnectTcp;
using testing::HttpOrigin;
using testing::ReadFor;
using testing::SendAll;

// Attempts as the check saw them, answered by `answer` (which may keep `done` to answer later).
class SessionCheckTest : public ::testing::Test {
 protected:
  using Answer = std::function<void(const Attempt&, DecisionDone&)>;

  void Start(const std::vector<std::string>& allow, Answer answer,
             std::chrono::milliseconds timeout = 1000ms) {
    answer_ = std::move(answer);
    ProxyOptions options;
    auto list = AllowList::Parse(allow);
    ASSERT_TRUE(list.ok()) << list.status().message();
    options.allow_list = *list;
    auto resolve = ResolveMap::Parse({{"allowed.test", "127.0.0.1"}});
    ASSERT_TRUE(resolve.ok());
    options.resolve = *resolve;
    options.check_timeout = timeout;
    options.check = [this](const Attempt& a, DecisionDone done) {
      std::lock_guard lock(mu_);
      seen_.push_back(a);
      answer_(a, done);
    };
    options.recorder = [this](const EgressRecord& r) { records_.Add(r); };
    proxy_ = testing::StartProxy(std::move(options), &port_);
    ASSERT_NE(proxy_, nullptr);
  }
  void TearDown() override {
    if (proxy_) proxy_->Stop();
  }
  std::string Exchange(const std::string& request, std::string_view until = "\r\n\r\n") {
    UniqueFd c = ConnectTcp(port_);
    EXPECT_TRUE(c.valid());
    SendAll(c.get(), request);
    return ReadFor(c.get(), 5s, until);
  }
  std::vector<Attempt> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }

  Answer answer_;
  std::mutex mu_;
  std::vector<Attempt> seen_;
  std::unique_ptr<EgressProxy> proxy_;
  uint16_t port_ = 0;
  testing::Collected<EgressRecord> records_;
};

TEST_F(SessionCheckTest, APlainRequestIsAskedWithItsUrlHeadersAndWholeBodyAndARefusalIs403) {
  HttpOrigin origin;
  const std::string where = "allowed.test:" + std::to_string(origin.port());
  Start({where}, [](const Attempt& a, DecisionDone& done) {
    if (a.body.find("4111 1111") != std::string::npos) done(Decision::Deny("carries the card"));
    else done(Decision::Defer());
  });
  // The body comes after the head, in a second write: the proxy reads it whole before asking.
  UniqueFd c = ConnectTcp(port_);
  const std::string body = std::string(3000, 'a') + "card 4111 1111";
  SendAll(c.get(), "POST http://" + where + "/upload?q=1 HTTP/1.1\r\nHost: " + where +
                       "\r\nX-Note: hi\r\nContent-Length: " + std::to_string(body.size()) +
                       "\r\n\r\n");
  std::this_thread::sleep_for(50ms);
  SendAll(c.get(), body);
  std::string refused = ReadFor(c.get(), 5s, "card");
  EXPECT_EQ(refused.rfind("HTTP/1.1 403", 0), 0u) << refused;
  EXPECT_NE(refused.find("session check: carries the card"), std::string::npos) << refused;
  EXPECT_TRUE(origin.heads().empty());  // refused before any byte went out

  auto asked = seen();
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0].host, "allowed.test");
  EXPECT_EQ(asked[0].port, origin.port());
  EXPECT_EQ(asked[0].protocol, Protocol::kHttp);
  EXPECT_EQ(asked[0].target, "http://" + where + "/upload?q=1");
  EXPECT_NE(asked[0].headers.find("X-Note: hi\r\n"), std::string::npos) << asked[0].headers;
  EXPECT_EQ(asked[0].body, body);
  auto records = records_.Wait(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_FALSE(records[0].allowed);
  EXPECT_EQ(records[0].rule_or_reason, "session check: carries the card");

  // The same request without the card goes through, body intact.
  std::string ok = Exchange("POST http://" + where + "/upload HTTP/1.1\r\nHost: " + where +
                                "\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
                            "upstream");
  EXPECT_EQ(ok.rfind("HTTP/1.1 200", 0), 0u) << ok;
  ASSERT_EQ(origin.bodies().size(), 1u);
  EXPECT_EQ(origin.bodies()[0], "hello");
}

TEST_F(SessionCheckTest, EveryRequestOfAKeptAliveConnectionIsAskedAndTunnelsByDestinationOnly) {
  HttpOrigin origin;
  const std::string where = "allowed.test:" + std::to_string(origin.port());
  Start({where}, [](const Attempt& a, DecisionDone& done) {
    done(a.target.ends_with("/two") ? Decision::Deny("not two") : Decision::Defer());
  });
  UniqueFd c = ConnectTcp(port_);
  SendAll(c.get(), "GET http://" + where + "/one HTTP/1.1\r\nHost: " + where + "\r\n\r\n");
  EXPECT_NE(ReadFor(c.get(), 5s, "GET /one").find("200"), std::string::npos);
  SendAll(c.get(), "GET http://" + where + "/two HTTP/1.1\r\nHost: " + where + "\r\n\r\n");
  std::string second = ReadFor(c.get(), 5s, "not two");
  EXPECT_NE(second.find("403"), std::string::npos) << second;

  std::string tunnel = Exchange("CONNECT " + where + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(tunnel.rfind("HTTP/1.1 200", 0), 0u) << tunnel;
  auto asked = seen();
  ASSERT_EQ(asked.size(), 3u);
  EXPECT_EQ(asked[2].protocol, Protocol::kConnect);
  EXPECT_EQ(asked[2].host, "allowed.test");
  EXPECT_TRUE(asked[2].target.empty());
  EXPECT_TRUE(asked[2].headers.empty());
}

TEST_F(SessionCheckTest, WhatTheAllowListRefusesIsNeverAsked) {
  Start({"allowed.test:1"}, [](const Attempt&, DecisionDone& done) { done(Decision::Defer()); });
  std::string r = Exchange("GET http://evil.test/x HTTP/1.1\r\nHost: evil.test\r\n\r\n");
  EXPECT_NE(r.find("403"), std::string::npos);
  EXPECT_TRUE(seen().empty());
}

TEST_F(SessionCheckTest, NoAnswerWithinTheTimeoutRefusesWhileOtherClientsAreServed) {
  HttpOrigin origin;
  const std::string where = "allowed.test:" + std::to_string(origin.port());
  std::mutex kept_mu;
  std::vector<DecisionDone> kept;  // answered after the test, to show a late answer is harmless
  Start(
      {where},
      [&](const Attempt& a, DecisionDone& done) {
        if (a.target.ends_with("/slow")) {
          std::lock_guard lock(kept_mu);
          kept.push_back(done);
        } else {
          done(Decision::Defer());
        }
      },
      300ms);
  UniqueFd slow = ConnectTcp(port_);
  SendAll(slow.get(), "GET http://" + where + "/slow HTTP/1.1\r\nHost: " + where + "\r\n\r\n");
  // Meanwhile the proxy's thread is free: another client is answered.
  std::string fast = Exchange("GET http://" + where + "/fast HTTP/1.1\r\nHost: " + where +
                                  "\r\nConnection: close\r\n\r\n",
                              "GET /fast");
  EXPECT_NE(fast.find("200"), std::string::npos) << fast;
  std::string r = ReadFor(slow.get(), 5s, "ms");
  EXPECT_NE(r.find("403"), std::string::npos) << r;
  EXPECT_NE(r.find("session check: no answer within 300 ms"), std::string::npos) << r;
  std::lock_guard lock(kept_mu);
  ASSERT_EQ(kept.size(), 1u);
  kept[0](Decision::Allow("too late"));  // nobody waits for it any more
}

TEST_F(SessionCheckTest, ACheckThatThrowsRefuses) {
  HttpOrigin origin;
  const std::string where = "allowed.test:" + std::to_string(origin.port());
  Start({where}, [](const Attempt&, DecisionDone&) { throw std::runtime_error("bug"); });
  std::string r = Exchange("GET http://" + where + "/ HTTP/1.1\r\nHost: " + where + "\r\n\r\n",
                           "bug");
  EXPECT_NE(r.find("403"), std::string::npos) << r;
  EXPECT_NE(r.find("session check: it failed: bug"), std::string::npos) << r;
}

// ---- the channel ---------------------------------------------------------------------------

TEST(DecisionChannelTest, AttemptsRoundTripAndMalformedOnesAreNamed) {
  Attempt a{"example.com", 8080, "", Protocol::kHttp, "http://example.com:8080/x?y=1",
            "Host: example.com\r\n\r\n", std::string("bin\0ary\nbody", 12)};
  auto back = DecodeAttempt(EncodeAttempt(7, a));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->first, 7u);
  EXPECT_EQ(back->second.host, a.host);
  EXPECT_EQ(back->second.port, a.port);
  EXPECT_EQ(back->second.protocol, Protocol::kHttp);
  EXPECT_EQ(back->second.target, a.target);
  EXPECT_EQ(back->second.headers, a.headers);
  EXPECT_EQ(back->second.body, a.body);

  EXPECT_FALSE(DecodeAttempt("no newline").ok());
  EXPECT_FALSE(DecodeAttempt("[1]\n").ok());
  EXPECT_FALSE(DecodeAttempt(R"({"id":1,"host":"h","port":70000,"protocol":"http","target":"","headers_bytes":0})"
                             "\n")
                   .ok());
  auto bad_protocol = DecodeAttempt(
      R"({"id":1,"host":"h","port":1,"protocol":"gopher","target":"","headers_bytes":0})"
      "\n");
  ASSERT_FALSE(bad_protocol.ok());
  EXPECT_NE(bad_protocol.status().message().find("gopher"), std::string::npos);
  EXPECT_FALSE(DecodeAttempt(
                   R"({"id":1,"host":"h","port":1,"protocol":"http","target":"","headers_bytes":9})"
                   "\nabc")
                   .ok());
}

// Waits for one decision from a check.
struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Decision> got;
  DecisionDone done() {
    return [this](Decision d) {
      std::lock_guard lock(mu);
      got.push_back(std::move(d));
      cv.notify_all();
    };
  }
  std::vector<Decision> Wait(size_t n) {
    std::unique_lock lock(mu);
    cv.wait_for(lock, 5s, [&] { return got.size() >= n; });
    return got;
  }
};

TEST(DecisionChannelTest, TheGatewaysAnswersReachTheirAttemptsAndAClosedChannelRefuses) {
  auto channel = MakeDecisionChannel();
  ASSERT_TRUE(channel.ok()) << channel.status().message();
  auto client = DecisionClient::Open(std::move(channel->second));
  ASSERT_TRUE(client.ok()) << client.status().message();
  auto server = std::make_unique<DecisionServer>(std::move(channel->first), [](const Attempt& a) {
    if (a.body == "secret") return Decision::Deny("carries the secret");
    if (a.host == "boom") throw std::runtime_error("broken");
    return Decision::Defer();
  });
  AsyncCheck check = (*client)->check();
  Waiter w;
  check(Attempt{"a.test", 80, "", Protocol::kHttp, "http://a.test/", "", "fine"}, w.done());
  check(Attempt{"a.test", 80, "", Protocol::kHttp, "http://a.test/", "", "secret"}, w.done());
  check(Attempt{"boom", 443, "", Protocol::kConnect, "", "", ""}, w.done());
  auto got = w.Wait(3);
  ASSERT_EQ(got.size(), 3u);
  int allowed = 0, refused_secret = 0, refused_broken = 0;
  for (const Decision& d : got) {
    allowed += d.kind == Decision::Kind::kAllow;
    refused_secret += d.kind == Decision::Kind::kDeny && d.reason == "carries the secret";
    refused_broken += d.kind == Decision::Kind::kDeny && d.reason.find("broken") != std::string::npos;
  }
  EXPECT_EQ(allowed, 1);
  EXPECT_EQ(refused_secret, 1);
  EXPECT_EQ(refused_broken, 1);
  // The server counts an answer after its send returns, which may be after the client has the
  // answer: wait (bounded) for the count rather than race it.
  for (int i = 0; i < 500 && server->answered() < 3u; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(server->answered(), 3u);

  // The gateway goes: what is asked after is refused at once.
  server.reset();
  Waiter after;
  // The reader sees the end of the channel soon after; until then a send may still succeed and
  // is then refused when the end is seen. Either way, refused.
  check(Attempt{"a.test", 80, "", Protocol::kHttp, "http://a.test/", "", "fine"}, after.done());
  auto late = after.Wait(1);
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].kind, Decision::Kind::kDeny);

  // The client goes: its check stays callable and refuses.
  client->reset();
  Waiter gone;
  check(Attempt{"a.test", 80, "", Protocol::kHttp, "", "", ""}, gone.done());
  ASSERT_EQ(gone.Wait(1).size(), 1u);
  EXPECT_EQ(gone.got[0].kind, Decision::Kind::kDeny);
}

TEST(DecisionChannelTest, OnlyASeqpacketSocketIsTaken) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  UniqueFd other(fds[1]);
  auto opened = DecisionClient::Open(UniqueFd(fds[0]));
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("SOCK_SEQPACKET"), std::string::npos);
  EXPECT_FALSE(DecisionClient::Open(UniqueFd()).ok());
}

TEST(DecisionChannelTest, AGatewayThatNeverAnswersLeavesTheProxyToItsTimeout) {
  // A peer that reads nothing: the child's sends fill the buffer and are then refused at once.
  auto channel = MakeDecisionChannel();
  ASSERT_TRUE(channel.ok());
  auto client = DecisionClient::Open(std::move(channel->second));
  ASSERT_TRUE(client.ok());
  AsyncCheck check = (*client)->check();
  Waiter w;
  const std::string body(60 * 1024, 'x');
  size_t asked = 0;
  for (; asked < 200; ++asked) {
    check(Attempt{"a.test", 80, "", Protocol::kHttp, "http://a.test/", "", body}, w.done());
    std::lock_guard lock(w.mu);
    if (!w.got.empty()) break;
  }
  auto got = w.Wait(1);
  ASSERT_FALSE(got.empty()) << "200 attempts of 60 KiB all fit in the channel's buffer";
  EXPECT_EQ(got[0].kind, Decision::Kind::kDeny);
  EXPECT_NE(got[0].reason.find("too many attempts"), std::string::npos) << got[0].reason;
  // Closing the gateway's end refuses every attempt still waiting.
  channel->first.reset();
  EXPECT_EQ(w.Wait(asked + 1).size(), asked + 1);
}

}  // namespace
}  // namespace warden::egress
