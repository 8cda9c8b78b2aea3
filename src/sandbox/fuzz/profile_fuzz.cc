// libFuzzer entry point for the sandbox profile reader (YAML text -> Options): a profile may come
// from a workspace an agent wrote to. Invariants, beyond not crashing or throwing:
//   * a refused profile leaves the options exactly as they were (profile.h promises it);
//   * reading is deterministic, and applying an accepted profile a second time changes nothing
//     but the lists it appends to (ro, rw, allow), which grow by the same entries again.
// Seed corpus: tests/fuzz/corpus/profile/ (docs/testing-fuzz.md).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "sandbox/profile.h"

namespace {

using warden::sandbox::Bind;
using warden::sandbox::Options;

bool SameBinds(const std::vector<Bind>& a, const std::vector<Bind>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].host != b[i].host || a[i].inside != b[i].inside || a[i].writable != b[i].writable)
      return false;
  }
  return true;
}

// Every field but binds and allow.
bool SameScalars(const Options& a, const Options& b) {
  return a.timeout_ms == b.timeout_ms && a.memory_bytes == b.memory_bytes && a.pids == b.pids &&
         a.cpu_ms == b.cpu_ms && a.output_limit_bytes == b.output_limit_bytes &&
         a.tmpfs_bytes == b.tmpfs_bytes && a.file_size_bytes == b.file_size_bytes &&
         a.open_files == b.open_files && a.protect == b.protect && a.workdir == b.workdir &&
         a.env == b.env && a.net == b.net && a.resolve == b.resolve && a.backend == b.backend &&
         a.hostname == b.hostname && a.degrade.allow_no_landlock == b.degrade.allow_no_landlock &&
         a.degrade.allow_no_cgroups == b.degrade.allow_no_cgroups &&
         a.degrade.allow_no_seccomp_notify == b.degrade.allow_no_seccomp_notify && a.argv == b.argv;
}

bool Same(const Options& a, const Options& b) {
  return SameScalars(a, b) && SameBinds(a.binds, b.binds) && a.allow == b.allow;
}

// Options as `warden run` flags might have set them before the profile is applied.
Options Base() {
  Options o;
  o.timeout_ms = 1000;
  o.binds.push_back({"/work", "/work", true});
  o.allow = {"example.com"};
  o.env = {{"LANG", "C"}};
  o.argv = {"true"};
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const Options base = Base();
  Options once = base;
  const auto status = warden::sandbox::LoadProfileText(text, "fuzz.yaml", &once);
  if (!status.ok()) {
    FUZZ_CHECK(Same(once, base));
    FUZZ_CHECK(!status.message().empty());
    return 0;
  }
  Options again = base;
  FUZZ_CHECK(warden::sandbox::LoadProfileText(text, "fuzz.yaml", &again).ok());
  FUZZ_CHECK(Same(once, again));

  Options twice = once;
  FUZZ_CHECK(warden::sandbox::LoadProfileText(text, "fuzz.yaml", &twice).ok());
  FUZZ_CHECK(SameScalars(once, twice));
  const size_t added_binds = once.binds.size() - base.binds.size();
  const size_t added_allow = once.allow.size() - base.allow.size();
  FUZZ_CHECK(twice.binds.size() == once.binds.size() + added_binds);
  FUZZ_CHECK(twice.allow.size() == once.allow.size() + added_allow);
  FUZZ_CHECK(SameBinds(
      std::vector<Bind>(twice.binds.begin(), twice.binds.begin() + once.binds.size()), once.binds));
  return 0;
}
