// Name resolution off the proxy's thread. getaddrinfo blocks and cannot be cancelled, and Asio's
// own async resolver runs every lookup of an io_context on one private thread, so one slow name
// would hold up every other client's. This pool runs up to N lookups at once on detached worker
// threads: a lookup stuck in the C library never blocks the proxy, nor its shutdown.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "egress/ip_address.h"

namespace warden::egress {

class ResolverPool {
 public:
  using Callback = std::function<void(Result<std::vector<IpAddress>>)>;

  // `max_threads` lookups run at once; more wait in a queue of at most `max_queued` (beyond
  // it, Lookup fails at once with "resolver queue full").
  ResolverPool(size_t max_threads, size_t max_queued);
  // Stops taking work; queued lookups are dropped (their callbacks never run); running ones
  // finish on their detached threads and their callbacks still run.
  ~ResolverPool();
  ResolverPool(const ResolverPool&) = delete;
  ResolverPool& operator=(const ResolverPool&) = delete;

  // Resolves `name` (a validated host name, never an address spelling) to its TCP addresses in
  // the C library's preferred order. `done` runs exactly once, on a worker thread (or on the
  // calling thread when the queue is full), unless the pool is destroyed first.
  void Lookup(std::string name, Callback done);

  struct Shared;  // with the worker threads, which may outlive the pool

 private:
  std::shared_ptr<Shared> shared_;
};

}  // namespace warden::egress
