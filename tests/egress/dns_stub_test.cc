#include "egress/dns_stub.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace warden::egress {
namespace {

std::string Query(uint16_t id, const std::string& name, uint16_t qtype, uint16_t flags = 0x0100) {
  std::string p;
  p += static_cast<char>(id >> 8);
  p += static_cast<char>(id & 0xff);
  p += static_cast<char>(flags >> 8);
  p += static_cast<char>(flags & 0xff);
  p += std::string("\x00\x01\x00\x00\x00\x00\x00\x00", 8);
  size_t start = 0;
  while (start < name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    p += static_cast<char>(dot - start);
    p += name.substr(start, dot - start);
    start = dot + 1;
  }
  p += '\0';
  p += static_cast<char>(qtype >> 8);
  p += static_cast<char>(qtype & 0xff);
  p += std::string("\x00\x01", 2);
  return p;
}

uint8_t Rcode(const std::string& reply) { return static_cast<uint8_t>(reply[3]) & 0x0f; }
uint16_t AnswerCount(const std::string& reply) {
  return static_cast<uint16_t>(static_cast<uint8_t>(reply[6]) << 8 |
                               static_cast<uint8_t>(reply[7]));
}

DnsStub MakeStub(DnsStubOptions options = {}) {
  return DnsStub(*AllowList::Parse({"*.example.test", "api.test:8443"}), options);
}

TEST(DnsStub, RefusesNamesNotOnTheAllowListAndRecordsThem) {
  DnsStub stub = MakeStub();
  DnsQueryRecord rec;
  auto reply = stub.Answer(Query(0x1234, "evil.test", 1), &rec);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->substr(0, 2), "\x12\x34");
  EXPECT_TRUE(static_cast<uint8_t>((*reply)[2]) & 0x80);  // a response
  EXPECT_EQ(Rcode(*reply), DnsStubOptions::kRefused);
  EXPECT_FALSE(rec.allowed);
  EXPECT_EQ(rec.name, "evil.test");
  EXPECT_EQ(rec.qtype, 1);
  EXPECT_EQ(rec.rule_or_reason, "host evil.test is not on the allow-list");
}

TEST(DnsStub, AllowedNamesGetTheConfiguredAnswerCode) {
  DnsStubOptions options;
  options.allowed_rcode = DnsStubOptions::kNxDomain;
  DnsStub stub = MakeStub(options);
  DnsQueryRecord rec;
  auto reply = stub.Answer(Query(1, "A.Example.Test", 28), &rec);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(Rcode(*reply), DnsStubOptions::kNxDomain);
  EXPECT_TRUE(rec.allowed);
  EXPECT_EQ(rec.name, "a.example.test");
  EXPECT_EQ(rec.rule_or_reason, "*.example.test");
  // Port-restricted entries still make the name known.
  EXPECT_TRUE(stub.Answer(Query(2, "api.test", 1), &rec).has_value());
  EXPECT_TRUE(rec.allowed);
}

TEST(DnsStub, CanAnswerAllowedNamesWithAnAddress) {
  DnsStubOptions options;
  options.answer_v4 = *ParseCanonicalIp("127.0.0.1");
  DnsStub stub = MakeStub(options);
  auto a = stub.Answer(Query(7, "a.example.test", 1), nullptr);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(Rcode(*a), 0);
  EXPECT_EQ(AnswerCount(*a), 1);
  EXPECT_EQ(a->substr(a->size() - 4), std::string("\x7f\x00\x00\x01", 4));
  auto aaaa = stub.Answer(Query(8, "a.example.test", 28), nullptr);
  EXPECT_EQ(Rcode(*aaaa), 0);
  EXPECT_EQ(AnswerCount(*aaaa), 0);  // no IPv6 answer configured: NODATA
  auto denied = stub.Answer(Query(9, "example.test", 1), nullptr);
  EXPECT_EQ(Rcode(*denied), DnsStubOptions::kRefused);
  EXPECT_EQ(AnswerCount(*denied), 0);
}

TEST(DnsStub, MalformedPacketsAreIgnored) {
  DnsStub stub = MakeStub();
  std::string good = Query(1, "a.example.test", 1);
  EXPECT_FALSE(stub.Answer("", nullptr).has_value());
  EXPECT_FALSE(stub.Answer(good.substr(0, 11), nullptr).has_value());
  EXPECT_FALSE(stub.Answer(good.substr(0, good.size() - 1), nullptr).has_value());
  EXPECT_FALSE(
      stub.Answer(Query(1, "a.example.test", 1, 0x8100), nullptr).has_value());  // a response
  EXPECT_FALSE(
      stub.Answer(Query(1, "a.example.test", 1, 0x2800), nullptr).has_value());  // opcode 5
  std::string pointer = good.substr(0, 12) + std::string("\xc0\x0c\x00\x01\x00\x01", 6);
  EXPECT_FALSE(stub.Answer(pointer, nullptr).has_value());
  std::string two_questions = good;
  two_questions[5] = 2;
  EXPECT_FALSE(stub.Answer(two_questions, nullptr).has_value());
  std::string long_label = good.substr(0, 12) + static_cast<char>(64) + std::string(64, 'a') +
                           std::string("\x00\x00\x01\x00\x01", 5);
  EXPECT_FALSE(stub.Answer(long_label, nullptr).has_value());
}

TEST(DnsStub, InvalidNamesAreRefusedAndRecordedQuoted) {
  DnsStub stub = MakeStub();
  DnsQueryRecord rec;
  auto reply = stub.Answer(Query(1, "bad_name\x01.example.test", 16), &rec);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(Rcode(*reply), DnsStubOptions::kRefused);
  EXPECT_FALSE(rec.allowed);
  EXPECT_NE(rec.name.find("\\x01"), std::string::npos) << rec.name;
  nlohmann::json j = rec;
  EXPECT_NO_THROW(j.dump());
}

}  // namespace
}  // namespace warden::egress
