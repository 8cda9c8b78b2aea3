#include "mcp/protocol_version.h"

#include <algorithm>

namespace warden::mcp {

bool IsSupportedVersion(std::string_view version) {
  return std::find(kSupportedVersions.begin(), kSupportedVersions.end(), version) !=
         kSupportedVersions.end();
}

std::string_view Negotiate(std::string_view requested) {
  for (std::string_view v : kSupportedVersions) {
    if (v == requested) return v;
  }
  return LatestVersion();
}

bool AllowsBatches(std::string_view version) { return version == "2025-03-26"; }

}  // namespace warden::mcp
