#include "egress/resolver.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

namespace warden::egress {

struct ResolverPool::Shared {
  struct Job {
    std::string name;
    Callback done;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Job> queue;
  size_t max_threads = 1;
  size_t max_queued = 0;
  size_t threads = 0;  // started and not yet exited
  size_t idle = 0;
  bool stopped = false;
};

namespace {

Result<std::vector<IpAddress>> Resolve(const std::string& name) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(name.c_str(), nullptr, &hints, &res);
  if (rc != 0) {
    return Status::Error(rc == EAI_SYSTEM ? std::string(std::strerror(errno)) : gai_strerror(rc));
  }
  std::vector<IpAddress> out;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    IpAddress a;
    if (ai->ai_family == AF_INET) {
      const auto* sin = reinterpret_cast<const sockaddr_in*>(ai->ai_addr);
      a.family = IpAddress::Family::kV4;
      std::memcpy(a.bytes.data(), &sin->sin_addr, 4);
    } else if (ai->ai_family == AF_INET6) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(ai->ai_addr);
      a.family = IpAddress::Family::kV6;
      std::memcpy(a.bytes.data(), &sin6->sin6_addr, 16);
    } else {
      continue;
    }
    bool seen = false;
    for (const auto& b : out) seen |= b == a;
    if (!seen) out.push_back(a);
  }
  freeaddrinfo(res);
  if (out.empty()) return Status::Error("no addresses");
  return out;
}

void WorkerLoop(std::shared_ptr<ResolverPool::Shared> s) {
  std::unique_lock lock(s->mu);
  while (true) {
    ++s->idle;
    // Idle workers exit after a while so that a quiet proxy holds no threads.
    bool woke = s->cv.wait_for(lock, std::chrono::seconds(30),
                               [&] { return s->stopped || !s->queue.empty(); });
    --s->idle;
    if (s->stopped || !woke) break;
    auto job = std::move(s->queue.front());
    s->queue.pop_front();
    lock.unlock();
    auto result = Resolve(job.name);
    job.done(std::move(result));
    lock.lock();
  }
  --s->threads;
}

}  // namespace

ResolverPool::ResolverPool(size_t max_threads, size_t max_queued)
    : shared_(std::make_shared<Shared>()) {
  shared_->max_threads = max_threads == 0 ? 1 : max_threads;
  shared_->max_queued = max_queued;
}

ResolverPool::~ResolverPool() {
  std::lock_guard lock(shared_->mu);
  shared_->stopped = true;
  shared_->queue.clear();
  shared_->cv.notify_all();
}

void ResolverPool::Lookup(std::string name, Callback done) {
  std::unique_lock lock(shared_->mu);
  if (shared_->queue.size() >= shared_->max_queued + shared_->idle) {
    lock.unlock();
    done(Status::Error("resolver queue full"));
    return;
  }
  shared_->queue.push_back({std::move(name), std::move(done)});
  if (shared_->idle > 0) {
    shared_->cv.notify_one();
  } else if (shared_->threads < shared_->max_threads) {
    ++shared_->threads;
    std::thread(WorkerLoop, shared_).detach();
  }
}

}  // namespace warden::egress
