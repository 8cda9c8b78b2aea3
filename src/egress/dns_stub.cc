#include "egress/dns_stub.h"

#include <nlohmann/json.hpp>

#include "egress/egress_record.h"
#include "egress/host_name.h"

namespace warden::egress {

namespace {

constexpr size_t kHeaderSize = 12;
constexpr uint16_t kTypeA = 1;
constexpr uint16_t kTypeAaaa = 28;
constexpr uint16_t kClassIn = 1;

uint16_t Read16(std::string_view p, size_t i) {
  return static_cast<uint16_t>(static_cast<uint8_t>(p[i]) << 8 | static_cast<uint8_t>(p[i + 1]));
}

void Put16(std::string& out, uint16_t v) {
  out += static_cast<char>(v >> 8);
  out += static_cast<char>(v & 0xff);
}

struct Question {
  std::string name;  // labels joined with '.', raw bytes
  uint16_t qtype = 0;
  uint16_t qclass = 0;
  size_t end = 0;  // offset just past the question
};

// Reads the question's name as plain labels. Compression pointers are not expected in a
// question and make the packet malformed.
std::optional<Question> ParseQuestion(std::string_view p) {
  Question q;
  size_t i = kHeaderSize;
  size_t wire_length = 0;
  while (true) {
    if (i >= p.size()) return std::nullopt;
    const uint8_t len = static_cast<uint8_t>(p[i++]);
    if (len == 0) break;
    if (len > 63 || i + len > p.size()) return std::nullopt;
    wire_length += len + 1;
    if (wire_length > 254) return std::nullopt;
    if (!q.name.empty()) q.name += '.';
    q.name.append(p.substr(i, len));
    i += len;
  }
  if (i + 4 > p.size()) return std::nullopt;
  q.qtype = Read16(p, i);
  q.qclass = Read16(p, i + 2);
  q.end = i + 4;
  return q;
}

}  // namespace

void to_json(nlohmann::json& j, const DnsQueryRecord& r) {
  j = nlohmann::json{{"time", FormatTime(r.time)},
                     {"name", r.name},
                     {"qtype", r.qtype},
                     {"allowed", r.allowed},
                     {"rule_or_reason", r.rule_or_reason},
                     {"rcode", r.rcode}};
}

DnsStub::DnsStub(AllowList allow_list, DnsStubOptions options)
    : allow_list_(std::move(allow_list)), options_(std::move(options)) {}

std::optional<std::string> DnsStub::Answer(std::string_view packet, DnsQueryRecord* record) const {
  if (packet.size() < kHeaderSize) return std::nullopt;
  const uint16_t flags = Read16(packet, 2);
  const bool is_response = flags & 0x8000;
  const uint8_t opcode = (flags >> 11) & 0xf;
  if (is_response || opcode != 0 || Read16(packet, 4) != 1) return std::nullopt;
  auto question = ParseQuestion(packet);
  if (!question) return std::nullopt;

  DnsQueryRecord rec;
  rec.time = std::chrono::system_clock::now();
  rec.qtype = question->qtype;
  auto host = ParseHost(question->name);
  const AllowRule* rule = nullptr;
  if (!host.ok() || question->name.empty()) {
    rec.name = Quote(question->name);
    rec.rule_or_reason = host.ok() ? "empty name" : host.status().message();
  } else {
    rec.name = host->name;
    for (const auto& r : allow_list_.rules()) {
      if (r.MatchesHost(*host)) {
        rule = &r;
        break;
      }
    }
    rec.rule_or_reason = rule ? rule->text : "host " + host->name + " is not on the allow-list";
  }
  rec.allowed = rule != nullptr;

  std::optional<IpAddress> answer;
  uint8_t rcode = options_.denied_rcode;
  if (rule) {
    const bool have_answers = options_.answer_v4 || options_.answer_v6;
    if (!have_answers || question->qclass != kClassIn) {
      rcode = options_.allowed_rcode;
    } else {
      rcode = DnsStubOptions::kNoError;
      if (question->qtype == kTypeA) answer = options_.answer_v4;
      if (question->qtype == kTypeAaaa) answer = options_.answer_v6;
    }
  }
  rec.rcode = rcode;

  std::string out;
  out.reserve(question->end + 32);
  Put16(out, Read16(packet, 0));  // id
  // QR=1, opcode 0, AA=0, TC=0, RD copied, RA=0, RCODE.
  Put16(out, static_cast<uint16_t>(0x8000 | (flags & 0x0100) | rcode));
  Put16(out, 1);
  Put16(out, answer ? 1 : 0);
  Put16(out, 0);
  Put16(out, 0);
  out.append(packet.substr(kHeaderSize, question->end - kHeaderSize));
  if (answer) {
    Put16(out, 0xc00c);  // pointer to the question's name
    Put16(out, answer->is_v4() ? kTypeA : kTypeAaaa);
    Put16(out, kClassIn);
    Put16(out, 0);
    Put16(out, 0);  // TTL 0: nothing to cache
    const size_t n = answer->is_v4() ? 4 : 16;
    Put16(out, static_cast<uint16_t>(n));
    out.append(reinterpret_cast<const char*>(answer->bytes.data()), n);
  }
  if (record) *record = std::move(rec);
  return out;
}

}  // namespace warden::egress
