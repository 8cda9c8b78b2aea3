// What the audit stage leaves in call.state once it has written the call's entry: the entry's id,
// for final stages after it (the undo stage keys the call's undo plan by it). Absent when the
// entry could not be written.
#pragma once

#include <cstdint>

namespace warden::gateway {

struct AuditRecorded {
  uint64_t id = 0;
};

}  // namespace warden::gateway
