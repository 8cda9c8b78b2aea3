// The registry of MCP 2026-07-28 task contexts: one per principal and task, never shared across
// principals; a malformed task or scope refused; at most N per principal, an idle one making room
// and a new task refused when all are busy.
#include "gateway/session/task_contexts.h"
#include "gateway/session/request_state.h"

#include <gtest/gtest.h>

#include "policy/default_policy.h"
#include "testing.h"

namespace warden::gateway {
namespace {

using nlohmann::json;

class TaskContextsTest : public ::testing::Test {
 protected:
  TaskContextsTest()
      : gw_(testing::PolicyFromText(std::string(policy::DefaultPolicyText())), dir_.File("a.db")) {}
  ~TaskContextsTest() override {
    for (auto& c : made_) c->Close();
  }
  TaskContexts Registry(size_t cap) {
    return TaskContexts(
        "http",
        [this](const identity::Caller& caller, SessionOptions options) {
          auto c = std::make_shared<McpSession>(*gw_.core, caller, std::move(options));
          made_.push_back(c);
          return c;
        },
        [this](std::shared_ptr<McpSession> c) {
          closed_.push_back(c.get());
          c->Close();
        },
        cap);
  }
  static mcp::Request Req(json meta) {
    return mcp::Request{mcp::Id(int64_t{1}), "tools/list", json{{"_meta", std::move(meta)}}};
  }
  static mcp::Request InTask(const std::string& task) { return Req({{"warden/task", task}}); }
  testing::TempDir dir_;
  testing::TestGateway gw_;
  std::vector<std::shared_ptr<McpSession>> made_;
  std::vector<McpSession*> closed_;
};

TEST_F(TaskContextsTest, OneContextPerPrincipalAndTaskNeverShared) {
  TaskContexts tasks = Registry(8);
  const identity::Caller alice{"acme", "alice", "bot", ""}, other_agent{"acme", "alice", "bot2", ""};
  auto a1 = tasks.For(alice, InTask("t1"));
  auto a1_again = tasks.For(alice, InTask("t1"));
  auto a2 = tasks.For(alice, InTask("t2"));
  auto a_default = tasks.For(alice, Req(json::object()));
  auto b1 = tasks.For(other_agent, InTask("t1"));
  ASSERT_TRUE(a1 && a1_again && a2 && a_default && b1);
  EXPECT_EQ(a1->get(), a1_again->get());
  EXPECT_NE(a1->get(), a2->get());
  EXPECT_NE(a1->get(), a_default->get());
  EXPECT_NE(a1->get(), b1->get()) << "another agent's same task id is another context";
  EXPECT_TRUE((*a1)->modern());
  // Values that could make two principals' keys equal do not.
  const identity::Caller tricky1{"a", "b/c", "", ""}, tricky2{"a/b", "c", "", ""};
  auto t1 = tasks.For(tricky1, Req(json::object()));
  auto t2 = tasks.For(tricky2, Req(json::object()));
  ASSERT_TRUE(t1 && t2);
  EXPECT_NE(t1->get(), t2->get());
}

TEST_F(TaskContextsTest, AMalformedTaskOrScopeIsRefused) {
  TaskContexts tasks = Registry(8);
  const identity::Caller alice{"", "alice", "", ""};
  EXPECT_FALSE(tasks.For(alice, Req({{"warden/task", 7}})));
  EXPECT_FALSE(tasks.For(alice, Req({{"warden/task", ""}})));
  EXPECT_FALSE(tasks.For(alice, Req({{"warden/task", std::string("a\nb")}})));
  EXPECT_FALSE(tasks.For(alice, Req({{"warden/scope", json::array()}})));
  EXPECT_EQ(tasks.size(), 0u);
}

TEST_F(TaskContextsTest, AtTheCapAnIdleContextMakesRoomAndWhenAllAreBusyANewTaskIsRefused) {
  TaskContexts tasks = Registry(2);
  const identity::Caller alice{"", "alice", "", ""}, bob{"", "bob", "", ""};
  auto first = tasks.For(alice, Req({{"warden/task", "1"}}));
  auto second = tasks.For(alice, Req({{"warden/task", "2"}}));
  ASSERT_TRUE(first && second);
  // Bob's contexts do not count against Alice's cap.
  ASSERT_TRUE(tasks.For(bob, Req({{"warden/task", "1"}})));
  auto third = tasks.For(alice, Req({{"warden/task", "3"}}));
  ASSERT_TRUE(third) << third.status().message();
  ASSERT_EQ(closed_.size(), 1u);
  EXPECT_TRUE(closed_[0] == first->get() || closed_[0] == second->get());
  EXPECT_EQ(tasks.size(), 3u);
  // Both of Alice's contexts busy (a listen stream open on each): a fourth task is refused, and
  // neither stream is cut.
  for (auto* context : {second->get(), third->get()}) {
    if (closed_[0] == context) continue;
    context->HandleModern(
        mcp::Request{mcp::Id(int64_t{5}), "subscriptions/listen",
                     json{{"notifications", {{"toolsListChanged", true}}},
                          {"_meta", {{"io.modelcontextprotocol/protocolVersion", "2026-07-28"},
                                     {"io.modelcontextprotocol/clientCapabilities", json::object()}}}}},
        Exchange{.related = [](const mcp::Message&) {}, .reply = [](mcp::Message) {}});
    EXPECT_TRUE(context->busy());
  }
  auto fourth = tasks.For(alice, Req({{"warden/task", "4"}}));
  ASSERT_FALSE(fourth);
  EXPECT_NE(fourth.status().message().find("tasks with calls in flight"), std::string::npos)
      << fourth.status().message();
  EXPECT_EQ(closed_.size(), 1u);
}

// task__end ends the task's context: the next request of that task gets a new one (the old one
// closed), while another task of the same caller, and the same task of another, keep theirs.
TEST_F(TaskContextsTest, AnEndedTaskGetsANewContext) {
  TaskContexts tasks = Registry(8);
  const identity::Caller alice{"acme", "alice", "bot", ""}, bob{"acme", "bob", "bot", ""};
  auto t1 = tasks.For(alice, InTask("t1"));
  auto t2 = tasks.For(alice, InTask("t2"));
  auto bob1 = tasks.For(bob, InTask("t1"));
  ASSERT_TRUE(t1 && t2 && bob1);
  CallContext end;
  end.tenant = "acme";
  end.user = "alice";
  end.agent = "bot";
  end.task = "t1";
  for (auto& context : tasks.All()) context->CancelTaskCalls(end, "task__end");
  EXPECT_TRUE((*t1)->ended());
  EXPECT_FALSE((*t2)->ended());
  EXPECT_FALSE((*bob1)->ended());
  auto again = tasks.For(alice, InTask("t1"));
  ASSERT_TRUE(again);
  EXPECT_NE(again->get(), t1->get());
  ASSERT_EQ(closed_.size(), 1u);
  EXPECT_EQ(closed_[0], t1->get());
  EXPECT_EQ(tasks.For(alice, InTask("t2"))->get(), t2->get());
  EXPECT_EQ(tasks.For(bob, InTask("t1"))->get(), bob1->get());
}

// The gateway-wide ledger behind single use of "upstream" request states: an id is taken once
// until it expires, and a full ledger refuses rather than forgets.
TEST(UsedStatesTest, OnceUntilExpiryAndFullRefuses) {
  UsedStates used(2);
  EXPECT_EQ(used.MarkUsed("a", 1000, 0), UsedStates::Use::kFirst);
  EXPECT_EQ(used.MarkUsed("a", 1000, 10), UsedStates::Use::kAlreadyUsed);
  EXPECT_EQ(used.MarkUsed("b", 2000, 10), UsedStates::Use::kFirst);
  EXPECT_EQ(used.MarkUsed("c", 2000, 10), UsedStates::Use::kFull);
  // Past a's expiry its id is dropped (a state that old is refused as expired before this).
  EXPECT_EQ(used.MarkUsed("c", 2000, 1500), UsedStates::Use::kFirst);
  EXPECT_EQ(used.size(), 2u);
  EXPECT_EQ(used.MarkUsed("b", 2000, 1500), UsedStates::Use::kAlreadyUsed);
}

}  // namespace
}  // namespace warden::gateway
