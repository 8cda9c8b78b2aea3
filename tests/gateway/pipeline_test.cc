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
  EXPECT_EQ(trace, (std::vector<std::string>{"policy", "execute parks", "execute resumes",
                                             "result", "audit"}));
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
  EXPECT_EQ(trace, (std::vector<std::string>{"execute parks", "execute resumes",
                                             "audit(after execute)"}));
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

}  // namespace
}  // namespace warden::gateway
