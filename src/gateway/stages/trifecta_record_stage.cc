// The trifecta_record stage (final, after audit): what a call that ran returned joins its
// session's trifecta state (the legs it brought, fingerprints of its private parts, where its
// destinations came from), named by the call's audit entry id; and the call leaves flight.
// It never denies: the result is recorded already. A row that cannot be stored is logged; this
// process keeps enforcing from memory.
#include <spdlog/spdlog.h>

#include "gateway/stages/stages.h"
#include "gateway/trifecta/flow_tracker.h"
#include "gateway/undo/audit_recorded.h"

namespace warden::gateway {
namespace {

class TrifectaRecordStage : public Stage {
 public:
  std::string_view name() const override { return "trifecta_record"; }

  StageOutcome Run(CallContext& call) override {
    TrifectaCall* mine = call.state.Find<TrifectaCall>();
    if (mine == nullptr || mine->tracker == nullptr) return StageOutcome::Continue();
    policy::FlowFacts facts;
    // A call that ran: its result came back (also when the final stages then withheld it, since
    // the tool saw the arguments and the session may have seen the output in progress).
    if (call.result && !call.result->rpc_error) {
      const AuditRecorded* recorded = call.state.Find<AuditRecorded>();
      facts = policy::Absorb(mine->flow, mine->labels, call.arguments, call.result->value,
                             {recorded ? recorded->id : 0, call.tool});
    }
    Status stored = mine->tracker->Finish(mine->ticket, facts);
    if (!stored.ok())
      spdlog::error("trifecta: what {} brought into {} was kept in memory but not stored: {}",
                    call.tool, mine->ticket.keys.empty() ? "" : mine->ticket.keys.front(),
                    stored.message());
    mine->tracker = nullptr;
    return StageOutcome::Continue();
  }
};

}  // namespace

std::unique_ptr<Stage> MakeTrifectaRecordStage(const StageServices& services) {
  (void)services;
  return std::make_unique<TrifectaRecordStage>();
}

}  // namespace warden::gateway
