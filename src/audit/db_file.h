// The file of a SQLite database warden keeps (the audit log, and the gateway's state beside it):
// created before SQLite opens it, so that its mode is 0600 whatever the umask.
#pragma once

#include <string>

#include "common/status.h"

namespace warden::audit {

// Makes the missing parent directories (0700) and the file itself (0600) when absent; never
// follows a link at the file, and never opens a file that exists (closing a descriptor would drop
// the POSIX locks of this process's SQLite connections to it). SQLite gives the -wal and -shm
// files the database's mode.
Status CreateDatabaseFile(const std::string& path);

}  // namespace warden::audit
