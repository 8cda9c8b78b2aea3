// libFuzzer entry point for what /metrics and the JSON call log make of names a caller chooses
// (monitor/metrics.h, monitor/call_log.h): a tenant, agent or tool name is anything a JWT claim
// or a tools/call request may carry. Invariants, beyond not crashing, throwing or reading out of
// bounds:
//   * every line of the exposition is a HELP or TYPE comment of a known family, or a sample
//     `NAME{LABEL="VALUE",...} NUMBER` whose values hold no raw newline, no unescaped quote and
//     no control byte: a value cannot end its label, its line, or start a sample of its own;
//   * the series of a family never pass its limits (per label, and the cap);
//   * a call log line is one line of valid JSON that gives the tool name back (invalid UTF-8
//     replaced).
// The input is split at NUL bytes into up to four names. Seed corpus: tests/fuzz/corpus/metrics/.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "monitor/call_log.h"
#include "monitor/metrics.h"

namespace {

using namespace warden::monitor;

// A label value as the format escapes it: printable bytes other than '"' and '\', or one of the
// escapes \\ \" \n; bytes past ASCII only as valid UTF-8.
bool ValueIsEscaped(std::string_view v) {
  try {
    (void)nlohmann::json(std::string(v)).dump();  // throws on invalid UTF-8
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  for (size_t i = 0; i < v.size(); ++i) {
    const auto c = static_cast<unsigned char>(v[i]);
    if (c < 0x20 || c == 0x7f || c == '"') return false;
    if (c == '\\') {
      if (i + 1 >= v.size()) return false;
      const char next = v[++i];
      if (next != '\\' && next != '"' && next != 'n') return false;
    }
  }
  return true;
}

// NAME{L="V",...} NUMBER, with the values escaped. The value part ends at the first unescaped
// quote, so a forged quote inside a value would end it early and fail what follows.
bool SampleLineIsWellFormed(std::string_view line, std::string_view family) {
  if (!line.starts_with(family)) return false;
  size_t i = family.size();
  while (i < line.size() && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_'))
    ++i;
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (true) {
      size_t eq = line.find("=\"", i);
      if (eq == std::string_view::npos) return false;
      for (size_t k = i; k < eq; ++k)
        if (!std::isalnum(static_cast<unsigned char>(line[k])) && line[k] != '_') return false;
      size_t j = eq + 2;
      while (j < line.size() && line[j] != '"') j += line[j] == '\\' ? 2 : 1;
      if (j >= line.size()) return false;
      if (!ValueIsEscaped(line.substr(eq + 2, j - eq - 2))) return false;
      i = j + 1;
      if (i < line.size() && line[i] == ',') {
        ++i;
        continue;
      }
      if (i >= line.size() || line[i] != '}') return false;
      ++i;
      break;
    }
  }
  if (i >= line.size() || line[i] != ' ') return false;
  std::string_view number = line.substr(i + 1);
  if (number.empty()) return false;
  for (char c : number)
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.' && c != 'e' && c != '-' &&
        c != '+' && c != 'I' && c != 'n' && c != 'f' && c != 'N' && c != 'a')
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> names;
  size_t start = 0;
  while (names.size() < 3) {
    size_t nul = input.find('\0', start);
    if (nul == std::string::npos) break;
    names.push_back(input.substr(start, nul - start));
    start = nul + 1;
  }
  names.push_back(input.substr(start));
  while (names.size() < 4) names.push_back(names.back() + "x");

  Registry registry;
  Family& calls = registry.Add("warden_fuzz_total", "Fuzz \\ help\nline", Type::kCounter,
                               {{"tenant", 2}, {"tool", 3}, {"decision", 0}}, 8);
  Family& times = registry.Add("warden_fuzz_seconds", "T", Type::kHistogram, {{"tool", 2}}, 4);
  for (size_t round = 0; round < 3; ++round) {
    for (size_t i = 0; i < names.size(); ++i) {
      calls.Add({names[i], names[(i + round) % names.size()], "allow"});
      times.Observe({names[(i + 1) % names.size()]}, static_cast<double>(i) * 0.001);
    }
  }
  FUZZ_CHECK(calls.series() <= 8 + 1);  // the cap, then "other" once per decision
  FUZZ_CHECK(times.series() <= 4 + 1);
  Registry::Handle h = registry.AddCollector([&names](Exposition& e) {
    e.Header("warden_fuzz_gauge", "G", Type::kGauge);
    e.Sample("warden_fuzz_gauge", {{"scope", names[0]}, {"name", names[1]}}, 1);
  });

  const std::string text = registry.Render();
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    FUZZ_CHECK(end != std::string::npos);  // every line ends with a newline
    std::string_view line(text.data() + pos, end - pos);
    if (line.starts_with("# ")) {
      FUZZ_CHECK(line.starts_with("# HELP warden_fuzz_") || line.starts_with("# TYPE warden_fuzz_"));
    } else {
      FUZZ_CHECK(SampleLineIsWellFormed(line, "warden_fuzz_"));
    }
    pos = end + 1;
  }

  CallRecord record;
  record.tool = names[0];
  record.agent = names[1];
  record.session = names[2];
  record.request_id = names[3];
  record.decision = "deny";
  record.arguments = nlohmann::json{{"x", names[3]}};
  const std::string line = CallLogLine(record, std::chrono::system_clock::time_point{});
  FUZZ_CHECK(line.find('\n') == std::string::npos);
  nlohmann::json parsed = nlohmann::json::parse(line, nullptr, false);
  FUZZ_CHECK(!parsed.is_discarded());
  FUZZ_CHECK(parsed.is_object() && parsed.contains("gen_ai.tool.name"));
  return 0;
}
