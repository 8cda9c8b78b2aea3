#include "gateway/stdio_server.h"

#include <unistd.h>

#include <cerrno>

namespace warden::gateway {

namespace {

Status WriteLine(int fd, std::string text) {
  text.push_back('\n');
  std::string_view rest = text;
  while (!rest.empty()) {
    ssize_t n = write(fd, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("write to the MCP client", errno);
    rest.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

bool IsBlank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

}  // namespace

Status StdioServer::HandleLine(std::string_view line, int out_fd) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (IsBlank(line)) return Status::Ok();
  std::optional<std::string> reply = session_.HandleText(line);
  if (!reply) return Status::Ok();
  return WriteLine(out_fd, std::move(*reply));
}

Status StdioServer::Serve(int in_fd, int out_fd) {
  const size_t cap = session_.max_message_bytes();
  std::string pending;      // the start of the current line
  bool discarding = false;  // the current line is over the cap: skip to its end
  size_t discarded = 0;
  char buf[65536];
  for (;;) {
    ssize_t n = read(in_fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("read from the MCP client", errno);
    if (n == 0) break;
    std::string_view chunk(buf, static_cast<size_t>(n));
    while (!chunk.empty()) {
      size_t nl = chunk.find('\n');
      std::string_view piece = chunk.substr(0, nl);
      chunk.remove_prefix(nl == std::string_view::npos ? chunk.size() : nl + 1);
      if (discarding) {
        discarded += piece.size();
      } else if (pending.size() + piece.size() > cap + 1) {  // +1: a '\r' before the '\n'
        discarding = true;
        discarded = pending.size() + piece.size();
        pending.clear();
        pending.shrink_to_fit();
      } else {
        pending.append(piece);
      }
      if (nl == std::string_view::npos) break;
      if (discarding) {
        WARDEN_RETURN_IF_ERROR(WriteLine(out_fd, session_.RefuseOversized(discarded)));
        discarding = false;
        discarded = 0;
      } else {
        WARDEN_RETURN_IF_ERROR(HandleLine(pending, out_fd));
      }
      pending.clear();
    }
  }
  // A last line without its newline still counts.
  if (discarding) return WriteLine(out_fd, session_.RefuseOversized(discarded));
  if (!pending.empty()) return HandleLine(pending, out_fd);
  return Status::Ok();
}

}  // namespace warden::gateway
