// Walking the hash chain: finds the first entry that was edited, deleted, moved or inserted,
// and a tail cut off behind the head record's back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "audit/entry.h"
#include "audit/store.h"

namespace warden::audit {

enum class Problem {
  kNone,
  kEdited,      // the entry's contents no longer match its own hash
  kDeleted,     // the entry is missing: ids jump over it
  kReordered,   // neither contents nor prev_hash fit this position: moved, swapped or inserted
  kRehashed,    // the entry is self-consistent but the next entry (or the head) recorded
                // another hash for it: edited, then re-hashed
  kTruncated,   // entries at the end are gone: the head record counts more
  kUnrecorded,  // entries beyond the head record's count: written around warden
  kNoHead,      // the head record is missing
};
std::string_view ToString(Problem problem);

struct VerifyReport {
  bool ok() const { return problem == Problem::kNone; }
  uint64_t entries = 0;   // entries checked
  std::string head_hash;  // the last entry's hash (kGenesisHash for an empty log)
  Problem problem = Problem::kNone;
  uint64_t first_bad_id = 0;  // the first entry that is wrong or missing (0 when ok)
  std::string detail;         // one sentence naming the entry and what is wrong with it
};

// Feeds rows in id order and tells where the chain first breaks. Pure: the SQLite store, a
// PostgreSQL store and a JSONL export are all verified with it.
class ChainVerifier {
 public:
  // Checks the next row; returns false once a problem is found (later rows are not needed).
  bool Add(uint64_t id, const Result<AuditEntry>& row);
  // Compares the chain with the head record (nullopt: none was found; for an export, pass
  // the chain's own end) and returns the report.
  VerifyReport Finish(const std::optional<ChainHead>& head);

 private:
  bool Fail(Problem problem, uint64_t id, std::string detail);

  VerifyReport report_;
  uint64_t last_id_ = 0;
  std::string last_hash_ = kGenesisHash;
};

}  // namespace warden::audit
