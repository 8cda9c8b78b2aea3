// approvals.webhook (docs/approvals.md, "Webhook"): each new approval POSTed, signed, to the URL the
// policy in force names, from the sender's own thread (notify::WebhookSender): never on the call
// path, retried with backoff. A reload that changes the URL or the secret gets a new sender; one
// that removes the section stops posting. WebhookSlot is that rule on its own, which the alerts
// (gateway/alerts.h) use for monitoring.alerts.webhook too.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "notify/webhook.h"
#include "policy/model.h"
#include "state/approval_store.h"

namespace warden::gateway {

// The secret as the policy writes it: "env:VAR" is the variable's value (an error naming `where`
// when unset or empty), anything else the text itself.
Result<std::string> ResolveWebhookSecret(const std::string& written,
                                         const std::string& where = "approvals.webhook");

// The sender of one policy webhook setting, kept across calls and rebuilt only when the setting
// changes. Thread-safe.
class WebhookSlot {
 public:
  // `where` names the setting in log lines ("approvals.webhook").
  explicit WebhookSlot(std::string where) : where_(std::move(where)) {}
  // Posts `event` to `hook` (nothing when it is unset). A webhook that cannot be set up (an
  // unset secret variable, a bad CA file) is logged once per setting and skipped.
  void Post(const std::optional<policy::ApprovalWebhook>& hook, std::string event,
            nlohmann::json payload);
  notify::WebhookStats Stats();  // of the sender in use (zeros when none)

 private:
  const std::string where_;
  std::mutex mu_;
  std::string url_, written_secret_;  // what the sender was built for
  std::unique_ptr<notify::WebhookSender> sender_;
};

class ApprovalWebhook {
 public:
  // Posts `record` ("approval.created") to `policy`'s webhook, if it has one. Never blocks on
  // the network; a webhook that cannot be set up is logged once per configuration and skipped:
  // the call still waits for a person, who can see it in the console.
  void Created(const policy::Policy& policy, const state::ApprovalRecord& record);

  // The sender in use (null when none): for tests and stats.
  notify::WebhookStats Stats() { return slot_.Stats(); }

  // Where the console shows an approval, for the payload's `url` ("" leaves it out).
  void SetConsoleBase(std::string base) {
    std::lock_guard lock(mu_);
    console_base_ = std::move(base);
  }

 private:
  WebhookSlot slot_{"approvals.webhook"};
  std::mutex mu_;
  std::string console_base_;
};

}  // namespace warden::gateway
