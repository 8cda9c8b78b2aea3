#include "gateway/approvals/approval_webhook.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

namespace warden::gateway {

Result<std::string> ResolveWebhookSecret(const std::string& written) {
  if (!written.starts_with("env:")) return written;
  const std::string var = written.substr(4);
  const char* value = std::getenv(var.c_str());
  if (value == nullptr || *value == '\0')
    return Status::Error("approvals.webhook.secret names environment variable " + var +
                         ", which is not set");
  return std::string(value);
}

void ApprovalWebhook::Created(const policy::Policy& policy, const state::ApprovalRecord& record) {
  std::lock_guard lock(mu_);
  if (!policy.approvals.webhook) {
    sender_.reset();
    url_.clear();
    written_secret_.clear();
    failed_ = false;
    return;
  }
  const policy::ApprovalWebhook& hook = *policy.approvals.webhook;
  if (hook.url != url_ || hook.secret != written_secret_) {
    sender_.reset();
    failed_ = false;
    url_ = hook.url;
    written_secret_ = hook.secret;
    auto secret = ResolveWebhookSecret(hook.secret);
    if (!secret) {
      spdlog::error("approvals: webhook not set up: {}", secret.status().message());
      failed_ = true;
    } else {
      auto sender = notify::WebhookSender::Create({.url = hook.url, .secret = *secret});
      if (!sender) {
        spdlog::error("approvals: webhook not set up: {}", sender.status().message());
        failed_ = true;
      } else {
        sender_ = std::move(*sender);
      }
    }
  }
  if (!sender_) return;
  nlohmann::json payload = {{"approval", state::ToJson(record)}};
  if (!console_base_.empty()) payload["url"] = console_base_ + "/approvals/" + record.id;
  sender_->Post("approval.created", std::move(payload));
}

notify::WebhookStats ApprovalWebhook::Stats() {
  std::lock_guard lock(mu_);
  return sender_ ? sender_->Stats() : notify::WebhookStats{};
}

}  // namespace warden::gateway
