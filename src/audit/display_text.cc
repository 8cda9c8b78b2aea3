#include "audit/display_text.h"

#include "audit/entry.h"

namespace warden::audit {

namespace {

struct Range {
  uint32_t first;
  uint32_t last;
};

// Unicode general category Cf (format characters), Unicode 15.1, plus the line and paragraph
// separators (Zl, Zp). C0, DEL and C1 are tested apart.
constexpr Range kFormatCharacters[] = {
    {0x00AD, 0x00AD},    // soft hyphen
    {0x0600, 0x0605},    // Arabic number signs
    {0x061C, 0x061C},    // Arabic letter mark
    {0x06DD, 0x06DD},    // Arabic end of ayah
    {0x070F, 0x070F},    // Syriac abbreviation mark
    {0x0890, 0x0891},    // Arabic pound and piastre marks above
    {0x08E2, 0x08E2},    // Arabic disputed end of ayah
    {0x180E, 0x180E},    // Mongolian vowel separator
    {0x200B, 0x200F},    // zero width space, non-joiner, joiner; LRM, RLM
    {0x2028, 0x202E},    // line and paragraph separators; LRE, RLE, PDF, LRO, RLO
    {0x2060, 0x2064},    // word joiner, invisible operators
    {0x2066, 0x206F},    // LRI, RLI, FSI, PDI; deprecated format characters
    {0xFEFF, 0xFEFF},    // zero width no-break space (BOM)
    {0xFFF9, 0xFFFB},    // interlinear annotation
    {0x110BD, 0x110BD},  // Kaithi number sign
    {0x110CD, 0x110CD},  // Kaithi number sign above
    {0x13430, 0x1343F},  // Egyptian hieroglyph format controls
    {0x1BCA0, 0x1BCA3},  // shorthand format controls
    {0x1D173, 0x1D17A},  // musical symbol format controls
    {0xE0001, 0xE0001},  // language tag
    {0xE0020, 0xE007F},  // tag characters
};

// "\\u" and four lower-case hex digits of a UTF-16 code unit.
void AppendUnit(std::string& out, uint32_t unit) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(unit >> shift) & 0xF];
}

void AppendEscape(std::string& out, uint32_t code_point) {
  if (code_point < 0x10000) {
    AppendUnit(out, code_point);
    return;
  }
  const uint32_t v = code_point - 0x10000;
  AppendUnit(out, 0xD800 + (v >> 10));
  AppendUnit(out, 0xDC00 + (v & 0x3FF));
}

}  // namespace

bool ActsOnDisplay(uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) return true;
  for (const Range& r : kFormatCharacters) {
    if (cp < r.first) return false;  // the table is sorted
    if (cp <= r.last) return true;
  }
  return false;
}

std::string ForDisplay(std::string_view raw, DisplayForm form) {
  const bool as_json = form == DisplayForm::kJson;
  const std::string text = ValidUtf8(raw);  // decoded below as well-formed UTF-8
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const size_t len = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    uint32_t cp = len == 1 ? lead : len == 2 ? lead & 0x1F : len == 3 ? lead & 0x0F : lead & 0x07;
    for (size_t k = 1; k < len && i + k < text.size(); ++k) {
      cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    }
    if (cp == '\n') {
      out += as_json ? "\n" : "\\n";
    } else if (!as_json && cp == '\t') {
      out += "\\t";
    } else if (!as_json && cp == '\\') {
      out += "\\\\";
    } else if (ActsOnDisplay(cp)) {
      AppendEscape(out, cp);
    } else {
      out.append(text, i, len);
    }
    i += len;
  }
  return out;
}

std::string JsonForDisplay(const nlohmann::json& value, int indent) {
  return ForDisplay(value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace),
                    DisplayForm::kJson);
}

void AddDisplayFields(nlohmann::json& object, std::initializer_list<std::string_view> keys) {
  if (!object.is_object()) return;
  for (std::string_view key : keys) {
    const std::string name(key);
    auto it = object.find(name);
    if (it == object.end()) continue;
    if (it->is_string()) {
      object[name + "_display"] = ForDisplay(it->get_ref<const std::string&>());
      continue;
    }
    if (!it->is_array()) continue;
    nlohmann::json shown = nlohmann::json::array();
    for (const nlohmann::json& item : *it) {
      if (item.is_string()) shown.push_back(ForDisplay(item.get_ref<const std::string&>()));
    }
    if (shown.size() == it->size()) object[name + "_display"] = std::move(shown);
  }
}

}  // namespace warden::audit
