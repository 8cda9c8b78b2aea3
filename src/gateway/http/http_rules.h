// The Streamable HTTP transport's header rules, as pure functions (no I/O): which Accept and
// Content-Type values a POST or GET must carry, which Origins may reach the endpoint (the
// DNS-rebinding defence), and how a message is framed as a Server-Sent Event. Kept apart from the
// connection code so each rule is tested on its own (tests/gateway/http_server_test.cc).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/stages/stages.h"

namespace warden::gateway::http {

// True when the Accept header lists `media_type` (case-insensitive, parameters such as `;q=0.9`
// ignored). Wildcards do not count: MCP requires clients to name both types explicitly.
bool AcceptsMediaType(std::string_view accept, std::string_view media_type);

// True when the Content-Type header's media type is application/json (a charset parameter is
// fine, case-insensitive).
bool IsJsonContentType(std::string_view content_type);

// Whether a request with this Origin header may reach the MCP endpoint.
//  * no Origin header (`origin` empty): allowed; non-browser clients send none, and a browser
//    always sends one on the cross-origin requests that DNS rebinding relies on;
//  * an exact (case-insensitive) match of one of `allowed` (a trailing '/' is ignored);
//  * when the server is bound to a loopback address: http(s)://localhost, 127.0.0.1 or [::1],
//    with any port or none; a page served from the user's own machine is not a rebinding attack;
//  * anything else, including the literal `null`: refused.
bool OriginAllowed(std::string_view origin, const std::vector<std::string>& allowed,
                   bool loopback_server);

// Whether a request with this Host header may reach the endpoint: the other half of the
// DNS-rebinding defence (a rebound page's requests carry the attacker's name in Host, and not
// every client sends Origin). `host` is the header's value; `own_names` are the names this
// listener answers to without configuration (lower case, IPv6 in brackets: localhost, 127.0.0.1,
// [::1], its listen address and the address the connection came in on); `port` is the listener's
// port.
//  * no Host header (`host` empty; HTTP/1.0): allowed, a browser always sends one;
//  * one of `own_names`, without a port or with `port`;
//  * one of `allowed` (case-insensitive): an entry NAME:PORT matches that port only, an entry
//    NAME (or [IPV6]) matches NAME with any port or none;
//  * anything else (another name, another port, a malformed value, userinfo, a trailing dot):
//    refused.
bool HostAllowed(std::string_view host, const std::vector<std::string>& allowed,
                 const std::vector<std::string>& own_names, std::uint16_t port);

// True when `a` and `b` name the same principal (tenant, user and agent; the scope may differ
// from request to request). A session belongs to the principal that created it.
bool SamePrincipal(const identity::Caller& a, const identity::Caller& b);

// One SSE event carrying `data` (one line: serialised JSON-RPC never holds a newline) with event
// id `id`: "id: ID\ndata: DATA\n\n" (no id line when `id` is empty). A newline in `data` is split over several data lines, as the
// SSE format requires, so a bad message can never inject a field of its own.
std::string SseEvent(std::string_view id, std::string_view data);

// An SSE comment line, ignored by clients; keeps idle proxies from closing the stream.
inline constexpr std::string_view kSseKeepAlive = ": keep-alive\n\n";

// One chunk of a chunked HTTP/1.1 body holding `data` (which must not be empty), and the chunk
// that ends the body.
std::string HttpChunk(std::string_view data);
inline constexpr std::string_view kHttpLastChunk = "0\r\n\r\n";

}  // namespace warden::gateway::http
