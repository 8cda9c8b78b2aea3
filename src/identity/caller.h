// Who is calling: the tenant, user and agent a transport authenticated (identity.h for HTTP; the
// local user for stdio), and the task scope the session narrowed itself to. Plain data, shared by
// the gateway's transports, sessions and stages.
#pragma once

#include <string>

namespace warden::identity {

struct Caller {
  // `agent` empty: a person (a user's own key, a JWT without an agent claim, the local user);
  // set: an AI agent acting for `user`.
  std::string tenant, user, agent, scope;
};

}  // namespace warden::identity
