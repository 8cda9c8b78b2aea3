#include "cli/audit_command.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "audit/audit_log.h"
#include "audit/checkpoint.h"
#include "audit/merkle.h"
#include "audit/time_format.h"
#include "common/read_file.h"
#include "common/write_file.h"
#include "notify/http_post.h"

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
  sub_ = app.add_subcommand("audit", "Verify, read, export and prove the audit log");
  sub_->require_subcommand(1);
  verify_ = sub_->add_subcommand("verify", "Check the hash chain; name the first bad entry");
  tail_ = sub_->add_subcommand("tail", "Show the last entries");
  query_ = sub_->add_subcommand("query", "Show the entries that match filters");
  export_ =
      sub_->add_subcommand("export", "Write entries as JSON lines (canonical form, with hashes)");
  checkpoint_ = sub_->add_subcommand(
      "checkpoint", "Sign the tree's size and Merkle root with the log's Ed25519 key (a checkpoint)");
  prove_ = sub_->add_subcommand("prove", "Print the inclusion proof of entry ENTRY (JSON)");
  consistency_ = sub_->add_subcommand(
      "consistency", "Print the proof that the tree of NEW entries extends the tree of OLD (JSON)");
  public_key_ = sub_->add_subcommand("public-key", "Print the checkpoint key's public half (PEM)");
  AddCommonOptions(verify_, false);
  AddCommonOptions(checkpoint_, false);
  AddCommonOptions(prove_, false);
  AddCommonOptions(consistency_, false);
  AddCommonOptions(public_key_, false);
  for (CLI::App* sub : {checkpoint_, public_key_}) {
    sub->add_option("--key", key_,
                    "The Ed25519 key (PEM; default audit-checkpoint.key beside the database)");
  }
  checkpoint_->add_option("--origin", origin_, "The log's name in the checkpoint (default warden-audit)");
  checkpoint_->add_option("--out", out_file_, "Write the checkpoint to FILE (replaced atomically)");
  checkpoint_->add_option("--post", post_url_, "Also POST it (text/plain) to URL; any 2xx is success");
  checkpoint_->add_option("--ca-file", ca_file_, "With an https --post URL: trust this CA (PEM)");
  prove_->add_option("ENTRY", entry_, "The entry's id")->required();
  prove_->add_option("--size", tree_size_, "In the tree of this many entries (default: all)");
  consistency_->add_option("OLD", old_size_, "The older tree's size")->required();
  consistency_->add_option("NEW", new_size_, "The newer tree's size")->required();
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
  if (checkpoint_->parsed()) return SignCheckpoint();
  if (prove_->parsed()) return Prove();
  if (consistency_->parsed()) return Consistency();
  if (public_key_->parsed()) return PublicKey();
  err_ << "warden audit: name a subcommand: verify, tail, query, export, checkpoint, prove, "
          "consistency or public-key\n";
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

namespace {

json HexList(const std::vector<audit::Digest>& digests) {
  json out = json::array();
  for (const audit::Digest& d : digests) out.push_back(audit::ToHex(d));
  return out;
}

}  // namespace

std::optional<audit::AuditLog::Tree> AuditCommand::IntactTree(const char* name, int* exit_code) {
  *exit_code = kExitError;
  auto log = OpenForReading(db_);
  auto tree = log ? (*log)->ReadTree() : Result<AuditLog::Tree>(log.status());
  if (!tree) {
    err_ << "warden audit " << name << ": " << tree.status().message() << "\n";
    return std::nullopt;
  }
  if (!tree->report.ok()) {
    *exit_code = kExitBad;
    err_ << "warden audit " << name << ": the chain is broken at entry "
         << tree->report.first_bad_id << " (" << audit::ToString(tree->report.problem)
         << "): " << tree->report.detail << "; nothing is proved or signed about it\n";
    return std::nullopt;
  }
  return std::move(*tree);
}

std::string AuditCommand::KeyPath() const {
  return key_.empty() ? audit::DefaultCheckpointKeyPath(db_) : key_;
}

int AuditCommand::SignCheckpoint() {
  int code = kExitError;
  auto tree = IntactTree("checkpoint", &code);
  if (!tree) return code;
  Status origin = audit::ValidOrigin(origin_);
  if (!origin.ok()) {
    err_ << "warden audit checkpoint: --origin: " << origin.message() << "\n";
    return kExitError;
  }
  auto key = audit::CheckpointKey::Load(KeyPath(), /*create=*/true);
  if (!key) {
    err_ << "warden audit checkpoint: " << key.status().message() << "\n";
    return kExitError;
  }
  audit::Checkpoint c{origin_, tree->leaves.size(), audit::MerkleRoot(tree->leaves)};
  auto note = key->Sign(c);
  if (!note) {
    err_ << "warden audit checkpoint: " << note.status().message() << "\n";
    return kExitError;
  }
  if (!out_file_.empty()) {
    Status st = ReplaceFileWith(out_file_, *note, 0644, /*sync=*/true);
    if (!st.ok()) {
      err_ << "warden audit checkpoint: --out: " << st.message() << "\n";
      return kExitError;
    }
  } else {
    out_ << *note;
  }
  if (!post_url_.empty()) {
    if (Status st = notify::PostText(post_url_, ca_file_, *note, std::chrono::seconds(10)); !st.ok()) {
      err_ << "warden audit checkpoint: --post " << st.message() << "\n";
      return kExitError;
    }
  }
  return 0;
}

int AuditCommand::Prove() {
  int code = kExitError;
  auto tree = IntactTree("prove", &code);
  if (!tree) return code;
  const uint64_t size = tree_size_ == 0 ? tree->leaves.size() : tree_size_;
  if (size > tree->leaves.size()) {
    err_ << "warden audit prove: --size " << size << ": the log has " << tree->leaves.size()
         << " entries\n";
    return kExitError;
  }
  if (entry_ == 0 || entry_ > size) {
    err_ << "warden audit prove: entry " << entry_ << " is not in the tree of " << size
         << " entries (ids start at 1)\n";
    return kExitError;
  }
  std::span<const audit::Digest> leaves(tree->leaves.data(), size);
  // The root folded from the path: one pass over the leaves, not a second one for the root.
  const std::vector<audit::Digest> path = audit::InclusionProof(leaves, entry_ - 1);
  const auto root = audit::RootFromInclusion(entry_ - 1, size, leaves[entry_ - 1], path);
  if (!root) {
    err_ << "warden audit prove: internal error: the proof does not fold to a root\n";
    return kExitError;
  }
  json j = {{"entry", entry_},
            {"leaf_index", entry_ - 1},
            {"tree_size", size},
            {"leaf_hash", audit::ToHex(leaves[entry_ - 1])},
            {"path", HexList(path)},
            {"root", audit::ToHex(*root)}};
  out_ << j.dump() << "\n";
  return 0;
}

int AuditCommand::Consistency() {
  int code = kExitError;
  auto tree = IntactTree("consistency", &code);
  if (!tree) return code;
  if (new_size_ > tree->leaves.size() || old_size_ > new_size_) {
    err_ << "warden audit consistency: need OLD <= NEW <= " << tree->leaves.size()
         << " (the log's entries), got " << old_size_ << " and " << new_size_ << "\n";
    return kExitError;
  }
  std::span<const audit::Digest> leaves(tree->leaves.data(), new_size_);
  json j = {{"old_size", old_size_},
            {"new_size", new_size_},
            {"old_root", audit::ToHex(audit::MerkleRoot(leaves.first(old_size_)))},
            {"new_root", audit::ToHex(audit::MerkleRoot(leaves))},
            {"proof", HexList(audit::ConsistencyProof(leaves, old_size_))}};
  out_ << j.dump() << "\n";
  return 0;
}

int AuditCommand::PublicKey() {
  auto key = audit::CheckpointKey::Load(KeyPath(), /*create=*/false);
  if (!key) {
    err_ << "warden audit public-key: " << key.status().message()
         << " (warden audit checkpoint makes the key)\n";
    return kExitError;
  }
  out_ << key->PublicKeyPem();
  return 0;
}

}  // namespace warden::cli
