// The compensating call of one call, computed from its rule's `undo: { tool, args }` (policy.md)
// and what the call was given and returned. Pure functions: no I/O, no state.
//
// In undo.args, a string value that is exactly `$args/POINTER` or `$result/POINTER` (RFC 6901,
// as in a rule's match.args; `$args` or `$result` alone is the whole document) is replaced by the
// value found there; any other value, and a string that only contains a reference, is kept as
// written. Objects and arrays are walked. `$result` reads the CallToolResult's
// structuredContent, else the JSON its first text content holds.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"
#include "policy/model.h"

namespace warden::gateway {

// What undo.args refer to as `$result`: the result's structuredContent when it has one, else its
// first text content parsed as JSON, else null (nothing to point into).
nlohmann::json UndoResultDocument(const nlohmann::json& call_tool_result);

// undo.args with every reference replaced. Error naming the reference when a pointer is not
// valid RFC 6901 or finds nothing (`$result/id` on a result without "id").
Result<nlohmann::json> ResolveUndoArguments(const nlohmann::json& undo_args,
                                            const nlohmann::json& arguments,
                                            const nlohmann::json& result_document);

// The compensating call, or why there is none.
struct UndoPlan {
  bool available = false;
  std::string tool;                                     // undo.tool
  nlohmann::json arguments = nlohmann::json::object();  // resolved; empty when unavailable
  std::string reason;                                   // why unavailable ("" when available)
};

// The plan for a call that ran with `arguments` and returned `result` (a CallToolResult) under a
// rule whose undo is `undo`.
UndoPlan PlanUndo(const policy::Undo& undo, const nlohmann::json& arguments,
                  const nlohmann::json& result);

}  // namespace warden::gateway
