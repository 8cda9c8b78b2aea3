// The redact stage (final, before audit): every secret value warden holds or handed out, and the
// well-known shapes of secrets (credentials/redactor.h), are replaced with a marker in what goes
// back to the agent and into the audit log: the result (tool results, resources, prompts, the
// upstream's errors), the reason of a refusal (an upstream's error text, a server's stderr), and
// the arguments as the audit log records them. It runs whatever happened before it and never
// denies. docs/credentials.md, "Redaction".
#include "audit/redact.h"
#include "gateway/credentials/broker.h"
#include "gateway/stages/stages.h"

namespace warden::gateway {
namespace {

class RedactStage : public Stage {
 public:
  explicit RedactStage(CredentialBroker* broker) : broker_(broker) {}
  std::string_view name() const override { return "redact"; }

  StageOutcome Run(CallContext& call) override {
    if (broker_) {
      broker_->Refresh();
      const credentials::Redactor& r = broker_->redactor();
      if (call.result) r.RedactJson(call.result->value);
      if (!call.verdict.reason.empty()) call.verdict.reason = r.RedactText(call.verdict.reason);
      r.RedactJson(call.arguments);
    } else {
      // No store: the shapes alone (a token an upstream echoes is still one).
      if (call.result) ShapesJson(call.result->value);
      if (!call.verdict.reason.empty())
        call.verdict.reason = audit::RedactShapes(call.verdict.reason);
    }
    return StageOutcome::Continue();
  }

 private:
  static void ShapesJson(nlohmann::json& value) {
    if (value.is_string()) {
      value = audit::RedactShapes(value.get_ref<const std::string&>());
    } else if (value.is_array() || value.is_object()) {
      for (auto& item : value) ShapesJson(item);
    }
  }
  CredentialBroker* broker_;
};

}  // namespace

std::unique_ptr<Stage> MakeRedactStage(const StageServices& services) {
  return std::make_unique<RedactStage>(services.credentials);
}

}  // namespace warden::gateway
