#include "gateway/gateway.h"

#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "common/guard.h"
#include "gateway/credentials/broker.h"
#include "gateway/session/session.h"
#include "gateway/session/upstream_instances.h"
#include "sandbox/profile.h"

namespace warden::gateway {

namespace fs = std::filesystem;

GatewayCore::GatewayCore(policy::PolicyHolder& policy, audit::AuditLog& audit,
                         KillSwitches& switches, const BuiltinTools& tools,
                         identity::Caller default_caller, GatewayOptions options)
    : policy_(policy),
      audit_(audit),
      switches_(switches),
      tools_(tools),
      options_(std::move(options)),
      pool_(static_cast<size_t>(std::max(1, options_.worker_threads))),
      control_(static_cast<size_t>(std::max(1, options_.control_threads))),
      request_states_(options_.request_state_secret
                          ? std::make_unique<RequestStateSealer>(*options_.request_state_secret)
                          : std::make_unique<RequestStateSealer>()) {
  alerts_ = std::make_unique<Alerts>(Alerts::Options{
      .audit = &audit_,
      .switches = &switches_,
      .post = [this](std::function<void()> work) { PostControl(std::move(work)); },
      .remember_domain = options_.remember_domain});
  StageServices services = options_.services;
  if (services.alerts == nullptr) services.alerts = alerts_.get();
  services.policy = &policy_;
  services.kill_switches = &switches_;
  services.tools = &tools_;
  services.audit = &audit_;
  services.caller = std::move(default_caller);
  services.post = [this](std::function<void()> work) { Post(std::move(work)); };
  services.end_task = [this](const CallContext& call, const std::string& why) {
    size_t cancelled = 0;
    for (auto& session : Sessions()) cancelled += session->CancelTaskCalls(call, why);
    return cancelled;
  };
  pipeline_ = BuildPipeline(services, options_.chain.empty() ? StandardChain() : options_.chain);
  instances_ = std::make_unique<UpstreamInstances>(*this);
  listening_ = std::make_shared<Listening>();
  listening_->core = this;
  switches_.Subscribe([listening = listening_](KillScope scope, const std::string& name,
                                               const std::string& reason) {
    std::string why = "stopped by kill switch" + (reason.empty() ? "" : ": " + reason);
    std::lock_guard lock(listening->mu);
    GatewayCore* core = listening->core;
    if (core == nullptr) return;
    // Not on the workers: calls that hold all of them must not delay their own end.
    core->PostControl([core, scope, name, why] { core->CancelCovered(scope, name, why); });
  });
  metrics_ = RegisterMetrics();
}

GatewayCore::~GatewayCore() {
  metrics_.Reset();
  {
    std::lock_guard lock(listening_->mu);
    listening_->core = nullptr;
  }
  for (auto& session : Sessions()) session->Close();
  // Before the workers end: stopping an instance hands its waiters to them.
  instances_->StopAll();
  control_.join();
  pool_.join();
}

void GatewayCore::Post(std::function<void()> work) {
  // An exception must not leave a worker: asio would rethrow it out of the pool's thread and
  // end the process. The job is lost (logged); its session's other calls go on.
  boost::asio::post(pool_, [work = std::move(work)] {
    RunGuarded("gateway worker", "the job was dropped", work);
  });
}

void GatewayCore::PostControl(std::function<void()> work) {
  boost::asio::post(control_, [work = std::move(work)] {
    RunGuarded("gateway control", "the job was dropped", work);
  });
}

std::shared_ptr<boost::asio::steady_timer> GatewayCore::PostAfter(std::chrono::milliseconds delay,
                                                                  std::function<void()> work) {
  auto timer = std::make_shared<boost::asio::steady_timer>(pool_.get_executor(), delay);
  timer->async_wait([work = std::move(work)](const boost::system::error_code& error) {
    if (error) return;  // cancelled
    RunGuarded("gateway timer", "the job was dropped", work);
  });
  return timer;
}

void GatewayCore::CancelCovered(KillScope scope, const std::string& name,
                                const std::string& reason) {
  for (auto& session : Sessions()) session->CancelMatching(scope, name, reason);
  // What warden minted for the stopped callers is revoked (docs/credentials.md, "Revocation").
  // Tokens name no session, and a tool switch stops calls, not callers: those revoke nothing.
  if (CredentialBroker* broker = options_.services.credentials) {
    using Holder = credentials::MintedTokens::Holder;
    std::optional<Holder> holder;
    switch (scope) {
      case KillScope::kGlobal: holder = Holder::kAll; break;
      case KillScope::kTenant: holder = Holder::kTenant; break;
      case KillScope::kUser: holder = Holder::kUser; break;
      case KillScope::kAgent: holder = Holder::kAgent; break;
      case KillScope::kSession:
      case KillScope::kTask:
      case KillScope::kTool: break;
    }
    if (holder) broker->Revoke(*holder, name);
  }
}

void GatewayCore::AuditRefusal(const identity::Caller& caller, const std::string& session,
                               const std::string& what, const std::string& reason) {
  audit::AuditEntry entry;
  entry.tenant = caller.tenant;
  entry.user = caller.user;
  entry.agent = caller.agent;
  entry.session = session;
  entry.tool = what;
  entry.decision = "error";
  entry.rule = "protocol";
  entry.reason = reason.size() > 512 ? reason.substr(0, 512) : reason;
  auto written = audit_.Append(std::move(entry));
  if (!written) std::fprintf(stderr, "warden: audit: %s\n", written.status().message().c_str());
}

void GatewayCore::Register(const std::shared_ptr<McpSession>& session) {
  std::lock_guard lock(sessions_mu_);
  std::erase_if(sessions_, [](const std::weak_ptr<McpSession>& w) { return w.expired(); });
  sessions_.push_back(session);
}

void GatewayCore::Unregister(const McpSession* session) {
  std::lock_guard lock(sessions_mu_);
  std::erase_if(sessions_, [session](const std::weak_ptr<McpSession>& w) {
    auto s = w.lock();
    return !s || s.get() == session;
  });
}

std::vector<std::shared_ptr<McpSession>> GatewayCore::Sessions() const {
  std::lock_guard lock(sessions_mu_);
  std::vector<std::shared_ptr<McpSession>> out;
  for (const auto& w : sessions_) {
    if (auto s = w.lock()) out.push_back(std::move(s));
  }
  return out;
}

namespace {

// Directories every sandbox already shows read-only: binding them again is pointless.
bool AlreadyVisible(const fs::path& dir) {
  static const char* kSystem[] = {"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc"};
  const std::string d = dir.string();
  for (const char* s : kSystem) {
    const std::string p(s);
    if (d == p || d.rfind(p + "/", 0) == 0) return true;
  }
  return d == "/";
}

// The executable a command names, the way execvp would find it.
fs::path Which(const std::string& program) {
  if (program.find('/') != std::string::npos) return fs::path(program);
  const char* path = getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    fs::path candidate = fs::path(dirs.substr(start, end - start)) / program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return {};
}

}  // namespace

Result<sandbox::Options> GatewayCore::UpstreamSandbox(const policy::Policy& policy,
                                                      const policy::Upstream& upstream) {
  sandbox::Options o;
  o.protect = sandbox::DefaultProtectedPaths();
  // The policy's profile for it, when named, widens the default; it never narrows what the
  // command needs to start.
  if (!upstream.sandbox_profile.empty()) {
    auto it = policy.sandbox.profiles.find(upstream.sandbox_profile);
    if (it == policy.sandbox.profiles.end())
      return Status::Error("sandbox profile '" + upstream.sandbox_profile + "' is not defined");
    o = it->second;
  }
  {
    // What the command needs to start, read-only: the executable's directory, the directories of
    // the files its arguments name, and the current directory (relative paths resolve there).
    std::vector<fs::path> dirs;
    std::error_code ec;
    fs::path cwd = fs::current_path(ec);
    if (!upstream.command.empty()) {
      fs::path exe = Which(upstream.command[0]);
      if (!exe.empty()) {
        fs::path real = fs::weakly_canonical(exe, ec);
        dirs.push_back((ec ? exe : real).parent_path());
      }
      for (size_t i = 1; i < upstream.command.size(); ++i) {
        const std::string& arg = upstream.command[i];
        if (arg.empty() || arg[0] != '/') continue;
        fs::path p(arg);
        if (fs::is_regular_file(p, ec))
          dirs.push_back(fs::weakly_canonical(p, ec).parent_path());
        else if (fs::is_directory(p, ec))
          dirs.push_back(fs::weakly_canonical(p, ec));
      }
    }
    if (!cwd.empty()) dirs.push_back(cwd);
    std::sort(dirs.begin(), dirs.end());
    dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
    for (const fs::path& d : dirs) {
      if (d.empty() || AlreadyVisible(d)) continue;
      // A directory inside another one already bound is covered by it.
      bool covered = false;
      for (const fs::path& other : dirs) {
        const std::string a = d.string(), b = other.string();
        if (a != b && !AlreadyVisible(other) && a.rfind(b + "/", 0) == 0) covered = true;
      }
      for (const sandbox::Bind& b : o.binds) {
        const std::string inside = b.inside.empty() ? b.host : b.inside;
        if (d.string() == inside || d.string().rfind(inside + "/", 0) == 0) covered = true;
      }
      if (!covered) o.binds.push_back({d.string(), "", false});
    }
    if (o.workdir.empty() && !cwd.empty()) o.workdir = cwd.string();
  }
  // An upstream is a long-lived server: its stdout is the MCP stream, which an output cap would
  // cut mid-session; its lifetime is the session's, not a wall-clock limit's.
  o.output_limit_bytes = 0;
  o.timeout_ms = 0;
  for (const std::string& host : upstream.sandbox_allow) o.allow.push_back(host);
  if (!o.allow.empty()) o.net = sandbox::NetMode::kProxy;
  o.argv = upstream.command;
  return o;
}

std::string ExposedName(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "__" + name;
}

std::string MethodToolName(const std::string& upstream, const std::string& method) {
  return upstream + "__" + method;
}

}  // namespace warden::gateway
