// `web__fetch`: one HTTP(S) GET performed by the gateway process itself, under the policy's
// egress allow-list and the egress address guard (src/egress), with redirects re-checked hop by
// hop. Full contract: docs/builtin-tools.md.
//
// Why the gateway and not a sandbox: the fetch needs no code of the agent's, and doing it here
// lets every hop be decided with the same AllowList and AddressGuard the egress proxy uses,
// connecting only to the address that was checked (no second resolution: DNS rebinding defence).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "gateway/pipeline/pipeline.h"

namespace warden::gateway {

inline constexpr uint64_t kFetchMaxBytesCap = 1 << 20;        // max_bytes is capped here
inline constexpr uint64_t kFetchDefaultMaxBytes = 256 << 10;  // when max_bytes is absent
inline constexpr uint64_t kFetchTimeoutCapMs = 30'000;        // timeout_s is capped here
inline constexpr uint64_t kFetchDefaultTimeoutMs = 30'000;    // when timeout_s is absent
inline constexpr int kFetchMaxRedirects = 5;

// What a web__fetch call asks for, checked against its input schema.
struct FetchRequest {
  std::string url;
  uint64_t max_bytes = kFetchDefaultMaxBytes;    // 1 .. kFetchMaxBytesCap
  uint64_t timeout_ms = kFetchDefaultTimeoutMs;  // the whole fetch, every hop included
};

// The MCP Tool definition (name, title, description, inputSchema, outputSchema, annotations).
nlohmann::json WebFetchDefinition();

// Checks `arguments`: an object with `url` (an http or https URL; the URL itself is checked
// when fetched), optional `max_bytes` (positive integer, values above 1 MiB become 1 MiB) and
// `timeout_s` (positive number, values above 30 become 30), nothing else. The error names the
// member.
Result<FetchRequest> ParseFetchArguments(const nlohmann::json& arguments);

// Where a fetch may go.
struct FetchEgress {
  // The policy's egress.allow entries; null when no policy is in force, which denies every host.
  const std::vector<std::string>* allow = nullptr;
  // Asked before a redirect to another host or port, with the URL it goes to: the calling
  // session's trifecta verdict on fetching it now (docs/trifecta.md, "Redirects"). A reason
  // refuses the hop. Null: no such check (no session pipeline, as in the tool's own tests).
  std::function<std::optional<std::string>(const std::string& url)> redirect_check;
};

// Fetches `request.url`, following up to 5 redirects, each hop checked the same way: the host
// must be on the allow-list (port included), and every address it resolves to passes the
// address guard or is dropped (a name whose addresses are all refused is refused); the
// connection goes to a checked address only. A redirect to another host or port is first put
// to `egress.redirect_check`. https verifies the certificate against the system
// store, with SNI and the host name checked.
//
// Never fails as a Status: a refused host, a network error, a timeout, cancellation and HTTP
// status >= 400 are results with isError and a text saying why. structuredContent holds
// {url, final_url, status, content_type, body, truncated, bytes, egress: [decision per hop]
// [, error]} (see WebFetchOutputSchema). `cancel`, when set, ends the fetch at once.
CallResult RunWebFetch(const FetchRequest& request, const FetchEgress& egress,
                       const std::shared_ptr<CancelToken>& cancel);

// Whether `bytes` is well-formed UTF-8 (no overlong forms, surrogates or code points above
// U+10FFFF). Also used by sandbox__exec to decide between text and base64 for output files.
bool IsValidUtf8(std::string_view bytes);

}  // namespace warden::gateway
