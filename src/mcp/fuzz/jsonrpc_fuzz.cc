// libFuzzer entry point: Parse must never crash or throw on any bytes, and whatever parses must
// serialise and parse back to the same messages. Seed corpus: tests/mcp/corpus/.
//   ./jsonrpc_fuzz -max_len=65536 ../tests/mcp/corpus
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "mcp/jsonrpc.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  // The first byte picks batch mode so that both code paths are explored.
  warden::mcp::ParseOptions options;
  options.allow_batch = size > 0 && (data[0] & 1) != 0;
  warden::mcp::ParseResult result = warden::mcp::Parse(text, options);
  for (const auto& entry : result.entries) {
    const auto* message = std::get_if<warden::mcp::Message>(&entry);
    std::string out = message ? warden::mcp::Serialize(*message)
                              : warden::mcp::Serialize(std::get<warden::mcp::ErrorResponse>(entry));
    if (message) {
      warden::mcp::ParseOptions unlimited;
      unlimited.max_bytes = SIZE_MAX;
      warden::mcp::ParseResult again = warden::mcp::Parse(out, unlimited);
      if (!again.ok() || again.entries.size() != 1) std::abort();
    }
  }
  return 0;
}
