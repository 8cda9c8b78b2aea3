// Sandbox profiles: a YAML file that can say everything `warden run`'s options can say, plus the
// paths inside --rw workspaces that stay read-only. Schema and defaults: docs/sandbox.md.
#pragma once

#include <string>

#include "sandbox/options.h"

namespace warden::sandbox {

// The workspace paths that stay read-only when a profile names none (`protect:` replaces them):
// files that run again later outside the sandbox (git hooks, shell rc files, agent configs).
const std::vector<std::string>& DefaultProtectedPaths();

// Applies the profile at `path` on top of `options`. Unknown keys, wrong types and bad values
// are errors naming the file, the line and what was expected; `options` is untouched on error.
Status LoadProfile(const std::string& path, Options* options);
// Same, from YAML text (`origin` names it in errors).
Status LoadProfileText(const std::string& text, const std::string& origin, Options* options);

// Parses "HOST[:INSIDE]" as given to --ro / --rw.
Bind ParseBindSpec(const std::string& spec, bool writable);

}  // namespace warden::sandbox
