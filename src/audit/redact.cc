#include "audit/redact.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <utility>
#include <vector>

namespace warden::audit {
namespace {

using nlohmann::json;

// Secret words as they appear in a normalized key (see IsSecretKey).
constexpr std::array<std::string_view, 10> kKeyWords = {
    "password", "passwd",        "passphrase", "secret",     "token",
    "apikey",   "authorization", "cookie",     "privatekey", "credential"};

// The same words as they appear in free text, before "=" or ":".
constexpr std::array<std::string_view, 13> kTextWords = {
    "password", "passwd",        "passphrase", "secret",      "token",       "api_key",   "api-key",
    "apikey",   "authorization", "cookie",     "private_key", "private-key", "credential"};

using Span = TextSpan;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsUpper(char c) { return c >= 'A' && c <= 'Z'; }
bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
bool IsAlnum(char c) { return IsDigit(c) || IsUpper(c) || IsLower(c); }
bool IsWordChar(char c) { return IsAlnum(c) || c == '_'; }
bool IsUrlSafe64(char c) { return IsAlnum(c) || c == '_' || c == '-'; }
bool IsUpperAlnum(char c) { return IsDigit(c) || IsUpper(c); }
bool IsSlackChar(char c) { return IsAlnum(c) || c == '-'; }
bool IsGithubPatChar(char c) { return IsAlnum(c) || c == '_'; }
// RFC 6750 b64token.
bool IsCredentialChar(char c) {
  return IsAlnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' ||
         c == '=';
}
// Characters of base64, base64url and hex: the alphabets random secrets are written in ('='
// only as padding at the end of a run, so that "name=value" stays two parts).
bool IsEntropyChar(char c) { return IsAlnum(c) || c == '+' || c == '/' || c == '_' || c == '-'; }

template <typename Pred>
size_t RunEnd(std::string_view s, size_t pos, Pred pred) {
  while (pos < s.size() && pred(s[pos])) ++pos;
  return pos;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A token that starts with a fixed prefix at a word boundary and continues with at least
// `min_body` characters accepted by `body`: the whole token is the secret.
template <typename Pred>
void FindPrefixed(std::string_view text, std::string_view prefix, size_t min_body, Pred body,
                  std::vector<Span>* out) {
  for (size_t at = text.find(prefix); at != std::string_view::npos;
       at = text.find(prefix, at + 1)) {
    if (at > 0 && IsWordChar(text[at - 1])) continue;
    size_t end = RunEnd(text, at + prefix.size(), body);
    if (end - at - prefix.size() >= min_body) out->push_back({at, end});
  }
}

void FindSlackTokens(std::string_view text, std::vector<Span>* out) {
  for (size_t at = text.find("xox"); at != std::string_view::npos; at = text.find("xox", at + 1)) {
    if (at > 0 && IsWordChar(text[at - 1])) continue;
    if (at + 5 > text.size() ||
        std::string_view("abposr").find(text[at + 3]) == std::string_view::npos ||
        text[at + 4] != '-') {
      continue;
    }
    size_t end = RunEnd(text, at + 5, IsSlackChar);
    if (end - at - 5 >= 10) out->push_back({at, end});
  }
}

// header.payload.signature, each base64url; the header of every JWT starts with {" = eyJ.
void FindJwts(std::string_view text, std::vector<Span>* out) {
  for (size_t at = text.find("eyJ"); at != std::string_view::npos; at = text.find("eyJ", at + 1)) {
    if (at > 0 && IsWordChar(text[at - 1])) continue;
    size_t header_end = RunEnd(text, at, IsUrlSafe64);
    if (header_end - at < 8 || header_end >= text.size() || text[header_end] != '.') continue;
    size_t payload_end = RunEnd(text, header_end + 1, IsUrlSafe64);
    if (payload_end - header_end - 1 < 4) continue;
    size_t end = payload_end;
    if (end < text.size() && text[end] == '.') end = RunEnd(text, end + 1, IsUrlSafe64);
    out->push_back({at, end});
  }
}

void FindPemPrivateKeys(std::string_view text, std::vector<Span>* out) {
  constexpr std::string_view kBegin = "-----BEGIN ";
  for (size_t at = text.find(kBegin); at != std::string_view::npos;
       at = text.find(kBegin, at + 1)) {
    size_t label_end = text.find("-----", at + kBegin.size());
    if (label_end == std::string_view::npos) continue;
    std::string_view label = text.substr(at + kBegin.size(), label_end - at - kBegin.size());
    if (label.find("PRIVATE KEY") == std::string_view::npos) continue;
    // An unterminated block (a cut excerpt) is redacted to the end of the text.
    size_t end = text.size();
    size_t end_marker = text.find("-----END ", label_end + 5);
    if (end_marker != std::string_view::npos) {
      size_t close = text.find("-----", end_marker + 9);
      if (close != std::string_view::npos) end = close + 5;
    }
    out->push_back({at, end});
    at = end - 1;
  }
}

// "Bearer <credential>" and "Basic <base64>", the HTTP Authorization schemes.
void FindAuthSchemes(std::string_view text, std::string_view lower, std::vector<Span>* out) {
  for (std::string_view scheme : {std::string_view("bearer"), std::string_view("basic")}) {
    for (size_t at = lower.find(scheme); at != std::string_view::npos;
         at = lower.find(scheme, at + 1)) {
      if (at > 0 && IsWordChar(text[at - 1])) continue;
      size_t cred = RunEnd(text, at + scheme.size(), [](char c) { return c == ' ' || c == '\t'; });
      if (cred == at + scheme.size()) continue;
      size_t end = RunEnd(text, cred, IsCredentialChar);
      size_t len = end - cred;
      if (len < 8) continue;
      if (scheme == "basic") {
        // Base64 of user:password: a multiple of 4 long, and not an English word.
        std::string_view c = text.substr(cred, len);
        bool encoded = std::any_of(c.begin(), c.end(), [](char ch) {
          return IsDigit(ch) || IsUpper(ch) || ch == '=' || ch == '+' || ch == '/';
        });
        if (len % 4 != 0 || !encoded) continue;
      }
      out->push_back({cred, end});
    }
  }
}

// scheme://user:password@host: the password.
void FindUrlPasswords(std::string_view text, std::vector<Span>* out) {
  for (size_t at = text.find("://"); at != std::string_view::npos; at = text.find("://", at + 1)) {
    size_t start = at + 3;
    size_t auth_end = start;
    while (auth_end < text.size() &&
           std::string_view("/?#\"' \t\r\n<>").find(text[auth_end]) == std::string_view::npos) {
      ++auth_end;
    }
    std::string_view authority = text.substr(start, auth_end - start);
    size_t at_sign = authority.rfind('@');
    if (at_sign == std::string_view::npos) continue;
    size_t colon = authority.find(':');
    if (colon == std::string_view::npos || colon >= at_sign || colon + 1 == at_sign) continue;
    out->push_back({start + colon + 1, start + at_sign});
  }
}

// password=VALUE, "api_key": "VALUE", Authorization: VALUE ...: the value.
void FindAssignments(std::string_view text, std::string_view lower, std::vector<Span>* out) {
  for (std::string_view word : kTextWords) {
    for (size_t at = lower.find(word); at != std::string_view::npos;
         at = lower.find(word, at + 1)) {
      size_t name_end =
          RunEnd(lower, at + word.size(), [](char c) { return IsWordChar(c) || c == '-'; });
      bool counts_tokens = lower.substr(at, name_end - at).find("tokens") != std::string_view::npos;
      bool header_like = word == "authorization" || word == "cookie";
      size_t pos = name_end;
      if (pos < text.size() && (text[pos] == '"' || text[pos] == '\'')) ++pos;
      pos = RunEnd(text, pos, [](char c) { return c == ' ' || c == '\t'; });
      if (pos >= text.size() || (text[pos] != '=' && text[pos] != ':')) continue;
      char separator = text[pos++];
      if (pos < text.size() && (text[pos] == '=' || text[pos] == '/')) continue;  // ==, ://
      pos = RunEnd(text, pos, [](char c) { return c == ' ' || c == '\t'; });
      if (pos >= text.size()) continue;
      if (text.substr(pos).starts_with(kRedacted)) continue;
      size_t begin = pos, end;
      if (text[pos] == '"' || text[pos] == '\'') {
        begin = pos + 1;
        end = text.find(text[pos], begin);
        if (end == std::string_view::npos) end = text.size();
      } else if (header_like && separator == ':') {
        // A header value runs to the end of its line, or of the quoted string holding it.
        end = text.find_first_of("\r\n\"'", pos);
        if (end == std::string_view::npos) end = text.size();
      } else {
        end = text.find_first_of(" \t\r\n&,;\"'}])<>", pos);
        if (end == std::string_view::npos) end = text.size();
      }
      if (end == begin) continue;
      std::string_view value = text.substr(begin, end - begin);
      if (counts_tokens && std::all_of(value.begin(), value.end(), IsDigit)) continue;
      out->push_back({begin, end});
    }
  }
}

// Shannon entropy of `s` in bits per character.
double Entropy(std::string_view s) {
  std::array<int, 256> counts{};
  for (char c : s) ++counts[static_cast<unsigned char>(c)];
  double bits = 0;
  for (int n : counts) {
    if (n == 0) continue;
    double p = static_cast<double>(n) / static_cast<double>(s.size());
    bits -= p * std::log2(p);
  }
  return bits;
}

constexpr size_t kMinEntropyRun = 32;
// Random base62/base64 text of 32 characters scores about 4.5 to 4.8; hex cannot exceed 4.0
// (so hashes, UUIDs and commit ids stay), and identifiers and prose score lower.
constexpr double kMinEntropyBits = 4.3;

bool LooksRandom(std::string_view run) {
  if (run.size() < kMinEntropyRun) return false;
  int classes = std::any_of(run.begin(), run.end(), IsDigit) +
                std::any_of(run.begin(), run.end(), IsUpper) +
                std::any_of(run.begin(), run.end(), IsLower);
  return classes >= 2 && Entropy(run) >= kMinEntropyBits;
}

void FindHighEntropyRuns(std::string_view text, std::vector<Span>* out) {
  size_t pos = 0;
  while (pos < text.size()) {
    if (!IsEntropyChar(text[pos])) {
      ++pos;
      continue;
    }
    size_t end = RunEnd(text, pos, IsEntropyChar);
    end = RunEnd(text, end, [](char c) { return c == '='; });
    std::string_view run = text.substr(pos, end - pos);
    size_t slashes = static_cast<size_t>(std::count(run.begin(), run.end(), '/'));
    if (slashes * 10 > run.size()) {
      // A path, not base64: judge each segment on its own.
      size_t seg = pos;
      while (seg < end) {
        size_t seg_end = text.find('/', seg);
        if (seg_end == std::string_view::npos || seg_end > end) seg_end = end;
        if (LooksRandom(text.substr(seg, seg_end - seg))) out->push_back({seg, seg_end});
        seg = seg_end + 1;
      }
    } else if (LooksRandom(run)) {
      out->push_back({pos, end});
    }
    pos = end;
  }
}

std::string NormalizeKey(std::string_view key) {
  std::string out;
  out.reserve(key.size());
  for (char c : key) {
    if (c == '_' || c == '-' || c == '.' || c == ' ') continue;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

// Whether a value under a secret key is kept: null, booleans and token counts carry no secret.
bool KeepUnderSecretKey(std::string_view key, const json& value) {
  if (value.is_null() || value.is_boolean()) return true;
  return value.is_number() && NormalizeKey(key).find("tokens") != std::string::npos;
}

// "--password" or "-api-key" as an argv element: the next element is its value.
bool IsSecretFlag(const json& element) {
  if (!element.is_string()) return false;
  const std::string& s = element.get_ref<const std::string&>();
  return s.size() > 1 && s[0] == '-' && s.find('=') == std::string::npos && IsSecretKey(s);
}

// The shapes of credentials, shared by RedactText and RedactShapes. `lower` is `text` lower-cased.
void FindShapeSpans(std::string_view text, std::string_view lower, std::vector<Span>* spans) {
  FindPemPrivateKeys(text, spans);
  FindAuthSchemes(text, lower, spans);
  FindPrefixed(text, "sk-", 20, IsUrlSafe64, spans);
  for (std::string_view p : {"sk_live_", "sk_test_", "rk_live_", "rk_test_"})
    FindPrefixed(text, p, 16, IsAlnum, spans);
  for (std::string_view p : {"AKIA", "ASIA"}) FindPrefixed(text, p, 16, IsUpperAlnum, spans);
  for (std::string_view p : {"ghp_", "gho_", "ghu_", "ghs_", "ghr_"})
    FindPrefixed(text, p, 20, IsAlnum, spans);
  FindPrefixed(text, "github_pat_", 20, IsGithubPatChar, spans);
  FindPrefixed(text, "AIza", 30, IsUrlSafe64, spans);
  FindSlackTokens(text, spans);
  FindJwts(text, spans);
}

// Sorted by begin, with overlapping or touching spans joined: one marker per secret-looking run.
std::vector<Span> MergeSpans(std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin < b.begin; });
  std::vector<Span> merged;
  for (const Span& span : spans) {
    if (!merged.empty() && span.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, span.end);
    } else {
      merged.push_back(span);
    }
  }
  return merged;
}

// `text` with each of the sorted, disjoint `spans` replaced by kRedacted.
std::string Replace(std::string_view text, const std::vector<Span>& spans) {
  if (spans.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t copied = 0;
  for (const Span& span : spans) {
    out.append(text.substr(copied, span.begin - copied));
    out.append(kRedacted);
    copied = span.end;
  }
  out.append(text.substr(copied));
  return out;
}

}  // namespace

bool IsSecretKey(std::string_view key) {
  std::string normalized = NormalizeKey(key);
  return std::any_of(kKeyWords.begin(), kKeyWords.end(),
                     [&](std::string_view w) { return normalized.find(w) != std::string::npos; });
}

std::string RedactText(std::string_view text) {
  std::string lower = Lower(text);
  std::vector<Span> spans;
  FindShapeSpans(text, lower, &spans);
  FindUrlPasswords(text, &spans);
  FindAssignments(text, lower, &spans);
  FindHighEntropyRuns(text, &spans);
  return Replace(text, MergeSpans(std::move(spans)));
}

std::vector<TextSpan> FindShapes(std::string_view text) {
  std::vector<Span> spans;
  FindShapeSpans(text, Lower(text), &spans);
  return MergeSpans(std::move(spans));
}

std::string RedactShapes(std::string_view text, bool* changed) {
  std::vector<Span> spans = FindShapes(text);
  if (changed != nullptr) *changed = !spans.empty();
  return Replace(text, spans);
}

json Redact(const json& value) {
  if (value.is_string()) return RedactText(value.get_ref<const std::string&>());
  if (value.is_array()) {
    json out = json::array();
    bool after_flag = false;
    for (const json& element : value) {
      bool redact = after_flag && (element.is_string() || element.is_number());
      out.push_back(redact ? json(kRedacted) : Redact(element));
      after_flag = IsSecretFlag(element);
    }
    return out;
  }
  if (value.is_object()) {
    bool secret_value = false;
    for (const char* name_key : {"name", "key", "header"}) {
      auto it = value.find(name_key);
      if (it != value.end() && it->is_string() && IsSecretKey(it->get_ref<const std::string&>()))
        secret_value = true;
    }
    json out = json::object();
    for (const auto& [key, member] : value.items()) {
      bool secret = IsSecretKey(key) || (secret_value && key == "value");
      out[key] = secret && !KeepUnderSecretKey(key, member) ? json(kRedacted) : Redact(member);
    }
    return out;
  }
  return value;
}

}  // namespace warden::audit
