// libFuzzer entry point for MCP 2026-07-28's envelope (what every stateless request carries): the
// input is three header values and a body, separated by newlines. Nothing may crash or throw;
// headers built from a body by the revision's rules (the name in the =?base64?...?= form) must
// always match that body; any value survives the base64 header form, and EncodeHeaderValue's
// output never holds a byte that could end a header; whatever ReadRequestMeta accepts has the
// types it promises; a body's params read as a tool definition (x-mcp-header annotations, which
// warden reads from upstreams) never crash and give only header-safe values. Seed corpus: tests/fuzz/corpus/mcp_envelope/.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "common/base64.h"
#include "mcp/jsonrpc.h"
#include "mcp/modern.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

std::string Padded(std::string_view bytes) {
  std::string out = warden::Base64NoPad(bytes, warden::kBase64Alphabet);
  while (out.size() % 4 != 0) out.push_back('=');
  return out;
}

std::string_view Take(std::string_view& rest) {
  size_t nl = rest.find('\n');
  std::string_view part = rest.substr(0, nl);
  rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
  return part;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace warden::mcp;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  MirrorHeaders headers;
  headers.protocol_version = std::string(Take(rest));
  headers.method = std::string(Take(rest));
  headers.name = std::string(Take(rest));
  // The header form round-trips any bytes.
  Check(DecodeHeaderValue("=?base64?" + Padded(*headers.name) + "?=") == *headers.name);
  (void)DecodeHeaderValue(*headers.name);
  const std::string encoded = EncodeHeaderValue(*headers.name);
  Check(DecodeHeaderValue(encoded) == *headers.name);
  for (char c : encoded) Check(c >= 0x20 && c <= 0x7e);

  ParseResult parsed = Parse(rest, ParseOptions{});
  const auto* message = std::get_if<Message>(&parsed.entries.front());
  if (parsed.is_batch || message == nullptr) return 0;
  const auto* request = std::get_if<Request>(message);
  if (request == nullptr) return 0;
  (void)CheckMirrorHeaders(*request, headers);
  RequestMeta meta;
  if (!ReadRequestMeta(*request, meta)) {
    Check(meta.client_capabilities.is_object());
    Check(meta.client_info.is_object());
    Check(meta.protocol_version == MetaProtocolVersion(*request));
  }
  // Headers made from the body by the rules always match it.
  MirrorHeaders honest;
  honest.protocol_version = MetaProtocolVersion(*request);
  honest.method = request->method;
  if (auto name = NameOf(*request)) honest.name = "=?base64?" + Padded(*name) + "?=";
  Check(CheckMirrorHeaders(*request, honest).empty());
  if (auto name = NameOf(*request)) honest.name = EncodeHeaderValue(*name);
  Check(CheckMirrorHeaders(*request, honest).empty());
  if (request->params) {
    std::vector<ParamHeader> annotated;
    if (!ReadParamHeaders(*request->params, annotated)) {
      const nlohmann::json arguments = request->params->value("arguments", nlohmann::json());
      for (const ParamHeader& h : annotated) {
        Check(!h.path.empty() && !h.header.empty());
        if (auto value = ParamHeaderValue(arguments, h.path))
          for (char c : *value) Check(c >= 0x20 && c <= 0x7e);
      }
    } else {
      Check(annotated.empty());
    }
  }
  return 0;
}
