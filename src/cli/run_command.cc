#include "cli/run_command.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <fcntl.h>
#include <sys/resource.h>

#include "egress/decision_channel.h"
#include "egress/sandbox_network.h"
#include "sandbox/pool.h"
#include "sandbox/profile.h"
#include "sandbox/sandbox.h"

namespace warden::cli {
namespace {

using sandbox::Options;

int Fail(const std::string& message) {
  std::fprintf(stderr, "warden: %s\n", message.c_str());
  return 125;
}

}  // namespace

RunCommand::RunCommand(CLI::App& app) {
  sub_ = app.add_subcommand("run", "Run COMMAND in a fresh sandbox and wait for it");
  auto* s = sub_;
  flags_.AddTo(s);
  s->add_option("--net", net_, "Network: none (default) or proxy");
  s->add_option("--allow", allow_, "Allow egress to HOST[:PORT] (implies --net proxy)");
  s->add_option("--resolve", resolve_, "Map HOST=IP for the egress proxy");
  s->add_option("--egress-credential", credentials_,
                "ENV=HOST[:PORT] or ENV=https://HOST[:PORT], then optionally ;header=NAME "
                "(default Authorization) and ;template=TEXT (default 'Bearer {}' for Authorization, "
                "'{}' otherwise): the sandbox sees $ENV as a placeholder; the egress proxy sets "
                "header NAME to TEXT with this process's $ENV for {} in every request to HOST:PORT, "
                "replacing what the code sent there, and refuses the placeholder anywhere else "
                "(for https://, inside TLS it terminates with a CA the sandbox trusts for HOST alone)");
  s->add_option("--backend", backend_, "Isolation backend: native (default), gvisor, microvm");
  s->add_option("--pool", pool_, "Run in a pre-warmed sandbox of the pool serving this socket (warden pool start)");
  s->add_option("--json", json_, "Write the result record to FILE ('-' for stderr)");
  s->add_option("--decision-fd", decision_fd_,
                "The gateway's session check (a SOCK_SEQPACKET socket on this fd): the egress proxy "
                "asks it about every attempt the allow-list lets through (docs/trifecta.md)");
  s->add_option("command", command_, "The command and its arguments (after --)")->required();
  s->positionals_at_end();
}

int RunCommand::Execute() {
  auto parsed = flags_.ToOptions(*sub_);
  if (!parsed) return Fail(parsed.status().message());
  Options o = std::move(*parsed);
  if (!net_.empty()) {
    if (net_ == "none") o.net = sandbox::NetMode::kNone;
    else if (net_ == "proxy") o.net = sandbox::NetMode::kProxy;
    else return Fail("--net " + net_ + ": expected none or proxy");
  }
  for (const auto& a : allow_) o.allow.push_back(a);
  if (!o.allow.empty()) o.net = sandbox::NetMode::kProxy;
  for (const auto& r : resolve_) {
    auto eq = r.find('=');
    if (eq == std::string::npos || eq == 0) return Fail("--resolve " + r + ": expected HOST=IP");
    o.resolve[r.substr(0, eq)] = r.substr(eq + 1);
  }
  for (const auto& c : credentials_) {
    auto spec = sandbox::ParseEgressCredentialSpec(c);
    if (!spec) return Fail(spec.status().message());
    o.egress_credentials.push_back(std::move(*spec));
  }
  if (!backend_.empty()) o.backend = backend_;
  o.argv = command_;

  // Before the network: the proxy may still ask while it stops.
  std::unique_ptr<egress::DecisionClient> decisions;
  if (decision_fd_ >= 0) {
    const std::string flag = "--decision-fd " + std::to_string(decision_fd_);
    // Never past this process: the sandbox must not reach the gateway.
    if (fcntl(decision_fd_, F_SETFD, FD_CLOEXEC) != 0) return Fail(flag + ": not an open descriptor");
    auto opened = egress::DecisionClient::Open(UniqueFd(decision_fd_));
    if (!opened) return Fail(flag + ": " + opened.status().message());
    decisions = std::move(*opened);
    if (o.net != sandbox::NetMode::kProxy || !pool_.empty())
      return Fail(flag + ": only a sandbox with --net proxy and no --pool has egress to check");
  }
  std::unique_ptr<egress::SandboxNetwork> network;
  if (!o.egress_credentials.empty()) {
    if (Status st = sandbox::Validate(o); !st.ok()) return Fail(st.message());
    if (!pool_.empty()) return Fail("--egress-credential: pooled sandboxes have no network");
  }
  if (o.net == sandbox::NetMode::kProxy && pool_.empty()) {
    // Each credential's value comes from this process's environment and stays in this process:
    // the sandbox gets the placeholder under the same name.
    std::vector<egress::EgressCredential> credentials;
    for (const auto& spec : o.egress_credentials) {
      const char* value = std::getenv(spec.env.c_str());
      if (value == nullptr) {
        return Fail("--egress-credential " + spec.env + ": not set in warden's environment" +
                    (spec.secret.empty() ? "" : " (the gateway fills it from secret '" + spec.secret + "')"));
      }
      auto made = egress::MakeEgressCredential(spec.env, spec.host, spec.port, value, spec.tls,
                                               spec.header, spec.value_template);
      if (!made) return Fail(made.status().message());
      credentials.push_back(std::move(*made));
    }
    auto created = egress::SandboxNetwork::Create(o.allow, o.resolve, {}, "", credentials,
                                                  decisions ? decisions->check() : egress::AsyncCheck{});
    if (!created) return Fail(created.status().message());
    for (const auto& c : credentials) o.env[c.name] = c.placeholder;
    if (!(*created)->trust_bundle_path().empty()) {
      // Credentials over HTTPS: the sandbox trusts its own CA (and the system's) through this.
      o.binds.push_back({(*created)->trust_bundle_path(), egress::SandboxNetwork::kTrustBundleInside, false});
    }
    o.egress_credentials.clear();  // consumed: what the sandbox has now is the placeholder
    network = std::move(*created);
    // A busy tunnel holds two sockets and two pipes in this process.
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      setrlimit(RLIMIT_NOFILE, &rl);
    }
  }
  sandbox::RunResult r = pool_.empty() ? sandbox::Run(o, {}, network.get())
                                       : sandbox::pool::RunPooled(pool_, o, {}, /*forward_signals=*/true);
  if (r.reason == sandbox::Reason::kSetupError) std::fprintf(stderr, "warden: %s\n", r.error.c_str());
  else if (!r.error.empty()) std::fprintf(stderr, "warden: %s\n", r.error.c_str());
  if (!json_.empty()) {
    std::string record = sandbox::ToJson(r) + "\n";
    if (json_ == "-") {
      std::fputs(record.c_str(), stderr);
    } else {
      std::ofstream out(json_, std::ios::trunc);
      out << record;
      if (!out) std::fprintf(stderr, "warden: --json %s: could not write the result record\n", json_.c_str());
    }
  }
  return r.exit_code;
}

}  // namespace warden::cli
