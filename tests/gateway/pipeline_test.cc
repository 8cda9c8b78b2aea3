// The pipeline contract: stages run in order, the first that does not continue stops the chain,
// and final stages (audit) run whatever happened.
#include "gateway/pipeline/pipeline.h"

#include <gtest/gtest.h>

#include <future>
#include <string>
#include <thread>
#include <vector>

namespace warden::gateway {
namespace {

using nlohmann::json;

class RecordingStage : public Stage {
 public:
  RecordingStage(std::string name, std::vector<std::string>* trace, StageOutcome outcome)
      : name_(std::move(name)), trace_(trace), outcome_(std::move(outcome)) {}
  std::string_view name() const override { return name_; }
  StageOutcome Run(CallContext& call) override {
    trace_->push_back(name_ + (call.verdict.result == StageResult::kContinue
                                   ? ""
                                   : "(after " + call.verdict_stage + ")"));
    return outcome_;
  }

 private:
  std::string name_;
  std::vector<std::string>* trace_;
  StageOutcome outcome_;
};

std::unique_ptr<Stage> Continues(const std::string& name, std::vector<std::string>* trace) {
  return std::make_unique<RecordingStage>(name, trace, StageOutcome::Continue());
}

TEST(Pipeline, RunsStagesInOrderThenFinalStages) {
  std::vector<std::string> trace;
  Pipeline p;
  p.AddStage(Continues("identity", &trace));
  p.AddFinalStage(Continues("audit", &trace));
  p.AddStage(Continues("policy", &trace));
  CallContext call;
  StageOutcome out = p.Run(call);
  EXPECT_EQ(out.result, StageResult::kContinue);
  EXPECT_EQ(trace, (std::vector<std::string>{"identity", "policy", "audit"}));
  EXPECT_EQ(p.StageNames(), (std::vector<std::string>{"identity", "policy", "audit"}));
}

TEST(Pipeline, DenyShortCircuitsButTheAuditStageStillRuns) {
  std::vector<std::string> trace;
  Pipeline p;
  p.AddStage(Continues("identity", &trace));
  p.AddStage(std::make_unique<RecordingStage>(
      "kill_switches", &trace,
      StageOutcome::Deny(Refusal::kDenied, "tool killed", "kill_switch.tool:x")));
  p.AddStage(Continues("policy", &trace));
  p.AddStage(Continues("execute", &trace));
  p.AddFinalStage(Continues("audit", &trace));
  CallContext call;
  StageOutcome out = p.Run(call);
  EXPECT_EQ(out.result, StageResult::kDeny);
  EXPECT_EQ(out.reason, "tool killed");
  EXPECT_EQ(out.rule, "kill_switch.tool:x");
  EXPECT_EQ(call.verdict_stage, "kill_switches");
  // policy and execute never ran; audit saw the denial.
  EXPECT_EQ(trace,
            (std::vector<std::string>{"identity", "kill_switches", "audit(after kill_switches)"}));
}

// A stage that parks and is resumed later, from another thread, with `outcome`.
class ParkingStage : public Stage {
 public:
  ParkingStage(std::vector<std::string>* trace, std::future<StageOutcome> later)
      : trace_(trace), later_(std::move(later)) {}
  std::string_view name() const override { return "execute"; }
  StageOutcome Run(CallContext& call) override {
    trace_->push_back("execute parks");
    call.park = [this](std::function<void(StageOutcome)> resume) {
      waiter_ = std::thread([this, resume = std::move(resume)] {
        StageOutcome outcome = later_.get();
        trace_->push_back("execute resumes");
        resume(std::move(outcome));
      });
    };
    return StageOutcome{StageResult::kPause, Refusal::kNone, "waiting", ""};
  }
  ~ParkingStage() override {
    if (waiter_.joinable()) waiter_.join();
  }

 private:
  std::vector<std::string>* trace_;
  std::future<StageOutcome> later_;
  std::thread waiter_;
};

TEST(Pipeline, AParkedStageResumesOnItsOwnThreadAndTheChainGoesOnThere) {
  std::vector<std::string> trace;
  std::promise<StageOutcome> upstream;
  Pipeline p;
  p.AddStage(Continues("policy", &trace));
  p.AddStage(std::make_unique<ParkingStage>(&trace, upstream.get_future()));
  p.AddStage(Continues("result", &trace));
  p.AddFinalStage(Continues("audit", &trace));
  CallContext call;
  std::promise<std::pair<StageOutcome, std::thread::id>> finished;
  p.RunAsync(call, [&](const StageOutcome& o) {
    finished.set_value({o, std::this_thread::get_id()});
  });
  // RunAsync has returned with the stage parked: nothing after it ran, no thread waits here.
  EXPECT_EQ(trace, (std::vector<std::string>{"policy", "execute parks"}));
  upstream.set_value(StageOutcome::Continue());
  auto [outcome, thread] = finished.get_future().get();
  EXPECT_EQ(outcome.result, StageResult::kContinue);
  EXPECT_NE(thread, std::this_thread::get_id());
  EXPECT_EQ(trace, (std::vector<std::string>{"policy", "execute parks", "execute resumes", "result",
                                             "audit"}));
  StageStats execute = p.Stats()[1];
  EXPECT_EQ(execute.name, "execute");
  EXPECT_EQ(execute.paused, 1u);  // when it parked
  EXPECT_EQ(execute.resumed, 1u);
  EXPECT_EQ(execute.continued, 1u);  // how it ended
  EXPECT_EQ(execute.denied, 0u);
  EXPECT_GT(execute.parked.count(), 0);
  EXPECT_GE(execute.time, execute.parked);
  EXPECT_EQ(p.Stats()[0].paused, 0u);
  EXPECT_EQ(p.Stats()[0].resumed, 0u);
}

TEST(Pipeline, AParkedStageThatResumesWithADenialStopsTheChain) {
  std::vector<std::string> trace;
  std::promise<StageOutcome> upstream;
  Pipeline p;
  p.AddStage(std::make_unique<ParkingStage>(&trace, upstream.get_future()));
  p.AddStage(Continues("result", &trace));
  p.AddFinalStage(Continues("audit", &trace));
  CallContext call;
  upstream.set_value(StageOutcome::Deny(Refusal::kInternal, "upstream mail: server exited"));
  StageOutcome out = p.Run(call);  // the synchronous form waits for the resume
  EXPECT_EQ(out.result, StageResult::kDeny);
  EXPECT_EQ(out.reason, "upstream mail: server exited");
  EXPECT_EQ(call.verdict_stage, "execute");
  EXPECT_EQ(trace,
            (std::vector<std::string>{"execute parks", "execute resumes", "audit(after execute)"}));
}

TEST(Pipeline, PauseStopsTheChainLikeADenial) {
  std::vector<std::string> trace;
  Pipeline p;
  p.AddStage(std::make_unique<RecordingStage>(
      "approval", &trace, StageOutcome{StageResult::kPause, Refusal::kNone, "waiting", ""}));
  p.AddStage(Continues("execute", &trace));
  p.AddFinalStage(Continues("audit", &trace));
  CallContext call;
  EXPECT_EQ(p.Run(call).result, StageResult::kPause);
  EXPECT_EQ(trace, (std::vector<std::string>{"approval", "audit(after approval)"}));
  EXPECT_EQ(p.Stats()[0].paused, 1u);  // a final pause: nothing resumes it
  EXPECT_EQ(p.Stats()[0].resumed, 0u);
}

TEST(Pipeline, AFinalStageThatFailsWithholdsTheResult) {
  std::vector<std::string> trace;
  Pipeline p;
  p.AddStage(Continues("execute", &trace));
  p.AddFinalStage(std::make_unique<RecordingStage>(
      "audit", &trace, StageOutcome::Deny(Refusal::kInternal, "disk full")));
  CallContext call;
  StageOutcome out = p.Run(call);
  EXPECT_EQ(out.result, StageResult::kDeny);
  EXPECT_EQ(out.refusal, Refusal::kInternal);
  EXPECT_EQ(call.verdict_stage, "audit");
}

TEST(Pipeline, CountsEachStageOutcomeUnderItsName) {
  std::vector<std::string> trace;
  Pipeline p;
  p.AddStage(Continues("identity", &trace));
  p.AddStage(std::make_unique<RecordingStage>("policy", &trace,
                                              StageOutcome::Deny(Refusal::kDenied, "no")));
  p.AddFinalStage(Continues("audit", &trace));
  CallContext a, b;
  p.Run(a);
  p.Run(b);
  auto stats = p.Stats();
  ASSERT_EQ(stats.size(), 3u);
  EXPECT_EQ(stats[0].name, "identity");
  EXPECT_EQ(stats[0].continued, 2u);
  EXPECT_EQ(stats[1].name, "policy");
  EXPECT_EQ(stats[1].denied, 2u);
  EXPECT_EQ(stats[2].continued, 2u);
}

// A stage that records both directions, and on the way back does what it is told.
class TwoWayStage : public Stage {
 public:
  TwoWayStage(std::string name, std::vector<std::string>* trace,
              StageOutcome on_result = StageOutcome::Continue(), bool drop_streamed = false)
      : name_(std::move(name)),
        trace_(trace),
        on_result_(std::move(on_result)),
        drop_(drop_streamed) {}
  std::string_view name() const override { return name_; }
  StageOutcome Run(CallContext&) override {
    trace_->push_back(name_ + " in");
    return StageOutcome::Continue();
  }
  StageOutcome OnResult(CallContext& call) override {
    trace_->push_back(name_ + " back");
    call.result->value["seen"].push_back(name_);
    return on_result_;
  }
  bool OnStreamed(CallContext&, mcp::Notification& message) override {
    trace_->push_back(name_ + " streamed");
    (*message.params)["seen"].push_back(name_);
    return !drop_;
  }

 private:
  std::string name_;
  std::vector<std::string>* trace_;
  StageOutcome on_result_;
  bool drop_;
};

// Sets a result, as the execute stage does.
class ResultStage : public Stage {
 public:
  std::string_view name() const override { return "execute"; }
  StageOutcome Run(CallContext& call) override {
    call.result = CallResult::FromText("done", false);
    return StageOutcome::Continue();
  }
};

TEST(PipelineResponsePath, ResultsGoBackThroughTheStagesLastFirstAndMayBeRewritten) {
  std::vector<std::string> trace;
  Pipeline p;
  p.AddStage(std::make_unique<TwoWayStage>("identity", &trace));
  p.AddStage(std::make_unique<TwoWayStage>("redact", &trace));
  p.AddStage(std::make_unique<ResultStage>());
  p.AddFinalStage(Continues("audit", &trace));
  CallContext call;
  EXPECT_EQ(p.Run(call).result, StageResult::kContinue);
  EXPECT_EQ(trace, (std::vector<std::string>{"identity in", "redact in", "redact back",
                                             "identity back", "audit"}));
  ASSERT_TRUE(call.result);
  EXPECT_EQ(call.result->value["seen"], json({"redact", "identity"}));
  EXPECT_EQ(call.result->Text(), "done");
  auto stats = p.Stats();
  EXPECT_EQ(stats[1].results, 1u);
  EXPECT_EQ(stats[1].results_denied, 0u);
}

TEST(PipelineResponsePath, ARefusedResultStopsTheWayBackAndIsTheVerdict) {
  std::vector<std::string> trace;
  Pipeline p;
  p.AddStage(std::make_unique<TwoWayStage>("identity", &trace));
  p.AddStage(std::make_unique<TwoWayStage>(
      "redact", &trace, StageOutcome::Deny(Refusal::kDenied, "a private key", "redact.pem")));
  p.AddStage(std::make_unique<ResultStage>());
  p.AddFinalStage(Continues("audit", &trace));
  CallContext call;
  StageOutcome out = p.Run(call);
  EXPECT_EQ(out.result, StageResult::kDeny);
  EXPECT_EQ(out.rule, "redact.pem");
  EXPECT_EQ(call.verdict_stage, "redact");
  EXPECT_EQ(trace, (std::vector<std::string>{"identity in", "redact in", "redact back",
                                             "audit(after redact)"}));
  EXPECT_EQ(p.Stats()[1].results_denied, 1u);
}

TEST(PipelineResponsePath, ACallRefusedOnTheWayInNeverTakesTheWayBack) {
  std::vector<std::string> trace;
  Pipeline p;
  p.AddStage(std::make_unique<TwoWayStage>("identity", &trace));
  p.AddStage(std::make_unique<RecordingStage>("policy", &trace,
                                              StageOutcome::Deny(Refusal::kDenied, "no")));
  p.AddStage(std::make_unique<ResultStage>());
  CallContext call;
  EXPECT_EQ(p.Run(call).result, StageResult::kDeny);
  EXPECT_EQ(trace, (std::vector<std::string>{"identity in", "policy"}));
  EXPECT_EQ(p.Stats()[0].results, 0u);
}

TEST(PipelineResponsePath, APauseOnTheWayBackIsADenial) {
  std::vector<std::string> trace;
  Pipeline p;
  p.AddStage(std::make_unique<TwoWayStage>(
      "approval", &trace, StageOutcome{StageResult::kPause, Refusal::kNone, "later", ""}));
  p.AddStage(std::make_unique<ResultStage>());
  CallContext call;
  StageOutcome out = p.Run(call);
  EXPECT_EQ(out.result, StageResult::kDeny);
  EXPECT_EQ(out.refusal, Refusal::kInternal);
}

TEST(PipelineResponsePath, StreamedMessagesPassEveryStageLastFirstAndMayBeDropped) {
  std::vector<std::string> trace;
  Pipeline p;
  p.AddStage(std::make_unique<TwoWayStage>("identity", &trace));
  p.AddStage(std::make_unique<TwoWayStage>("redact", &trace));
  CallContext call;
  mcp::Notification progress{"notifications/progress", json{{"progress", 1}}};
  EXPECT_TRUE(p.Streamed(call, progress));
  EXPECT_EQ((*progress.params)["seen"], json({"redact", "identity"}));

  Pipeline dropping;
  dropping.AddStage(std::make_unique<TwoWayStage>("identity", &trace));
  dropping.AddStage(
      std::make_unique<TwoWayStage>("redact", &trace, StageOutcome::Continue(), true));
  trace.clear();
  mcp::Notification other{"notifications/progress", json{{"progress", 2}}};
  EXPECT_FALSE(dropping.Streamed(call, other));
  EXPECT_EQ(trace, (std::vector<std::string>{"redact streamed"})) << "nothing after a drop";
}

struct CounterState {
  int count = 0;
};
struct NameState {
  std::string name;
};

TEST(CallStateTest, OneObjectPerTypeCreatedOnFirstUseAndMovedWithTheCall) {
  CallContext call;
  EXPECT_EQ(call.state.Find<CounterState>(), nullptr);
  call.state.Get<CounterState>().count += 2;
  call.state.Get<CounterState>().count += 3;
  call.state.Get<NameState>().name = "approval";
  ASSERT_NE(call.state.Find<CounterState>(), nullptr);
  EXPECT_EQ(call.state.Find<CounterState>()->count, 5);
  CallContext moved = std::move(call);
  ASSERT_NE(moved.state.Find<NameState>(), nullptr);
  EXPECT_EQ(moved.state.Find<NameState>()->name, "approval");
}

TEST(CallResultTest, TextIsTheTextOfEachKindOfResult) {
  EXPECT_EQ(CallResult::FromText("hello", false).Text(), "hello");
  CallResult resource;
  resource.value = {
      {"contents", {{{"uri", "a://b"}, {"text", "one"}}, {{"uri", "a://c"}, {"blob", "AA=="}}}}};
  EXPECT_EQ(resource.Text(), "one");
  CallResult prompt;
  prompt.value = {
      {"messages", {{{"role", "user"}, {"content", {{"type", "text"}, {"text", "hi"}}}}}}};
  EXPECT_EQ(prompt.Text(), "hi");
  EXPECT_EQ(CallResult::FromError(-32002, "no such resource").Text(), "no such resource");
  CallResult other;
  other.value = {{"completion", {{"values", {"x"}}}}};
  EXPECT_EQ(other.Text(), R"({"completion":{"values":["x"]}})");
  EXPECT_TRUE(CallResult::FromError(-32002, "x").rpc_error);
  EXPECT_TRUE(CallResult::FromText("bad", true).value["isError"].get<bool>());
}

}  // namespace
}  // namespace warden::gateway
