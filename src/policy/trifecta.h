// The lethal trifecta as pure functions (docs/trifecta.md): what a session has been exposed to
// (untrusted content, private data), which calls brought it in, what private data looks like
// (fingerprints) and where destinations came from (provenance); and the decision for a call that
// would send something out. No I/O, no locks, no clocks: the gateway keeps one FlowState per
// session (or task, or caller), under its own lock, and persists what Absorb adds.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "policy/model.h"
#include "policy/policy.h"

namespace warden::policy {

// ---- fingerprints of private data ----
// Text is normalised before hashing: ASCII letters lowered, ASCII characters that are not letters
// or digits dropped, other bytes (UTF-8 of other scripts) kept. So "Acct: 4111-1111 1111" and
// "acct41111111111" are the same text.
std::string NormaliseForPrints(std::string_view text);

inline constexpr size_t kPrintGram = 24;        // bytes of normalised text per rolling hash
inline constexpr size_t kPrintWinnow = 8;       // one hash kept per this many consecutive grams
inline constexpr size_t kShortValueMin = 10;    // a whole short string value (an account number,
                                                // an id) is remembered when its normalised form is
inline constexpr size_t kShortValueDigits = 6;  // this long or longer and holds this many digits
// Any run of normalised text this long that is in both a private result and an outbound argument
// is found (winnowing keeps the leftmost-minimum hash of every kPrintWinnow consecutive grams).
inline constexpr size_t kPrintGuarantee = kPrintGram + kPrintWinnow - 1;

// The hashes kept for one private text: winnowed kPrintGram-grams, and the whole text's hash when
// it is a short value (tagged by length so that it only matches text of its own length).
std::vector<uint64_t> PrivatePrints(std::string_view text);

// ---- destinations: where a value came from ----
// Destination-like tokens of a text: words split at white space and at <>()[]{}"'`,;|\, with
// trailing .:!? trimmed, lowered; "mailto:" dropped; for a URL (or a bare host with a dot) also
// its host; runs of digit groups ("DE89 3704 0044", "+1 415-555-0100") joined without the
// separators. Hashed: provenance keeps hashes, never the text.
std::vector<uint64_t> DestinationTokens(std::string_view text);
// The hashes a destination argument is looked up by: the value lowered and trimmed, without
// "mailto:"; a URL's host; a digit-group run without its separators.
std::vector<uint64_t> DestinationKeys(std::string_view value);

// ---- the session's state ----
// A call that brought something in: its audit entry id (0 when not known yet) and tool.
struct FlowSource {
  uint64_t call = 0;
  std::string tool;
  bool operator==(const FlowSource&) const = default;
};

// What one finished call added (Absorb's output, and the unit the store persists).
struct FlowFacts {
  FlowSource source;
  LabelSet legs = 0;                       // kUntrustedOutput and/or kPrivateOutput
  std::vector<uint64_t> prints;            // of its private parts
  std::vector<uint64_t> untrusted_tokens;  // destination tokens of its untrusted parts
  std::vector<uint64_t> trusted_tokens;    // of its trusted parts, less its own arguments' tokens
  bool empty() const {
    return legs == 0 && prints.empty() && untrusted_tokens.empty() && trusted_tokens.empty();
  }
};

// Bounds per session (docs/trifecta.md, "Memory"): past them, the oldest entries are kept and new
// ones dropped, so a flood cannot push out what an attack planted first; the legs never drop.
inline constexpr size_t kMaxLegSources = 8;  // calls named per leg (the first ones)
inline constexpr size_t kMaxPrints = 32768;  // private-data hashes (256 KiB of keys)
inline constexpr size_t kMaxTokens = 8192;   // destination tokens, each of the two sets

class FlowState {
 public:
  // Adds what one call brought in.
  void Add(const FlowFacts& facts);

  bool holds(LabelSet leg) const { return (legs_ & leg) == leg; }
  LabelSet legs() const { return legs_; }
  // The first calls that brought `leg` (kUntrustedOutput or kPrivateOutput), and how many did.
  const std::vector<FlowSource>& sources(Label leg) const;
  uint64_t source_count(Label leg) const;

  // The private call one of `text`'s grams (or short-value windows) came from, if any.
  std::optional<FlowSource> FindPrivate(std::string_view normalised) const;
  // Where a destination token was seen.
  std::optional<FlowSource> SeenUntrusted(uint64_t token) const;
  bool SeenTrusted(uint64_t token) const;

  size_t print_count() const { return prints_.size(); }
  size_t token_count() const { return untrusted_.size() + trusted_.size(); }

 private:
  static size_t LegIndex(Label leg) { return leg == kUntrustedOutput ? 0 : 1; }
  LabelSet legs_ = 0;
  std::array<std::vector<FlowSource>, 2> sources_;
  std::array<uint64_t, 2> source_counts_{0, 0};
  std::vector<FlowSource> callers_;                   // index -> source, shared by the maps
  std::unordered_map<uint64_t, uint32_t> prints_;     // hash -> index in callers_
  std::unordered_map<uint64_t, uint32_t> untrusted_;  // token -> index in callers_
  std::unordered_map<uint64_t, bool> trusted_;
  uint32_t Intern(const FlowSource& source);
};

// Several states read as one: a call kept under both its MCP session and its task is checked
// against what either has seen (the conservative reading). Holds pointers: the states must
// outlive the view.
class FlowView {
 public:
  FlowView(const FlowState& state) : states_{&state} {}  // NOLINT: one state is a view of itself
  explicit FlowView(std::vector<const FlowState*> states) : states_(std::move(states)) {}

  LabelSet legs() const;
  std::vector<FlowSource> sources(Label leg) const;  // each state's first ones, in order
  uint64_t source_count(Label leg) const;
  std::optional<FlowSource> FindPrivate(std::string_view normalised) const;
  std::optional<FlowSource> SeenUntrusted(uint64_t token) const;
  bool SeenTrusted(uint64_t token) const;
  size_t print_count() const;

 private:
  std::vector<const FlowState*> states_;
};

// ---- settings ----
// trifecta.{effect, fingerprints} after the overrides that match the call.
struct TrifectaSettings {
  Effect effect = Effect::kAsk;  // ask or deny
  bool fingerprints = true;
};
TrifectaSettings SettingsFor(const TrifectaSection& section, std::string_view tenant,
                             std::string_view agent, std::string_view tool);

// ---- calls ----
// The labels a call carries: its rule's (or the default's), plus what a built-in always carries
// whatever the rule says (web__fetch: untrusted_output and external_send; sandbox__exec:
// untrusted_output, and external_send when its profile allows any egress).
LabelSet CallLabels(const std::vector<std::string>& decision_labels, std::string_view tool,
                    bool sandbox_has_egress);

// What a call carries whatever its rule says: web__fetch untrusted_output and external_send;
// sandbox__exec untrusted_output, and external_send when the profile named `sandbox_profile` (""
// for the default) has egress; every tool of a stdio upstream whose sandbox allows egress
// (`sandbox.allow`, or a profile with net: proxy), external_send, since the server itself can
// send what it is given anywhere its sandbox lets it. Decide adds these to a decision's labels,
// and Visible to its hints, so that an agent profile's `never` hides and denies them.
LabelSet IntrinsicLabels(const Policy& policy, std::string_view tool, std::string_view server,
                         const std::string& sandbox_profile);

// What a finished call adds to its session. `result` is the tool's result as the client gets it
// (a CallToolResult: structuredContent when present, else its text parsed as JSON when it
// parses, else the text); `flow` is the deciding rule's (null: none). A labelled part that is
// absent from the result adds nothing (an empty mailbox brings no untrusted leg); a field list
// on a result that is not JSON applies the label to all of it (fail closed).
FlowFacts Absorb(const FlowSpec* flow, LabelSet labels, const nlohmann::json& arguments,
                 const nlohmann::json& result, FlowSource source);
// The value Absorb reads out of a CallToolResult (the rule above).
nlohmann::json ResultValue(const nlohmann::json& call_tool_result);

// Legs held by calls still running, with the call that brings each (they count as held).
struct InFlightLegs {
  LabelSet legs = 0;
  std::optional<FlowSource> untrusted, private_data;  // a running call that brings each
};

// The trifecta's verdict on one call about to run.
struct TrifectaCheck {
  Effect effect = Effect::kAllow;  // allow: the trifecta has nothing against it
  std::string rule;                // "trifecta" or "trifecta.provenance"
  std::string reason;              // one line naming the calls behind each leg
  std::vector<std::string> legs;   // one line per leg held, for the approver and the audit entry
};

// Decides a call with `labels` (CallLabels) and `arguments` against the session's state, the
// calls in flight and the settings. In order:
//  * provenance: a destination argument (flow->destinations) whose value was seen in untrusted
//    content and never in a trusted part: at least ask, even with no private leg;
//  * the trifecta: external_send while untrusted and private are both held (or in flight): the
//    settings' effect, unless it is a clean send: every destination vouched for by a trusted part,
//    nothing handed over by id, and fingerprints on and no fragment of a private result in the
//    arguments (fingerprints are what make a send to a trusted address safe: the reply to an
//    attacker's mail goes to the attacker, and must not carry the user's invoices).
// The strongest wins (deny over ask).
TrifectaCheck CheckCall(const FlowView& state, const InFlightLegs& in_flight,
                        const TrifectaSettings& settings, const FlowSpec* flow, LabelSet labels,
                        const nlohmann::json& arguments);

// A text for the egress path: whether it carries private data of the session (fingerprints on).
std::optional<FlowSource> CarriesPrivate(const FlowView& state, std::string_view text);

// One connection or plain HTTP request that the code of a running sandbox__exec makes, past its
// profile's allow-list (docs/trifecta.md, "Sandbox egress"): `destination` is "host:port",
// `parts` what the request carries (its URL, header lines and body start; nothing for a tunnel,
// whose bytes are not looked at). With untrusted and private both held (or in flight), the
// settings' effect; but when a person approved the call under the trifecta (`approved`), only a
// request carrying a fragment of private data (fingerprints on) is stopped. No leg or one: allow
// (the allow-list is what says where the sandbox may go).
TrifectaCheck CheckSandboxEgress(const FlowView& state, const InFlightLegs& in_flight,
                                 const TrifectaSettings& settings, bool approved,
                                 std::string_view destination,
                                 const std::vector<std::string_view>& parts);

}  // namespace warden::policy
