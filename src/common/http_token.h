// RFC 9110 section 5.6.2 tokens: what an HTTP field name (and a method) must be. One definition for
// the egress proxy's parser, the upstream client's extra headers and MCP 2026-07-28's
// x-mcp-header names.
#pragma once

#include <string_view>

namespace warden {

inline bool IsHttpTchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return c != '\0' && std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// Whether `s` is a non-empty token.
inline bool IsHttpToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!IsHttpTchar(c)) return false;
  return true;
}

}  // namespace warden
