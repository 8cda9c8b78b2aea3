// The trifecta's pure half (trifecta.h; design: docs/trifecta.md).
#include "policy/trifecta.h"

#include <algorithm>
#include <unordered_set>

namespace warden::policy {
namespace {

using nlohmann::json;

constexpr uint64_t kBase = 0x100000001b3ULL;  // odd: the rolling hash's multiplier

uint64_t Mix(uint64_t x) {  // splitmix64's finaliser: spreads the polynomial hash's bits
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

uint64_t Power(uint64_t base, size_t n) {
  uint64_t out = 1;
  while (n-- > 0) out *= base;
  return out;
}

// The polynomial hash of `n` bytes, as the rolling window computes it.
uint64_t Poly(std::string_view bytes) {
  uint64_t h = 0;
  for (unsigned char c : bytes) h = h * kBase + c + 1;
  return h;
}

uint64_t GramKey(uint64_t poly) { return Mix(poly ^ 0x6772616d00000000ULL); }
uint64_t ShortKey(uint64_t poly, size_t length) {
  return Mix(poly ^ (static_cast<uint64_t>(length) << 56) ^ 0x73686f7274ULL);
}

// Rolls a window of `width` bytes over `text`, calling `each(poly)` for every full window.
template <class F>
void Roll(std::string_view text, size_t width, F each) {
  if (width == 0 || text.size() < width) return;
  const uint64_t top = Power(kBase, width - 1);
  uint64_t h = Poly(text.substr(0, width));
  each(h);
  for (size_t i = width; i < text.size(); ++i) {
    h -= (static_cast<unsigned char>(text[i - width]) + 1ULL) * top;
    h = h * kBase + static_cast<unsigned char>(text[i]) + 1;
    each(h);
  }
}

size_t Digits(std::string_view text) {
  return static_cast<size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }));
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(char c) {  // ASCII only, without the locale lookup std::isalnum makes
  return IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// "2026-12-03...", "10:30...": dates and times are everywhere; as short values they would match
// every message that mentions the same day.
bool LooksLikeDateOrTime(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  if (text.size() >= 10 && IsDigit(text[0]) && IsDigit(text[1]) && IsDigit(text[2]) &&
      IsDigit(text[3]) && (text[4] == '-' || text[4] == '/' || text[4] == '.') &&
      IsDigit(text[5]) && IsDigit(text[6]))
    return true;
  return text.size() >= 5 && IsDigit(text[0]) && IsDigit(text[1]) && text[2] == ':' &&
         IsDigit(text[3]) && IsDigit(text[4]);
}

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

uint64_t TokenHash(std::string_view token) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a, then mixed
  for (unsigned char c : token) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return Mix(h ^ 0x746f6bULL);
}

bool IsDelimiter(char c) {
  switch (c) {
    case ' ':
    case '\t':
    case '\r':
    case '\n':
    case '<':
    case '>':
    case '(':
    case ')':
    case '[':
    case ']':
    case '{':
    case '}':
    case '"':
    case '\'':
    case '`':
    case ',':
    case ';':
    case '|':
    case '\\':
      return true;
    default:
      return false;
  }
}

bool IsTrailing(char c) { return c == '.' || c == ':' || c == '!' || c == '?' || c == '*'; }

// The host of "scheme://[user@]host[:port]/..." or of "host.tld/path"; "" when it has none.
std::string_view HostOf(std::string_view token) {
  size_t scheme = token.find("://");
  std::string_view rest = scheme == std::string_view::npos ? token : token.substr(scheme + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (size_t at = rest.rfind('@'); at != std::string_view::npos) {
    if (scheme == std::string_view::npos) return "";  // an e-mail address, not a host
    rest.remove_prefix(at + 1);
  }
  if (!rest.empty() && rest.front() != '[') rest = rest.substr(0, rest.find(':'));
  if (scheme == std::string_view::npos && rest.find('.') == std::string_view::npos) return "";
  if (rest.size() == token.size()) return "";  // the token is the host already
  return rest;
}

void AddToken(std::string token, std::vector<uint64_t>* out) {
  while (!token.empty() && IsTrailing(token.back())) token.pop_back();
  while (!token.empty() && IsTrailing(token.front())) token.erase(token.begin());
  if (token.starts_with("mailto:")) token.erase(0, 7);
  if (token.size() < 3) return;
  out->push_back(TokenHash(token));
  // "#channel" and "@handle" name what an argument names without the sign.
  if ((token.front() == '#' || token.front() == '@') && token.size() > 3)
    out->push_back(TokenHash(std::string_view(token).substr(1)));
  std::string_view host = HostOf(token);
  if (!host.empty()) out->push_back(TokenHash(host));
}

// Runs of letter-and-digit groups separated by one space, hyphen or dot, as account and phone
// numbers are written for people ("DE89 3704 0044", "GB33 BUKB 2020", "+1 415-555-0100"),
// joined as they are typed for machines. A run starts at a group with a digit and goes on through
// groups with digits and short upper-case letter groups (an IBAN's bank code); every prefix of at
// least two groups that ends in a digit group and holds six digits is a token.
void AddDigitRuns(std::string_view text, std::vector<uint64_t>* out) {
  std::string joined;
  int groups = 0;
  size_t digits = 0;
  auto reset = [&] {
    joined.clear();
    groups = 0;
    digits = 0;
  };
  size_t i = 0;
  while (i <= text.size()) {
    size_t start = i;
    while (i < text.size() && IsAlnum(text[i])) ++i;
    std::string_view group = text.substr(start, i - start);
    const size_t d = Digits(group);
    const bool letters_only_upper =
        d == 0 && !group.empty() && group.size() <= 4 &&
        std::all_of(group.begin(), group.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
    if (group.empty() || (d == 0 && !(letters_only_upper && groups > 0))) {
      reset();
    } else {
      for (char c : group) joined += Lower(c);
      ++groups;
      digits += d;
      if (d > 0 && groups >= 2 && digits >= 6) out->push_back(TokenHash(joined));
    }
    const bool separator = i < text.size() && (text[i] == ' ' || text[i] == '-' || text[i] == '.');
    const bool continues = separator && i + 1 < text.size() && IsAlnum(text[i + 1]);
    if (!continues) reset();
    ++i;  // past the separator (or whatever ended the group)
  }
}

std::string Trimmed(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  std::string out;
  out.reserve(text.size());
  for (char c : text) out += Lower(c);
  return out;
}

std::string SourceText(const FlowSource& s) {
  if (s.call == 0) return s.tool + " (still running)";
  return "#" + std::to_string(s.call) + " " + s.tool;
}

std::string SourcesText(const std::vector<FlowSource>& sources, uint64_t count) {
  std::string out;
  for (const FlowSource& s : sources) out += (out.empty() ? "" : ", ") + SourceText(s);
  if (count > sources.size()) out += " and " + std::to_string(count - sources.size()) + " more";
  return out;
}

std::string Short(const std::string& text) {
  return text.size() <= 80 ? text : text.substr(0, 77) + "...";
}

Effect Stronger(Effect a, Effect b) {
  auto rank = [](Effect e) { return e == Effect::kDeny ? 2 : e == Effect::kAsk ? 1 : 0; };
  return rank(a) >= rank(b) ? a : b;
}

// The values every pattern reaches, as (pointer text, string) pairs; numbers as text.
std::vector<std::pair<std::string, std::string>> Reached(const std::vector<JsonPattern>& patterns,
                                                         const json& root) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const JsonPattern& p : patterns) {
    p.Visit(root, [&](const json& v) {
      VisitStrings(
          v, [&](const std::string& s) { out.emplace_back(p.text(), s); }, true);
    });
  }
  return out;
}

}  // namespace

std::string NormaliseForPrints(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x80 || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
      out += c;
    } else if (c >= 'A' && c <= 'Z') {
      out += Lower(c);
    }
  }
  return out;
}

std::vector<uint64_t> PrivatePrints(std::string_view text) {
  std::vector<uint64_t> out;
  const std::string n = NormaliseForPrints(text);
  if (n.size() >= kShortValueMin && n.size() < kPrintGram && Digits(n) >= kShortValueDigits &&
      !LooksLikeDateOrTime(text)) {
    out.push_back(ShortKey(Poly(n), n.size()));
    return out;
  }
  if (n.size() < kPrintGram) return out;
  std::vector<uint64_t> grams;
  grams.reserve(n.size() - kPrintGram + 1);
  Roll(n, kPrintGram, [&](uint64_t h) { grams.push_back(GramKey(h)); });
  // Winnowing: in every window of kPrintWinnow consecutive grams keep the minimum (the rightmost
  // one on ties), recording it once per position.
  const size_t w = std::min(kPrintWinnow, grams.size());
  size_t kept = SIZE_MAX;
  for (size_t end = w; end <= grams.size(); ++end) {
    size_t best = end - w;
    for (size_t i = end - w; i < end; ++i)
      if (grams[i] <= grams[best]) best = i;
    if (best != kept) {
      out.push_back(grams[best]);
      kept = best;
    }
  }
  return out;
}

std::vector<uint64_t> DestinationTokens(std::string_view text) {
  std::vector<uint64_t> out;
  std::string token;
  for (char c : text) {
    if (IsDelimiter(c)) {
      if (!token.empty()) AddToken(std::move(token), &out);
      token.clear();
    } else {
      token += Lower(c);
    }
  }
  if (!token.empty()) AddToken(std::move(token), &out);
  AddDigitRuns(text, &out);
  return out;
}

std::vector<uint64_t> DestinationKeys(std::string_view value) {
  std::vector<uint64_t> out;
  std::string v = Trimmed(value);
  if (v.starts_with("mailto:")) v.erase(0, 7);
  while (!v.empty() && IsTrailing(v.back())) v.pop_back();
  if (v.empty()) return out;
  out.push_back(TokenHash(v));
  if ((v.front() == '#' || v.front() == '@') && v.size() > 1)
    out.push_back(TokenHash(std::string_view(v).substr(1)));
  std::string_view host = HostOf(v);
  if (!host.empty()) out.push_back(TokenHash(host));
  AddDigitRuns(v, &out);
  return out;
}

// ---- FlowState ----

uint32_t FlowState::Intern(const FlowSource& source) {
  if (!callers_.empty() && callers_.back() == source)
    return static_cast<uint32_t>(callers_.size() - 1);
  callers_.push_back(source);
  return static_cast<uint32_t>(callers_.size() - 1);
}

void FlowState::Add(const FlowFacts& facts) {
  if (facts.empty()) return;
  legs_ |= facts.legs;
  for (Label leg : {kUntrustedOutput, kPrivateOutput}) {
    if (!(facts.legs & leg)) continue;
    size_t i = LegIndex(leg);
    ++source_counts_[i];
    if (sources_[i].size() < kMaxLegSources) sources_[i].push_back(facts.source);
  }
  const uint32_t who = Intern(facts.source);
  for (uint64_t h : facts.prints) {
    if (prints_.size() >= kMaxPrints) break;
    prints_.emplace(h, who);
  }
  for (uint64_t t : facts.untrusted_tokens) {
    if (untrusted_.size() >= kMaxTokens) break;
    untrusted_.emplace(t, who);
  }
  for (uint64_t t : facts.trusted_tokens) {
    if (trusted_.size() >= kMaxTokens) break;
    trusted_.emplace(t, true);
  }
}

const std::vector<FlowSource>& FlowState::sources(Label leg) const {
  return sources_[LegIndex(leg)];
}
uint64_t FlowState::source_count(Label leg) const { return source_counts_[LegIndex(leg)]; }

std::optional<FlowSource> FlowState::FindPrivate(std::string_view n) const {
  if (prints_.empty()) return std::nullopt;
  std::optional<FlowSource> found;
  Roll(n, kPrintGram, [&](uint64_t h) {
    if (found) return;
    auto it = prints_.find(GramKey(h));
    if (it != prints_.end()) found = callers_[it->second];
  });
  for (size_t width = kShortValueMin; width < kPrintGram && !found; ++width) {
    Roll(n, width, [&](uint64_t h) {
      if (found) return;
      auto it = prints_.find(ShortKey(h, width));
      if (it != prints_.end()) found = callers_[it->second];
    });
  }
  return found;
}

std::optional<FlowSource> FlowState::SeenUntrusted(uint64_t token) const {
  auto it = untrusted_.find(token);
  if (it == untrusted_.end()) return std::nullopt;
  return callers_[it->second];
}

bool FlowState::SeenTrusted(uint64_t token) const { return trusted_.contains(token); }

// ---- FlowView ----

LabelSet FlowView::legs() const {
  LabelSet out = 0;
  for (const FlowState* s : states_) out |= s->legs();
  return out;
}

std::vector<FlowSource> FlowView::sources(Label leg) const {
  std::vector<FlowSource> out;
  for (const FlowState* s : states_)
    for (const FlowSource& source : s->sources(leg))
      if (std::find(out.begin(), out.end(), source) == out.end()) out.push_back(source);
  return out;
}

uint64_t FlowView::source_count(Label leg) const {
  // A call kept under both keys is one call: the larger count, never fewer than are named.
  uint64_t n = 0;
  for (const FlowState* s : states_) n = std::max(n, s->source_count(leg));
  return std::max<uint64_t>(n, sources(leg).size());
}

std::optional<FlowSource> FlowView::FindPrivate(std::string_view normalised) const {
  for (const FlowState* s : states_)
    if (auto found = s->FindPrivate(normalised)) return found;
  return std::nullopt;
}

std::optional<FlowSource> FlowView::SeenUntrusted(uint64_t token) const {
  for (const FlowState* s : states_)
    if (auto found = s->SeenUntrusted(token)) return found;
  return std::nullopt;
}

bool FlowView::SeenTrusted(uint64_t token) const {
  for (const FlowState* s : states_)
    if (s->SeenTrusted(token)) return true;
  return false;
}

size_t FlowView::print_count() const {
  size_t n = 0;
  for (const FlowState* s : states_) n += s->print_count();
  return n;
}

// ---- settings and labels ----

TrifectaSettings SettingsFor(const TrifectaSection& section, std::string_view tenant,
                             std::string_view agent, std::string_view tool) {
  TrifectaSettings s{section.effect, section.fingerprints};
  for (const TrifectaOverride& o : section.overrides) {
    if (!o.tenant.empty() && o.tenant != tenant) continue;
    if (!o.agent.empty() && o.agent != agent) continue;
    if (o.tool && !o.tool->Matches(tool)) continue;
    if (o.effect) s.effect = *o.effect;
    if (o.fingerprints) s.fingerprints = *o.fingerprints;
  }
  return s;
}

LabelSet CallLabels(const std::vector<std::string>& decision_labels, std::string_view tool,
                    bool sandbox_has_egress) {
  LabelSet labels = LabelSetOf(decision_labels);
  if (tool == "web__fetch") labels |= kUntrustedOutput | kExternalSend;
  if (tool == "sandbox__exec") {
    labels |= kUntrustedOutput;
    if (sandbox_has_egress) labels |= kExternalSend;
  }
  return labels;
}

namespace {
bool ProfileHasEgress(const Policy& policy, const std::string& profile) {
  const std::string name = profile.empty() ? std::string("default") : profile;
  auto it = policy.sandbox.profiles.find(name);
  return it != policy.sandbox.profiles.end() && it->second.net == sandbox::NetMode::kProxy;
}
}  // namespace

LabelSet IntrinsicLabels(const Policy& policy, std::string_view tool, std::string_view server,
                         const std::string& sandbox_profile) {
  if (tool == "web__fetch" || tool == "sandbox__exec")
    return CallLabels({}, tool,
                      tool == "sandbox__exec" && ProfileHasEgress(policy, sandbox_profile));
  auto egress = [&](const Upstream& up) {
    return !up.command.empty() &&
           (!up.sandbox_allow.empty() || ProfileHasEgress(policy, up.sandbox_profile));
  };
  if (!server.empty()) {
    auto up = policy.upstreams.find(server);
    return up != policy.upstreams.end() && egress(up->second) ? kExternalSend : 0;
  }
  // No server given (tools/list, `policy test`): the upstream whose prefix the name carries, or
  // the one without a prefix, without allocating.
  for (const auto& [name, up] : policy.upstreams) {
    const std::string& p = up.prefix;
    const bool mine = p.empty() ? tool.find("__") == std::string_view::npos
                                : tool.size() > p.size() + 2 && tool.starts_with(p) &&
                                      tool.substr(p.size(), 2) == "__";
    if (mine && egress(up)) return kExternalSend;
  }
  return 0;
}

// ---- absorbing a result ----

json ResultValue(const json& r) {
  if (!r.is_object()) return r;
  if (auto it = r.find("structuredContent"); it != r.end() && !it->is_null()) return *it;
  std::string text;
  if (auto it = r.find("content"); it != r.end() && it->is_array()) {
    for (const json& part : *it) {
      if (!part.is_object()) continue;
      if (auto t = part.find("text"); t != part.end() && t->is_string())
        text += (text.empty() ? "" : "\n") + t->get<std::string>();
      // A resource embedded in the result is content too.
      if (auto res = part.find("resource"); res != part.end() && res->is_object()) {
        if (auto t = res->find("text"); t != res->end() && t->is_string())
          text += (text.empty() ? "" : "\n") + t->get<std::string>();
      }
    }
  } else if (auto c = r.find("contents"); c != r.end() && c->is_array()) {
    for (const json& part : *c)  // a ReadResourceResult
      if (part.is_object())
        if (auto t = part.find("text"); t != part.end() && t->is_string())
          text += (text.empty() ? "" : "\n") + t->get<std::string>();
  } else {
    return r;  // not a CallToolResult: the value itself
  }
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_discarded() && (parsed.is_object() || parsed.is_array())) return parsed;
  return text;
}

FlowFacts Absorb(const FlowSpec* flow, LabelSet labels, const json& arguments,
                 const json& call_result, FlowSource source) {
  FlowFacts facts;
  facts.source = std::move(source);
  const json value = ResultValue(call_result);
  const bool structured = value.is_object() || value.is_array();
  static const std::vector<JsonPattern> kNone;
  const std::vector<JsonPattern>& u_parts = flow ? flow->untrusted_parts : kNone;
  const std::vector<JsonPattern>& p_parts = flow ? flow->private_parts : kNone;
  const bool untrusted = (labels & kUntrustedOutput) || !u_parts.empty();
  const bool private_data = (labels & kPrivateOutput) || !p_parts.empty();
  // Field lists on a result that is not JSON cannot be applied: the label covers all of it.
  const bool u_whole = untrusted && (u_parts.empty() || !structured);
  const bool p_whole = private_data && (p_parts.empty() || !structured);

  auto non_empty = [](const json& v) {
    if (v.is_string()) return !v.get_ref<const std::string&>().empty();
    return !(v.is_null() || ((v.is_array() || v.is_object()) && v.empty()));
  };
  // The call's own arguments: a result that repeats them vouches for nothing.
  std::vector<uint64_t> own;
  VisitStrings(
      arguments,
      [&](const std::string& s) {
        for (uint64_t t : DestinationTokens(s)) own.push_back(t);
      },
      true);
  std::sort(own.begin(), own.end());
  auto add_tokens = [&](const std::string& s, bool trusted) {
    for (uint64_t t : DestinationTokens(s)) {
      if (trusted) {
        if (!std::binary_search(own.begin(), own.end(), t)) facts.trusted_tokens.push_back(t);
      } else {
        facts.untrusted_tokens.push_back(t);
      }
    }
  };

  if (untrusted) {
    bool any = false;
    if (u_whole) {
      any = non_empty(value);
      VisitStrings(
          value, [&](const std::string& s) { add_tokens(s, false); }, true);
    } else {
      for (const JsonPattern& p : u_parts) {
        if (p.ReachesSomething(value)) any = true;
        p.Visit(value, [&](const json& v) {
          VisitStrings(
              v, [&](const std::string& s) { add_tokens(s, false); }, true);
        });
      }
      JsonPattern::VisitOutside(value, u_parts, [&](const json& v) {
        VisitStrings(
            v, [&](const std::string& s) { add_tokens(s, true); }, true);
      });
    }
    if (any) facts.legs |= kUntrustedOutput;
  } else {
    VisitStrings(
        value, [&](const std::string& s) { add_tokens(s, true); }, true);
  }

  if (private_data) {
    bool any = false;
    auto add_prints = [&](const std::string& s) {
      for (uint64_t h : PrivatePrints(s)) facts.prints.push_back(h);
    };
    if (p_whole) {
      any = non_empty(value);
      VisitStrings(value, add_prints, true);
    } else {
      for (const JsonPattern& p : p_parts) {
        if (p.ReachesSomething(value)) any = true;
        p.Visit(value, [&](const json& v) { VisitStrings(v, add_prints, true); });
      }
    }
    if (any) facts.legs |= kPrivateOutput;
  }
  auto dedupe = [](std::vector<uint64_t>& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  };
  dedupe(facts.untrusted_tokens);
  dedupe(facts.trusted_tokens);
  // A session keeps no more than the bounds: neither does one call's facts.
  if (facts.untrusted_tokens.size() > kMaxTokens) facts.untrusted_tokens.resize(kMaxTokens);
  if (facts.trusted_tokens.size() > kMaxTokens) facts.trusted_tokens.resize(kMaxTokens);
  // Prints keep their order of first appearance (the bound keeps the earliest), without repeats.
  {
    std::unordered_set<uint64_t> seen;
    seen.reserve(facts.prints.size());
    size_t kept = 0;
    for (uint64_t h : facts.prints)
      if (seen.insert(h).second) facts.prints[kept++] = h;
    facts.prints.resize(kept);
  }
  if (facts.prints.size() > kMaxPrints) facts.prints.resize(kMaxPrints);
  return facts;
}

// ---- the decision ----

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX sequences decoded (and '+' as a space): how data rides in a URL's query or a form body.
std::string PercentDecoded(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      int hi = HexValue(text[i + 1]), lo = HexValue(text[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += text[i] == '+' ? ' ' : text[i];
  }
  return out;
}

// What a URL destination carries besides where it goes: its path, query and fragment.
std::string_view UrlPayload(std::string_view value) {
  size_t scheme = value.find("://");
  if (scheme == std::string_view::npos) return {};
  size_t rest = value.find_first_of("/?#", scheme + 3);
  return rest == std::string_view::npos ? std::string_view() : value.substr(rest);
}

}  // namespace

std::optional<FlowSource> CarriesPrivate(const FlowView& state, std::string_view text) {
  if (auto found = state.FindPrivate(NormaliseForPrints(text))) return found;
  // Percent-encoding would hide the data from the normalised text ("%3A" leaves "3a" in it).
  if (text.find('%') != std::string_view::npos)
    return state.FindPrivate(NormaliseForPrints(PercentDecoded(text)));
  return std::nullopt;
}

namespace {

// One line per leg held, naming the calls that brought it (finished ones, then one running).
std::vector<std::string> LegLines(const FlowView& state, const InFlightLegs& in_flight) {
  const LabelSet held = state.legs() | in_flight.legs;
  auto leg_text = [&](Label leg) {
    std::vector<FlowSource> sources = state.sources(leg);
    uint64_t count = state.source_count(leg);
    const std::optional<FlowSource>& running =
        leg == kUntrustedOutput ? in_flight.untrusted : in_flight.private_data;
    if ((in_flight.legs & leg) && running) {
      sources.push_back(*running);
      ++count;
    }
    return SourcesText(sources, count);
  };
  std::vector<std::string> lines;
  if (held & kUntrustedOutput) lines.push_back("untrusted content from " + leg_text(kUntrustedOutput));
  if (held & kPrivateOutput) lines.push_back("private data from " + leg_text(kPrivateOutput));
  return lines;
}

}  // namespace

TrifectaCheck CheckCall(const FlowView& state, const InFlightLegs& in_flight,
                        const TrifectaSettings& settings, const FlowSpec* flow, LabelSet labels,
                        const json& arguments) {
  TrifectaCheck out;
  if (!(labels & kExternalSend)) return out;
  const LabelSet held = state.legs() | in_flight.legs;
  out.legs = LegLines(state, in_flight);

  static const std::vector<JsonPattern> kNone;
  const std::vector<JsonPattern>& dests = flow ? flow->destinations : kNone;
  const std::vector<JsonPattern>& hands = flow ? flow->hands_over : kNone;

  // Destinations and where they were seen.
  std::vector<std::string> injected;  // seen only in untrusted content
  bool all_vouched = !dests.empty();
  size_t destination_values = 0;
  for (const auto& [pointer, value] : Reached(dests, arguments)) {
    ++destination_values;
    std::optional<FlowSource> untrusted_at;
    bool trusted = false;
    for (uint64_t key : DestinationKeys(value)) {
      if (!untrusted_at) untrusted_at = state.SeenUntrusted(key);
      trusted = trusted || state.SeenTrusted(key);
    }
    if (!trusted) all_vouched = false;
    if (untrusted_at && !trusted)
      injected.push_back(pointer + " '" + Short(value) + "' appeared only in untrusted content (" +
                         SourceText(*untrusted_at) + ")");
  }
  if (destination_values == 0) all_vouched = false;

  std::string handed;
  for (const JsonPattern& p : hands)
    if (p.ReachesSomething(arguments)) handed += (handed.empty() ? "" : ", ") + p.text();

  // Fragments of private data in what the call sends (its destinations are checked above).
  std::optional<FlowSource> carried;
  std::string carried_at;
  if (settings.fingerprints && state.print_count() > 0) {
    JsonPattern::VisitOutside(arguments, dests, [&](const json& v) {
      if (carried) return;
      VisitStrings(
          v,
          [&](const std::string& s) {
            if (!carried) carried = CarriesPrivate(state, s);
          },
          true);
    });
    // A URL is a destination by its host, and a carrier by the rest of it.
    for (const auto& [pointer, value] : Reached(dests, arguments)) {
      if (carried) break;
      std::string_view payload = UrlPayload(value);
      if (!payload.empty()) carried = CarriesPrivate(state, payload);
    }
    if (carried) carried_at = "an argument carries private data from " + SourceText(*carried);
  }

  std::vector<std::string> why;
  auto fire = [&](Effect effect, const char* rule, std::string reason) {
    if (out.rule.empty() || Stronger(effect, out.effect) != out.effect) out.rule = rule;
    out.effect = Stronger(out.effect, effect);
    why.push_back(std::move(reason));
  };

  if ((held & kUntrustedOutput) && (held & kPrivateOutput)) {
    const bool clean = all_vouched && handed.empty() && settings.fingerprints && !carried;
    if (!clean) {
      std::string reason = "this call can send data out while the session holds " + out.legs[0] +
                           " and " + out.legs[1];
      if (!dests.empty() && !all_vouched)
        reason += "; not every destination was vouched for by a trusted result";
      if (!handed.empty()) reason += "; it hands over stored objects (" + handed + ")";
      if (carried) reason += "; " + carried_at;
      if (!settings.fingerprints && !dests.empty())
        reason += "; fingerprints are off, so what it sends cannot be checked";
      fire(settings.effect, "trifecta", std::move(reason));
    }
  }
  if (!injected.empty()) {
    std::string reason = "destination " + injected[0];
    for (size_t i = 1; i < injected.size(); ++i) reason += "; " + injected[i];
    fire(Effect::kAsk, "trifecta.provenance", std::move(reason));
  }
  if (out.effect == Effect::kAllow) {
    out.legs.clear();
    return out;
  }
  for (const std::string& w : why) out.reason += (out.reason.empty() ? "" : "; ") + w;
  return out;
}

TrifectaCheck CheckSandboxEgress(const FlowView& state, const InFlightLegs& in_flight,
                                 const TrifectaSettings& settings, bool approved,
                                 std::string_view destination,
                                 const std::vector<std::string_view>& parts) {
  TrifectaCheck out;
  const LabelSet held = state.legs() | in_flight.legs;
  if (!((held & kUntrustedOutput) && (held & kPrivateOutput))) return out;
  std::optional<FlowSource> carried;
  if (settings.fingerprints && state.print_count() > 0) {
    for (std::string_view part : parts) {
      if (!part.empty() && (carried = CarriesPrivate(state, part))) break;
    }
  }
  if (approved && !carried) return out;  // a person let this code send while both legs were held
  out.effect = settings.effect;
  out.rule = "trifecta";
  out.legs = LegLines(state, in_flight);
  if (approved) {
    out.reason = "the sandbox's code sends private data from " + SourceText(*carried) + " to " +
                 std::string(destination) +
                 " (the call was approved to send, not to send that)";
  } else {
    out.reason = "the sandbox's code sends to " + std::string(destination) +
                 " while the session holds " + out.legs[0] + " and " + out.legs[1];
    if (carried) out.reason += "; the request carries private data from " + SourceText(*carried);
  }
  return out;
}

}  // namespace warden::policy
