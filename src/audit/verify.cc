#include "audit/verify.h"

namespace warden::audit {
namespace {

std::string Entry(uint64_t id) { return "entry " + std::to_string(id); }

}  // namespace

std::string_view ToString(Problem problem) {
  switch (problem) {
    case Problem::kNone:
      return "ok";
    case Problem::kEdited:
      return "edited";
    case Problem::kDeleted:
      return "deleted";
    case Problem::kReordered:
      return "reordered";
    case Problem::kRehashed:
      return "rehashed";
    case Problem::kTruncated:
      return "truncated";
    case Problem::kUnrecorded:
      return "unrecorded";
    case Problem::kNoHead:
      return "no_head";
  }
  return "unknown";
}

bool ChainVerifier::Fail(Problem problem, uint64_t id, std::string detail) {
  report_.problem = problem;
  report_.first_bad_id = id;
  report_.detail = std::move(detail);
  return false;
}

bool ChainVerifier::Add(uint64_t id, const Result<AuditEntry>& row) {
  if (!report_.ok()) return false;
  uint64_t expected = last_id_ + 1;
  if (id != expected) {
    std::string after = last_id_ == 0 ? "the log starts at " + Entry(id)
                                      : Entry(last_id_) + " is followed by " + Entry(id);
    std::string missing = id == expected + 1 ? Entry(expected) + " is missing"
                                             : "entries " + std::to_string(expected) + " to " +
                                                   std::to_string(id - 1) + " are missing";
    if (id < expected)
      return Fail(Problem::kReordered, id,
                  Entry(id) + " is out of order (after " + Entry(last_id_) + ")");
    return Fail(Problem::kDeleted, expected, missing + " (" + after + "): deleted");
  }
  if (!row.ok())
    return Fail(Problem::kEdited, id,
                Entry(id) + " is unreadable (" + row.status().message() + "): edited");
  const AuditEntry& entry = *row;
  bool self_ok = ComputeEntryHash(entry) == entry.hash;
  bool link_ok = entry.prev_hash == last_hash_;
  if (!self_ok && link_ok) {
    return Fail(Problem::kEdited, id,
                Entry(id) + " does not match its hash: its contents were edited");
  }
  if (!self_ok) {
    return Fail(
        Problem::kReordered, id,
        Entry(id) +
            " matches neither its hash nor the previous entry's: moved, swapped or inserted");
  }
  if (!link_ok) {
    if (last_id_ == 0) {
      return Fail(Problem::kReordered, id,
                  Entry(id) + " does not start from the genesis hash: inserted or moved");
    }
    // The entry is intact and records the hash its predecessor had when it was written; the
    // predecessor now hashes differently although its own hash fits: edited, then re-hashed.
    return Fail(Problem::kRehashed, last_id_,
                Entry(last_id_) + " was rewritten: its hash " + last_hash_.substr(0, 16) +
                    "... is not the " + entry.prev_hash.substr(0, 16) + "... that " + Entry(id) +
                    " recorded");
  }
  last_id_ = id;
  last_hash_ = entry.hash;
  report_.entries = id;
  report_.head_hash = entry.hash;
  return true;
}

VerifyReport ChainVerifier::Finish(const std::optional<ChainHead>& head) {
  if (report_.head_hash.empty()) report_.head_hash = last_hash_;
  if (!report_.ok()) return report_;
  if (!head) {
    Fail(Problem::kNoHead, last_id_ + 1,
         "the head record (count and last hash) is missing: deleted");
    return report_;
  }
  if (head->count > last_id_) {
    std::string gone = head->count == last_id_ + 1
                           ? Entry(last_id_ + 1) + " is missing"
                           : "entries " + std::to_string(last_id_ + 1) + " to " +
                                 std::to_string(head->count) + " are missing";
    Fail(Problem::kTruncated, last_id_ + 1,
         gone + " (the log ends at " + std::to_string(last_id_) + " but its head records " +
             std::to_string(head->count) + " entries): the tail was deleted");
  } else if (head->count < last_id_) {
    Fail(Problem::kUnrecorded, head->count + 1,
         Entry(head->count + 1) + " and later are not in the head record (" +
             std::to_string(head->count) + " entries): written around warden");
  } else if (head->hash != last_hash_) {
    Fail(Problem::kRehashed, last_id_,
         (last_id_ == 0 ? std::string("the empty log") : Entry(last_id_)) +
             " was rewritten: its hash " + last_hash_.substr(0, 16) + "... is not the " +
             head->hash.substr(0, 16) + "... that the head recorded");
  }
  return report_;
}

}  // namespace warden::audit
