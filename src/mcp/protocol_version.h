// The MCP protocol versions warden speaks and how one is chosen during initialize.
#pragma once

#include <array>
#include <string_view>

namespace warden::mcp {

// Newest first. A version is a date string, compared as an opaque token.
inline constexpr std::array<std::string_view, 3> kSupportedVersions = {
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
};

// The newest version warden speaks.
constexpr std::string_view LatestVersion() { return kSupportedVersions.front(); }

bool IsSupportedVersion(std::string_view version);

// The server's answer to an initialize request asking for `requested`: the same version when
// warden supports it, else the newest one warden supports (the client then decides whether to
// continue). The returned view points at static storage.
std::string_view Negotiate(std::string_view requested);

// Whether JSON-RPC batches (arrays of messages) are allowed: only in 2025-03-26; 2025-06-18 removed
// them. False for versions warden does not speak.
bool AllowsBatches(std::string_view version);

}  // namespace warden::mcp
