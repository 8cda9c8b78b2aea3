#include "gateway/pipeline/pipeline.h"

#include <future>

namespace warden::gateway {

std::string_view StageResultName(StageResult result) {
  switch (result) {
    case StageResult::kContinue:
      return "continue";
    case StageResult::kDeny:
      return "deny";
    case StageResult::kPause:
      return "pause";
  }
  return "deny";
}

CallResult CallResult::FromText(std::string text, bool is_error) {
  CallResult r;
  r.value = {{"content", nlohmann::json::array({{{"type", "text"}, {"text", std::move(text)}}})},
             {"isError", is_error}};
  r.is_error = is_error;
  return r;
}

CallResult CallResult::FromError(int code, std::string message, nlohmann::json data) {
  CallResult r;
  r.value = {{"code", code}, {"message", std::move(message)}};
  if (!data.is_null()) r.value["data"] = std::move(data);
  r.is_error = true;
  r.rpc_error = true;
  return r;
}

namespace {

// Appends the `text` member of each object in `parts` that has a string one (a content list).
void AppendTexts(const nlohmann::json& parts, std::string& out) {
  if (!parts.is_array()) return;
  for (const nlohmann::json& part : parts) {
    if (!part.is_object()) continue;
    auto text = part.find("text");
    if (text == part.end() || !text->is_string()) continue;
    if (!out.empty()) out += "\n";
    out += text->get_ref<const std::string&>();
  }
}

}  // namespace

std::string CallResult::Text() const {
  std::string text;
  if (rpc_error && value.is_object() && value.contains("message") && value["message"].is_string())
    return value["message"].get<std::string>();
  if (value.is_object()) {
    if (auto it = value.find("content"); it != value.end()) AppendTexts(*it, text);
    if (auto it = value.find("contents"); it != value.end()) AppendTexts(*it, text);
    if (auto it = value.find("messages"); it != value.end() && it->is_array()) {
      for (const nlohmann::json& m : *it) {
        if (m.is_object() && m.contains("content"))
          AppendTexts(nlohmann::json::array({m["content"]}), text);
      }
    }
  }
  if (text.empty()) text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return text;
}

void Pipeline::AddStage(std::unique_ptr<Stage> stage) {
  StageStats stats{.name = std::string(stage->name())};
  stages_.push_back({std::move(stage), std::move(stats)});
}

void Pipeline::AddFinalStage(std::unique_ptr<Stage> stage) {
  StageStats stats{.name = std::string(stage->name())};
  final_stages_.push_back({std::move(stage), std::move(stats)});
}

void Pipeline::Count(Entry& entry, StageResult result, Clock::time_point started,
                     std::optional<Clock::time_point> parked_at) {
  const Clock::time_point now = Clock::now();
  const double seconds = std::chrono::duration<double>(now - started).count();
  std::lock_guard lock(stats_mu_);
  entry.stats.time += now - started;
  ++entry.stats.buckets[monitor::LatencyBucket(seconds)];
  if (parked_at) {
    ++entry.stats.resumed;
    entry.stats.parked += now - *parked_at;
  }
  switch (result) {
    case StageResult::kContinue:
      ++entry.stats.continued;
      break;
    case StageResult::kDeny:
      ++entry.stats.denied;
      break;
    case StageResult::kPause:
      ++entry.stats.paused;
      break;
  }
}

StageOutcome Pipeline::Run(CallContext& call) {
  std::promise<StageOutcome> promise;
  std::future<StageOutcome> future = promise.get_future();
  RunAsync(call, [&promise](const StageOutcome& outcome) { promise.set_value(outcome); });
  return future.get();
}

void Pipeline::RunAsync(CallContext& call, Done done) {
  call.verdict = StageOutcome::Continue();
  call.verdict_stage.clear();
  Step(call, 0, std::move(done));
}

void Pipeline::CountPause(Entry& entry) {
  std::lock_guard lock(stats_mu_);
  ++entry.stats.paused;
}

void Pipeline::Step(CallContext& call, std::size_t next, Done done) {
  for (std::size_t i = next; i < stages_.size(); ++i) {
    call.park = nullptr;
    const Clock::time_point started = Clock::now();
    StageOutcome outcome = stages_[i].stage->Run(call);
    if (outcome.result == StageResult::kPause && call.park) {
      auto park = std::move(call.park);
      call.park = nullptr;
      const Clock::time_point parked_at = Clock::now();
      CountPause(stages_[i]);
      // The thread that resumes carries the chain on; this one returns.
      park([this, &call, i, started, parked_at,
            done = std::move(done)](StageOutcome resumed) mutable {
        if (Settle(call, i, std::move(resumed), started, parked_at))
          Step(call, i + 1, std::move(done));
        else
          Finish(call, done);
      });
      return;
    }
    if (!Settle(call, i, std::move(outcome), started, std::nullopt)) {
      Finish(call, done);
      return;
    }
  }
  Respond(call);
  Finish(call, done);
}

void Pipeline::Respond(CallContext& call) {
  if (!call.result) return;
  for (std::size_t i = stages_.size(); i-- > 0;) {
    Entry& entry = stages_[i];
    const Clock::time_point started = Clock::now();
    StageOutcome outcome = entry.stage->OnResult(call);
    if (outcome.result == StageResult::kPause)
      outcome = StageOutcome::Deny(Refusal::kInternal, "a stage paused on the response path");
    {
      std::lock_guard lock(stats_mu_);
      entry.stats.time += Clock::now() - started;
      ++entry.stats.results;
      if (outcome.result == StageResult::kDeny) ++entry.stats.results_denied;
    }
    if (outcome.result == StageResult::kDeny) {
      call.verdict = std::move(outcome);
      call.verdict_stage = std::string(entry.stage->name());
      return;
    }
  }
}

bool Pipeline::Streamed(CallContext& call, mcp::Notification& message) {
  for (std::size_t i = stages_.size(); i-- > 0;) {
    if (!stages_[i].stage->OnStreamed(call, message)) return false;
  }
  return true;
}

bool Pipeline::Settle(CallContext& call, std::size_t index, StageOutcome outcome,
                      Clock::time_point started, std::optional<Clock::time_point> parked_at) {
  Entry& entry = stages_[index];
  Count(entry, outcome.result, started, parked_at);
  if (outcome.result == StageResult::kContinue) return true;
  call.verdict = std::move(outcome);
  call.verdict_stage = std::string(entry.stage->name());
  return false;
}

void Pipeline::Finish(CallContext& call, const Done& done) {
  // Final stages see the verdict; one that denies overrides it (an audit entry that could not
  // be written withholds the result), and the rest still run.
  for (Entry& entry : final_stages_) {
    const Clock::time_point started = Clock::now();
    StageOutcome outcome = entry.stage->Run(call);
    Count(entry, outcome.result, started);
    if (outcome.result == StageResult::kDeny) {
      call.verdict = std::move(outcome);
      call.verdict_stage = std::string(entry.stage->name());
    }
  }
  done(call.verdict);
}

std::vector<std::string> Pipeline::StageNames() const {
  std::vector<std::string> names;
  for (const Entry& e : stages_) names.emplace_back(e.stage->name());
  for (const Entry& e : final_stages_) names.emplace_back(e.stage->name());
  return names;
}

std::vector<StageStats> Pipeline::Stats() const {
  std::lock_guard lock(stats_mu_);
  std::vector<StageStats> out;
  for (const Entry& e : stages_) out.push_back(e.stats);
  for (const Entry& e : final_stages_) out.push_back(e.stats);
  return out;
}

void CancelToken::Cancel(const std::string& reason) {
  std::function<void()> stop;
  {
    std::lock_guard lock(mu_);
    if (cancelled_.load()) return;
    reason_ = reason;
    cancelled_.store(true);
    // Runs once: dropping it here also breaks the cycle of an action that holds this token.
    stop = std::move(stop_);
    stop_ = nullptr;
  }
  if (stop) stop();
}

std::string CancelToken::reason() const {
  std::lock_guard lock(mu_);
  return reason_;
}

void CancelToken::OnCancel(std::function<void()> stop) {
  {
    std::lock_guard lock(mu_);
    if (!cancelled_.load()) {
      stop_ = std::move(stop);
      return;
    }
  }
  if (stop) stop();
}

}  // namespace warden::gateway
