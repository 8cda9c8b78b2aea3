#include "audit/options.h"

namespace warden::audit {

std::string_view ToString(SyncLevel level) { return level == SyncLevel::kFull ? "full" : "normal"; }

Result<SyncLevel> ParseSyncLevel(std::string_view text) {
  if (text == "normal") return SyncLevel::kNormal;
  if (text == "full") return SyncLevel::kFull;
  return Status::Error("unknown sync level '" + std::string(text) + "' (expected normal or full)");
}

}  // namespace warden::audit
