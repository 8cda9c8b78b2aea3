#include "audit/entry.h"

#include "audit/sha256.h"

namespace warden::audit {

using nlohmann::json;

const std::string kGenesisHash(64, '0');

std::string_view ToString(EntryKind kind) {
  switch (kind) {
    case EntryKind::kDecision:
      return "decision";
    case EntryKind::kCall:
      return "call";
    case EntryKind::kAdmin:
      return "admin";
  }
  return "decision";
}

Result<EntryKind> ParseEntryKind(std::string_view text) {
  if (text == "decision") return EntryKind::kDecision;
  if (text == "call") return EntryKind::kCall;
  if (text == "admin") return EntryKind::kAdmin;
  return Status::Error("unknown entry kind '" + std::string(text) +
                       "' (expected decision, call or admin)");
}

json ToJson(const AuditEntry& e, bool with_hash) {
  json approvals = json::array();
  for (const Approval& a : e.approvals) {
    approvals.push_back({{"who", a.who}, {"when", a.when}, {"decision", a.decision}});
  }
  json result = nullptr;
  if (e.result) {
    result = {
        {"size", e.result->size}, {"sha256", e.result->sha256}, {"excerpt", e.result->excerpt}};
  }
  json out = {
      {"id", e.id},
      {"time", e.time},
      {"tenant", e.tenant},
      {"user", e.user},
      {"agent", e.agent},
      {"session", e.session},
      {"tool", e.tool},
      {"arguments", e.arguments},
      {"decision", e.decision},
      {"rule", e.rule},
      {"reason", e.reason},
      {"approvals", std::move(approvals)},
      {"result", std::move(result)},
      {"labels", e.labels},
      {"latency_us", e.latency_us},
      {"kind", ToString(e.kind)},
      {"prev_hash", e.prev_hash},
  };
  if (with_hash) out["hash"] = e.hash;
  return out;
}

namespace {

// Reads j[key] into *out when it has the expected JSON type; names the field otherwise.
Status GetString(const json& j, const char* key, std::string* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string())
    return Status::Error(std::string("\"") + key + "\" must be a string");
  *out = it->get<std::string>();
  return Status::Ok();
}

Status GetUnsigned(const json& j, const char* key, uint64_t* out) {
  auto it = j.find(key);
  // nlohmann parses every non-negative integer literal as unsigned.
  if (it == j.end() || !it->is_number_unsigned()) {
    return Status::Error(std::string("\"") + key + "\" must be a non-negative integer");
  }
  *out = it->get<uint64_t>();
  return Status::Ok();
}

Result<std::optional<ResultSummary>> GetResult(const json& j) {
  auto it = j.find("result");
  if (it == j.end()) return Status::Error("\"result\" is missing");
  if (it->is_null()) return std::optional<ResultSummary>();
  if (!it->is_object()) return Status::Error("\"result\" must be an object or null");
  ResultSummary r;
  WARDEN_RETURN_IF_ERROR(GetUnsigned(*it, "size", &r.size).Wrap("result"));
  WARDEN_RETURN_IF_ERROR(GetString(*it, "sha256", &r.sha256).Wrap("result"));
  WARDEN_RETURN_IF_ERROR(GetString(*it, "excerpt", &r.excerpt).Wrap("result"));
  return std::optional<ResultSummary>(std::move(r));
}

Result<std::vector<Approval>> GetApprovals(const json& j) {
  auto it = j.find("approvals");
  if (it == j.end() || !it->is_array()) return Status::Error("\"approvals\" must be an array");
  std::vector<Approval> out;
  for (const json& item : *it) {
    if (!item.is_object()) return Status::Error("\"approvals\" items must be objects");
    Approval a;
    WARDEN_RETURN_IF_ERROR(GetString(item, "who", &a.who).Wrap("approvals"));
    WARDEN_RETURN_IF_ERROR(GetString(item, "when", &a.when).Wrap("approvals"));
    WARDEN_RETURN_IF_ERROR(GetString(item, "decision", &a.decision).Wrap("approvals"));
    out.push_back(std::move(a));
  }
  return out;
}

Result<std::vector<std::string>> GetLabels(const json& j) {
  auto it = j.find("labels");
  if (it == j.end() || !it->is_array()) return Status::Error("\"labels\" must be an array");
  std::vector<std::string> out;
  for (const json& item : *it) {
    if (!item.is_string()) return Status::Error("\"labels\" items must be strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

}  // namespace

Result<AuditEntry> FromJson(const json& j) {
  if (!j.is_object()) return Status::Error("an audit entry must be a JSON object");
  AuditEntry e;
  WARDEN_RETURN_IF_ERROR(GetUnsigned(j, "id", &e.id));
  for (auto [key, field] : {std::pair{"time", &e.time},
                            {"tenant", &e.tenant},
                            {"user", &e.user},
                            {"agent", &e.agent},
                            {"session", &e.session},
                            {"tool", &e.tool},
                            {"decision", &e.decision},
                            {"rule", &e.rule},
                            {"reason", &e.reason},
                            {"prev_hash", &e.prev_hash}}) {
    WARDEN_RETURN_IF_ERROR(GetString(j, key, field));
  }
  auto args = j.find("arguments");
  if (args == j.end()) return Status::Error("\"arguments\" is missing");
  e.arguments = *args;
  auto approvals = GetApprovals(j);
  if (!approvals) return approvals.status();
  e.approvals = std::move(*approvals);
  auto result = GetResult(j);
  if (!result) return result.status();
  e.result = std::move(*result);
  auto labels = GetLabels(j);
  if (!labels) return labels.status();
  e.labels = std::move(*labels);
  WARDEN_RETURN_IF_ERROR(GetUnsigned(j, "latency_us", &e.latency_us));
  std::string kind;
  WARDEN_RETURN_IF_ERROR(GetString(j, "kind", &kind));
  auto parsed_kind = ParseEntryKind(kind);
  if (!parsed_kind) return parsed_kind.status();
  e.kind = *parsed_kind;
  if (j.contains("hash")) WARDEN_RETURN_IF_ERROR(GetString(j, "hash", &e.hash));
  return e;
}

std::string CanonicalJson(const json& j) {
  // nlohmann::json keeps object members in a std::map: keys come out sorted by byte value.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      n = 1, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;  // truncated sequence
    for (size_t k = 1; k <= n; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are invalid.
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

// Appends `s` as a JSON string exactly as nlohmann's dump does (see CanonicalJson): valid
// UTF-8 passes through; '"', '\\' and control characters are escaped.
void AppendQuoted(std::string& out, std::string_view s) {
  if (!IsValidUtf8(s)) {
    out += CanonicalJson(json(std::string(s)));  // nlohmann's own replacement of bad bytes
    return;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 0xf]);
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
}

// Built by hand rather than through ToJson and dump: this runs once per append while the
// store's write lock is held, and the map of a json object costs dozens of allocations.
// Keys in byte order; entry_test checks it against CanonicalJson(ToJson(entry, with_hash)).
std::string Canonical(const AuditEntry& e, bool with_hash, const CanonicalFields& fields) {
  std::string out;
  out.reserve(256 + fields.arguments.size() + fields.approvals.size() + fields.result.size() +
              fields.labels.size());
  auto key = [&](std::string_view k) {
    out.push_back(out.empty() ? '{' : ',');
    AppendQuoted(out, k);
    out.push_back(':');
  };
  auto str = [&](std::string_view k, std::string_view v) {
    key(k);
    AppendQuoted(out, v);
  };
  str("agent", e.agent);
  key("approvals");
  out += fields.approvals;
  key("arguments");
  out += fields.arguments;
  str("decision", e.decision);
  if (with_hash) str("hash", e.hash);
  key("id");
  out += std::to_string(e.id);
  str("kind", ToString(e.kind));
  key("labels");
  out += fields.labels;
  key("latency_us");
  out += std::to_string(e.latency_us);
  str("prev_hash", e.prev_hash);
  str("reason", e.reason);
  key("result");
  out += fields.result;
  str("rule", e.rule);
  str("session", e.session);
  str("tenant", e.tenant);
  str("time", e.time);
  str("tool", e.tool);
  str("user", e.user);
  out.push_back('}');
  return out;
}

}  // namespace

CanonicalFields CanonicalJsonFields(const AuditEntry& e) {
  CanonicalFields f;
  f.arguments = CanonicalJson(e.arguments);
  f.approvals.push_back('[');
  for (size_t i = 0; i < e.approvals.size(); ++i) {
    if (i > 0) f.approvals.push_back(',');
    f.approvals += "{\"decision\":";
    AppendQuoted(f.approvals, e.approvals[i].decision);
    f.approvals += ",\"when\":";
    AppendQuoted(f.approvals, e.approvals[i].when);
    f.approvals += ",\"who\":";
    AppendQuoted(f.approvals, e.approvals[i].who);
    f.approvals.push_back('}');
  }
  f.approvals.push_back(']');
  if (e.result) {
    f.result = "{\"excerpt\":";
    AppendQuoted(f.result, e.result->excerpt);
    f.result += ",\"sha256\":";
    AppendQuoted(f.result, e.result->sha256);
    f.result += ",\"size\":" + std::to_string(e.result->size) + "}";
  } else {
    f.result = "null";
  }
  f.labels.push_back('[');
  for (size_t i = 0; i < e.labels.size(); ++i) {
    if (i > 0) f.labels.push_back(',');
    AppendQuoted(f.labels, e.labels[i]);
  }
  f.labels.push_back(']');
  return f;
}

std::string ValidUtf8(std::string_view text) {
  if (IsValidUtf8(text)) return std::string(text);
  return json::parse(CanonicalJson(json(std::string(text)))).get<std::string>();
}

std::string CanonicalBody(const AuditEntry& entry, const CanonicalFields& fields) {
  return Canonical(entry, false, fields);
}

std::string CanonicalBody(const AuditEntry& entry) {
  return Canonical(entry, false, CanonicalJsonFields(entry));
}

std::string CanonicalLine(const AuditEntry& entry) {
  return Canonical(entry, true, CanonicalJsonFields(entry));
}

std::string ComputeEntryHash(const AuditEntry& entry) {
  return Sha256Hex(entry.prev_hash, CanonicalBody(entry));
}

}  // namespace warden::audit
