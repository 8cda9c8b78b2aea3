// Tool pinning, the defence against a rug pull: an upstream MCP server that shows a harmless tool,
// is trusted, then changes what the tool says it does ("...and ignore previous instructions"),
// its schema, or renames tools. The first manifest (tools/list) the gateway sees from a server is
// trusted and pinned, tool by tool, by the SHA-256 of each definition; afterwards a tool whose
// definition differs from its pin, or that was not in the pinned manifest, is hidden until an
// operator approves it (`warden tools approve`). Tables state_pin_servers and state_pins in the
// warden database (docs/state.md). Thread-safe; several processes may share the database.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "state/database.h"

namespace warden::state {

// The members of an MCP Tool that are pinned: what the model reads (name, title, description),
// what it sends and gets (inputSchema, outputSchema), and what the server claims about the tool
// (annotations: never trusted, but a change to them is a change all the same). Other members
// (icons, _meta, execution) are not pinned.
inline constexpr const char* kPinnedMembers[] = {"name",        "title",        "description",
                                                 "inputSchema", "outputSchema", "annotations"};

// The pinned part of `tool` (an MCP Tool object): the members above that are present.
nlohmann::json PinnedDefinition(const nlohmann::json& tool);
// Lower-case hex SHA-256 of the canonical JSON of PinnedDefinition(tool) (sorted keys, no
// whitespace, audit::CanonicalJson).
std::string DefinitionHash(const nlohmann::json& tool);
// The pinned members whose values differ between two definitions, in kPinnedMembers order.
std::vector<std::string> ChangedMembers(const nlohmann::json& pinned,
                                        const nlohmann::json& current);

enum class PinStatus {
  kPinned,   // the current definition is the pinned one: shown
  kChanged,  // differs from its pin: hidden until approved
  kNew,      // appeared after the server's manifest was first pinned: hidden until approved
  kRemoved,  // pinned, but missing from the latest manifest
};
// "pinned", "changed", "new", "removed".
const char* ToString(PinStatus status);

struct PinnedTool {
  std::string server;         // the upstream's name
  std::string upstream_name;  // the tool's name upstream
  std::string exposed_name;   // what agents see (prefix applied): what approve takes
  PinStatus status = PinStatus::kPinned;
  // The latest definition the server listed (for kRemoved: the last one it listed).
  nlohmann::json definition;
  // The approved definition; null for kNew.
  nlohmann::json pinned_definition;
  std::vector<std::string> changed;  // kChanged: which pinned members differ
  std::string first_seen, changed_at, approved_by, approved_at;  // RFC 3339 UTC; "" when never
};

class PinStore {
 public:
  // Opens the database (see DatabaseOptions); with options.create, creates the tables. A
  // read-only store reads a file without the tables as holding no pins.
  static Result<std::unique_ptr<PinStore>> Open(const DatabaseOptions& options);

  // Reviews `server`'s current manifest: `tools` is the complete tools/list result's array of
  // Tool objects (all pages), with upstream names; each is exposed as prefix + name ("files__"
  // or "" for --no-prefix). Returns the upstream names that may be shown: those whose
  // definition equals its pin. The first manifest seen for a server is pinned whole (trust on
  // first use) and returned whole. Afterwards: a tool that differs from its pin becomes
  // kChanged, one without a pin kNew, a pin missing from the manifest kRemoved; a changed tool
  // that changes back to its pinned definition is shown again (the pin, not the history, is
  // what was approved). In one transaction. Errors (and then nothing may be shown): `tools` not
  // an array of objects with a non-empty string name, a name listed twice, an empty server name,
  // SQLite failures.
  Result<std::set<std::string>> Review(const std::string& server, const std::string& prefix,
                                       const nlohmann::json& tools);

  // Approves one tool by its exposed name (or SERVER__TOOL: the server's name, two
  // underscores, the upstream name): a changed or new tool's current definition becomes its pin;
  // a removed tool's pin is forgotten (should it come back, it is new). Approving a pinned tool
  // changes nothing. Returns the tool as it was before. Errors: no such tool.
  Result<PinnedTool> Approve(const std::string& name, const std::string& who);
  // Approves every changed, new and removed tool of `server`: its current manifest becomes the
  // pinned one. Returns the tools it approved (empty when nothing was waiting). Errors: no
  // manifest was ever pinned for `server`.
  Result<std::vector<PinnedTool>> ApproveServer(const std::string& server, const std::string& who);

  // Every tool (of `server` only, when not empty), by server then exposed name.
  Result<std::vector<PinnedTool>> List(const std::string& server = "");

  // A number that changes whenever an approval is committed (by any process): the gateway
  // reviews its upstreams' manifests again when it changes, so approved tools appear without a
  // restart. This store's own approvals show at once; another process's within
  // kGenerationFresh (the file is read at most that often).
  Result<int64_t> ApprovalGeneration();
  static constexpr std::chrono::milliseconds kGenerationFresh{100};

 private:
  PinStore(DatabaseOptions options, Db db) : options_(std::move(options)), db_(std::move(db)) {}
  Result<std::vector<PinnedTool>> Select(const std::string& where, const std::string& a,
                                         const std::string& b);
  Status ApproveRow(const PinnedTool& tool, const std::string& who, const std::string& now);
  Status BumpGeneration();
  Result<int64_t> ReadGeneration();  // under mu_

  DatabaseOptions options_;
  std::mutex mu_;  // one transaction at a time on db_
  Db db_;
  Stmt generation_stmt_;  // ReadGeneration's, once prepared (finalized before db_ closes)
  // When the generation was last read and what it was (under mu_); reset by this store's own
  // approvals.
  std::optional<std::pair<std::chrono::steady_clock::time_point, int64_t>> generation_read_;
};

}  // namespace warden::state
