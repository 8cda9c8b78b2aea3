#include "mcp/jsonrpc.h"

#include <cstdint>
#include <limits>
#include <map>
#include <utility>

namespace warden::mcp {

using nlohmann::json;

Id Id::Unsigned(std::uint64_t n) {
  Id id;
  if (n <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    id.v_ = static_cast<std::int64_t>(n);
  } else {
    id.v_ = n;
  }
  return id;
}

json Id::ToJson() const {
  return std::visit([](const auto& v) { return json(v); }, v_);
}

std::string Id::ToString() const {
  return ToJson().dump(-1, ' ', false, json::error_handler_t::replace);
}

bool ParseResult::ok() const {
  for (const auto& e : entries) {
    if (!std::holds_alternative<Message>(e)) return false;
  }
  return !entries.empty();
}

ErrorResponse MakeError(std::optional<Id> id, int code, std::string message) {
  return ErrorResponse{std::move(id), code, std::move(message), std::nullopt};
}

namespace {

// Builds the DOM like nlohmann's own parser, but stops at the depth limit (before allocating the
// deeper levels) and notes keys given twice, per top-level entry of a batch.
class BoundedDomBuilder {
 public:
  explicit BoundedDomBuilder(std::size_t max_depth) : max_depth_(max_depth) {}

  bool null() { return Put(nullptr) != nullptr; }
  bool boolean(bool b) { return Put(b) != nullptr; }
  bool number_integer(json::number_integer_t n) { return Put(n) != nullptr; }
  bool number_unsigned(json::number_unsigned_t n) { return Put(n) != nullptr; }
  bool number_float(json::number_float_t d, const std::string& /*text*/) {
    return Put(d) != nullptr;
  }
  bool string(std::string& s) { return Put(std::move(s)) != nullptr; }
  bool binary(json::binary_t& b) { return Put(json::binary(std::move(b))) != nullptr; }
  bool start_object(std::size_t /*size*/) { return Open(json::object()); }
  bool end_object() { return Close(); }
  bool start_array(std::size_t /*size*/) { return Open(json::array()); }
  bool end_array() { return Close(); }
  bool key(std::string& k) {
    json* object = stack_.back();
    if (object->contains(k)) NoteDuplicate(k);
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                   const json::exception& ex) {
    std::string what = ex.what();
    // Drop nlohmann's "[json.exception.parse_error.101] " tag; keep the human part.
    if (auto close = what.find("] ");
        what.rfind("[json.exception", 0) == 0 && close != std::string::npos) {
      what.erase(0, close + 2);
    }
    error_ = std::move(what);
    return false;
  }

  void Fail(std::string why) { error_ = std::move(why); }
  json& root() { return root_; }
  bool too_deep() const { return too_deep_; }
  const std::string& error() const { return error_; }
  // Duplicate key in the root object itself (or anywhere in a non-array root).
  const std::optional<std::string>& root_duplicate() const { return root_duplicate_; }
  // For an array root: entry index -> first duplicated key in that entry.
  const std::map<std::size_t, std::string>& entry_duplicates() const { return entry_duplicates_; }

 private:
  json* Put(json value) {
    if (stack_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    json* parent = stack_.back();
    if (parent->is_array()) {
      parent->push_back(std::move(value));
      return &parent->back();
    }
    json& slot = (*parent)[key_];
    slot = std::move(value);
    return &slot;
  }
  // Pointers on the stack stay valid: an open container is always the last thing added to its
  // parent, and nothing is added to the parent until it closes.
  bool Open(json container) {
    if (stack_.size() >= max_depth_) {
      too_deep_ = true;
      return false;
    }
    stack_.push_back(Put(std::move(container)));
    return true;
  }
  bool Close() {
    stack_.pop_back();
    return true;
  }
  void NoteDuplicate(const std::string& k) {
    if (root_.is_array() && stack_.size() >= 2) {
      entry_duplicates_.emplace(root_.size() - 1, k);
    } else if (!root_duplicate_) {
      root_duplicate_ = k;
    }
  }

  std::size_t max_depth_;
  json root_;
  std::vector<json*> stack_;
  std::string key_;
  bool too_deep_ = false;
  std::string error_;
  std::optional<std::string> root_duplicate_;
  std::map<std::size_t, std::string> entry_duplicates_;
};

ErrorResponse Invalid(std::optional<Id> id, std::string why) {
  return MakeError(std::move(id), kInvalidRequest, "Invalid Request: " + std::move(why));
}

// Reads an id; on failure returns nullopt and says why.
std::optional<Id> ReadId(const json& v, std::string* why) {
  switch (v.type()) {
    case json::value_t::string:
      return Id(v.get<std::string>());
    case json::value_t::number_integer:
      return Id(v.get<std::int64_t>());
    case json::value_t::number_unsigned:
      return Id::Unsigned(v.get<std::uint64_t>());
    case json::value_t::number_float:
      *why =
          "id must be an integer or a string, got a number with a fraction, an exponent or more "
          "than 64 bits";
      return std::nullopt;
    default:
      *why = std::string("id must be a string or an integer, got ") + v.type_name();
      return std::nullopt;
  }
}

ParsedEntry ReadErrorMember(std::optional<Id> id, const json& error) {
  if (!error.is_object()) {
    return Invalid(id, std::string("error must be an object, got ") + error.type_name());
  }
  auto code = error.find("code");
  if (code == error.end() || !code->is_number_integer()) {
    return Invalid(id, "error.code must be an integer");
  }
  if (code->is_number_unsigned() ? code->get<std::uint64_t>() > std::numeric_limits<int>::max()
                                 : (code->get<std::int64_t>() < std::numeric_limits<int>::min() ||
                                    code->get<std::int64_t>() > std::numeric_limits<int>::max())) {
    return Invalid(id, "error.code does not fit in 32 bits");
  }
  auto message = error.find("message");
  if (message == error.end() || !message->is_string()) {
    return Invalid(id, "error.message must be a string");
  }
  ErrorResponse e{std::move(id), code->get<int>(), message->get<std::string>(), std::nullopt};
  if (auto data = error.find("data"); data != error.end()) e.data = *data;
  return Message(std::move(e));
}

// Turns one JSON value (a whole message or one batch entry) into a message or the error for it.
ParsedEntry Classify(const json& v, const std::optional<std::string>& duplicate_key) {
  if (!v.is_object()) {
    return Invalid(std::nullopt,
                   std::string("a message must be a JSON object, got ") + v.type_name());
  }
  // Read the id first so that every later error can echo it when it is valid.
  auto id_it = v.find("id");
  const bool has_id = id_it != v.end();
  std::string id_problem;
  std::optional<Id> id;
  if (has_id && !id_it->is_null()) id = ReadId(*id_it, &id_problem);

  if (duplicate_key) {
    // With "id" given twice there is no one id to echo.
    return Invalid(*duplicate_key == "id" ? std::nullopt : id,
                   "key \"" + *duplicate_key + "\" appears more than once");
  }
  auto version = v.find("jsonrpc");
  if (version == v.end()) return Invalid(id, "jsonrpc member missing; it must be \"2.0\"");
  if (!version->is_string() || version->get_ref<const std::string&>() != "2.0") {
    return Invalid(id, "jsonrpc must be the string \"2.0\", got " +
                           version->dump(-1, ' ', false, json::error_handler_t::replace));
  }
  if (!id_problem.empty()) return Invalid(std::nullopt, id_problem);

  auto method = v.find("method");
  auto result = v.find("result");
  auto error = v.find("error");
  const bool has_result = result != v.end();
  const bool has_error = error != v.end();

  if (method != v.end()) {
    if (has_result || has_error)
      return Invalid(id, "a message cannot have both method and result or error");
    if (!method->is_string())
      return Invalid(id, std::string("method must be a string, got ") + method->type_name());
    if (method->get_ref<const std::string&>().empty())
      return Invalid(id, "method must not be empty");
    std::optional<json> params;
    if (auto p = v.find("params"); p != v.end()) {
      if (!p->is_object() && !p->is_array()) {
        return Invalid(id,
                       std::string("params must be an object or an array, got ") + p->type_name());
      }
      params = *p;
    }
    if (!has_id) return Message(Notification{method->get<std::string>(), std::move(params)});
    if (!id) return Invalid(std::nullopt, "id must not be null in a request (MCP)");
    return Message(Request{*id, method->get<std::string>(), std::move(params)});
  }
  if (has_result && has_error) return Invalid(id, "a response cannot have both result and error");
  if (has_result) {
    if (!has_id) return Invalid(std::nullopt, "a response needs an id");
    if (!id) return Invalid(std::nullopt, "a successful response cannot have a null id");
    return Message(Response{*id, *result});
  }
  if (has_error) {
    if (!has_id) return Invalid(std::nullopt, "an error response needs an id (null when unknown)");
    return ReadErrorMember(id, *error);
  }
  return Invalid(id, "a message needs a method, a result or an error");
}

}  // namespace

ParseResult Parse(std::string_view text, const ParseOptions& options) {
  ParseResult out;
  if (text.size() > options.max_bytes) {
    out.entries.push_back(Invalid(std::nullopt, "message is " + std::to_string(text.size()) +
                                                    " bytes, more than the limit of " +
                                                    std::to_string(options.max_bytes)));
    return out;
  }
  // nlohmann's lexer takes a NUL byte for the end of input, so "{...}\0junk" would parse as the
  // object alone. A raw NUL is never valid JSON text: refuse it outright.
  if (text.find('\0') != std::string_view::npos) {
    out.entries.push_back(
        MakeError(std::nullopt, kParseError, "Parse error: NUL byte in the text"));
    return out;
  }
  BoundedDomBuilder builder(options.max_depth);
  bool parsed = false;
  try {
    parsed = json::sax_parse(text.data(), text.data() + text.size(), &builder);
  } catch (const std::exception& ex) {  // defensive: the builder itself does not throw by design
    builder.Fail(ex.what());
    parsed = false;
  }
  if (!parsed) {
    if (builder.too_deep()) {
      out.entries.push_back(Invalid(
          std::nullopt, "nesting deeper than " + std::to_string(options.max_depth) + " levels"));
    } else {
      out.entries.push_back(
          MakeError(std::nullopt, kParseError, "Parse error: " + builder.error()));
    }
    return out;
  }
  json& root = builder.root();
  if (!root.is_array()) {
    out.entries.push_back(Classify(root, builder.root_duplicate()));
    return out;
  }
  if (!options.allow_batch) {
    out.entries.push_back(
        Invalid(std::nullopt, "batches are not allowed in this protocol version"));
    return out;
  }
  if (root.empty()) {
    out.entries.push_back(Invalid(std::nullopt, "empty batch"));
    return out;
  }
  out.is_batch = true;
  out.entries.reserve(root.size());
  const auto& dups = builder.entry_duplicates();
  for (std::size_t i = 0; i < root.size(); ++i) {
    std::optional<std::string> dup;
    if (auto it = dups.find(i); it != dups.end()) dup = it->second;
    out.entries.push_back(Classify(root[i], dup));
  }
  return out;
}

namespace {

json Envelope() { return json{{"jsonrpc", "2.0"}}; }

json ToJsonImpl(const Request& r) {
  json j = Envelope();
  j["id"] = r.id.ToJson();
  j["method"] = r.method;
  if (r.params) j["params"] = *r.params;
  return j;
}
json ToJsonImpl(const Notification& n) {
  json j = Envelope();
  j["method"] = n.method;
  if (n.params) j["params"] = *n.params;
  return j;
}
json ToJsonImpl(const Response& r) {
  json j = Envelope();
  j["id"] = r.id.ToJson();
  j["result"] = r.result;
  return j;
}
json ToJsonImpl(const ErrorResponse& e) {
  json j = Envelope();
  j["id"] = e.id ? e.id->ToJson() : json(nullptr);
  json error{{"code", e.code}, {"message", e.message}};
  if (e.data) error["data"] = *e.data;
  j["error"] = std::move(error);
  return j;
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

json ToJson(const Message& message) {
  return std::visit([](const auto& m) { return ToJsonImpl(m); }, message);
}

std::string Serialize(const Message& message) { return Dump(ToJson(message)); }

std::string SerializeBatch(std::span<const Message> messages) {
  json array = json::array();
  for (const auto& m : messages) array.push_back(ToJson(m));
  return Dump(array);
}

}  // namespace warden::mcp
