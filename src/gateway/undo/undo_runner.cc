#include "gateway/undo/undo_runner.h"

#include <future>
#include <memory>

#include "gateway/session/session.h"
#include "state/database.h"

namespace warden::gateway {
namespace {

using nlohmann::json;
using state::UndoRecord;
using state::UndoStatus;

std::string CallIdText(uint64_t id) { return std::to_string(id); }

// The first text of a CallToolResult, or its error message: what the undo says it answered.
std::string UndoReplySummary(const json& reply) {
  if (reply.contains("error")) return reply["error"].value("message", reply["error"].dump());
  const json& result = reply.contains("result") ? reply["result"] : reply;
  if (result.contains("content") && result["content"].is_array()) {
    for (const json& part : result["content"])
      if (part.is_object() && part.value("type", "") == "text" && part.contains("text") &&
          part["text"].is_string())
        return part["text"].get<std::string>();
  }
  return result.dump();
}

json UndoReplyJson(const mcp::Message& message) {
  if (const auto* response = std::get_if<mcp::Response>(&message))
    return json{{"result", response->result}};
  if (const auto* error = std::get_if<mcp::ErrorResponse>(&message)) {
    json e = {{"code", error->code}, {"message", error->message}};
    if (error->data) e["data"] = *error->data;
    return json{{"error", std::move(e)}};
  }
  return json{{"error", {{"code", mcp::kInternalError}, {"message", "unexpected reply"}}}};
}

// Sends one request to `session` and waits for its reply, at most until `deadline`.
Result<json> AskUndoSession(McpSession& session, int64_t id, const std::string& method, json params,
                            std::chrono::steady_clock::time_point deadline) {
  auto promise = std::make_shared<std::promise<json>>();
  auto future = promise->get_future();
  Exchange exchange;
  exchange.reply = [promise](mcp::Message m) { promise->set_value(UndoReplyJson(m)); };
  session.Handle(mcp::Request{mcp::Id(id), method, std::move(params)}, std::move(exchange));
  if (future.wait_until(deadline) != std::future_status::ready)
    return Status::Error(method + " got no answer in time");
  return future.get();
}

}  // namespace

std::string UndoSessionId(uint64_t call_id) { return "undo-" + CallIdText(call_id); }

UndoOutcome UndoRunner::NoPlan(uint64_t call_id) {
  UndoOutcome out;
  out.call_id = call_id;
  audit::AuditFilter filter;
  filter.after_id = call_id - 1;
  filter.limit = 1;
  auto entries = core_.audit().Query(filter);
  if (!entries) {
    out.message = "the audit log could not be read: " + entries.status().message();
    return out;
  }
  if (entries->empty() || entries->front().id != call_id) {
    out.result = UndoResult::kUnknownCall;
    out.message = "no call " + CallIdText(call_id) + " in the audit log";
    return out;
  }
  const audit::AuditEntry& entry = entries->front();
  out.result = UndoResult::kNotUndoable;
  if (entry.kind == audit::EntryKind::kAdmin) {
    out.message = "entry " + CallIdText(call_id) + " is an admin entry (" + entry.decision +
                  "), not a call: there is nothing to undo";
  } else if (entry.kind == audit::EntryKind::kDecision) {
    out.message = "call " + CallIdText(call_id) + " did not run (" + entry.decision +
                  "): there is nothing to undo";
  } else {
    out.message = "call " + CallIdText(call_id) + " has no compensating call: its rule has no undo";
  }
  return out;
}

UndoOutcome UndoRunner::Undo(uint64_t call_id, const std::string& who) {
  UndoOutcome out;
  out.call_id = call_id;
  if (call_id == 0) {
    out.result = UndoResult::kUnknownCall;
    out.message = "no call 0: audit entry ids start at 1";
    return out;
  }
  auto claim = store_.Claim(call_id, who);
  if (!claim) {
    out.message = "the undo store could not be used: " + claim.status().message();
    return out;
  }
  const UndoRecord& record = claim->record;
  if (record.call_id == 0) return NoPlan(call_id);
  out.undo_tool = record.undo_tool;
  out.undo_arguments = record.undo_args;
  if (!claim->claimed) {
    switch (record.status) {
      case UndoStatus::kUnavailable:
        out.result = UndoResult::kNotUndoable;
        out.message = "call " + CallIdText(call_id) + " (" + record.tool +
                      ") has no compensating call: " + record.reason;
        break;
      case UndoStatus::kDone:
        out.result = UndoResult::kAlreadyUndone;
        out.undo_call_id = record.undo_call_id;
        out.message = "call " + CallIdText(call_id) + " was already undone by " + record.undone_by +
                      " at " + record.undone_at + " (call " + CallIdText(record.undo_call_id) + ")";
        break;
      default:
        out.result = UndoResult::kInProgress;
        out.message = "an undo of call " + CallIdText(call_id) + " by " + record.undone_by +
                      " is running now";
        break;
    }
    return out;
  }

  auto reply = RunCompensatingCall(record);
  bool ok = false;
  std::string failure;
  if (!reply) {
    failure = reply.status().message();
  } else {
    out.reply = reply->contains("result") ? (*reply)["result"] : (*reply)["error"];
    ok = reply->contains("result") && !(*reply)["result"].value("isError", false);
    if (!ok) failure = UndoReplySummary(*reply);
  }
  out.undo_call_id = CompensatingEntryId(record);

  // The link: one admin entry naming who, the original call and the compensating one.
  audit::AuditEntry link;
  link.kind = audit::EntryKind::kAdmin;
  link.tenant = record.tenant;
  link.user = record.user;
  link.agent = record.agent;
  link.session = UndoSessionId(call_id);
  link.tool = record.tool;
  link.decision = ok ? "undo" : "undo_failed";
  link.rule = "undo." + CallIdText(call_id);
  link.reason = ok ? "call " + CallIdText(call_id) + " undone by " + who + " with " +
                         record.undo_tool + " (call " + CallIdText(out.undo_call_id) + ")"
                   : "undo of call " + CallIdText(call_id) + " by " + who + " failed: " + failure;
  link.approvals.push_back({who, state::Now(), ok ? "undo" : "undo_failed"});
  link.arguments = {{"call_id", call_id},
                    {"undo_tool", record.undo_tool},
                    {"undo_arguments", record.undo_args},
                    {"undo_call_id", out.undo_call_id}};
  auto linked = core_.audit().Append(std::move(link));
  if (linked) out.link_id = linked->id;

  auto finished = store_.Finish(call_id, ok, ok ? "" : failure, out.undo_call_id);
  if (!linked || !finished) {
    out.result = UndoResult::kError;
    out.message = "the compensating call " + record.undo_tool + (ok ? " ran" : " failed") +
                  ", but " +
                  (!linked ? "its audit link could not be written: " + linked.status().message()
                           : "the undo store could not be updated: " + finished.status().message());
    return out;
  }
  out.result = ok ? UndoResult::kDone : UndoResult::kFailed;
  out.message = ok ? "call " + CallIdText(call_id) + " undone: " + record.undo_tool +
                         " ran as call " + CallIdText(out.undo_call_id)
                   : "the compensating call " + record.undo_tool + " of call " +
                         CallIdText(call_id) + " failed: " + failure;
  return out;
}

Result<json> UndoRunner::RunCompensatingCall(const UndoRecord& record) {
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  identity::Caller caller{record.tenant, record.user, record.agent, record.scope};
  auto session = std::make_shared<McpSession>(
      core_, caller, SessionOptions{UndoSessionId(record.call_id), "undo"});
  core_.Register(session);
  auto result = [&]() -> Result<json> {
    auto init = AskUndoSession(*session, 1, "initialize",
                               {{"protocolVersion", "2025-06-18"},
                                {"capabilities", json::object()},
                                {"clientInfo", {{"name", "warden-undo"}, {"version", "1"}}}},
                               deadline);
    if (!init) return init.status();
    if (!init->contains("result"))
      return Status::Error("the undo session did not start: " + UndoReplySummary(*init));
    session->Handle(mcp::Notification{"notifications/initialized", std::nullopt}, {});
    // The listing learns the upstreams' tools (and their pins) as a client's first would.
    auto list = AskUndoSession(*session, 2, "tools/list", json::object(), deadline);
    if (!list) return list.status();
    return AskUndoSession(*session, 3, "tools/call",
                          {{"name", record.undo_tool}, {"arguments", record.undo_args}}, deadline);
  }();
  session->Close();  // cancels the call when it did not answer in time
  core_.Unregister(session.get());
  if (!result)
    return Status::Error(result.status().message() + " (" +
                         std::to_string(options_.timeout.count() / 1000) + " s)");
  return result;
}

uint64_t UndoRunner::CompensatingEntryId(const UndoRecord& record) {
  audit::AuditFilter filter;
  filter.session = UndoSessionId(record.call_id);
  filter.tool = record.undo_tool;
  filter.limit = 1;
  filter.newest = true;
  auto entries = core_.audit().Query(filter);
  if (!entries) return 0;
  for (auto it = entries->rbegin(); it != entries->rend(); ++it)
    if (it->kind != audit::EntryKind::kAdmin) return it->id;
  return 0;
}

}  // namespace warden::gateway
