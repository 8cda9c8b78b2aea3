// Runs Parse over every file in the fuzzer's seed corpus (tests/fuzz/corpus/jsonrpc/), with and
// without batches: nothing throws, every result is either messages that serialise and parse back,
// or one error reply per entry. File names say what each expects: ok-*, err-*.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "mcp/jsonrpc.h"

namespace warden::mcp {
namespace {

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(JsonRpcCorpus, EveryFileParsesWithoutThrowingAndMatchesItsName) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(WARDEN_MCP_CORPUS)) {
    if (!entry.is_regular_file()) continue;
    ++files;
    const std::string name = entry.path().filename().string();
    const std::string text = ReadFile(entry.path());
    for (bool batch : {false, true}) {
      ParseOptions options;
      options.allow_batch = batch;
      ParseResult r;
      ASSERT_NO_THROW(r = Parse(text, options)) << name;
      ASSERT_FALSE(r.entries.empty()) << name;
      for (const auto& e : r.entries) {
        if (const auto* m = std::get_if<Message>(&e)) {
          EXPECT_TRUE(Parse(Serialize(*m)).ok()) << name;
        } else {
          EXPECT_NO_THROW((void)Serialize(std::get<ErrorResponse>(e))) << name;
        }
      }
      // batch-* files are only valid with batches on.
      const bool expect_ok =
          name.rfind("ok-", 0) == 0 || (batch && name.rfind("batch-ok-", 0) == 0);
      EXPECT_EQ(r.ok(), expect_ok) << name << " batch=" << batch;
    }
  }
  EXPECT_GE(files, 20);
}

}  // namespace
}  // namespace warden::mcp
