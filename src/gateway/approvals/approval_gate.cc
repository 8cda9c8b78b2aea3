#include "gateway/approvals/approval_gate.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>

#include "audit/entry.h"
#include "common/random_hex.h"
#include "audit/sha256.h"
#include "audit/time_format.h"
#include "policy/glob.h"

namespace warden::gateway {

using state::ApprovalRecord;
using state::ApprovalStatus;

std::string ApprovalBinding(const std::string& tenant, const std::string& user,
                            const std::string& agent, const std::string& session,
                            const std::string& task, const std::string& tool,
                            const nlohmann::json& arguments, const std::string& definition_hash,
                            bool retry) {
  nlohmann::json bound = {{"tenant", tenant},       {"user", user},
                          {"agent", agent},         {"tool", tool},
                          {"arguments", arguments}, {"definition", definition_hash}};
  if (!retry) bound["session"] = session;
  if (!task.empty()) bound["task"] = task;
  return audit::Sha256Hex(audit::CanonicalJson(bound));
}

std::string FormatDuration(std::chrono::milliseconds duration) {
  int64_t ms = duration.count();
  if (ms % 1000 != 0 || ms < 1000) return std::to_string(ms) + "ms";
  int64_t s = ms / 1000;
  std::string out;
  if (s >= 3600) out += std::to_string(s / 3600) + "h";
  if (s % 3600 >= 60) out += std::to_string(s % 3600 / 60) + "m";
  if (s % 60) out += std::to_string(s % 60) + "s";
  return out;
}

state::Decider DeciderOf(const identity::Caller& caller, bool local_operator) {
  // Single-user mode's operator is the host's login (LoginName), as the CLI's is: one person.
  if (local_operator) return state::Person("", caller.user, caller.user + " (local operator)");
  return state::Person(caller.tenant, caller.user);
}

// "apr_" and 128 random bits in hex: unguessable, so that knowing one id tells nothing of others.
std::string NewApprovalId() { return "apr_" + RandomHex(16); }

namespace {

bool Named(const std::vector<std::string>& names, const std::string& who) {
  return std::find(names.begin(), names.end(), who) != names.end();
}

const policy::Rule* RuleByText(const policy::Policy& policy, const std::string& text) {
  for (const policy::Rule& r : policy.rules)
    if (r.text == text) return &r;
  return nullptr;
}

}  // namespace

std::optional<std::string> WhyMayNotDecide(const policy::Policy& policy,
                                           const identity::Caller& caller, bool local_operator,
                                           const ApprovalRecord& record) {
  if (!caller.agent.empty())
    return "agents may not decide approvals: a person decides, with their own credential "
           "(keys: on the user, or a JWT naming the user without an agent)";
  if (local_operator) return std::nullopt;
  if (caller.tenant.empty() || caller.user.empty())
    return "only a person of the approval's tenant may decide it";
  if (caller.tenant != record.tenant) return "approval " + record.id + " belongs to another tenant";
  auto t = policy.identity.tenants.find(caller.tenant);
  if (t == policy.identity.tenants.end())
    return "tenant '" + caller.tenant + "' is not in the policy";
  auto u = t->second.users.find(caller.user);
  if (u == t->second.users.end()) return "user '" + caller.user + "' is not in the policy";
  const policy::Rule* rule = RuleByText(policy, record.rule);
  if (caller.user == record.user) {
    if (!policy.approvals.self_approve)
      return "user '" + caller.user +
             "' asked for this call (through their agent) and approvals.self_approve is off: "
             "another approver must decide";
    // A rule that names who approves its calls is narrower than self_approve.
    if (rule && !rule->approvers.empty() && !Named(rule->approvers, caller.user))
      return "rule " + rule->id + " names who approves its calls, and '" + caller.user +
             "' (who asked for this call through their agent) is not among them";
    return std::nullopt;
  }
  if (!u->second.approver)
    return "user '" + caller.user + "' is not an approver (approver: true) of tenant '" +
           caller.tenant + "'";
  if (rule && !rule->approvers.empty() && !Named(rule->approvers, caller.user))
    return "rule " + rule->id + " names who approves its calls, and '" + caller.user +
           "' is not among them";
  if (!policy.approvals.approvers.empty()) {
    const auto risk = policy::ParseRisk(record.risk);
    for (const policy::ApproverGrant& g : policy.approvals.approvers) {
      if (!Named(g.users, caller.user)) continue;
      if (!g.risks.empty() &&
          (!risk || std::find(g.risks.begin(), g.risks.end(), *risk) == g.risks.end()))
        continue;
      if (!g.tools.empty() &&
          std::none_of(g.tools.begin(), g.tools.end(),
                       [&](const policy::Glob& glob) { return glob.Matches(record.tool); }))
        continue;
      return std::nullopt;
    }
    return "no approvals.approvers entry lets '" + caller.user + "' approve " + record.tool +
           " at risk " + record.risk;
  }
  return std::nullopt;
}

std::optional<std::string> WhyMayNotSee(const policy::Policy& policy,
                                        const identity::Caller& caller, bool local_operator,
                                        const ApprovalRecord& record) {
  if (!caller.agent.empty()) return "agents may not read approvals: a person does";
  if (local_operator) return std::nullopt;
  if (caller.tenant.empty() || caller.user.empty() || caller.tenant != record.tenant)
    return "approval " + record.id + " belongs to another tenant";
  if (caller.user == record.user) return std::nullopt;
  auto t = policy.identity.tenants.find(caller.tenant);
  if (t != policy.identity.tenants.end()) {
    auto u = t->second.users.find(caller.user);
    if (u != t->second.users.end() && u->second.approver) return std::nullopt;
  }
  return "approval " + record.id + " is seen by the tenant's approvers and by the user whose "
         "agent made the call, and '" + caller.user + "' is neither";
}

namespace {

// This process as an approval's owner: its pid and its start time (in clock ticks since boot,
// /proc/self/stat field 22), so that a pid reused by a later process does not pass for it.
std::string StartTimeOf(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The command name (field 2) is in parentheses and may hold spaces: count from its end.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return field;
  }
  return "";
}

}  // namespace

std::string ApprovalOwnerId() {
  static const std::string id = [] {
    const std::string pid = std::to_string(::getpid());
    return pid + ":" + StartTimeOf(pid);
  }();
  return id;
}

bool ApprovalOwnerGone(const std::string& owner) {
  if (owner == ApprovalOwnerId()) return false;
  const size_t colon = owner.find(':');
  if (owner.empty() || colon == std::string::npos || colon == 0) return true;
  const std::string pid = owner.substr(0, colon);
  if (pid.find_first_not_of("0123456789") != std::string::npos) return true;
  const std::string started = StartTimeOf(pid);
  return started.empty() || started != owner.substr(colon + 1);
}

Result<std::unique_ptr<ApprovalGate>> ApprovalGate::Open(const state::DatabaseOptions& database,
                                                         audit::AuditLog& audit,
                                                         ApprovalGateOptions options) {
  auto store = state::ApprovalStore::Open(database);
  if (!store) return store.status().Wrap("approvals");
  // Pending rows of a process that is gone: their callers' connections went with it. Never
  // approve them silently, never lose them; a gateway still running on the file keeps its own.
  auto orphaned = (*store)->CancelOrphaned(options.restart_reason, ApprovalOwnerGone);
  if (!orphaned) return orphaned.status().Wrap("approvals");
  std::unique_ptr<ApprovalGate> gate(new ApprovalGate(std::move(*store), audit, options));
  for (const ApprovalRecord& r : *orphaned)
    gate->Audit(r, "cancelled", "warden", options.restart_reason);
  return gate;
}

ApprovalGate::ApprovalGate(std::unique_ptr<state::ApprovalStore> store, audit::AuditLog& audit,
                           ApprovalGateOptions options)
    : store_(std::move(store)), audit_(audit), options_(std::move(options)) {
  auto version = store_->DataVersion();
  data_version_ = version ? *version : 0;
  checked_since_ = state::Now();
  thread_ = std::thread([this] { Run(); });
}

ApprovalGate::~ApprovalGate() {
  StopAll("gateway stopping");
  if (thread_.joinable()) thread_.join();
}

void ApprovalGate::StopAll(const std::string& why) {
  std::map<std::string, Wait> left;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    left.swap(waits_);
  }
  cv_.notify_all();
  // The rows stay pending: the next gateway to open the store marks them cancelled (restarted),
  // and a caller that retries hears so. Only the waiting calls end here.
  for (auto& [id, wait] : left) {
    ApprovalOutcome out;
    out.status = ApprovalStatus::kCancelled;
    out.record.id = id;
    out.record.status = ApprovalStatus::kCancelled;
    out.message = "approval " + id + " was cancelled (" + why + ")";
    try {
      wait.waiter.done(std::move(out));
    } catch (...) {
      spdlog::error("approvals: ending the wait of {} failed", id);
    }
  }
}

void ApprovalGate::OnCreated(std::function<void(const ApprovalRecord&)> listener) {
  std::lock_guard lock(mu_);
  on_created_ = std::move(listener);
}

size_t ApprovalGate::waiting() const {
  std::lock_guard lock(mu_);
  return waits_.size();
}

Result<ApprovalRecord> ApprovalGate::Ask(ApprovalRecord record, std::chrono::milliseconds timeout,
                                         Waiter waiter) {
  const auto now = std::chrono::system_clock::now();
  if (record.id.empty()) record.id = NewApprovalId();
  record.owner = ApprovalOwnerId();
  record.status = ApprovalStatus::kPending;
  record.created = audit::FormatTime(now);
  record.expires = audit::FormatTime(
      now + std::chrono::duration_cast<std::chrono::system_clock::duration>(timeout));
  const std::string id = record.id;
  {
    // Waiting before the row exists: a decision can only come once the row does, and then it
    // finds the wait.
    std::lock_guard lock(mu_);
    if (stop_) return Status::Error("the approval gate is stopping");
    const auto steady = std::chrono::steady_clock::now();
    Wait& w = waits_[id];
    w.waiter = std::move(waiter);
    w.deadline = steady + timeout;
    w.next_tick = steady + options_.keepalive_interval;
    w.timeout = timeout;
  }
  auto stored = store_->Create(std::move(record));
  std::function<void(const ApprovalRecord&)> listener;
  {
    std::lock_guard lock(mu_);
    if (!stored) {
      waits_.erase(id);
      return stored.status();
    }
    listener = on_created_;
  }
  cv_.notify_all();
  if (listener) {
    try {
      listener(*stored);
    } catch (const std::exception& e) {
      spdlog::warn("approvals: the new-approval listener failed: {}", e.what());
    }
  }
  return stored;
}

Result<state::DecideResult> ApprovalGate::Approve(const std::string& id, const state::Decider& who,
                                                  const std::string& comment,
                                                  const nlohmann::json& details) {
  return Decided(store_->Approve(id, who, comment), true, who, comment, details);
}

Result<state::DecideResult> ApprovalGate::Deny(const std::string& id, const state::Decider& who,
                                               const std::string& comment,
                                               const nlohmann::json& details) {
  return Decided(store_->Deny(id, who, comment), false, who, comment, details);
}

Result<state::DecideResult> ApprovalGate::Decided(Result<state::DecideResult> result, bool approve,
                                                  const state::Decider& who,
                                                  const std::string& comment,
                                                  const nlohmann::json& details) {
  if (!result || result->error != state::DecideError::kNone) return result;
  const ApprovalRecord& r = result->record;
  audit::AuditEntry e;
  e.kind = audit::EntryKind::kAdmin;
  e.tenant = r.tenant;
  e.user = r.user;
  e.agent = r.agent;
  e.session = r.session;
  e.tool = r.tool;
  e.decision = approve ? "approve" : "deny";
  e.rule = "approval." + r.id;
  e.reason = comment;
  e.approvals.push_back({who.name, state::Now(), e.decision});
  e.arguments = details.is_object() ? details : nlohmann::json::object();
  // The person the vote counts for (never told apart by name), and whether it was only the
  // agent's client answering.
  e.arguments["decider"] = {{"tenant", who.tenant}, {"user", who.user}, {"in_band", who.in_band}};
  e.arguments["approval"] = r.id;
  e.arguments["status"] = std::string(state::ToString(r.status));
  e.arguments["votes"] = r.votes.size();
  e.arguments["votes_needed"] = r.votes_needed;
  // The decision stands whatever the log says: it is in the store, which the console and CLI
  // read; a log that cannot be written is reported, as for kill switches.
  if (auto written = audit_.Append(std::move(e)); !written)
    spdlog::error("approvals: the audit entry for the decision on {} could not be written: {}",
                  r.id, written.status().message());
  if (result->decided) Finish(r.id, r);
  return result;
}

void ApprovalGate::Cancel(const std::string& id, const std::string& why) {
  End(id, ApprovalStatus::kCancelled, why);
}

void ApprovalGate::End(const std::string& id, ApprovalStatus status, const std::string& why) {
  const bool expire = status == ApprovalStatus::kExpired;
  auto ended = expire ? store_->Expire(id, why) : store_->Cancel(id, why);
  auto record = store_->Get(id);
  if (!record || !*record) {
    // The store cannot say: the call still ends (fail closed), as `status`.
    ApprovalRecord r;
    r.id = id;
    r.status = status;
    r.comment = why;
    Finish(id, r);
    return;
  }
  // Someone may have decided first: their decision stands, and is what the call gets.
  if (ended && *ended) Audit(**record, expire ? "expired" : "cancelled", "warden", why);
  Finish(id, **record);
}

void ApprovalGate::Finish(const std::string& id, const ApprovalRecord& record) {
  std::optional<Wait> wait;
  {
    std::lock_guard lock(mu_);
    auto it = waits_.find(id);
    if (it == waits_.end()) return;
    wait = std::move(it->second);
    waits_.erase(it);
  }
  ApprovalOutcome out;
  out.status = record.status;
  out.record = record;
  switch (record.status) {
    case ApprovalStatus::kApproved:
      break;
    case ApprovalStatus::kDenied:
      out.message = "denied by " + record.decided_by +
                    (record.comment.empty() ? std::string() : ": " + record.comment);
      break;
    case ApprovalStatus::kExpired:
      out.message = record.comment.empty() ? "approval expired" : record.comment;
      break;
    case ApprovalStatus::kCancelled:
      out.message = "approval " + id + " was cancelled" +
                    (record.comment.empty() ? std::string() : " (" + record.comment + ")");
      break;
    case ApprovalStatus::kPending:
      out.status = ApprovalStatus::kCancelled;
      out.message = "approval " + id + " ended without a decision";
      break;
  }
  try {
    wait->waiter.done(std::move(out));
  } catch (const std::exception& e) {
    spdlog::error("approvals: resuming the call of {} failed: {}", id, e.what());
  } catch (...) {
    spdlog::error("approvals: resuming the call of {} failed", id);
  }
}

void ApprovalGate::CheckStore() {
  auto version = store_->DataVersion();
  if (!version || *version == data_version_) return;
  data_version_ = *version;
  // A second of overlap: another process's clock read and commit may straddle our last look.
  const std::string since = checked_since_;
  checked_since_ = audit::FormatTime(std::chrono::system_clock::now() - std::chrono::seconds(1));
  auto decided = store_->DecidedSince(since);
  if (!decided) {
    spdlog::warn("approvals: reading decisions from the store failed: {}",
                 decided.status().message());
    return;
  }
  for (const ApprovalRecord& r : *decided) Finish(r.id, r);
}

void ApprovalGate::Run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    auto now = std::chrono::steady_clock::now();
    auto wake = now + options_.poll_interval;
    std::vector<std::pair<std::string, std::chrono::milliseconds>> expired;
    std::vector<std::pair<std::function<void(int)>, int>> ticks;
    for (auto& [id, w] : waits_) {
      if (w.deadline <= now) {
        expired.emplace_back(id, w.timeout);
        continue;
      }
      if (w.waiter.keepalive && w.next_tick <= now) {
        ticks.emplace_back(w.waiter.keepalive, ++w.ticks);
        w.next_tick = now + options_.keepalive_interval;
      }
      wake = std::min(wake, std::min(w.deadline, w.waiter.keepalive ? w.next_tick : w.deadline));
    }
    lock.unlock();
    for (auto& [tick, n] : ticks) {
      try {
        tick(n);
      } catch (...) {
      }
    }
    for (auto& [id, timeout] : expired)
      End(id, ApprovalStatus::kExpired, "approval expired after " + FormatDuration(timeout));
    CheckStore();
    lock.lock();
    if (stop_) break;
    if (!expired.empty()) continue;
    cv_.wait_until(lock, wake);
  }
}

void ApprovalGate::Audit(const ApprovalRecord& record, const std::string& decision,
                         const std::string& who, const std::string& why) {
  audit::AuditEntry e;
  e.kind = audit::EntryKind::kDecision;
  e.tenant = record.tenant;
  e.user = record.user;
  e.agent = record.agent;
  e.session = record.session;
  e.tool = record.tool;
  e.decision = decision;
  e.rule = "approval." + record.id;
  e.reason = why;
  if (!who.empty()) e.approvals.push_back({who, state::Now(), decision});
  auto written = audit_.Append(std::move(e));
  if (!written)
    spdlog::error("approvals: the audit entry for {} ({}) could not be written: {}", record.id,
                  decision, written.status().message());
}

}  // namespace warden::gateway
