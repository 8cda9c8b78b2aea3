// The credentials stage (after approval, before execute): for a call an HTTP upstream with
// `credentials` serves, renders the headers that call's request carries (the calling user's
// secrets, a token minted for this call with the agent as actor), into call.state
// (UpstreamCallHeaders), where the session picks them up. A read call gets `read.header`, a
// write call `write.header`: a read never holds the write credential. A secret that is not set
// refuses this call alone, naming the secret and how to set it. stdio upstreams get their
// environment at spawn (session/upstream_instances.cc), not here. A sandbox__exec call whose
// profile grants egress credentials gets the user's secrets for its `warden run` child
// (SandboxLaunchEnv), whose proxy holds them; the sandbox sees placeholders. docs/credentials.md.
#include "gateway/credentials/broker.h"
#include "gateway/stages/stages.h"

namespace warden::gateway {
namespace {

class CredentialsStage : public Stage {
 public:
  explicit CredentialsStage(CredentialBroker* broker) : broker_(broker) {}
  std::string_view name() const override { return "credentials"; }

  StageOutcome Run(CallContext& call) override {
    if (!call.policy || call.server.empty()) return StageOutcome::Continue();
    if (call.server == "sandbox" && !call.policy->upstreams.contains(call.server))
      return SandboxCredentials(call);
    auto it = call.policy->upstreams.find(call.server);
    if (it == call.policy->upstreams.end() || !CredentialBroker::NeedsCallHeaders(it->second))
      return StageOutcome::Continue();
    if (!broker_) {
      // The policy asks for credentials this gateway cannot give: refused, never sent bare.
      return StageOutcome::Deny(
          Refusal::kInternal,
          "upstream " + call.server + " needs credentials but this gateway has no secret store");
    }
    // Write unless the policy said read: the same default as the policy's (a tool nobody
    // declared read is a write).
    const bool write = !call.decision || call.decision->access == policy::Access::kWrite;
    CredentialOwner owner{call.tenant, call.user, call.agent};
    auto headers = broker_->CallHeaders(*call.policy, call.server, owner, call.tool, write);
    if (!headers) {
      return StageOutcome::Deny(Refusal::kDenied, "upstream " + call.server + " credentials: " +
                                                      headers.status().message());
    }
    UpstreamCallHeaders& out = call.state.Get<UpstreamCallHeaders>();
    out.set = true;
    out.headers = std::move(*headers);
    return StageOutcome::Continue();
  }

 private:
  // sandbox__exec on a profile with egress credentials: the user's secrets for the launcher.
  StageOutcome SandboxCredentials(CallContext& call) {
    auto profile = ChooseSandboxProfile(call);
    if (!profile || profile->egress_credentials.empty()) return StageOutcome::Continue();
    if (!broker_) {
      return StageOutcome::Deny(Refusal::kInternal,
                                "the sandbox profile grants credentials but this gateway has no "
                                "secret store");
    }
    auto env = broker_->SandboxEnvironment(*profile, {call.tenant, call.user, call.agent});
    if (!env) return StageOutcome::Deny(Refusal::kDenied, "sandbox " + env.status().message());
    call.state.Get<SandboxLaunchEnv>().env = std::move(*env);
    return StageOutcome::Continue();
  }

  CredentialBroker* broker_;
};

}  // namespace

std::unique_ptr<Stage> MakeCredentialsStage(const StageServices& services) {
  return std::make_unique<CredentialsStage>(services.credentials);
}

}  // namespace warden::gateway
