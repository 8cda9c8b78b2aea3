// Helpers shared by the gateway tests: a temporary directory, policies from text, an audit log.
#pragma once

#include <memory>
#include <string>

#include "audit/audit_log.h"
#include "policy/policy.h"

namespace warden::gateway::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Loads `yaml`; fails the test (and returns null) when it does not load.
std::shared_ptr<const policy::Policy> PolicyFromText(const std::string& yaml);
// Opens (creating) the audit log at `path`; fails the test on error.
std::unique_ptr<audit::AuditLog> OpenAudit(const std::string& path);
// Writes `text` to `path`.
void WriteFile(const std::string& path, const std::string& text);

}  // namespace warden::gateway::testing
