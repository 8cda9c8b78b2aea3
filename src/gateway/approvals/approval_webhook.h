// approvals.webhook (docs/approvals.md, "Webhook"): each new approval POSTed, signed, to the URL the
// policy in force names, from the sender's own thread (notify::WebhookSender): never on the call
// path, retried with backoff. A reload that changes the URL or the secret gets a new sender; one
// that removes the section stops posting.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "notify/webhook.h"
#include "policy/model.h"
#include "state/approval_store.h"

namespace warden::gateway {

// The secret as the policy writes it: "env:VAR" is the variable's value (an error when unset or
// empty), anything else the text itself.
Result<std::string> ResolveWebhookSecret(const std::string& written);

class ApprovalWebhook {
 public:
  // Posts `record` ("approval.created") to `policy`'s webhook, if it has one. Never blocks on
  // the network; a webhook that cannot be set up (an unset secret variable) is logged once per
  // configuration and skipped: the call still waits for a person, who can see it in the console.
  void Created(const policy::Policy& policy, const state::ApprovalRecord& record);

  // The sender in use (null when none): for tests and stats.
  notify::WebhookStats Stats();

  // Where the console shows an approval, for the payload's `url` ("" leaves it out).
  void SetConsoleBase(std::string base) {
    std::lock_guard lock(mu_);
    console_base_ = std::move(base);
  }

 private:
  std::mutex mu_;
  std::string url_, written_secret_;  // what the sender was built for
  std::unique_ptr<notify::WebhookSender> sender_;
  bool failed_ = false;  // building it for this url/secret failed (logged once)
  std::string console_base_;
};

}  // namespace warden::gateway
