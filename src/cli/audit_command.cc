#include "cli/audit_command.h"

#include <chrono>
#include <nlohmann/json.hpp>

#include "audit/audit_log.h"
#include "audit/time_format.h"

namespace warden::cli {
namespace {

using audit::AuditEntry;
using audit::AuditFilter;
using audit::AuditLog;
using nlohmann::json;

constexpr int kExitBad = 1;
constexpr int kExitError = 2;

// One line per entry: id, time, kind, decision, who, tool, rule, latency, reason.
std::string FormatLine(const AuditEntry& e) {
  std::string who = e.tenant + "/" + e.user + "/" + e.agent;
  std::string line = std::to_string(e.id) + "  " + e.time + "  " +
                     std::string(audit::ToString(e.kind)) + "  " + e.decision + "  " + who + "  " +
                     (e.tool.empty() ? "-" : e.tool);
  if (!e.rule.empty()) line += "  rule=" + e.rule;
  line += "  " + std::to_string(e.latency_us) + "us";
  if (!e.reason.empty()) line += "  " + e.reason;
  return line;
}

}  // namespace

AuditCommand::AuditCommand(CLI::App& app, std::ostream& out, std::ostream& err)
    : out_(out), err_(err), db_(audit::kDefaultDatabasePath) {
  sub_ = app.add_subcommand("audit", "Verify, read and export the audit log");
  sub_->require_subcommand(1);
  verify_ = sub_->add_subcommand("verify", "Check the hash chain; name the first bad entry");
  tail_ = sub_->add_subcommand("tail", "Show the last entries");
  query_ = sub_->add_subcommand("query", "Show the entries that match filters");
  export_ =
      sub_->add_subcommand("export", "Write entries as JSON lines (canonical form, with hashes)");
  AddCommonOptions(verify_, false);
  AddCommonOptions(tail_, true);
  AddCommonOptions(query_, true);
  AddCommonOptions(export_, true);
  for (CLI::App* sub : {verify_, tail_, query_}) sub->add_flag("--json", json_, "Print JSON");
  tail_->add_option("-n,--lines", count_, "How many entries (default 20)");
  query_->add_option("--limit", limit_, "At most N entries (default: all)");
  query_->add_flag("--newest", newest_,
                   "With --limit: the newest N matches rather than the oldest");
  export_->add_option("--format", format_, "Output format (jsonl)")
      ->check(CLI::IsMember({"jsonl"}));
  export_->add_option("--limit", limit_, "At most N entries (default: all)");
}

void AuditCommand::AddCommonOptions(CLI::App* sub, bool filters) {
  sub->add_option("--db", db_, "The SQLite store (default ./var/warden/warden.db)");
  if (!filters) return;
  sub->add_option("--since", since_, "From this time: RFC 3339, a date, or an age like 2h, 7d");
  sub->add_option("--until", until_, "Before this time (same forms)");
  sub->add_option("--tenant", tenant_, "Only this tenant");
  sub->add_option("--user", user_, "Only this user");
  sub->add_option("--agent", agent_, "Only this agent");
  sub->add_option("--session", session_, "Only this session");
  sub->add_option("--tool", tool_, "Only this tool (SERVER__TOOL)");
  sub->add_option("--decision", decision_, "Only this decision (allow, deny, ask, error...)");
  sub->add_option("--kind", kind_, "Only this kind (decision, call, admin)");
}

int AuditCommand::Execute() {
  if (verify_->parsed()) return Verify();
  if (tail_->parsed()) return List(true);
  if (query_->parsed()) return List(false);
  if (export_->parsed()) return Export();
  err_ << "warden audit: name a subcommand: verify, tail, query or export\n";
  return kExitError;
}

namespace {

Result<std::unique_ptr<AuditLog>> OpenForReading(const std::string& db) {
  audit::AuditOptions options;
  options.path = db;
  options.create = false;
  return AuditLog::Open(options);
}

}  // namespace

int AuditCommand::Verify() {
  auto log = OpenForReading(db_);
  if (!log) {
    err_ << "warden audit verify: " << log.status().message() << "\n";
    return kExitError;
  }
  auto report = (*log)->Verify();
  if (!report) {
    err_ << "warden audit verify: " << report.status().message() << "\n";
    return kExitError;
  }
  if (json_) {
    json j = {{"ok", report->ok()},
              {"entries", report->entries},
              {"head", report->head_hash},
              {"problem", audit::ToString(report->problem)},
              {"first_bad_id", report->first_bad_id},
              {"detail", report->detail}};
    out_ << j.dump() << "\n";
  } else if (report->ok()) {
    out_ << "ok: " << report->entries << " entries, head " << report->head_hash << "\n";
  } else {
    out_ << "FAIL at entry " << report->first_bad_id << " (" << audit::ToString(report->problem)
         << "): " << report->detail << "\n";
  }
  return report->ok() ? 0 : kExitBad;
}

namespace {

Result<AuditFilter> MakeFilter(const std::string& since, const std::string& until,
                               const std::string& kind) {
  AuditFilter filter;
  auto now = std::chrono::system_clock::now();
  if (!since.empty()) {
    auto bound = audit::ParseTimeBound(since, now);
    if (!bound) return bound.status().Wrap("--since");
    filter.since = *bound;
  }
  if (!until.empty()) {
    auto bound = audit::ParseTimeBound(until, now);
    if (!bound) return bound.status().Wrap("--until");
    filter.until = *bound;
  }
  if (!kind.empty()) {
    auto parsed = audit::ParseEntryKind(kind);
    if (!parsed) return parsed.status().Wrap("--kind");
    filter.kind = *parsed;
  }
  return filter;
}

}  // namespace

int AuditCommand::List(bool tail) {
  const char* name = tail ? "tail" : "query";
  auto filter = MakeFilter(since_, until_, kind_);
  if (!filter) {
    err_ << "warden audit " << name << ": " << filter.status().message() << "\n";
    return kExitError;
  }
  filter->tenant = tenant_, filter->user = user_, filter->agent = agent_,
  filter->session = session_;
  filter->tool = tool_, filter->decision = decision_;
  if (tail) {
    if (count_ == 0) return 0;
    filter->limit = count_;
    filter->newest = true;
  } else {
    filter->limit = limit_;
    filter->newest = newest_;
  }
  auto log = OpenForReading(db_);
  if (!log) {
    err_ << "warden audit " << name << ": " << log.status().message() << "\n";
    return kExitError;
  }
  auto entries = (*log)->Query(*filter);
  if (!entries) {
    err_ << "warden audit " << name << ": " << entries.status().message() << "\n";
    return kExitError;
  }
  if (json_) {
    json array = json::array();
    for (const AuditEntry& e : *entries) array.push_back(audit::ToJson(e));
    out_ << audit::CanonicalJson(array) << "\n";
  } else {
    for (const AuditEntry& e : *entries) out_ << FormatLine(e) << "\n";
  }
  return 0;
}

int AuditCommand::Export() {
  auto filter = MakeFilter(since_, until_, kind_);
  if (!filter) {
    err_ << "warden audit export: " << filter.status().message() << "\n";
    return kExitError;
  }
  filter->tenant = tenant_, filter->user = user_, filter->agent = agent_,
  filter->session = session_;
  filter->tool = tool_, filter->decision = decision_, filter->limit = limit_;
  auto log = OpenForReading(db_);
  if (!log) {
    err_ << "warden audit export: " << log.status().message() << "\n";
    return kExitError;
  }
  auto written = (*log)->ExportJsonl(*filter, out_);
  if (!written) {
    err_ << "warden audit export: " << written.status().message() << "\n";
    return kExitError;
  }
  return 0;
}

}  // namespace warden::cli
