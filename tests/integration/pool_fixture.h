// A `warden pool start` server run by a test: started with the given options, waited for until
// every sandbox is ready, stopped with SIGTERM (and its exit status checked) when destroyed.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"

namespace warden::testing {

class PoolProcess {
 public:
  // `flags`: after `warden pool start --socket PATH`.
  explicit PoolProcess(const std::vector<std::string>& flags = {"--size", "2"}) {
    char tmpl[] = "/tmp/warden-test-pool-XXXXXX";
    dir_ = mkdtemp(tmpl);
    socket_ = dir_ + "/pool.sock";
    log_ = dir_ + "/pool.log";
    std::vector<std::string> args = {WARDEN_BIN, "pool", "start", "--socket", socket_};
    args.insert(args.end(), flags.begin(), flags.end());
    pid_ = fork();
    if (pid_ == 0) {
      int null = open("/dev/null", O_RDWR);
      int log = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      dup2(null, 0);
      dup2(null, 1);
      dup2(log, 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(98);
    }
  }
  ~PoolProcess() {
    Stop();
    // The stopped pool removed its socket; the log and the directory are ours.
    unlink(log_.c_str());
    unlink(socket_.c_str());
    rmdir(dir_.c_str());
  }

  // Waits until `ready` sandboxes wait for a command (default: the pool's size). False on timeout
  // or when the server exited.
  bool WaitReady(int ready = -1, int timeout_ms = 20000) {
    for (int waited = 0; waited < timeout_ms; waited += 20) {
      nlohmann::json s = Status();
      if (s.is_object() && s["ready"].get<int>() >= (ready < 0 ? s["size"].get<int>() : ready))
        return true;
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        exit_status_ = status;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  // `warden pool status --json`, or null when it failed.
  nlohmann::json Status() const {
    Invocation inv;
    inv.json = false;
    inv.args = {"pool", "status", "--socket", socket_, "--json"};
    Outcome o = RunWarden(inv);
    if (o.exit_code != 0) return nullptr;
    return nlohmann::json::parse(o.out, nullptr, false);
  }

  // SIGTERM, then the server's exit status (0 on a clean shutdown).
  int Stop() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
      pid_ = -1;
      exit_status_ = status;
    }
    return WIFEXITED(exit_status_) ? WEXITSTATUS(exit_status_) : 128 + WTERMSIG(exit_status_);
  }

  std::string Log() const {
    std::string out;
    int fd = open(log_.c_str(), O_RDONLY | O_CLOEXEC);
    char buf[4096];
    ssize_t n;
    while (fd >= 0 && (n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    if (fd >= 0) close(fd);
    return out;
  }

  const std::string& socket() const { return socket_; }
  pid_t pid() const { return pid_; }

 private:
  std::string dir_, socket_, log_;
  pid_t pid_ = -1;
  int exit_status_ = 0;
};

// `warden run --pool SOCKET [FLAGS...] -- sh -c SCRIPT`.
inline Outcome RunPooledSh(const PoolProcess& pool, const std::string& script,
                           const std::vector<std::string>& flags = {}) {
  std::vector<std::string> all = {"--pool", pool.socket()};
  all.insert(all.end(), flags.begin(), flags.end());
  return RunSh(script, all);
}

}  // namespace warden::testing
