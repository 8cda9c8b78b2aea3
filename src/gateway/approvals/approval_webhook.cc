#include "gateway/approvals/approval_webhook.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

#include "gateway/approvals/approval_display.h"

namespace warden::gateway {

Result<std::string> ResolveWebhookSecret(const std::string& written, const std::string& where) {
  if (!written.starts_with("env:")) return written;
  const std::string var = written.substr(4);
  const char* value = std::getenv(var.c_str());
  if (value == nullptr || *value == '\0')
    return Status::Error(where + ".secret names environment variable " + var +
                         ", which is not set");
  return std::string(value);
}

void WebhookSlot::Post(const std::optional<policy::ApprovalWebhook>& hook, std::string event,
                       nlohmann::json payload) {
  std::lock_guard lock(mu_);
  if (!hook) {
    sender_.reset();
    url_.clear();
    written_secret_.clear();
    return;
  }
  if (hook->url != url_ || hook->secret != written_secret_) {
    sender_.reset();
    url_ = hook->url;
    written_secret_ = hook->secret;
    auto secret = ResolveWebhookSecret(hook->secret, where_);
    if (!secret) {
      spdlog::error("{}: webhook not set up: {}", where_, secret.status().message());
    } else {
      auto sender = notify::WebhookSender::Create({.url = hook->url, .secret = *secret});
      if (!sender) {
        spdlog::error("{}: webhook not set up: {}", where_, sender.status().message());
      } else {
        sender_ = std::move(*sender);
      }
    }
  }
  if (sender_) sender_->Post(std::move(event), std::move(payload));
}

notify::WebhookStats WebhookSlot::Stats() {
  std::lock_guard lock(mu_);
  return sender_ ? sender_->Stats() : notify::WebhookStats{};
}

void ApprovalWebhook::Created(const policy::Policy& policy, const state::ApprovalRecord& record) {
  nlohmann::json payload = {{"approval", ApprovalJsonForPeople(record)}};
  {
    std::lock_guard lock(mu_);
    if (!console_base_.empty()) payload["url"] = console_base_ + "/approvals/" + record.id;
  }
  slot_.Post(policy.approvals.webhook, "approval.created", std::move(payload));
}

}  // namespace warden::gateway
