// libFuzzer entry point for the DNS stub on the sandbox's loopback: any UDP payload sandboxed code
// sends it. Two stubs answer each packet, one with addresses for allowed names and one without.
// Invariants, beyond not crashing:
//   * only a standard query with one question is answered; the reply is a response with the
//     query's id, RD bit and question bytes, one answer at most, and it is itself never answered
//     (two stubs can never keep each other busy);
//   * the answer code and the address follow the allow-list and the options, nothing else;
//   * the record's name is normalised (parsing it again changes nothing) when valid, and it and
//     the reason are printable ASCII: a query name cannot inject control bytes into logs.
// Seed corpus: tests/fuzz/corpus/dns_query/ (docs/testing-fuzz.md).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "egress/allow_list.h"
#include "egress/dns_stub.h"
#include "egress/host_name.h"
#include "fuzz_check.h"

namespace {

using namespace warden::egress;

uint16_t Read16(std::string_view p, size_t i) {
  return static_cast<uint16_t>(static_cast<uint8_t>(p[i]) << 8 | static_cast<uint8_t>(p[i + 1]));
}

bool Printable(std::string_view text) {
  for (char c : text) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

AllowList Allowed() {
  auto list = AllowList::Parse({"example.com", "*.allowed.test", "10.1.2.3", "[::1]:8080"});
  FUZZ_CHECK(list.ok());
  return *list;
}

void CheckAnswer(const DnsStub& stub, const DnsStubOptions& options, std::string_view packet) {
  DnsQueryRecord record;
  const auto reply = stub.Answer(packet, &record);
  if (!reply) return;
  FUZZ_CHECK(packet.size() >= 12);
  const uint16_t flags = Read16(packet, 2);
  FUZZ_CHECK((flags & 0x8000) == 0 && ((flags >> 11) & 0xf) == 0 && Read16(packet, 4) == 1);

  const std::string& r = *reply;
  FUZZ_CHECK(r.size() >= 12 + 5);
  FUZZ_CHECK(r.substr(0, 2) == packet.substr(0, 2));
  const uint16_t reply_flags = Read16(r, 2);
  FUZZ_CHECK((reply_flags & 0x8000) != 0 && ((reply_flags >> 11) & 0xf) == 0);
  FUZZ_CHECK((reply_flags & 0x0100) == (flags & 0x0100));
  FUZZ_CHECK((reply_flags & 0xf) == record.rcode);
  FUZZ_CHECK(Read16(r, 4) == 1 && Read16(r, 8) == 0 && Read16(r, 10) == 0);
  const uint16_t answers = Read16(r, 6);
  FUZZ_CHECK(answers <= 1);
  // The question: the query's bytes from offset 12 to the end of its QTYPE and QCLASS.
  size_t question_end = 12;
  while (question_end < packet.size() && packet[question_end] != 0) {
    question_end += 1 + static_cast<uint8_t>(packet[question_end]);
  }
  question_end += 1 + 4;
  FUZZ_CHECK(question_end <= packet.size() && question_end <= r.size());
  FUZZ_CHECK(r.compare(12, question_end - 12, packet.substr(12, question_end - 12)) == 0);
  if (answers == 0) FUZZ_CHECK(r.size() == question_end);
  FUZZ_CHECK(!stub.Answer(r, nullptr).has_value());

  FUZZ_CHECK(Printable(record.name) && Printable(record.rule_or_reason));
  if (!record.allowed) {
    FUZZ_CHECK(record.rcode == options.denied_rcode && answers == 0);
    return;
  }
  auto host = ParseHost(record.name);
  FUZZ_CHECK(host.ok() && host->name == record.name);
  FUZZ_CHECK(record.rcode == options.allowed_rcode || record.rcode == DnsStubOptions::kNoError);
  if (answers == 1) {
    FUZZ_CHECK(record.rcode == DnsStubOptions::kNoError);
    const auto& address = record.qtype == 1 ? options.answer_v4 : options.answer_v6;
    FUZZ_CHECK((record.qtype == 1 || record.qtype == 28) && address.has_value());
    const size_t n = address->is_v4() ? 4 : 16;
    FUZZ_CHECK(r.size() == question_end + 12 + n);
    FUZZ_CHECK(Read16(r, question_end) == 0xc00c && Read16(r, question_end + 2) == record.qtype);
    FUZZ_CHECK(
        r.compare(r.size() - n, n, reinterpret_cast<const char*>(address->bytes.data()), n) == 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const DnsStubOptions plain;  // REFUSED for everything, no addresses
  static const DnsStubOptions answering = [] {
    DnsStubOptions o;
    o.allowed_rcode = DnsStubOptions::kNoError;
    o.denied_rcode = DnsStubOptions::kNxDomain;
    o.answer_v4 = ParseCanonicalIp("10.0.2.3");
    o.answer_v6 = ParseCanonicalIp("fd00::3");
    return o;
  }();
  static const DnsStub plain_stub(Allowed(), plain);
  static const DnsStub answering_stub(Allowed(), answering);
  const std::string_view packet(reinterpret_cast<const char*>(data), size);
  CheckAnswer(plain_stub, plain, packet);
  CheckAnswer(answering_stub, answering, packet);
  return 0;
}
