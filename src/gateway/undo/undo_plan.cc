#include "gateway/undo/undo_plan.h"

#include <string_view>

namespace warden::gateway {

using nlohmann::json;

namespace {

constexpr std::string_view kUndoArgsRoot = "$args";
constexpr std::string_view kUndoResultRoot = "$result";

// When `text` is a whole reference: which document ("$args" or "$result") and the pointer.
bool SplitUndoReference(const std::string& text, std::string_view& root, std::string& pointer) {
  for (std::string_view prefix : {kUndoArgsRoot, kUndoResultRoot}) {
    if (text.size() < prefix.size() || text.compare(0, prefix.size(), prefix) != 0) continue;
    std::string rest = text.substr(prefix.size());
    if (!rest.empty() && rest[0] != '/') continue;  // "$argsX" is plain text
    root = prefix;
    pointer = std::move(rest);
    return true;
  }
  return false;
}

// The value at `pointer` in `document`, or an error naming the reference.
Result<json> LookUpUndoReference(const json& document, const std::string& pointer,
                                 const std::string& text) {
  // json_pointer throws on bad syntax and on indexes that are not numbers: contained here.
  try {
    json::json_pointer ptr(pointer);
    if (!document.is_null() && document.contains(ptr)) return document.at(ptr);
  } catch (const json::exception& e) {
    return Status::Error("'" + text + "' is not a valid JSON pointer reference: " + e.what());
  }
  return Status::Error("'" + text + "' finds nothing");
}

Result<json> ResolveUndoValue(const json& value, const json& arguments,
                              const json& result_document) {
  if (value.is_object()) {
    json out = json::object();
    for (const auto& [key, item] : value.items()) {
      auto resolved = ResolveUndoValue(item, arguments, result_document);
      if (!resolved) return resolved.status();
      out[key] = std::move(*resolved);
    }
    return out;
  }
  if (value.is_array()) {
    json out = json::array();
    for (const json& item : value) {
      auto resolved = ResolveUndoValue(item, arguments, result_document);
      if (!resolved) return resolved.status();
      out.push_back(std::move(*resolved));
    }
    return out;
  }
  if (!value.is_string()) return value;
  const std::string& text = value.get_ref<const std::string&>();
  std::string_view root;
  std::string pointer;
  if (!SplitUndoReference(text, root, pointer)) return value;
  if (root == kUndoResultRoot && result_document.is_null())
    return Status::Error("'" + text +
                         "' finds nothing: the result has no structuredContent and its first "
                         "text content is not JSON");
  return LookUpUndoReference(root == kUndoArgsRoot ? arguments : result_document, pointer, text);
}

}  // namespace

json UndoResultDocument(const json& call_tool_result) {
  if (!call_tool_result.is_object()) return nullptr;
  auto structured = call_tool_result.find("structuredContent");
  if (structured != call_tool_result.end() && !structured->is_null()) return *structured;
  auto content = call_tool_result.find("content");
  if (content == call_tool_result.end() || !content->is_array()) return nullptr;
  for (const json& part : *content) {
    if (!part.is_object() || part.value("type", "") != "text") continue;
    auto text = part.find("text");
    if (text == part.end() || !text->is_string()) return nullptr;
    json parsed = json::parse(text->get_ref<const std::string&>(), nullptr, false);
    return parsed.is_discarded() ? json(nullptr) : parsed;
  }
  return nullptr;
}

Result<json> ResolveUndoArguments(const json& undo_args, const json& arguments,
                                  const json& result_document) {
  return ResolveUndoValue(undo_args.is_null() ? json::object() : undo_args, arguments,
                          result_document);
}

UndoPlan PlanUndo(const policy::Undo& undo, const json& arguments, const json& result) {
  UndoPlan plan;
  plan.tool = undo.tool;
  auto resolved = ResolveUndoArguments(undo.args, arguments, UndoResultDocument(result));
  if (!resolved) {
    plan.reason =
        "the compensating call " + undo.tool + " cannot be made: " + resolved.status().message();
    return plan;
  }
  if (!resolved->is_object()) {
    plan.reason = "the compensating call " + undo.tool + "'s arguments are not a JSON object";
    return plan;
  }
  plan.available = true;
  plan.arguments = std::move(*resolved);
  return plan;
}

}  // namespace warden::gateway
