#include "audit/audit_log.h"

#include <istream>

#include "audit/redact.h"
#include "audit/result_summary.h"
#include "audit/sqlite_store.h"
#include "audit/time_format.h"

namespace warden::audit {

using nlohmann::json;

namespace {

// Redacts what can carry secrets and makes every string valid UTF-8, so that the stored text
// and the hashed canonical text are the same bytes.
AuditEntry Prepare(AuditEntry e) {
  e.arguments = Redact(e.arguments);
  e.reason = RedactText(e.reason);
  if (e.result) e.result->excerpt = RedactText(e.result->excerpt);
  if (e.time.empty()) e.time = NowRfc3339();
  for (std::string* field : {&e.time, &e.tenant, &e.user, &e.agent, &e.session, &e.tool,
                             &e.decision, &e.rule, &e.reason}) {
    *field = ValidUtf8(*field);
  }
  for (Approval& a : e.approvals)
    a.who = ValidUtf8(a.who), a.when = ValidUtf8(a.when), a.decision = ValidUtf8(a.decision);
  if (e.result)
    e.result->excerpt = ValidUtf8(e.result->excerpt),
    e.result->sha256 = ValidUtf8(e.result->sha256);
  for (std::string& label : e.labels) label = ValidUtf8(label);
  e.id = 0;
  e.prev_hash.clear();
  e.hash.clear();
  return e;
}

}  // namespace

struct AuditLog::Writer {
  AuditEntry* entry;
  Status status;
  bool done = false;
  std::condition_variable cv;
};

Result<std::unique_ptr<AuditLog>> AuditLog::Open(const AuditOptions& options) {
  auto store = SqliteAuditStore::Open(options);
  if (!store) return store.status();
  return std::make_unique<AuditLog>(std::move(*store), options.max_batch, options.before_commit);
}

AuditLog::AuditLog(std::unique_ptr<AuditStore> store, size_t max_batch,
                   std::function<void(size_t)> before_commit)
    : store_(std::move(store)),
      max_batch_(max_batch == 0 ? 1 : max_batch),
      before_commit_(std::move(before_commit)) {}

AuditLog::~AuditLog() = default;

Result<AuditReceipt> AuditLog::Append(AuditEntry entry) {
  // Redaction and serialisation-ready strings are made here, on the caller's thread, so that
  // the leader of a group commit does as little as possible while others wait.
  AuditEntry prepared = Prepare(std::move(entry));
  Writer self{&prepared};
  std::unique_lock lock(mu_);
  queue_.push_back(&self);
  // Wait until a leader has committed this entry, or until this caller is at the front and
  // so becomes the leader for everything queued behind it.
  self.cv.wait(lock, [&] { return self.done || queue_.front() == &self; });
  if (!self.done) CommitQueued(lock);
  if (!self.status.ok()) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    return self.status;
  }
  return AuditReceipt{prepared.id, prepared.time, prepared.hash};
}

void AuditLog::CommitQueued(std::unique_lock<std::mutex>& lock) {
  std::vector<Writer*> batch;
  std::vector<AuditEntry*> entries;
  for (auto it = queue_.begin(); it != queue_.end() && batch.size() < max_batch_; ++it) {
    batch.push_back(*it);
    entries.push_back((*it)->entry);
  }
  // Callers that arrive while the transaction runs queue up behind this batch: they form the
  // next one, so the rate of commits, not of calls, is what the disk has to sustain.
  lock.unlock();
  if (before_commit_) before_commit_(batch.size());
  Status st = store_->AppendBatch(entries);
  lock.lock();
  commits_.fetch_add(1, std::memory_order_relaxed);
  if (st.ok()) appends_.fetch_add(batch.size(), std::memory_order_relaxed);
  uint64_t largest = largest_batch_.load(std::memory_order_relaxed);
  if (batch.size() > largest) largest_batch_.store(batch.size(), std::memory_order_relaxed);
  for (Writer* w : batch) {
    queue_.pop_front();
    w->status = st;
    w->done = true;
    w->cv.notify_one();
  }
  if (!queue_.empty()) queue_.front()->cv.notify_one();  // the next leader
}

Result<VerifyReport> AuditLog::Verify() {
  ChainVerifier verifier;
  std::optional<ChainHead> head;
  Status st = store_->ScanChain(
      &head, [&](uint64_t id, const Result<AuditEntry>& row) { return verifier.Add(id, row); });
  if (!st.ok()) return st.Wrap("verify");
  return verifier.Finish(head);
}

Result<AuditLog::Tree> AuditLog::ReadTree() {
  ChainVerifier verifier;
  std::optional<ChainHead> head;
  Tree tree;
  Status st = store_->ScanChain(&head, [&](uint64_t id, const Result<AuditEntry>& row) {
    if (!verifier.Add(id, row)) return false;
    auto leaf = EntryLeafHash(row->hash);
    if (!leaf) return false;  // cannot happen: the verifier recomputed this hash
    tree.leaves.push_back(*leaf);
    return true;
  });
  if (!st.ok()) return st.Wrap("read the tree");
  tree.report = verifier.Finish(head);
  if (!tree.report.ok() || tree.leaves.size() != tree.report.entries) tree.leaves.clear();
  return tree;
}

Result<std::vector<AuditEntry>> AuditLog::Query(const AuditFilter& filter) {
  std::vector<AuditEntry> out;
  Status bad;
  Status st = store_->Scan(filter, [&](uint64_t id, const Result<AuditEntry>& row) {
    if (!row.ok()) {
      bad = Status::Error("entry " + std::to_string(id) + " is unreadable (" +
                          row.status().message() + "); run `warden audit verify`");
      return false;
    }
    out.push_back(*row);
    return true;
  });
  if (!st.ok()) return st.Wrap("query");
  if (!bad.ok()) return bad;
  return out;
}

Result<std::vector<AuditEntry>> AuditLog::Tail(size_t n) {
  if (n == 0) return std::vector<AuditEntry>();
  AuditFilter filter;
  filter.limit = n;
  filter.newest = true;
  return Query(filter);
}

Result<uint64_t> AuditLog::ExportJsonl(const AuditFilter& filter, std::ostream& out) {
  uint64_t written = 0;
  Status bad;
  Status st = store_->Scan(filter, [&](uint64_t id, const Result<AuditEntry>& row) {
    if (!row.ok()) {
      bad = Status::Error("entry " + std::to_string(id) + " is unreadable (" +
                          row.status().message() + ")");
      return false;
    }
    out << CanonicalLine(*row) << '\n';
    if (!out) {
      bad = Status::Error("write failed after " + std::to_string(written) + " entries");
      return false;
    }
    ++written;
    return true;
  });
  if (!st.ok()) return st.Wrap("export");
  if (!bad.ok()) return bad.Wrap("export");
  out.flush();
  return written;
}

AuditStats AuditLog::stats() const {
  return AuditStats{appends_.load(), commits_.load(), largest_batch_.load(), failures_.load()};
}

Result<VerifyReport> VerifyJsonl(std::istream& in) {
  ChainVerifier verifier;
  std::string line;
  uint64_t line_number = 0, last_id = 0;
  std::string last_hash = kGenesisHash;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.empty()) continue;
    json parsed = json::parse(line, nullptr, /*allow_exceptions=*/false);
    Result<AuditEntry> row =
        parsed.is_discarded() ? Result<AuditEntry>(Status::Error("not JSON")) : FromJson(parsed);
    uint64_t id = row.ok() ? row->id : last_id + 1;
    if (!verifier.Add(id, row)) break;
    last_id = id;
    last_hash = row->hash;
  }
  if (in.bad()) return Status::Error("read failed at line " + std::to_string(line_number));
  return verifier.Finish(ChainHead{last_id, last_hash});
}

}  // namespace warden::audit
