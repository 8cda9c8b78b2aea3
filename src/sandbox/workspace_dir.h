// Host directories that a sandbox writes into: sandbox__exec's workspace (gateway/builtin_tools.cc)
// and a pool's per-sandbox workspace (pool.cc). Whatever a command leaves there is hostile: it is
// reached through descriptors, one component at a time, never following a symbolic link.
#pragma once

#include <fcntl.h>

#include <string>

#include "common/status.h"
#include "common/unique_fd.h"
#include "sandbox/user.h"

namespace warden::sandbox::workspace {

inline constexpr int kDirOpenFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

// The directory for private workspace parents: $TMPDIR when absolute, else /tmp.
std::string TempBase();

// `warden run` opens a bind source as the sandbox's host user: every directory from `base` up to
// / must let others search it when that user is not us. The error says what to change.
Status CheckSearchable(const std::string& base);

// A private directory `base`/`prefix`XXXXXX (mkdtemp: 0700, ours), made 0711 (searchable, not
// listable) when the sandbox's host user is not us. Returns its path; `*fd` is its descriptor.
Result<std::string> MakePrivateParent(const std::string& base, const std::string& prefix,
                                      const user::IdMap& ids, UniqueFd* fd);

// Makes directory `name` (0700) under `parent_fd`, owned by the sandbox's host user, and opens it.
Result<UniqueFd> MakeOwnedDir(int parent_fd, const std::string& name, const user::IdMap& ids);

// Gives `fd` to the sandbox's host user (when the caller is root: an unprivileged id, which must
// be able to write what the caller made for it). `what` names it in the error.
Status Own(int fd, const user::IdMap& ids, const std::string& what);

// A new open file description of directory `dirfd`, for readdir (a dup would share the read
// position).
int OpenForListing(int dirfd);

// Removes everything below `dirfd`, which a command may have filled with links, read-only or
// unsearchable directories, and trees deep enough to exhaust a recursion: never follows a link,
// grants itself the permissions it needs, and moves too-deep directories up to remove them in a
// later pass.
void RemoveContents(int dirfd);

// RemoveContents, then the directory `name` itself under `parent_fd`.
void RemoveTree(int parent_fd, const std::string& name);

}  // namespace warden::sandbox::workspace
