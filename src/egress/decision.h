// The decision hook: how the rest of warden (the gateway's trifecta and approvals) gets a say in
// every egress attempt before the allow-list does.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace warden::egress {

// kHttps: one request inside a tunnel whose TLS the proxy terminates (tls_intercept.h).
enum class Protocol { kConnect, kHttp, kSocks5, kHttps };

// "connect", "http", "socks5", "https": the names records and JSON use.
std::string_view ProtocolName(Protocol protocol);

// One attempt to reach a destination, as the hook sees it.
struct Attempt {
  std::string host;  // normalised: lower case, no trailing dot; addresses canonical
  uint16_t port = 0;
  std::string session_id;  // ProxyOptions::session_id: which sandbox/session asks
  Protocol protocol = Protocol::kConnect;
  // Filled for the session check (AsyncCheck) only. Plain HTTP, and each request inside an
  // intercepted tunnel: the absolute URL of the request ("http://host:port/path?query"), its
  // header lines as the client sent them, and the start of its body
  // (ProxyOptions::check_body_bytes). Tunnels: all empty.
  std::string target;
  std::string headers;
  std::string body;
};

struct Decision {
  enum class Kind { kAllow, kDeny, kDefer };
  Kind kind = Kind::kDefer;
  std::string reason;  // recorded, and sent to the client on deny

  // Allows without consulting the allow-list. The address guard still applies.
  static Decision Allow(std::string reason) { return {Kind::kAllow, std::move(reason)}; }
  static Decision Deny(std::string reason) { return {Kind::kDeny, std::move(reason)}; }
  // Leaves the decision to the allow-list (what happens when there is no hook).
  static Decision Defer() { return {Kind::kDefer, {}}; }
};

// Called on the proxy's thread for every attempt whose host is a valid name or address, before
// the allow-list. It must not block (it holds up every connection of the proxy). A hook that
// throws denies the attempt ("decision hook failed: ...").
using DecisionHook = std::function<Decision(const Attempt&)>;

// The session check: how a gateway that started this sandbox for a session (sandbox__exec) has
// the session's trifecta state judge each attempt the allow-list let through, without the proxy's
// thread waiting for it. Called on the proxy's thread; it must return at once and call `done`
// later, once, from any thread (later calls are ignored). kDeny refuses the attempt; anything
// else lets it go on to the address guard. No answer within ProxyOptions::check_timeout refuses
// it too, as does a check that throws.
using DecisionDone = std::function<void(Decision)>;
using AsyncCheck = std::function<void(const Attempt&, DecisionDone done)>;

}  // namespace warden::egress
