// libFuzzer entry point for the JSON-RPC layer (what every MCP client and upstream sends): Parse
// must never crash or throw on any bytes, whatever parses must serialise and parse back to one
// message that serialises to the same text (Serialize is a fixed point), and a batch of the
// messages that parsed must parse back as a batch of as many. Seed corpus:
// tests/fuzz/corpus/jsonrpc/ (docs/testing-fuzz.md).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "mcp/jsonrpc.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace warden::mcp;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  // The first byte picks batch mode so that both code paths are explored.
  ParseOptions options;
  options.allow_batch = size > 0 && (data[0] & 1) != 0;
  ParseResult result = Parse(text, options);
  Check(!result.entries.empty());
  Check(!result.is_batch || options.allow_batch);
  ParseOptions unlimited;
  unlimited.max_bytes = SIZE_MAX;
  std::vector<Message> messages;
  for (const auto& entry : result.entries) {
    const auto* message = std::get_if<Message>(&entry);
    if (message == nullptr) {
      (void)Serialize(std::get<ErrorResponse>(entry));
      continue;
    }
    const std::string out = Serialize(*message);
    ParseResult again = Parse(out, unlimited);
    Check(again.ok() && again.entries.size() == 1 && !again.is_batch);
    Check(Serialize(std::get<Message>(again.entries[0])) == out);
    messages.push_back(*message);
  }
  if (messages.size() > 1) {
    unlimited.allow_batch = true;
    ParseResult batch = Parse(SerializeBatch(messages), unlimited);
    Check(batch.ok() && batch.is_batch && batch.entries.size() == messages.size());
  }
  return 0;
}
