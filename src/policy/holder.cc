#include "policy/holder.h"

namespace warden::policy {

PolicyHolder::PolicyHolder(std::shared_ptr<const Policy> initial) : current_(std::move(initial)) {}

std::shared_ptr<const Policy> PolicyHolder::Current() const {
  return current_.load(std::memory_order_acquire);
}

void PolicyHolder::Set(std::shared_ptr<const Policy> policy) {
  current_.store(std::move(policy), std::memory_order_release);
}

Status PolicyHolder::ReloadFrom(const std::string& path) {
  Result<Policy> loaded = LoadPolicyFile(path);
  if (!loaded.ok()) return loaded.status().Wrap("policy reload kept the previous policy");
  Set(std::make_shared<const Policy>(std::move(loaded).value()));
  return Status::Ok();
}

}  // namespace warden::policy
