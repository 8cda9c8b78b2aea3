#include "egress/decision_channel.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

namespace warden::egress {
namespace {

using nlohmann::json;

constexpr int kSendBuffer = 1 << 20;  // asked for; the kernel caps it at net.core.wmem_max

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// One whole message, or "" at end of channel; errors other than EINTR end it too.
bool ReceiveMessage(int fd, std::vector<char>& buf, std::string* out) {
  for (;;) {
    ssize_t n = ::recv(fd, buf.data(), buf.size(), MSG_TRUNC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    // A message larger than the buffer arrives cut: it is malformed, and the rest is dropped.
    out->assign(buf.data(), std::min(static_cast<size_t>(n), buf.size()));
    if (static_cast<size_t>(n) > buf.size()) out->clear();
    return true;
  }
}

}  // namespace

Result<std::pair<UniqueFd, UniqueFd>> MakeDecisionChannel() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
    return Status::FromErrno("decision channel: socketpair", errno);
  for (int fd : fds) {
    int size = kSendBuffer;
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);  // best effort
  }
  return std::make_pair(UniqueFd(fds[0]), UniqueFd(fds[1]));
}

std::string EncodeAttempt(uint64_t id, const Attempt& a) {
  json head = {{"id", id},
               {"host", a.host},
               {"port", a.port},
               {"protocol", ProtocolName(a.protocol)},
               {"target", a.target},
               {"headers_bytes", a.headers.size()}};
  std::string out = Dump(head);
  out += '\n';
  out += a.headers;
  out += a.body;
  return out;
}

Result<std::pair<uint64_t, Attempt>> DecodeAttempt(std::string_view message) {
  const size_t nl = message.find('\n');
  if (nl == std::string_view::npos) return Status::Error("no newline after the attempt's header");
  json head = json::parse(message.substr(0, nl), nullptr, /*allow_exceptions=*/false);
  if (!head.is_object()) return Status::Error("the attempt's header is not a JSON object");
  auto id = head.find("id");
  auto host = head.find("host");
  auto port = head.find("port");
  auto protocol = head.find("protocol");
  auto target = head.find("target");
  auto headers_bytes = head.find("headers_bytes");
  if (id == head.end() || !id->is_number_unsigned() || host == head.end() || !host->is_string() ||
      port == head.end() || !port->is_number_unsigned() || port->get<uint64_t>() > 65535 ||
      protocol == head.end() || !protocol->is_string() || target == head.end() ||
      !target->is_string() || headers_bytes == head.end() || !headers_bytes->is_number_unsigned())
    return Status::Error("the attempt's header lacks a field or has one of the wrong type");
  Attempt a;
  a.host = host->get<std::string>();
  a.port = static_cast<uint16_t>(port->get<uint64_t>());
  const std::string name = protocol->get<std::string>();
  bool known = false;
  for (Protocol p : {Protocol::kConnect, Protocol::kHttp, Protocol::kSocks5, Protocol::kHttps}) {
    if (ProtocolName(p) == name) {
      a.protocol = p;
      known = true;
    }
  }
  if (!known) return Status::Error("unknown protocol '" + name + "'");
  a.target = target->get<std::string>();
  std::string_view rest = message.substr(nl + 1);
  const uint64_t h = headers_bytes->get<uint64_t>();
  if (h > rest.size()) return Status::Error("headers_bytes is past the end of the message");
  a.headers = std::string(rest.substr(0, h));
  a.body = std::string(rest.substr(h));
  return std::make_pair(id->get<uint64_t>(), std::move(a));
}

// ---- the child's end ---------------------------------------------------------------------

struct DecisionClient::Shared {
  UniqueFd fd;
  std::mutex mu;
  std::unordered_map<uint64_t, DecisionDone> pending;
  uint64_t next_id = 1;
  bool closed = false;
  // Started by the first check, on the proxy's thread: `warden run` must still be single-threaded
  // when it clones the sandbox (sandbox.h), and the proxy starts only after that.
  std::thread reader;
  bool reader_started = false;

  void StartReader() {
    std::lock_guard lock(mu);
    if (closed || reader_started) return;
    reader_started = true;
    reader = std::thread([this] {
      try {
        DecisionClient::ReadAnswers(*this);
      } catch (...) {  // out of memory: what waits is refused below
      }
      Close();
    });
  }

  // Refuses everything waiting, once the channel is gone.
  void Close() {
    std::unordered_map<uint64_t, DecisionDone> left;
    {
      std::lock_guard lock(mu);
      closed = true;
      left.swap(pending);
    }
    for (auto& [id, done] : left) done(Decision::Deny("the gateway's session check closed"));
  }
};

Result<std::unique_ptr<DecisionClient>> DecisionClient::Open(UniqueFd fd) {
  int type = 0;
  socklen_t len = sizeof type;
  if (!fd.valid() || ::getsockopt(fd.get(), SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
      type != SOCK_SEQPACKET)
    return Status::Error("not a SOCK_SEQPACKET socket");
  auto shared = std::make_shared<Shared>();
  shared->fd = std::move(fd);
  return std::unique_ptr<DecisionClient>(new DecisionClient(std::move(shared)));
}

DecisionClient::DecisionClient(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}

void DecisionClient::ReadAnswers(Shared& shared) {
  Shared* s = &shared;
  {
    std::vector<char> buf(kMaxDecisionMessage);
    std::string message;
    while (ReceiveMessage(s->fd.get(), buf, &message)) {
      json answer = json::parse(message, nullptr, /*allow_exceptions=*/false);
      if (!answer.is_object() || !answer.contains("id") || !answer["id"].is_number_unsigned())
        continue;  // nothing to match it with: that attempt times out, refused
      DecisionDone done;
      {
        std::lock_guard lock(s->mu);
        auto it = s->pending.find(answer["id"].get<uint64_t>());
        if (it == s->pending.end()) continue;
        done = std::move(it->second);
        s->pending.erase(it);
      }
      auto allow = answer.find("allow");
      auto reason = answer.find("reason");
      std::string why = reason != answer.end() && reason->is_string() ? reason->get<std::string>()
                                                                       : std::string();
      if (allow != answer.end() && allow->is_boolean() && allow->get<bool>())
        done(Decision::Allow(why));
      else
        done(Decision::Deny(why.empty() ? "the gateway's session check refused it" : why));
    }
  }
}

DecisionClient::~DecisionClient() {
  {
    std::lock_guard lock(shared_->mu);
    shared_->closed = true;  // no reader starts from now on
  }
  ::shutdown(shared_->fd.get(), SHUT_RDWR);  // wakes the reader with end of channel
  if (shared_->reader.joinable()) shared_->reader.join();
  shared_->Close();
}

AsyncCheck DecisionClient::check() const {
  std::weak_ptr<Shared> weak = shared_;
  return [weak](const Attempt& attempt, DecisionDone done) {
    auto s = weak.lock();
    if (!s) {
      done(Decision::Deny("the gateway's session check closed"));
      return;
    }
    s->StartReader();
    uint64_t id;
    {
      std::lock_guard lock(s->mu);
      if (s->closed) {
        done(Decision::Deny("the gateway's session check closed"));
        return;
      }
      id = s->next_id++;
      s->pending[id] = done;
    }
    std::string message = EncodeAttempt(id, attempt);
    ssize_t n = -1;
    if (message.size() <= kMaxDecisionMessage) {
      do {
        n = ::send(s->fd.get(), message.data(), message.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      } while (n < 0 && errno == EINTR);
    }
    if (n == static_cast<ssize_t>(message.size())) return;
    const int err = errno;
    {
      std::lock_guard lock(s->mu);
      if (s->pending.erase(id) == 0) return;  // the channel closed meanwhile and refused it
    }
    done(Decision::Deny(message.size() > kMaxDecisionMessage ? "the request is too large to check"
                        : err == EAGAIN || err == EWOULDBLOCK
                            ? "too many attempts wait for the gateway's session check"
                            : "the gateway's session check is gone"));
  };
}

// ---- the gateway's end -------------------------------------------------------------------

DecisionServer::DecisionServer(UniqueFd fd, std::function<Decision(const Attempt&)> decide)
    : fd_(std::move(fd)), decide_(std::move(decide)) {
  thread_ = std::thread([this] {
    try {
      Serve();
    } catch (...) {  // out of memory: the child's waits run out and refuse
    }
  });
}

DecisionServer::~DecisionServer() { Stop(); }

void DecisionServer::Stop() {
  if (fd_.valid()) ::shutdown(fd_.get(), SHUT_RDWR);
  if (thread_.joinable()) thread_.join();
}

void DecisionServer::Serve() {
  std::vector<char> buf(kMaxDecisionMessage);
  std::string message;
  while (ReceiveMessage(fd_.get(), buf, &message)) {
    auto decoded = DecodeAttempt(message);
    if (!decoded) {
      ++malformed_;  // no id to answer: the child's wait runs out and refuses the attempt
      continue;
    }
    Decision d;
    try {
      d = decide_(decoded->second);
    } catch (const std::exception& e) {
      d = Decision::Deny(std::string("the session check failed: ") + e.what());
    } catch (...) {
      d = Decision::Deny("the session check failed");
    }
    json answer = {{"id", decoded->first},
                   {"allow", d.kind != Decision::Kind::kDeny},
                   {"reason", d.reason}};
    const std::string text = Dump(answer);
    ssize_t n;
    do {
      n = ::send(fd_.get(), text.data(), text.size(), MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return;
    ++answered_;
  }
}

}  // namespace warden::egress
