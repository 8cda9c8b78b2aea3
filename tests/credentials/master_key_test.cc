// credentials::LoadMasterKey and friends: the two text forms, the key id, and the file checks
// that keep a key readable by others (or reached through a link) from being used.
#include "credentials/master_key.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "testing.h"

namespace warden::credentials {
namespace {

using testing::Contains;
using testing::Lacks;

// The key 00 01 02 ... 1f in both forms, and its id as Python computes it:
// hashlib.sha256(b"warden master key id\n" + bytes(range(32))).hexdigest()[:16]
constexpr const char* kHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
constexpr const char* kBase64 = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
constexpr const char* kId = "e4d5dd985ce48926";

KeySource File(const std::string& path) {
  KeySource source;
  source.file = path;
  return source;
}
KeySource Env(const std::string& name) {
  KeySource source;
  source.env = name;
  return source;
}

class MasterKeyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/warden-master-key-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text, mode_t mode) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    EXPECT_EQ(chmod(path.c_str(), mode), 0);
    return path;
  }

  std::string dir_;
};

TEST(ParseMasterKey, HexAndBase64NameTheSameKey) {
  auto hex = ParseMasterKey(kHex, "test");
  ASSERT_TRUE(hex) << hex.status().message();
  auto b64 = ParseMasterKey(kBase64, "test");
  ASSERT_TRUE(b64) << b64.status().message();
  EXPECT_EQ(hex->bytes, b64->bytes);
  for (size_t i = 0; i < 32; ++i) EXPECT_EQ(hex->bytes[i], i);
  EXPECT_EQ(hex->id, kId);
  EXPECT_EQ(b64->id, kId);
}

TEST(ParseMasterKey, TrimsSurroundingWhitespaceAndAcceptsUpperCaseHex) {
  std::string upper = kHex;
  for (char& c : upper) c = static_cast<char>(toupper(c));
  for (const std::string& text :
       {std::string(" \n\t") + kHex + "\r\n", upper, std::string("\n") + kBase64 + "\n"}) {
    auto key = ParseMasterKey(text, "test");
    ASSERT_TRUE(key) << text << ": " << key.status().message();
    EXPECT_EQ(key->id, kId);
  }
}

TEST(ParseMasterKey, RefusesAnythingElseWithoutQuotingIt) {
  const std::string hex = kHex;
  const std::string b64 = kBase64;
  const std::string bad[] = {
      hex.substr(0, 63),                                   // one digit short
      hex + "0",                                           // one too many
      "g" + hex.substr(1),                                 // not hex
      hex.substr(0, 32) + " " + hex.substr(32),            // whitespace inside
      b64.substr(0, 43),                                   // padding missing
      "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHg==",      // 31 bytes
      "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gIQ==",  // 34 bytes
      "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh9=",      // nonzero bits after the 32nd byte
      "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwd-h8=",      // URL-safe alphabet
      "not a key at all",
  };
  for (const std::string& text : bad) {
    auto key = ParseMasterKey(text, "file /k");
    ASSERT_FALSE(key) << text;
    EXPECT_TRUE(Contains(key.status().message(), "file /k"));
    EXPECT_TRUE(Contains(key.status().message(), "neither 64 hex digits nor base64"));
    EXPECT_TRUE(Lacks(key.status().message(), text));
  }
  for (const char* empty : {"", "  \n"}) {
    auto key = ParseMasterKey(empty, "file /k");
    ASSERT_FALSE(key);
    EXPECT_TRUE(Contains(key.status().message(), "is empty"));
  }
}

TEST(KeySource, Describes) {
  EXPECT_EQ(Env("WARDEN_MASTER_KEY").Describe(), "environment variable WARDEN_MASTER_KEY");
  EXPECT_EQ(File("/etc/k").Describe(), "file /etc/k");
}

TEST_F(MasterKeyTest, FileWithOwnerOnlyModeLoads) {
  for (mode_t mode : {0600, 0400}) {
    const std::string path = Write("key" + std::to_string(mode), std::string(kHex) + "\n", mode);
    auto key = LoadMasterKey(File(path));
    ASSERT_TRUE(key) << key.status().message();
    EXPECT_EQ(key->id, kId);
  }
  auto b64 = LoadMasterKey(File(Write("b64", std::string(kBase64) + "\n", 0600)));
  ASSERT_TRUE(b64) << b64.status().message();
  EXPECT_EQ(b64->id, kId);
}

TEST_F(MasterKeyTest, FileOthersCanReachIsRefused) {
  for (mode_t mode : {0644, 0640, 0604, 0602, 0620, 0610}) {
    const std::string path = Write("key", kHex, mode);
    auto key = LoadMasterKey(File(path));
    ASSERT_FALSE(key) << std::oct << mode;
    EXPECT_TRUE(Contains(key.status().message(), "file " + path));
    EXPECT_TRUE(Contains(key.status().message(), "must be 0600 or 0400"));
    EXPECT_TRUE(Lacks(key.status().message(), kHex));
  }
  auto key = LoadMasterKey(File(Write("key", kHex, 0644)));
  ASSERT_FALSE(key);
  EXPECT_TRUE(Contains(key.status().message(), "mode 0644"));
}

TEST_F(MasterKeyTest, SymbolicLinkIsRefused) {
  const std::string target = Write("real", kHex, 0600);
  const std::string link = dir_ + "/link";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  auto key = LoadMasterKey(File(link));
  ASSERT_FALSE(key);
  EXPECT_TRUE(Contains(key.status().message(), "symbolic link"));
  EXPECT_TRUE(Contains(key.status().message(), link));
}

TEST_F(MasterKeyTest, NonRegularAndMissingFilesAreRefused) {
  const std::string sub = dir_ + "/sub";
  ASSERT_EQ(mkdir(sub.c_str(), 0700), 0);
  auto dir = LoadMasterKey(File(sub));
  ASSERT_FALSE(dir);
  EXPECT_TRUE(Contains(dir.status().message(), "not a regular file"));

  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto pipe = LoadMasterKey(File(fifo));  // must not block waiting for a writer
  ASSERT_FALSE(pipe);
  EXPECT_TRUE(Contains(pipe.status().message(), "not a regular file"));

  auto missing = LoadMasterKey(File(dir_ + "/absent"));
  ASSERT_FALSE(missing);
  EXPECT_TRUE(Contains(missing.status().message(), dir_ + "/absent"));
  EXPECT_EQ(missing.status().err(), ENOENT);
}

TEST_F(MasterKeyTest, BadFileTextIsRefused) {
  const std::string secretish = "0123456789abcdef-almost-a-key";
  auto key = LoadMasterKey(File(Write("key", secretish, 0600)));
  ASSERT_FALSE(key);
  EXPECT_TRUE(Contains(key.status().message(), "neither 64 hex digits nor base64"));
  EXPECT_TRUE(Lacks(key.status().message(), secretish));

  auto empty = LoadMasterKey(File(Write("empty", "", 0600)));
  ASSERT_FALSE(empty);
  EXPECT_TRUE(Contains(empty.status().message(), "is empty"));

  auto huge = LoadMasterKey(File(Write("huge", std::string(100000, 'a'), 0600)));
  ASSERT_FALSE(huge);
  EXPECT_TRUE(Contains(huge.status().message(), "larger than"));
}

TEST(LoadMasterKey, EnvironmentVariable) {
  const char* name = "WARDEN_TEST_MASTER_KEY_ENV";
  ASSERT_EQ(setenv(name, kBase64, 1), 0);
  auto key = LoadMasterKey(Env(name));
  ASSERT_TRUE(key) << key.status().message();
  EXPECT_EQ(key->id, kId);

  ASSERT_EQ(unsetenv(name), 0);
  auto unset = LoadMasterKey(Env(name));
  ASSERT_FALSE(unset);
  EXPECT_EQ(unset.status().message(),
            "the master key's environment variable WARDEN_TEST_MASTER_KEY_ENV is not set");

  ASSERT_EQ(setenv(name, "", 1), 0);
  auto empty = LoadMasterKey(Env(name));
  ASSERT_FALSE(empty);
  EXPECT_TRUE(Contains(empty.status().message(), "is empty"));

  ASSERT_EQ(setenv(name, "zz", 1), 0);
  auto bad = LoadMasterKey(Env(name));
  ASSERT_FALSE(bad);
  EXPECT_TRUE(Contains(bad.status().message(), "environment variable " + std::string(name)));
  unsetenv(name);
}

TEST_F(MasterKeyTest, KeyRingOrdersKeysAndRefusesDuplicates) {
  const std::string other(64, 'a');
  const std::string current = Write("current", other, 0600);
  const std::string previous = Write("previous", kHex, 0600);
  auto ring = LoadKeyRing(File(current), {File(previous)});
  ASSERT_TRUE(ring) << ring.status().message();
  ASSERT_EQ(ring->keys.size(), 2u);
  EXPECT_EQ(ring->current().id, ring->keys[0].id);
  EXPECT_NE(ring->current().id, kId);
  ASSERT_NE(ring->Find(kId), nullptr);
  EXPECT_EQ(ring->Find(kId), &ring->keys[1]);
  EXPECT_EQ(ring->Find("0000000000000000"), nullptr);

  // The same key in another form is still the same key.
  const std::string again = Write("again", kBase64, 0600);
  auto dup = LoadKeyRing(File(current), {File(previous), File(again)});
  ASSERT_FALSE(dup);
  EXPECT_TRUE(Contains(dup.status().message(), "same id " + std::string(kId)));
  EXPECT_TRUE(Contains(dup.status().message(), previous));
  EXPECT_TRUE(Contains(dup.status().message(), again));

  auto broken = LoadKeyRing(File(current), {File(dir_ + "/absent")});
  ASSERT_FALSE(broken);
  EXPECT_TRUE(Contains(broken.status().message(), dir_ + "/absent"));
}

}  // namespace
}  // namespace warden::credentials
