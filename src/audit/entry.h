// One audit log entry, its canonical JSON form and its place in the SHA-256 hash chain.
// The canonical form is a contract with external verifiers: docs/audit.md spells it out byte
// for byte, and a change to it is a change of the on-disk format.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace warden::audit {

// What an entry records.
enum class EntryKind {
  kDecision,  // the gateway decided a call (allow, deny, ask...) without, or before, running it
  kCall,      // a tool call that ran: its result summary and latency
  kAdmin,     // an operator's change: kill switches, tool approvals, policy reloads
};
std::string_view ToString(EntryKind kind);
// "decision", "call" or "admin"; an error naming the bad value otherwise.
Result<EntryKind> ParseEntryKind(std::string_view text);

// A human's answer to an approval request.
struct Approval {
  std::string who;       // the approver's identity
  std::string when;      // RFC 3339 UTC
  std::string decision;  // "approve", "deny", ...
  bool operator==(const Approval&) const = default;
};

// What a tool returned, without the result itself.
struct ResultSummary {
  uint64_t size = 0;    // bytes
  std::string sha256;   // lower-case hex of the whole result
  std::string excerpt;  // the start of the result, redacted and capped (see SummarizeResult)
  bool operator==(const ResultSummary&) const = default;
};

// The SHA-256 of nothing before the first entry: 64 '0' characters.
extern const std::string kGenesisHash;

struct AuditEntry {
  uint64_t id = 0;   // 1, 2, 3... with no gaps; assigned by the log
  std::string time;  // RFC 3339 UTC with microseconds; filled by the log when empty
  std::string tenant, user, agent, session, tool;
  nlohmann::json arguments = nlohmann::json::object();  // redacted by the log before it is stored
  std::string decision;                                 // allow, deny, ask, error, ...
  std::string rule;    // the policy rule behind the decision ("" when none)
  std::string reason;  // why, in words
  std::vector<Approval> approvals;
  std::optional<ResultSummary> result;  // absent for entries about calls that did not run
  std::vector<std::string> labels;
  uint64_t latency_us = 0;
  EntryKind kind = EntryKind::kDecision;
  std::string prev_hash;  // the previous entry's hash (kGenesisHash for entry 1); set by the log
  std::string hash;       // SHA-256(prev_hash || canonical JSON without "hash"); set by the log

  bool operator==(const AuditEntry&) const = default;
};

// The entry as a JSON object with every field; `with_hash` adds "hash".
nlohmann::json ToJson(const AuditEntry& entry, bool with_hash = true);
// The inverse of ToJson: every field must be present with its type ("hash" may be absent).
Result<AuditEntry> FromJson(const nlohmann::json& json);

// Canonical JSON: sorted keys, no whitespace, UTF-8 (invalid sequences become U+FFFD).
std::string CanonicalJson(const nlohmann::json& json);
// The canonical JSON of the entry's JSON-valued fields, as stores keep them in columns:
// result is "null" when absent.
struct CanonicalFields {
  std::string arguments, approvals, result, labels;
};
CanonicalFields CanonicalJsonFields(const AuditEntry& entry);

// The canonical JSON of the entry without "hash": the bytes that are hashed after prev_hash.
// Equal to CanonicalJson(ToJson(entry, false)), built faster.
std::string CanonicalBody(const AuditEntry& entry);
// The same, from fields already serialised by CanonicalJsonFields(entry).
std::string CanonicalBody(const AuditEntry& entry, const CanonicalFields& fields);
// The canonical JSON of the entry with "hash": one line of a JSONL export.
std::string CanonicalLine(const AuditEntry& entry);

// `text` with each invalid UTF-8 sequence replaced by U+FFFD, as CanonicalJson replaces it.
std::string ValidUtf8(std::string_view text);

// SHA-256(entry.prev_hash || CanonicalBody(entry)) in lower-case hex.
std::string ComputeEntryHash(const AuditEntry& entry);

}  // namespace warden::audit
