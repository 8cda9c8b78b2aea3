// libFuzzer entry point for the trifecta's handling of tool results and arguments (trifecta.h).
// An upstream's result is written by whoever controls that server, or by whoever wrote the web
// page or mail it returns: Absorb and CheckCall run on it for every call. Invariants, beyond not
// crashing, throwing or reading out of bounds:
//   * Absorb's facts stay within the bounds (kMaxPrints, kMaxTokens) and carry only the legs the
//     call's labels allow;
//   * every private string of the input is then found again by CarriesPrivate when it is long
//     enough to be fingerprinted (kPrintGram normalised bytes);
//   * CheckCall is deterministic, and never allows a send while both legs are held unless the
//     rule declares destinations.
// The input is a JSON value when it parses (used as the result's structured content and as a
// send's arguments), else text. Seed corpus: tests/fuzz/corpus/trifecta/.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "policy/trifecta.h"

namespace {

using namespace warden::policy;
using nlohmann::json;

JsonPattern Pattern(const char* text) { return *JsonPattern::Parse(text); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  json value = json::parse(input, nullptr, /*allow_exceptions=*/false);
  const bool structured = !value.is_discarded();
  json result = structured ? json{{"structuredContent", value}}
                           : json{{"content", {{{"type", "text"}, {"text", input}}}}};
  FlowSpec read;
  read.untrusted_parts = {Pattern("/body"), Pattern("/messages/*/body"), Pattern("/*/text")};
  read.private_parts = {Pattern("")};
  FlowSpec send;
  send.destinations = {Pattern("/to"), Pattern("/to/*"), Pattern("/url")};
  send.hands_over = {Pattern("/attachment_ids/*")};

  FlowFacts facts =
      Absorb(&read, kUntrustedOutput | kPrivateOutput, json::object(), result, {1, "mail__read"});
  FUZZ_CHECK(facts.prints.size() <= kMaxPrints);
  FUZZ_CHECK(facts.untrusted_tokens.size() <= kMaxTokens);
  FUZZ_CHECK(facts.trusted_tokens.size() <= kMaxTokens);
  FUZZ_CHECK((facts.legs & ~(kUntrustedOutput | kPrivateOutput)) == 0);
  FlowFacts none = Absorb(nullptr, 0, json::object(), result, {2, "plain"});
  FUZZ_CHECK(none.legs == 0 && none.prints.empty() && none.untrusted_tokens.empty());

  FlowState state;
  state.Add(facts);
  FUZZ_CHECK(state.print_count() <= kMaxPrints);
  // What was fingerprinted is found again (while the bound did not cut it short).
  if (facts.prints.size() < kMaxPrints / 2) {
    json private_value = ResultValue(result);
    VisitStrings(private_value, [&](const std::string& s) {
      if (NormaliseForPrints(s).size() >= kPrintGram) FUZZ_CHECK(CarriesPrivate(state, s));
    });
  }

  const json args = structured && value.is_object() ? value : json{{"body", input}};
  const TrifectaSettings settings{Effect::kAsk, true};
  TrifectaCheck a = CheckCall(state, {}, settings, &send, kExternalSend, args);
  TrifectaCheck b = CheckCall(state, {}, settings, &send, kExternalSend, args);
  FUZZ_CHECK(a.effect == b.effect && a.reason == b.reason && a.rule == b.rule);
  if (state.holds(kUntrustedOutput | kPrivateOutput)) {
    // Without destinations no send is clean.
    FUZZ_CHECK(CheckCall(state, {}, settings, nullptr, kExternalSend, args).effect == Effect::kAsk);
  }
  (void)DestinationTokens(input);
  (void)DestinationKeys(input);
  (void)PrivatePrints(input);
  return 0;
}
