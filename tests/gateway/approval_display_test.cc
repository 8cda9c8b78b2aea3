// What people read of a waiting call (docs/approvals.md "What people see"): an argument holding
// a right-to-left override ("\u202e0009\u202c", which reads "9000" when shown raw) shows as
// escapes in the console's data (the approvals API), the webhook's display fields and the in-band
// elicitation message, while the raw fields and the call that runs keep the stored value exactly.
// One gateway core with a real upstream (tests/upstream/fixtures/echo_server.py --record).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "gateway/approvals/approval_gate.h"
#include "gateway/approvals/approval_webhook.h"
#include "gateway/http/approvals_api.h"
#include "gateway/session/session.h"
#include "testing.h"
#include "upstream/client.h"

namespace warden::gateway {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// A webhook receiver for one request on 127.0.0.1: answers 200 and keeps the body.
class OneWebhookReceiver {
 public:
  OneWebhookReceiver() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(listen(fd_, 4), 0);
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { body_.set_value(ReadOne()); });
  }
  ~OneWebhookReceiver() {
    thread_.join();
    close(fd_);
  }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/hook"; }
  // The body of the first request ("" when none came within 10 s).
  std::future<std::string> Body() { return body_.get_future(); }

 private:
  std::string ReadOne() {
    pollfd listening{fd_, POLLIN, 0};
    if (poll(&listening, 1, 10000) != 1) return "";
    const int conn = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) return "";
    std::string data, body;
    char buf[4096];
    for (;;) {
      const size_t head_end = data.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        std::string head = data.substr(0, head_end);
        for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const size_t at = head.find("content-length:");
        const size_t want = at == std::string::npos ? 0 : std::stoul(head.substr(at + 15));
        if (data.size() >= head_end + 4 + want) {
          body = data.substr(head_end + 4, want);
          const std::string ok =
              "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
          (void)!write(conn, ok.data(), ok.size());
          break;
        }
      }
      pollfd reading{conn, POLLIN, 0};
      if (poll(&reading, 1, 10000) != 1) break;
      const ssize_t n = read(conn, buf, sizeof buf);
      if (n <= 0) break;
      data.append(buf, static_cast<size_t>(n));
    }
    close(conn);
    return body;
  }

  int fd_ = -1;
  uint16_t port_ = 0;
  std::promise<std::string> body_;
  std::thread thread_;
};

std::string DisplayTestPolicy() {
  return "version: 1\nupstreams:\n  echo:\n    command: [/usr/bin/python3, \"" +
         testing::EchoFixture() +
         "\", --record]\n"
         "tools:\n"
         "  - match: { tool: echo__echo }\n    risk: high\n"
         "  - match: { server: echo }\n    risk: low\n"
         "defaults:\n  effect_by_risk: { low: allow, medium: allow, high: ask }\n"
         "approvals:\n  self_approve: true\n";
}

TEST(ApprovalDisplay, AttackBidiOverrideInArgumentsShowsAsEscapesToPeopleAndTheStoredCallRuns) {
  testing::TempDir dir;
  const std::string db = dir.File("warden.db");
  auto gate_audit = testing::OpenAudit(db);
  auto gate = ApprovalGate::Open({.path = db}, *gate_audit, {});
  ASSERT_TRUE(gate) << gate.status().message();
  OneWebhookReceiver receiver;
  auto posted = receiver.Body();
  policy::Policy hook_policy;
  hook_policy.approvals.webhook = policy::ApprovalWebhook{receiver.Url(), "whsec_display_test"};
  ApprovalWebhook webhook;
  (*gate)->OnCreated([&](const state::ApprovalRecord& r) { webhook.Created(hook_policy, r); });
  GatewayOptions options{
      .worker_threads = 2,
      .make_upstream = [](upstream::Spec spec, upstream::Events events, upstream::ClientOptions o) {
        return upstream::Client::Create(std::move(spec), std::move(events), std::move(o));
      }};
  options.services.approvals = gate->get();
  const identity::Caller tester{"", "tester", "", ""};
  testing::TestGateway gw(testing::PolicyFromText(DisplayTestPolicy()), db, tester, options);

  // A client that declared elicitation: with self_approve, it is asked in-band.
  auto session = gw.NewSession(tester, "sess-display");
  ASSERT_TRUE(testing::Initialize2025(*session, {{"elicitation", json::object()}}));
  ASSERT_TRUE(
      testing::SendRequest(*session, 2, "tools/list", json::object()).get().contains("result"));

  const std::string amount = "\u202e0009\u202c";     // reads "9000" when shown raw
  const std::string escaped = "\\u202e0009\\u202c";  // what people see
  const json args = {{"text", "pay " + amount}, {"amount", amount}};
  auto asked = std::make_shared<std::promise<mcp::Request>>();
  auto once = std::make_shared<std::once_flag>();
  auto reply = testing::SendRequest(
      *session, 10, "tools/call", {{"name", "echo__echo"}, {"arguments", args}},
      [asked, once](const mcp::Message& m) {
        if (auto* r = std::get_if<mcp::Request>(&m); r && r->method == "elicitation/create")
          std::call_once(*once, [&] { asked->set_value(*r); });
      });
  auto request = asked->get_future();
  ASSERT_EQ(request.wait_for(10s), std::future_status::ready) << "the client was not asked";
  const mcp::Request elicitation = request.get();

  // 1. The in-band message shows the tool and the arguments with the override escaped.
  const std::string message = elicitation.params.value_or(json())["message"].get<std::string>();
  EXPECT_NE(message.find("echo__echo"), std::string::npos) << message;
  EXPECT_NE(message.find("\"amount\": \"" + escaped + "\""), std::string::npos) << message;
  EXPECT_EQ(message.find(amount), std::string::npos) << "the override is shown, not obeyed";

  // 2. The console's data: one approval and the pending list.
  auto pending = (*gate)->store().List(false);
  ASSERT_TRUE(pending && pending->size() == 1u);
  const std::string id = (*pending)[0].id;
  ApprovalsApi api(*gw.core);
  for (const std::string& path : {"/api/approvals/" + id, std::string("/api/approvals")}) {
    AdminReply got = api.Handle(tester, AdminRequest{"GET", path, "", "", "127.0.0.1"}, true);
    ASSERT_EQ(got.status, 200) << got.body;
    const json body = json::parse(got.body);
    const json record = body.contains("approvals") ? body["approvals"][0] : body;
    const std::string shown = record.value("arguments_display", "");
    EXPECT_NE(shown.find("\"amount\": \"" + escaped + "\""), std::string::npos) << path << shown;
    EXPECT_EQ(shown.find(amount), std::string::npos) << path << ": no raw override";
    EXPECT_EQ(json::parse(shown), args) << "the display is JSON for the stored value";
    EXPECT_EQ(record["tool_display"], "echo__echo");
    EXPECT_EQ(record["arguments"], args) << "the raw field is the stored value, for machines";
  }

  // 3. The webhook's display fields (its raw `arguments` stay structured JSON).
  ASSERT_EQ(posted.wait_for(10s), std::future_status::ready);
  const json event = json::parse(posted.get(), nullptr, false);
  ASSERT_TRUE(event.is_object()) << "no webhook came";
  const json& approval = event["data"]["approval"];
  EXPECT_EQ(approval["id"], id);
  EXPECT_EQ(approval["tool_display"], "echo__echo");
  const std::string hook_shown = approval.value("arguments_display", "");
  EXPECT_NE(hook_shown.find("\"amount\": \"" + escaped + "\""), std::string::npos) << hook_shown;
  EXPECT_EQ(hook_shown.find(amount), std::string::npos) << hook_shown;
  EXPECT_EQ(approval["arguments"], args);

  // 4. Approved in the client, the stored call runs with the original string.
  session->Handle(
      mcp::Response{elicitation.id, {{"action", "accept"}, {"content", {{"decision", "approve"}}}}},
      {});
  ASSERT_EQ(reply.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(testing::ReplyText(reply.get()), "pay " + amount);
  const json calls =
      json::parse(testing::ReplyText(
                      testing::SendRequest(*session, 11, "tools/call",
                                           {{"name", "echo__calls"}, {"arguments", json::object()}})
                          .get()),
                  nullptr, false);
  ASSERT_TRUE(calls.is_array() && !calls.empty()) << calls.dump();
  EXPECT_EQ(calls[0]["arguments"], args) << "the upstream got exactly the stored arguments";
  session->Close();
  (*gate)->StopAll("test ends");
}

}  // namespace
}  // namespace warden::gateway
