// `warden approvals list|show|approve|deny`, run as the real binary (WARDEN_BIN) the way an
// operator runs it beside a gateway; the gateway side is an ApprovalStore in this test process,
// on the same database file.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "audit/time_format.h"
#include "harness.h"
#include "state/admin_audit.h"
#include "state/approval_store.h"

namespace warden {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using state::ApprovalRecord;
using state::ApprovalStatus;
using testing::Outcome;
using testing::RunWarden;
using testing::TempDir;

class ApprovalsCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = state::ApprovalStore::Open({.path = db()});
    ASSERT_TRUE(store) << store.status().message();
    store_ = std::move(*store);
  }
  std::string db() const { return tmp_.path() + "/var/warden/warden.db"; }
  Outcome Warden(std::vector<std::string> args) {
    args.push_back("--db");
    args.push_back(db());
    return RunWarden({.args = std::move(args), .json = false});
  }
  // A call waiting in the gateway: bob's mailer sending `arguments`.
  ApprovalRecord Waiting(const json& arguments, int votes_needed = 1,
                         const std::string& tool = "mail__send_email") {
    ApprovalRecord r;
    r.tenant = "acme", r.user = "bob", r.agent = "mailer", r.session = "session-7";
    r.tool = tool, r.server = "mail", r.risk = "high";
    r.arguments = arguments.dump();
    r.rule = "tools[0] {tool: mail__send_*}";
    r.reason = "mail leaves the company";
    r.binding = std::string(64, 'b'), r.retry_key = std::string(64, 'c');
    r.created = state::Now();
    r.expires = audit::FormatTime(std::chrono::system_clock::now() + 10min);
    r.votes_needed = votes_needed;
    auto created = store_->Create(r);
    EXPECT_TRUE(created) << created.status().message();
    return created ? *created : r;
  }
  ApprovalRecord Stored(const std::string& id) {
    auto got = store_->Get(id);
    EXPECT_TRUE(got && *got);
    return got && *got ? **got : ApprovalRecord{};
  }
  json AdminEntries() {
    Outcome audit = Warden({"audit", "query", "--kind", "admin", "--json"});
    EXPECT_EQ(audit.exit_code, 0) << audit.err;
    return json::parse(audit.out, nullptr, false);
  }

  TempDir tmp_;
  std::unique_ptr<state::ApprovalStore> store_;
};

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_F(ApprovalsCliTest, ListShowsOneLinePerPendingApprovalAndAllShowsDecidedOnes) {
  ApprovalRecord first = Waiting({{"to", "x@example.com"}});
  ApprovalRecord second = Waiting({{"to", "y@example.com"}}, 2, "mail__forward");
  ASSERT_TRUE(store_->Deny(Waiting({{"to", "z"}}).id, state::Person("acme", "alice"), "no"));

  Outcome list = Warden({"approvals", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const std::string want_first = first.id + "  pending  ";
  ASSERT_TRUE(Has(list.out, want_first)) << list.out;
  EXPECT_TRUE(Has(list.out, "acme/bob/mailer  mail__send_email  high\n")) << list.out;
  EXPECT_TRUE(Has(list.out, second.id + "  pending 0 of 2  ")) << list.out;
  EXPECT_EQ(std::count(list.out.begin(), list.out.end(), '\n'), 2) << list.out;
  EXPECT_LT(list.out.find(first.id), list.out.find(second.id)) << "oldest first";

  Outcome all = Warden({"approvals", "list", "--all"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(std::count(all.out.begin(), all.out.end(), '\n'), 3) << all.out;
  EXPECT_TRUE(Has(all.out, "  denied  ")) << all.out;

  Outcome as_json = Warden({"approvals", "list", "--json"});
  ASSERT_EQ(as_json.exit_code, 0) << as_json.err;
  json array = json::parse(as_json.out);
  ASSERT_TRUE(array.is_array());
  ASSERT_EQ(array.size(), 2u);
  EXPECT_EQ(array[0], state::ToJson(Stored(first.id)));
  EXPECT_EQ(array[1]["votes_needed"], 2);
}

TEST_F(ApprovalsCliTest, ListSaysWhenNothingIsPending) {
  Outcome list = Warden({"approvals", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(list.out, "no approvals pending\n");
  Outcome as_json = Warden({"approvals", "list", "--json"});
  EXPECT_EQ(json::parse(as_json.out), json::array());
}

TEST_F(ApprovalsCliTest, ShowPrintsEveryFieldAndTheArgumentsInFull) {
  const std::string body(20000, 'x');
  ApprovalRecord call = Waiting({{"to", "x@example.com"}, {"body", body + "END"}});
  Outcome show = Warden({"approvals", "show", call.id});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  for (const std::string& line :
       {"id:              " + call.id, std::string("status:          pending (expires in "),
        std::string("tool:            mail__send_email"), std::string("server:          mail"),
        std::string("risk:            high"), std::string("tenant:          acme"),
        std::string("user:            bob"), std::string("agent:           mailer"),
        std::string("session:         session-7"),
        std::string("rule:            tools[0] {tool: mail__send_*}"),
        std::string("reason:          mail leaves the company"), "created:         " + call.created,
        "expires:         " + call.expires, std::string("votes:           0 of 1"),
        "binding:         " + call.binding, std::string("arguments:\n{\n  \"body\": \"")}) {
    EXPECT_TRUE(Has(show.out, line)) << line << "\n" << show.out.substr(0, 2000);
  }
  EXPECT_TRUE(Has(show.out, body + "END\"")) << "the arguments were cut";
  EXPECT_TRUE(Has(show.out, "  \"to\": \"x@example.com\"\n}")) << show.out.substr(0, 200);

  Outcome as_json = Warden({"approvals", "show", call.id, "--json"});
  ASSERT_EQ(as_json.exit_code, 0) << as_json.err;
  json record = json::parse(as_json.out);
  EXPECT_EQ(record, state::ToJson(Stored(call.id)));
  EXPECT_EQ(record["arguments"]["body"], body + "END");
  EXPECT_FALSE(record.contains("retry_key"));
}

// An agent (or whoever wrote the web page it read) controls the arguments: printed raw, an
// escape sequence could clear the operator's screen and draw a harmless-looking call instead.
TEST_F(ApprovalsCliTest, TerminalEscapeSequencesInArgumentsArePrintedEscaped) {
  const std::string attack =
      "\x1b[2J\x1b[H"  // clear the screen, cursor home
      "to: boss@example.com\r"
      "\xc2\x9b"
      "31m"  // C1 CSI
      "\xe2\x80\xae"
      "moc.live"  // right-to-left override
      "\x7f\x07";
  ApprovalRecord call = Waiting({{"to", "eve@evil.example"}, {"note", attack}}, 1,
                                std::string("mail__send\x1b]0;owned\x07"));
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"approvals", "show", call.id},
        std::vector<std::string>{"approvals", "list"}}) {
    Outcome out = Warden(args);
    ASSERT_EQ(out.exit_code, 0) << out.err;
    for (const char* raw : {"\x1b", "\r", "\x07", "\x7f", "\xc2\x9b", "\xe2\x80\xae"}) {
      EXPECT_FALSE(Has(out.out, raw))
          << args[1] << " printed a raw control character: " << json(out.out).dump();
    }
    EXPECT_TRUE(Has(out.out, "mail__send\\u001b]0;owned\\u0007")) << out.out;
  }
  Outcome show = Warden({"approvals", "show", call.id});
  EXPECT_TRUE(Has(show.out, "\\u001b[2J\\u001b[H")) << show.out;
  EXPECT_TRUE(Has(show.out, "\\u009b31m")) << show.out;
  EXPECT_TRUE(Has(show.out, "\\u202emoc.live\\u007f\\u0007")) << show.out;
  // The escaped arguments are still the JSON they were.
  const size_t start = show.out.find("arguments:\n") + 11;
  json shown = json::parse(show.out.substr(start), nullptr, false);
  ASSERT_FALSE(shown.is_discarded()) << show.out.substr(start);
  EXPECT_EQ(shown["note"], attack);

  Outcome as_json = Warden({"approvals", "show", call.id, "--json"});
  EXPECT_FALSE(Has(as_json.out, "\x1b"));
  EXPECT_EQ(json::parse(as_json.out)["arguments"]["note"], attack);
}

TEST_F(ApprovalsCliTest, ApproveRecordsTheOperatorAndIsAudited) {
  ApprovalRecord call = Waiting({{"to", "x@example.com"}});
  Outcome approved = Warden({"approvals", "approve", call.id, "--comment", "checked with bob"});
  ASSERT_EQ(approved.exit_code, 0) << approved.err;
  EXPECT_TRUE(Has(approved.out, call.id + ": approved by ")) << approved.out;
  ApprovalRecord got = Stored(call.id);
  EXPECT_EQ(got.status, ApprovalStatus::kApproved);
  EXPECT_TRUE(got.decided_by.size() > 6 &&
              got.decided_by.compare(got.decided_by.size() - 6, 6, " (cli)") == 0)
      << got.decided_by;
  EXPECT_EQ(got.comment, "checked with bob");
  EXPECT_TRUE(*store_->Consume(call.id));

  json entries = AdminEntries();
  ASSERT_EQ(entries.size(), 1u) << entries.dump();
  EXPECT_EQ(entries[0]["decision"], "approve");
  EXPECT_EQ(entries[0]["rule"], "approval." + call.id);
  EXPECT_EQ(entries[0]["tool"], "mail__send_email");
  EXPECT_EQ(entries[0]["tenant"], "acme");
  EXPECT_EQ(entries[0]["agent"], "mailer");
  EXPECT_EQ(entries[0]["reason"], "checked with bob");
  EXPECT_EQ(entries[0]["user"], got.decided_by);
  EXPECT_EQ(Warden({"audit", "verify"}).exit_code, 0);
}

TEST_F(ApprovalsCliTest, TwoPersonApprovalSaysOneOfTwoAndRefusesTheSameOperatorTwice) {
  ApprovalRecord call = Waiting({{"to", "x@example.com"}}, 2);
  Outcome first = Warden({"approvals", "approve", call.id});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_TRUE(Has(first.out, "approved 1 of 2")) << first.out;
  EXPECT_EQ(Stored(call.id).status, ApprovalStatus::kPending);

  Outcome again = Warden({"approvals", "approve", call.id});
  EXPECT_EQ(again.exit_code, 3);
  EXPECT_TRUE(Has(again.err, "already approved")) << again.err;
  EXPECT_TRUE(Has(again.err, "different person")) << again.err;

  // Single-user mode's local operator is the host's login too: the same person as the CLI's,
  // whatever either is called (issue 31: votes are told apart by person, not by name).
  const std::string login = state::OperatorName();
  auto renamed = store_->Approve(call.id, state::Person("", login, login + " (local operator)"), "");
  ASSERT_TRUE(renamed);
  EXPECT_EQ(renamed->error, state::DecideError::kSameApprover);

  auto second = store_->Approve(call.id, state::Person("acme", "alice"), "");
  ASSERT_TRUE(second);
  EXPECT_TRUE(second->decided);
  EXPECT_EQ(AdminEntries().size(), 1u) << "the refused vote was audited";
}

TEST_F(ApprovalsCliTest, DenyEndsItAndALaterDecisionSaysHowItEndedAndByWhom) {
  ApprovalRecord call = Waiting({{"to", "x@example.com"}});
  Outcome denied = Warden({"approvals", "deny", call.id, "--comment", "wrong recipient"});
  ASSERT_EQ(denied.exit_code, 0) << denied.err;
  EXPECT_TRUE(Has(denied.out, call.id + ": denied by ")) << denied.out;
  EXPECT_TRUE(Has(denied.out, "wrong recipient")) << denied.out;
  EXPECT_EQ(Stored(call.id).status, ApprovalStatus::kDenied);

  for (const char* verb : {"approve", "deny"}) {
    Outcome late = Warden({"approvals", verb, call.id});
    EXPECT_EQ(late.exit_code, 3) << verb;
    EXPECT_TRUE(Has(late.err, "no longer pending: denied by ")) << late.err;
    EXPECT_TRUE(Has(late.err, "(cli) at ")) << late.err;
    EXPECT_TRUE(Has(late.err, ": wrong recipient")) << late.err;
  }
  json entries = AdminEntries();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0]["decision"], "deny");
  EXPECT_EQ(entries[0]["reason"], "wrong recipient");

  ApprovalRecord expired = Waiting({{"to", "y"}});
  ASSERT_TRUE(*store_->Expire(expired.id, "approval expired after 10m"));
  Outcome late = Warden({"approvals", "approve", expired.id});
  EXPECT_EQ(late.exit_code, 3);
  EXPECT_TRUE(Has(late.err, "expired by warden at ")) << late.err;
}

TEST_F(ApprovalsCliTest, UnknownIdsBadIdsAndBadCommentsExitTwo) {
  ApprovalRecord call = Waiting({{"to", "x@example.com"}});
  const std::string nobody = "apr_" + std::string(32, '0');
  for (const char* verb : {"approve", "deny", "show"}) {
    Outcome unknown = Warden({"approvals", verb, nobody});
    EXPECT_EQ(unknown.exit_code, 2) << verb;
    EXPECT_TRUE(Has(unknown.err, "no approval " + nobody)) << unknown.err;
  }
  Outcome bad = Warden({"approvals", "approve", "42"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(Has(bad.err, "not an approval id")) << bad.err;
  Outcome long_comment =
      Warden({"approvals", "deny", call.id, "--comment", std::string(1025, 'c')});
  EXPECT_EQ(long_comment.exit_code, 2);
  EXPECT_TRUE(Has(long_comment.err, "longer than 1024 bytes")) << long_comment.err;
  Outcome escape = Warden({"approvals", "deny", call.id, "--comment", "\x1b[2J"});
  EXPECT_EQ(escape.exit_code, 2);
  EXPECT_TRUE(Has(escape.err, "control character")) << escape.err;
  Outcome no_id = Warden({"approvals", "approve"});
  EXPECT_NE(no_id.exit_code, 0);
  EXPECT_EQ(Stored(call.id).status, ApprovalStatus::kPending);
  EXPECT_TRUE(AdminEntries().empty());
}

TEST_F(ApprovalsCliTest, AMissingDatabaseIsAnErrorAndIsNotCreated) {
  const std::string missing = tmp_.path() + "/elsewhere/warden.db";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"approvals", "list"},
        std::vector<std::string>{"approvals", "approve", "apr_" + std::string(32, '0')}}) {
    std::vector<std::string> full = args;
    full.push_back("--db");
    full.push_back(missing);
    Outcome out = RunWarden({.args = full, .json = false});
    EXPECT_EQ(out.exit_code, 2) << args[1];
    EXPECT_TRUE(Has(out.err, "no warden database at " + missing)) << out.err;
  }
  EXPECT_FALSE(std::filesystem::exists(missing));
}

TEST_F(ApprovalsCliTest, ConfigFindsTheDatabaseThroughStorageSqlite) {
  ApprovalRecord call = Waiting({{"to", "x@example.com"}});
  const std::string config = tmp_.path() + "/policy.yaml";
  std::ofstream(config) << "version: 1\nstorage:\n  sqlite: " << json(db()).dump() << "\n";
  Outcome list = RunWarden({.args = {"approvals", "list", "--config", config}, .json = false});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_TRUE(Has(list.out, call.id)) << list.out;
  Outcome approved =
      RunWarden({.args = {"approvals", "approve", call.id, "--config", config}, .json = false});
  ASSERT_EQ(approved.exit_code, 0) << approved.err;
  EXPECT_EQ(Stored(call.id).status, ApprovalStatus::kApproved);
  Outcome broken = RunWarden(
      {.args = {"approvals", "list", "--config", tmp_.path() + "/absent.yaml"}, .json = false});
  EXPECT_EQ(broken.exit_code, 2);
}

}  // namespace
}  // namespace warden
