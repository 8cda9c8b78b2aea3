// Text an agent wrote (a call's arguments, its tool name), made safe to show a person: what
// would change how the text around it looks, instead of showing itself, becomes a visible
// escape. One rule for every place a person reads a call: `warden approvals`, the console's data,
// the in-band elicitation message, the approval webhook's display fields (docs/approvals.md
// "What people see"). Only ever applied to a copy for display: stored text is never changed.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace warden::audit {

// True for a code point a display acts on instead of showing: C0 and C1 controls and DEL
// (escape sequences, CSI), the line and paragraph separators U+2028 and U+2029, and every
// format character (Unicode general category Cf: the bidirectional embeddings, overrides,
// isolates and marks, zero-width characters, the soft hyphen, tags ...), which can reorder,
// hide or join the text around them ("\u202e0009\u202c" reads "9000").
bool ActsOnDisplay(uint32_t code_point);

enum class DisplayForm {
  // Plain text, shown on one line: newline, tab and backslash also become \n, \t and \\, so the
  // result reads one way only.
  kText,
  // JSON text as nlohmann's dump writes it (strings already escaped, raw newlines only for
  // indentation, which stay): the result is JSON for the same value.
  kJson,
};

// `raw` for display: each code point ActsOnDisplay names becomes a JSON-style escape, \u202e
// (one above U+FFFF as its UTF-16 surrogate pair, \udb40\udc01, so that kJson stays JSON);
// each invalid UTF-8 sequence becomes U+FFFD. Everything else (é, 日本, emoji) is unchanged.
std::string ForDisplay(std::string_view raw, DisplayForm form = DisplayForm::kText);

// A JSON value (a call's arguments) pretty-printed with `indent` spaces for display:
// ForDisplay(value.dump(indent), kJson). What the console, the webhook and the in-band message
// show of the arguments.
std::string JsonForDisplay(const nlohmann::json& value, int indent = 2);

// For each of `keys` that `object` holds as a string, or an array of strings, adds KEY_display:
// the same through ForDisplay (kText). The raw fields stay, unchanged, for machines; a page shows
// only the _display ones. Other keys and values are left alone.
void AddDisplayFields(nlohmann::json& object, std::initializer_list<std::string_view> keys);

}  // namespace warden::audit
