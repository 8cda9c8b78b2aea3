// A strict, bounded JSON Schema validator for tool input schemas (the subset MCP servers publish:
// draft 2020-12 and draft-07 keywords). warden checks a call's arguments against the tool's
// inputSchema before the call reaches an upstream, so the model gets a precise "what was wrong"
// and the upstream never sees arguments its own contract refuses.
//
// Upstream schemas are untrusted input: compiling is linear in the schema's size, and one
// validation stops after a fixed number of steps and a fixed nesting depth, whatever the schema.
// Contract (keywords, limits, messages, what is not checked): docs/json-schema.md.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

#include "common/status.h"

namespace warden::schema {

struct JsonSchemaLimits {
  // Deepest schema nesting Compile accepts, and deepest recursion (subschema applications, $ref
  // included) one validation goes before it stops.
  int max_depth = 64;
  // Steps one Validate may take; a step is one subschema applied to one value (each enum lookup,
  // pattern match and item compared for uniqueItems counts as one more).
  int max_steps = 10000;
  // Subschemas Compile accepts (a hostile schema must not make the gateway allocate without end).
  int max_subschemas = 100000;
};

class JsonSchema {
 public:
  // Compiles `schema` (an object or a boolean) once: regexes, $ref targets, enum sets.
  // Fails when the schema cannot be used: the error names the JSON pointer of the bad keyword
  // and what is wrong ("/properties/name/pattern: invalid regex '(': missing ): ("). Unknown
  // keywords are annotations and ignored; so is `format`. A $ref that is not a local JSON pointer
  // ("#", "#/$defs/x", "#/definitions/x", any "#/...") is accepted and not checked.
  static Result<JsonSchema> Compile(const nlohmann::json& schema, JsonSchemaLimits limits = {});

  // Ok when `value` conforms. Otherwise the error names the first failing place as a JSON pointer
  // into `value` ("/" is the value itself) and what was expected:
  //   "/path: expected a string, got a number"
  //   "/: missing required member 'message'"
  //   "/count: 12 is more than the maximum 10"
  // A validation that runs out of steps or depth fails (never passes) and says so.
  // Thread-safe: one compiled schema may validate on many threads at once.
  Status Validate(const nlohmann::json& value) const;

  struct Compiled;  // defined in json_schema.cc

 private:
  explicit JsonSchema(std::shared_ptr<const Compiled> compiled) : compiled_(std::move(compiled)) {}
  std::shared_ptr<const Compiled> compiled_;
};

// Compiled input schemas by schema text, least recently used evicted first. Thread-safe.
// A schema that fails to compile is cached too (as its error), so a broken upstream schema is
// not recompiled on every call.
class ToolSchemaCache {
 public:
  // `max_entries` schemas and `max_bytes` of schema text at most; a schema whose text alone is
  // over `max_bytes / 4` is compiled for each call and never kept.
  explicit ToolSchemaCache(size_t max_entries = 512, size_t max_bytes = 8u << 20)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}

  // See CheckToolArguments.
  Status Check(const nlohmann::json& tool_definition, const nlohmann::json& arguments);

  size_t size() const;

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const Result<JsonSchema>> schema;
  };
  std::shared_ptr<const Result<JsonSchema>> Lookup(const std::string& key);
  void Insert(const std::string& key, std::shared_ptr<const Result<JsonSchema>> schema);

  const size_t max_entries_, max_bytes_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  size_t bytes_ = 0;
};

// Checks `arguments` (the tools/call params.arguments; null counts as the empty object, since a
// client may omit them) against `tool_definition["inputSchema"]` (a Tool object as tools/list
// gives it). Ok when the definition has no inputSchema. Errors:
//   "invalid arguments: /count: 12 is more than the maximum 10"     (the model can correct it)
//   "the tool's inputSchema is unusable: /properties/x/pattern: ..."  (the upstream's fault)
// Compiled schemas are kept in one process-wide ToolSchemaCache (bounded, thread-safe).
Status CheckToolArguments(const nlohmann::json& tool_definition, const nlohmann::json& arguments);

}  // namespace warden::schema
