#include "gateway/stdio/stdio_server.h"

#include <unistd.h>

#include <cerrno>
#include <vector>

#include "mcp/modern.h"
#include "mcp/protocol_version.h"

namespace warden::gateway {

namespace {

bool IsBlank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

std::string Oversized(std::size_t bytes, std::size_t cap) {
  return mcp::Serialize(mcp::MakeError(std::nullopt, mcp::kInvalidRequest,
                                       "Invalid Request: message is " + std::to_string(bytes) +
                                           " bytes or more, more than the limit of " +
                                           std::to_string(cap)));
}

// The replies owed for one batch line, written together as one array once all have come.
struct BatchReplies {
  std::mutex mu;
  std::vector<std::optional<mcp::Message>> slots;
  size_t remaining = 0;
};

}  // namespace

StdioServer::StdioServer(std::shared_ptr<McpSession> session, std::size_t max_message_bytes,
                         TaskContexts::Make make_context)
    : session_(std::move(session)), cap_(max_message_bytes) {
  if (make_context) {
    tasks_ = std::make_unique<TaskContexts>("stdio", std::move(make_context),
                                            [](std::shared_ptr<McpSession> context) {
                                              context->Close();
                                            });
  }
}

void StdioServer::Write(const std::string& text) {
  std::lock_guard lock(write_mu_);
  if (write_failed_.load()) return;
  std::string line = text + "\n";
  std::string_view rest = line;
  while (!rest.empty()) {
    ssize_t n = write(out_fd_, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      write_error_ = Status::FromErrno("write to the MCP client", errno);
      write_failed_ = true;
      return;
    }
    rest.remove_prefix(static_cast<size_t>(n));
  }
}

void StdioServer::HandleLine(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (IsBlank(line)) return;
  mcp::ParseOptions options;
  options.max_bytes = cap_;
  options.allow_batch = session_->AllowsBatches();
  mcp::ParseResult parsed = mcp::Parse(line, options);
  auto write_message = [this](const mcp::Message& m) { Write(mcp::Serialize(m)); };
  if (era_ == Era::kUndecided && !parsed.is_batch) {
    if (const auto* m = std::get_if<mcp::Message>(&parsed.entries.front())) {
      if (const auto* request = std::get_if<mcp::Request>(m)) {
        const std::string version = mcp::MetaProtocolVersion(*request);
        era_ = request->method != "initialize" && !version.empty() && !mcp::IsSupportedVersion(version) && tasks_
                   ? Era::kModern
                   : Era::kSession;
      }
    }
  }
  if (era_ == Era::kModern) return HandleModernLine(std::move(parsed));

  if (!parsed.is_batch) {
    const mcp::ParsedEntry& entry = parsed.entries.front();
    if (const auto* error = std::get_if<mcp::ErrorResponse>(&entry)) {
      session_->AuditProtocolError(*error);
      write_message(*error);
      return;
    }
    session_->Handle(std::get<mcp::Message>(entry),
                     Exchange{.related = write_message,
                              .reply = [this](mcp::Message m) { Write(mcp::Serialize(m)); }});
    return;
  }
  auto batch = std::make_shared<BatchReplies>();
  batch->slots.resize(parsed.entries.size());
  std::vector<size_t> requests;
  for (size_t i = 0; i < parsed.entries.size(); ++i) {
    const mcp::ParsedEntry& entry = parsed.entries[i];
    if (const auto* error = std::get_if<mcp::ErrorResponse>(&entry)) {
      session_->AuditProtocolError(*error);
      batch->slots[i] = *error;
    } else if (std::holds_alternative<mcp::Request>(std::get<mcp::Message>(entry))) {
      requests.push_back(i);
    }
  }
  batch->remaining = requests.size();
  auto flush = [this, batch] {
    std::vector<mcp::Message> out;
    for (auto& slot : batch->slots)
      if (slot) out.push_back(std::move(*slot));
    if (!out.empty()) Write(mcp::SerializeBatch(out));
  };
  if (requests.empty()) {
    for (size_t i = 0; i < parsed.entries.size(); ++i)
      if (const auto* m = std::get_if<mcp::Message>(&parsed.entries[i]))
        session_->Handle(*m, Exchange{.related = write_message});
    flush();
    return;
  }
  for (size_t i = 0; i < parsed.entries.size(); ++i) {
    const auto* m = std::get_if<mcp::Message>(&parsed.entries[i]);
    if (!m) continue;
    Exchange exchange{.related = write_message};
    if (std::holds_alternative<mcp::Request>(*m)) {
      exchange.reply = [batch, i, flush](mcp::Message reply) {
        bool last;
        {
          std::lock_guard lock(batch->mu);
          batch->slots[i] = std::move(reply);
          last = --batch->remaining == 0;
        }
        if (last) flush();
      };
    }
    session_->Handle(*m, std::move(exchange));
  }
}

void StdioServer::HandleModernLine(mcp::ParseResult parsed) {
  auto write_message = [this](const mcp::Message& m) { Write(mcp::Serialize(m)); };
  if (parsed.is_batch) {
    write_message(mcp::MakeError(std::nullopt, mcp::kInvalidRequest,
                                 "batches are not part of protocol version 2026-07-28"));
    return;
  }
  mcp::ParsedEntry& entry = parsed.entries.front();
  if (const auto* error = std::get_if<mcp::ErrorResponse>(&entry)) {
    session_->AuditProtocolError(*error);
    write_message(*error);
    return;
  }
  const mcp::Message& message = std::get<mcp::Message>(entry);
  if (const auto* note = std::get_if<mcp::Notification>(&message)) {
    // The one notification a 2026 stdio client sends warden: it ends a subscription.
    if (note->method == "notifications/cancelled" && note->params && note->params->is_object() &&
        note->params->contains("requestId"))
      for (auto& context : tasks_->All()) context->CancelListen((*note->params)["requestId"]);
    return;
  }
  auto* request = std::get_if<mcp::Request>(&std::get<mcp::Message>(entry));
  if (request == nullptr) return;  // responses: nothing warden needs
  auto context = tasks_->For(session_->caller(), *request);
  if (!context) {
    write_message(mcp::MakeError(request->id, mcp::kInvalidParams, context.status().message()));
    return;
  }
  (*context)->HandleModern(std::move(*request),
                           Exchange{.related = write_message, .reply = write_message});
}

Status StdioServer::Serve(int in_fd, int out_fd) {
  out_fd_ = out_fd;
  session_->AttachStream([this](const mcp::Message& m) { Write(mcp::Serialize(m)); });
  std::string pending;      // the start of the current line
  bool discarding = false;  // the current line is over the cap: skip to its end
  size_t discarded = 0;
  char buf[65536];
  Status read_status;
  for (;;) {
    if (write_failed_.load()) break;
    ssize_t n = read(in_fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      read_status = Status::FromErrno("read from the MCP client", errno);
      break;
    }
    if (n == 0) break;
    std::string_view chunk(buf, static_cast<size_t>(n));
    while (!chunk.empty()) {
      size_t nl = chunk.find('\n');
      std::string_view piece = chunk.substr(0, nl);
      chunk.remove_prefix(nl == std::string_view::npos ? chunk.size() : nl + 1);
      if (discarding) {
        discarded += piece.size();
      } else if (pending.size() + piece.size() > cap_ + 1) {  // +1: a '\r' before the '\n'
        discarding = true;
        discarded = pending.size() + piece.size();
        pending.clear();
        pending.shrink_to_fit();
      } else {
        pending.append(piece);
      }
      if (nl == std::string_view::npos) break;
      if (discarding) {
        Write(Oversized(discarded, cap_));
        discarding = false;
        discarded = 0;
      } else {
        HandleLine(pending);
      }
      pending.clear();
    }
  }
  // A last line without its newline still counts.
  if (read_status.ok()) {
    if (discarding) Write(Oversized(discarded, cap_));
    else if (!pending.empty()) HandleLine(pending);
  }
  if (tasks_) {
    for (auto& context : tasks_->TakeAll()) {
      // Calls in flight are answered, as in a session; a call parked for a retry that can no
      // longer come is not waited for.
      if (context->parked_count() == 0) context->Drain();
      context->Close();
    }
  }
  session_->Drain();
  session_->Close();
  std::lock_guard lock(write_mu_);
  if (write_failed_.load()) return write_error_;
  return read_status;
}

}  // namespace warden::gateway
