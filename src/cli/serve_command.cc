#include "cli/serve_command.h"

#include <arpa/inet.h>
#include <signal.h>
#include <unistd.h>

#include "common/login_name.h"
#include "gateway/http/admin_api.h"
#include "gateway/http/http_server.h"
#include "gateway/http/metrics_access.h"
#include "gateway/session/session.h"
#include "identity/identity.h"
#include "monitor/families.h"
#include "monitor/metrics.h"
#include "sandbox/options.h"

namespace warden::cli {

namespace {

bool IsLoopback(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  return inet_pton(AF_INET, host.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

// The gateway as the HTTP server sees it: callers authenticated against the policy in force (the
// gateway rebuilds the authenticator with every reload), one McpSession per MCP session.
class ServeHost : public gateway::SessionHost {
 public:
  ServeHost(Gateway& gateway, bool local_operator)
      : gateway_(gateway),
        admin_(std::make_shared<gateway::AdminApi>(
            gateway.core(), gateway::AdminApiOptions{.local_operator = local_operator})) {}

  Result<identity::Caller> Authenticate(std::string_view authorization,
                                        const std::string&) override {
    // The gateway replaces the authenticator together with the policy it was built from
    // (Gateway::Reload): a reload whose identity cannot be built changes neither.
    return gateway_.authenticator()->Authenticate(authorization);
  }

  void Refused(const identity::Caller& caller, int http_status, const std::string& what,
               const std::string& peer) override {
    monitor::Metrics().http_refusals.Add({std::to_string(http_status)});
    // Called on an I/O thread: the write goes to the worker pool.
    gateway::GatewayCore& core = gateway_.core();
    core.Post([&core, caller, http_status, what, peer] {
      core.AuditRefusal(caller, "", "http " + std::to_string(http_status),
                        what + " (from " + peer + ")");
    });
  }

  void Admin(const identity::Caller& caller, gateway::AdminRequest request,
             std::function<void(gateway::AdminReply)> done) override {
    // The store write and the audit append block: on the control executor, which calls that
    // hold every worker cannot starve.
    admin_->Submit(caller, std::move(request), std::move(done));
  }

  std::shared_ptr<gateway::McpSession> CreateSession(const identity::Caller& caller) override {
    auto session = std::make_shared<gateway::McpSession>(
        gateway_.core(), caller, gateway::SessionOptions{.transport = "http"});
    gateway_.core().Register(session);
    return session;
  }

  std::shared_ptr<gateway::McpSession> CreateTaskContext(const identity::Caller& caller,
                                                         gateway::SessionOptions options) override {
    auto context = std::make_shared<gateway::McpSession>(gateway_.core(), caller, std::move(options));
    gateway_.core().Register(context);
    return context;
  }

 private:
  Gateway& gateway_;
  std::shared_ptr<gateway::AdminApi> admin_;
};

}  // namespace

ServeCommand::ServeCommand(CLI::App& app, std::ostream& err) : err_(err) {
  sub_ = app.add_subcommand(
      "serve", "Serve MCP over Streamable HTTP: every tool call decided by policy and audited");
  flags_.AddTo(sub_);
  sub_->add_option("--listen", listen_,
                   "HOST:PORT to listen on (default: the policy's listen, 127.0.0.1:8787; port 0 "
                   "picks a free one)");
  sub_->add_option("--allow-origin", origins_,
                   "Browser origin allowed to call (scheme://host[:port]; repeatable)");
  sub_->add_option("--allow-host", hosts_,
                   "Host header allowed besides the listener's own address and localhost "
                   "(NAME or NAME:PORT, e.g. the DNS name clients use; repeatable)");
  sub_->add_option("--max-body", max_body_, "Largest POST body (default 4M)");
  sub_->add_option("--session-idle", idle_, "Close sessions idle this long (default 30m)");
  sub_->add_option("--threads", threads_, "HTTP I/O threads (default 1)");
}

int ServeCommand::Execute() {
  signal(SIGPIPE, SIG_IGN);
  // SIGINT and SIGTERM end warden: taken here with sigwait, so blocked before any thread starts.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  gateway::HttpServerOptions http;
  auto policy = PolicyFromFlags(flags_);
  if (!policy) {
    err_ << "warden serve: " << policy.status().message() << "\n";
    return 2;
  }
  std::string listen = !listen_.empty() ? listen_ : (*policy)->listen;
  auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    err_ << "warden serve: --listen " << listen << ": expected HOST:PORT\n";
    return 2;
  }
  http.host = listen.substr(0, colon);
  if (http.host.size() > 2 && http.host.front() == '[' && http.host.back() == ']')
    http.host = http.host.substr(1, http.host.size() - 2);
  try {
    int port = std::stoi(listen.substr(colon + 1));
    if (port < 0 || port > 65535) throw std::out_of_range("port");
    http.port = static_cast<uint16_t>(port);
  } catch (const std::exception&) {
    err_ << "warden serve: --listen " << listen << ": the port must be a number from 0 to 65535\n";
    return 2;
  }
  auto body = sandbox::ParseSize(max_body_);
  if (!body || *body == 0) {
    err_ << "warden serve: --max-body " << max_body_ << ": expected a size such as 4M\n";
    return 2;
  }
  http.max_body_bytes = *body;
  auto idle = sandbox::ParseDuration(idle_);
  if (!idle || *idle < 1000) {
    err_ << "warden serve: --session-idle " << idle_ << ": expected a duration of 1s or more\n";
    return 2;
  }
  http.session_idle_timeout = std::chrono::seconds(*idle / 1000);
  http.allowed_origins = origins_;
  http.allowed_hosts = hosts_;
  http.threads = std::max(1, threads_);

  // Single-user mode (docs/approvals.md, "Who decides"): on a loopback listener, a policy that
  // declares no tenants (the embedded default, or a file without any) serves every request as
  // the local user, who is the local operator. A policy with tenants ignores it (every request is
  // authenticated), and on any other listener a tenant-less policy refuses every request.
  const bool local = IsLoopback(http.host);
  identity::Caller local_caller{"", LoginName("local"), "", ""};
  auto started = Gateway::Start(
      flags_, local_caller, err_,
      identity::IdentityOptions{.local_single_user = local, .local_user = local_caller.user});
  if (!started) {
    err_ << "warden serve: " + started.status().message() + "\n";
    return 2;
  }
  Gateway& g = **started;
  if (credentials::TokenMinter* minter = g.minter()) {
    // The tokens warden mints for upstreams are checked against these (docs/credentials.md); a
    // key another process added (`warden secrets rotate --signing-key`) is published at once.
    gateway::CredentialBroker* broker = g.broker();
    http.jwks = [minter, broker] {
      if (broker) broker->Refresh();
      return minter->Jwks().dump();
    };
    // Tokens revoked by a kill switch before they expired: an upstream checks a token's jti here.
    if (broker) http.revoked = [broker] { return broker->minted().RevokedJson().dump(); };
  }
  // /metrics (docs/monitoring.md): loopback peers, or a key of the policy in force.
  http.metrics = [&g](std::string_view authorization,
                      const std::string& peer) -> Result<std::string> {
    if (Status st = gateway::MetricsAccess(*g.policy().Current(), authorization, peer); !st.ok())
      return st;
    return monitor::DefaultRegistry().Render();
  };
  ServeHost host(g, local);
  gateway::HttpServer server(host, http);
  if (Status st = server.Start(); !st.ok()) {
    err_ << "warden serve: " + st.message() + "\n";
    return 2;
  }
  const std::string shown_host =
      http.host.find(':') != std::string::npos ? "[" + http.host + "]" : http.host;
  const std::string endpoint =
      "http://" + shown_host + ":" + std::to_string(server.port()) + http.path;
  // Each line in one write: the exec pool (a child) writes to the same stderr, and a client
  // reads the endpoint line whole.
  err_ << "warden: MCP endpoint " + endpoint + "\n";
  err_ << "warden serve: policy " +
              (flags_.config.empty() ? std::string("<embedded default>") : flags_.config) +
              ", audit log " + g.audit_path() + "\n";
  if (local && g.policy().Current()->identity.tenants.empty()) {
    err_ << "warden serve: no tenants and a loopback address: serving one local user (" +
                local_caller.user + ") without keys\n";
  }
  err_ << "warden serve: connect an MCP client to " + endpoint +
              " (Streamable HTTP), e.g. npx @modelcontextprotocol/inspector --cli " + endpoint +
              " --transport http --method tools/list\n";
  err_.flush();

  int sig = 0;
  sigwait(&stop, &sig);
  err_ << "warden serve: stopping (signal " + std::to_string(sig) + ")\n";
  err_.flush();
  server.Stop();
  return 0;
}

}  // namespace warden::cli
