// X-Warden-Signature: SignatureHeader and VerifySignature, the two sides of the contract.
#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <cstdint>
#include <string>

#include "notify/webhook.h"

namespace warden::notify {
namespace {

using std::chrono::seconds;

constexpr int64_t kSignedAt = 1700000000;
constexpr const char* kBody = R"({"a":1})";

TEST(Signature, IsTheTimestampAndTheLowerHexHmacOfTimestampDotBody) {
  // printf '%s' '1700000000.{"a":1}' | openssl dgst -sha256 -hmac whsec_test
  EXPECT_EQ(SignatureHeader("whsec_test", kSignedAt, kBody),
            "t=1700000000,v1=38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789");
}

TEST(Signature, VerifiesWithTheSecretAndNotWithAnother) {
  const std::string header = SignatureHeader("right secret", kSignedAt, kBody);
  EXPECT_TRUE(VerifySignature("right secret", header, kBody, kSignedAt, seconds(300)));
  EXPECT_FALSE(VerifySignature("wrong secret", header, kBody, kSignedAt, seconds(300)));
  EXPECT_FALSE(VerifySignature("", header, kBody, kSignedAt, seconds(300)));
}

TEST(Signature, ATamperedBodyFails) {
  const std::string header = SignatureHeader("s", kSignedAt, kBody);
  EXPECT_FALSE(VerifySignature("s", header, R"({"a":2})", kSignedAt, seconds(300)));
  EXPECT_FALSE(VerifySignature("s", header, std::string(kBody) + " ", kSignedAt, seconds(300)));
}

TEST(Signature, AReplayOutsideTheToleranceFails) {
  const std::string header = SignatureHeader("s", kSignedAt, kBody);
  EXPECT_TRUE(VerifySignature("s", header, kBody, kSignedAt + 300, seconds(300)));
  EXPECT_TRUE(VerifySignature("s", header, kBody, kSignedAt - 300, seconds(300)));
  EXPECT_FALSE(VerifySignature("s", header, kBody, kSignedAt + 301, seconds(300)));
  EXPECT_FALSE(VerifySignature("s", header, kBody, kSignedAt - 301, seconds(300)));
  EXPECT_FALSE(VerifySignature("s", header, kBody, INT64_MIN, seconds(300)));
  EXPECT_FALSE(VerifySignature("s", header, kBody, INT64_MAX, seconds(300)));
}

TEST(Signature, MovingTheTimestampForwardBreaksTheMac) {
  // An attacker who captured a request cannot refresh its t= to pass the tolerance check.
  const std::string header = SignatureHeader("s", kSignedAt, kBody);
  const std::string mac = header.substr(header.find("v1="));
  const std::string refreshed = "t=" + std::to_string(kSignedAt + 3600) + "," + mac;
  EXPECT_FALSE(VerifySignature("s", refreshed, kBody, kSignedAt + 3600, seconds(300)));
}

TEST(Signature, MalformedHeadersFail) {
  const std::string good = SignatureHeader("s", kSignedAt, kBody);
  const std::string mac = good.substr(good.find("v1=") + 3);
  std::string upper = mac;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const std::string& header : {
           std::string(""),
           std::string("t=1700000000"),
           "v1=" + mac,
           "t=,v1=" + mac,
           "t=17x0000000,v1=" + mac,
           "t=-1700000000,v1=" + mac,
           "t=1700000000,t=1700000000,v1=" + mac,
           "t=1700000000,v1=" + mac.substr(0, 63),
           "t=1700000000,v1=" + mac + "0",
           "t=1700000000,v1=" + upper,
           "t=1700000000,v0=" + mac,
       }) {
    EXPECT_FALSE(VerifySignature("s", header, kBody, kSignedAt, seconds(300))) << header;
  }
}

TEST(Signature, AnyMatchingV1Passes) {
  // Receivers rotating secrets may see one v1 per secret; order does not matter.
  const std::string good = SignatureHeader("s", kSignedAt, kBody);
  const std::string mac = good.substr(good.find("v1=") + 3);
  const std::string other(64, '0');
  EXPECT_TRUE(VerifySignature("s", "v1=" + other + ",t=1700000000,v1=" + mac, kBody, kSignedAt,
                              seconds(0)));
}

}  // namespace
}  // namespace warden::notify
