#include "policy/credential_template.h"

#include <algorithm>

namespace warden::policy {

namespace {

std::vector<std::string> Names(const Template& t, TemplatePart::Kind kind) {
  std::vector<std::string> out;
  for (const TemplatePart& p : t.parts) {
    if (p.kind == kind && std::find(out.begin(), out.end(), p.text) == out.end()) {
      out.push_back(p.text);
    }
  }
  return out;
}

void AppendLiteral(Template& t, std::string_view text) {
  if (text.empty()) return;
  if (!t.parts.empty() && t.parts.back().kind == TemplatePart::kLiteral) {
    t.parts.back().text += text;
  } else {
    t.parts.push_back({TemplatePart::kLiteral, std::string(text)});
  }
}

// An upstream name as the policy allows it: letters, digits, '-' and '_'.
bool ValidUpstreamName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  });
}

Status Reference(Template& t, std::string_view inner) {
  const size_t colon = inner.find(':');
  if (colon == std::string_view::npos) {
    return Status::Error("'{" + std::string(inner) +
                         "}' is not a reference: write {secret:NAME} or {token:UPSTREAM} (a "
                         "literal brace is {{ or }})");
  }
  const std::string_view kind = inner.substr(0, colon);
  const std::string_view name = inner.substr(colon + 1);
  if (kind == "secret") {
    if (!ValidSecretName(name)) {
      return Status::Error("'{" + std::string(inner) +
                           "}': a secret name is 1 to 64 of letters, digits, '_', '.' and '-', "
                           "starting with a letter or digit");
    }
    t.parts.push_back({TemplatePart::kSecret, std::string(name)});
    return Status::Ok();
  }
  if (kind == "token" || kind == "exchange") {
    if (!ValidUpstreamName(name)) {
      return Status::Error("'{" + std::string(inner) + "}': name the upstream the token is for");
    }
    t.parts.push_back(
        {kind == "token" ? TemplatePart::kToken : TemplatePart::kExchange, std::string(name)});
    return Status::Ok();
  }
  return Status::Error("'{" + std::string(inner) + "}': unknown reference kind '" +
                       std::string(kind) + "' (known: secret, token, exchange)");
}

}  // namespace

bool ValidSecretName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (!alnum(name.front())) return false;
  return std::all_of(name.begin(), name.end(),
                     [&](char c) { return alnum(c) || c == '_' || c == '.' || c == '-'; });
}

bool Template::uses_secret() const {
  return std::any_of(parts.begin(), parts.end(),
                     [](const TemplatePart& p) { return p.kind == TemplatePart::kSecret; });
}
bool Template::uses_token() const {
  return std::any_of(parts.begin(), parts.end(), [](const TemplatePart& p) {
    return p.kind == TemplatePart::kToken || p.kind == TemplatePart::kExchange;
  });
}
bool Template::uses_exchange() const {
  return std::any_of(parts.begin(), parts.end(),
                     [](const TemplatePart& p) { return p.kind == TemplatePart::kExchange; });
}
std::vector<std::string> Template::secrets() const { return Names(*this, TemplatePart::kSecret); }
std::vector<std::string> Template::tokens() const {
  std::vector<std::string> out = Names(*this, TemplatePart::kToken);
  for (std::string& name : Names(*this, TemplatePart::kExchange))
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(std::move(name));
  return out;
}

Result<Template> ParseTemplate(std::string_view text) {
  Template t;
  constexpr std::string_view kWhole = "secret:";
  if (text.substr(0, kWhole.size()) == kWhole && text.find('{') == std::string_view::npos) {
    const std::string_view name = text.substr(kWhole.size());
    if (!ValidSecretName(name)) {
      return Status::Error("'" + std::string(text) +
                           "': a secret name is 1 to 64 of letters, digits, '_', '.' and '-', "
                           "starting with a letter or digit");
    }
    t.parts.push_back({TemplatePart::kSecret, std::string(name)});
    return t;
  }
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '{' && i + 1 < text.size() && text[i + 1] == '{') {
      AppendLiteral(t, "{");
      i += 2;
      continue;
    }
    if (c == '}' && i + 1 < text.size() && text[i + 1] == '}') {
      AppendLiteral(t, "}");
      i += 2;
      continue;
    }
    if (c == '}') return Status::Error("a lone '}' (write }} for a literal brace)");
    if (c == '{') {
      const size_t close = text.find('}', i + 1);
      if (close == std::string_view::npos) {
        return Status::Error("'{' is never closed (write {{ for a literal brace)");
      }
      const std::string_view inner = text.substr(i + 1, close - i - 1);
      if (inner.empty())
        return Status::Error("'{}' names nothing: write {secret:NAME} or {token:UPSTREAM}");
      if (inner.find('{') != std::string_view::npos) {
        return Status::Error("'{' inside a reference");
      }
      if (Status s = Reference(t, inner); !s.ok()) return s;
      i = close + 1;
      continue;
    }
    const size_t next = text.find_first_of("{}", i);
    const size_t end = next == std::string_view::npos ? text.size() : next;
    AppendLiteral(t, text.substr(i, end - i));
    i = end;
  }
  return t;
}

}  // namespace warden::policy
