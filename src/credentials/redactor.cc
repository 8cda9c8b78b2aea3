#include "credentials/redactor.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <set>
#include <utility>

#include "audit/redact.h"
#include "common/base64.h"

namespace warden::credentials {
namespace {

using nlohmann::json;

// A stream holds back at least this much when a shape is still open at the end of what it has
// (a PEM block whose END line has not arrived): a 4096-bit RSA key is about 3.3 KB of PEM, so
// 8 KB covers every private key block in practice without buffering output without bound.
constexpr size_t kShapeHold = 8192;

// A stable base64 core shorter than this would match unrelated base64 too often.
constexpr size_t kMinBase64Core = 8;

constexpr const char* kBase64Std = kBase64Alphabet;
constexpr const char* kBase64Url = kBase64UrlAlphabet;

unsigned char Byte(char c) { return static_cast<unsigned char>(c); }

// Base64 of `bytes` without padding: the last character carries zero bits for the missing ones.
std::string Base64(std::string_view bytes, const char* alphabet) {
  return Base64NoPad(bytes, alphabet);
}

// The characters of the base64 encoding of `value` that do not depend on what surrounds it, when
// it starts `offset` bytes (0 to 2) into a 3-byte group: the value's bits start at bit 8 * offset
// of the encoding, and only characters whose 6 bits all fall inside the value are kept. Empty
// when fewer than kMinBase64Core characters are left.
std::string Base64Core(std::string_view value, size_t offset, const char* alphabet) {
  std::string data(offset, '\0');
  data.append(value);
  std::string encoded = Base64(data, alphabet);
  size_t first = (8 * offset + 5) / 6;            // first character wholly inside the value
  size_t last = 8 * (offset + value.size()) / 6;  // one past the last such character
  if (last < first || last - first < kMinBase64Core) return "";
  return encoded.substr(first, last - first);
}

constexpr char kHexLower[] = "0123456789abcdef";
constexpr char kHexUpper[] = "0123456789ABCDEF";

std::string Hex(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    out.push_back(kHexLower[Byte(c) >> 4]);
    out.push_back(kHexLower[Byte(c) & 0xf]);
  }
  return out;
}

bool IsUnreserved(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

// RFC 3986 percent-encoding of everything but the unreserved characters; `form` writes a space
// as '+' the way HTML forms (application/x-www-form-urlencoded) do.
std::string PercentEncode(std::string_view bytes, const char* hex, bool form) {
  std::string out;
  for (char c : bytes) {
    if (IsUnreserved(c)) {
      out.push_back(c);
    } else if (form && c == ' ') {
      out.push_back('+');
    } else {
      out.push_back('%');
      out.push_back(hex[Byte(c) >> 4]);
      out.push_back(hex[Byte(c) & 0xf]);
    }
  }
  return out;
}

void AppendU(std::string* out, uint32_t unit) {
  out->append("\\u");
  for (int shift = 12; shift >= 0; shift -= 4) out->push_back(kHexLower[(unit >> shift) & 0xf]);
}

// Decodes one UTF-8 sequence at s[*pos]; false (and *pos unchanged) when it is not well formed.
bool DecodeUtf8(std::string_view s, size_t* pos, uint32_t* code_point) {
  unsigned char lead = Byte(s[*pos]);
  size_t length = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 0;
  if (length == 0 || *pos + length > s.size()) return false;
  uint32_t cp = lead & (0x3f >> (length - 1));
  for (size_t i = 1; i < length; ++i) {
    unsigned char c = Byte(s[*pos + i]);
    if ((c & 0xc0) != 0x80) return false;
    cp = (cp << 6) | (c & 0x3f);
  }
  *pos += length;
  *code_point = cp;
  return true;
}

// How JSON writers commonly escape a string (without its quotes). All write \" \\ and the short
// escapes for control characters, \u00xx for the others. `ascii` also writes every non-ASCII
// character as \uxxxx (Python's json.dumps); `html` also writes < > & as \u003c \u003e \u0026
// (Go's encoding/json). Lower-case hex, as all three do.
std::string JsonEscape(std::string_view s, bool ascii, bool html) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    char c = s[i];
    if (ascii && Byte(c) >= 0x80) {
      uint32_t cp = 0;
      if (DecodeUtf8(s, &i, &cp)) {
        if (cp >= 0x10000) {
          cp -= 0x10000;
          AppendU(&out, 0xd800 + (cp >> 10));
          AppendU(&out, 0xdc00 + (cp & 0x3ff));
        } else {
          AppendU(&out, cp);
        }
        continue;
      }
      out.push_back(c);  // not UTF-8: a writer would refuse or replace it; keep the raw byte
    } else if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t') {
      out.push_back('\\');
      out.push_back(c == '\b' ? 'b' : c == '\f' ? 'f' : c == '\n' ? 'n' : c == '\r' ? 'r' : 't');
    } else if (Byte(c) < 0x20 || (html && (c == '<' || c == '>' || c == '&'))) {
      AppendU(&out, Byte(c));
    } else {
      out.push_back(c);
    }
    ++i;
  }
  return out;
}

// Every form `value` is matched in, without duplicates (most values are plain ASCII, for which
// the escaped and percent-encoded forms are the value itself).
std::vector<std::string> Encodings(std::string_view value) {
  std::vector<std::string> forms;
  auto add = [&](std::string form) {
    if (!form.empty() && std::find(forms.begin(), forms.end(), form) == forms.end())
      forms.push_back(std::move(form));
  };
  add(std::string(value));
  add(JsonEscape(value, false, false));
  add(JsonEscape(value, true, false));
  add(JsonEscape(value, false, true));
  for (size_t offset = 0; offset < 3; ++offset) {
    add(Base64Core(value, offset, kBase64Std));
    add(Base64Core(value, offset, kBase64Url));
  }
  add(PercentEncode(value, kHexUpper, false));
  add(PercentEncode(value, kHexLower, false));
  add(PercentEncode(value, kHexUpper, true));
  add(Hex(value));
  return forms;
}

// One region to replace: [begin, end) and its marker (nullptr for a shape: audit::kRedacted).
struct Match {
  size_t begin;
  size_t end;
  const std::string* marker;
};

// Every known pattern and shape in `text`, sorted by begin, overlapping matches merged into one
// that carries the marker of its first known value (kRedacted when it holds only shapes).
// Touching matches stay apart so that two adjacent values keep their two names. A template only
// so that it can take Redactor's private Pattern without naming it; callers hold Redactor::mu_.
template <typename Pattern>
std::vector<Match> FindMatches(const std::vector<Pattern>& patterns, std::string_view text) {
  std::vector<Match> found;
  if (!patterns.empty()) {
    // Patterns by first byte, each list still longest first, so that a position is tried
    // only against patterns that can start there and the first hit is the longest.
    std::array<std::vector<const Pattern*>, 256> by_first;
    for (const Pattern& p : patterns) by_first[Byte(p.bytes[0])].push_back(&p);
    for (size_t i = 0; i < text.size(); ++i) {
      for (const Pattern* p : by_first[Byte(text[i])]) {
        if (text.substr(i).starts_with(p->bytes)) {
          found.push_back({i, i + p->bytes.size(), &p->marker});
          break;
        }
      }
    }
  }
  for (const audit::TextSpan& span : audit::FindShapes(text))
    found.push_back({span.begin, span.end, nullptr});
  std::stable_sort(found.begin(), found.end(),
                   [](const Match& a, const Match& b) { return a.begin < b.begin; });
  std::vector<Match> merged;
  for (const Match& m : found) {
    if (!merged.empty() && m.begin < merged.back().end) {
      merged.back().end = std::max(merged.back().end, m.end);
      if (merged.back().marker == nullptr) merged.back().marker = m.marker;
    } else {
      merged.push_back(m);
    }
  }
  return merged;
}

// Appends text[from, to) to *out with the matches in it replaced (a match running past `to` is
// cut there: the caller keeps the rest).
void AppendRedacted(std::string_view text, const std::vector<Match>& matches, size_t from,
                    size_t to, std::string* out) {
  size_t copied = from;
  for (const Match& m : matches) {
    if (m.end <= from) continue;
    if (m.begin >= to) break;
    size_t begin = std::max(m.begin, from);
    out->append(text.substr(copied, begin - copied));
    out->append(m.marker != nullptr ? std::string_view(*m.marker) : audit::kRedacted);
    copied = std::min(m.end, to);
  }
  out->append(text.substr(copied, to - copied));
}

template <typename Pattern>
std::string RedactWith(const std::vector<Pattern>& patterns, std::string_view text, bool* changed) {
  std::vector<Match> matches = FindMatches(patterns, text);
  if (changed != nullptr) *changed = !matches.empty();
  if (matches.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  AppendRedacted(text, matches, 0, text.size(), &out);
  return out;
}

template <typename Pattern>
bool RedactJsonWith(const std::vector<Pattern>& patterns, json& value) {
  if (value.is_string()) {
    bool changed = false;
    std::string out = RedactWith(patterns, value.get_ref<const std::string&>(), &changed);
    if (changed) value = std::move(out);
    return changed;
  }
  bool changed = false;
  if (value.is_array()) {
    for (json& element : value) changed |= RedactJsonWith(patterns, element);
    return changed;
  }
  if (!value.is_object()) return false;
  std::vector<std::string> keys;
  bool keys_changed = false;
  for (auto it = value.begin(); it != value.end(); ++it) {
    changed |= RedactJsonWith(patterns, it.value());
    bool key_changed = false;
    keys.push_back(RedactWith(patterns, it.key(), &key_changed));
    keys_changed |= key_changed;
  }
  if (!keys_changed) return changed;
  // Keys are the object's identity, so the object is rebuilt. Two keys that redact alike
  // ("[REDACTED]" twice) must not overwrite each other: later ones get "#2", "#3"...
  json rebuilt = json::object();
  size_t i = 0;
  for (auto it = value.begin(); it != value.end(); ++it, ++i) {
    std::string key = keys[i];
    for (int n = 2; rebuilt.contains(key); ++n) key = keys[i] + "#" + std::to_string(n);
    rebuilt[key] = std::move(it.value());
  }
  value = std::move(rebuilt);
  return true;
}

// Whether a stream may end an emitted piece just before s[pos]: a piece must never end inside
// something a shape rule could still match once the rest arrives, and the rules must see the
// next piece as they would have seen it in the whole text. Every shape is a run of token
// characters that needs at most a non-word character before it, except "Bearer <credential>" /
// "Basic <credential>" (a scheme word, spaces, then the run) and the PEM BEGIN line (words and
// spaces). So a piece may end after a newline, or after a character that is not a token
// character, a space or a tab; or after a space or tab that does not follow a scheme word and is
// not on a line that has a "-----BEGIN" shortly before.
bool SafeCut(std::string_view s, size_t pos) {
  if (pos == 0) return true;
  char c = s[pos - 1];
  if (c == '\n') return true;
  bool token = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               std::string_view("-._~+/=").find(c) != std::string_view::npos;
  if (token) return false;
  if (c != ' ' && c != '\t') return true;
  size_t word_end = pos;
  while (word_end > 0 && (s[word_end - 1] == ' ' || s[word_end - 1] == '\t')) --word_end;
  for (std::string_view scheme : {std::string_view("bearer"), std::string_view("basic")}) {
    if (word_end < scheme.size()) continue;
    std::string_view word = s.substr(word_end - scheme.size(), scheme.size());
    if (std::equal(word.begin(), word.end(), scheme.begin(), [](char a, char b) {
          return (a >= 'A' && a <= 'Z' ? a - 'A' + 'a' : a) == b;
        })) {
      return false;
    }
  }
  // A PEM label ("ENCRYPTED PRIVATE KEY") is short: look back a line's worth of it only.
  constexpr size_t kPemLookBack = 80;
  size_t from = pos > kPemLookBack ? pos - kPemLookBack : 0;
  std::string_view before = s.substr(from, pos - from);
  size_t line = before.rfind('\n');
  if (line != std::string_view::npos) before.remove_prefix(line + 1);
  return before.find("-----BEGIN") == std::string_view::npos;
}

}  // namespace

bool Redactor::Add(const std::string& name, std::string_view value) {
  if (value.size() < kMinValueBytes) return false;
  std::vector<std::string> forms = Encodings(value);
  std::string marker = "[REDACTED:" + name + "]";
  std::lock_guard<std::mutex> lock(mu_);
  bool known = std::any_of(patterns_.begin(), patterns_.end(),
                           [&](const Pattern& p) { return p.value == value; });
  if (known) return true;
  for (std::string& form : forms)
    patterns_.push_back({std::move(form), marker, std::string(value)});
  std::stable_sort(patterns_.begin(), patterns_.end(), [](const Pattern& a, const Pattern& b) {
    return a.bytes.size() > b.bytes.size();
  });
  return true;
}

void Redactor::Remove(std::string_view value) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(patterns_, [&](const Pattern& p) { return p.value == value; });
}

size_t Redactor::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<std::string_view> values;
  for (const Pattern& p : patterns_) values.insert(p.value);
  return values.size();
}

size_t Redactor::longest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return patterns_.empty() ? 0 : patterns_.front().bytes.size();
}

// The lock is held for the whole text rather than copying the patterns: a text is redacted in
// one pass that is cheap next to what produced it, and Add/Remove are rare.
std::string Redactor::RedactText(std::string_view text, bool* changed) const {
  std::lock_guard<std::mutex> lock(mu_);
  return RedactWith(patterns_, text, changed);
}

bool Redactor::RedactJson(nlohmann::json& value) const {
  std::lock_guard<std::mutex> lock(mu_);
  return RedactJsonWith(patterns_, value);
}

// Emits the longest prefix of what is pending that nothing arriving later can change: it ends
// (a) at least longest() - 1 bytes before the end, so every known value that starts in it is
// wholly in view, (b) outside every match, including one still running at the end (a PEM block
// waiting for its END line), and (c) where SafeCut allows. When (b) and (c) would hold back more
// than max(longest() - 1, kShapeHold) bytes, the piece ends there regardless: a match running
// across that point is redacted up to it, and its rest passes unless it matches on its own (a
// PEM block longer than kShapeHold loses its BEGIN line to the first piece, so its tail shows).
std::string StreamRedactor::Feed(std::string_view chunk) {
  pending_.append(chunk);
  std::lock_guard<std::mutex> lock(redactor_.mu_);
  size_t longest = redactor_.patterns_.empty() ? 0 : redactor_.patterns_.front().bytes.size();
  size_t keep = longest > 0 ? longest - 1 : 0;
  size_t size = pending_.size();
  if (size <= keep) return "";
  size_t cap = std::max(keep, kShapeHold);
  size_t floor = size > cap ? size - cap : 0;
  std::vector<Match> matches = FindMatches(redactor_.patterns_, pending_);
  size_t cut = size - keep;
  while (cut > floor) {
    bool moved = false;
    for (const Match& m : matches) {
      if (m.begin < cut && (cut < m.end || m.end == size)) {
        cut = m.begin;
        moved = true;
      }
    }
    if (cut > floor && !SafeCut(pending_, cut)) {
      --cut;
      moved = true;
    }
    if (!moved) break;
  }
  cut = std::max(cut, floor);
  std::string out;
  AppendRedacted(pending_, matches, 0, cut, &out);
  pending_.erase(0, cut);
  return out;
}

std::string StreamRedactor::Finish() {
  std::string out;
  {
    std::lock_guard<std::mutex> lock(redactor_.mu_);
    out = RedactWith(redactor_.patterns_, pending_, nullptr);
  }
  pending_.clear();
  return out;
}

}  // namespace warden::credentials
