// A webhook receiver for the tests: a real HTTP (or HTTPS) server on 127.0.0.1 that records every
// request and answers each as the test scripts it (a status, or no answer at all).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace warden::notify::testing {

// A self-signed certificate (which is its own CA) and its key, in PEM.
struct TlsIdentity {
  std::string cert_pem;
  std::string key_pem;
};
// Made with OpenSSL's APIs: EC P-256, subjectAltName `san` (e.g. "IP:127.0.0.1,DNS:localhost").
TlsIdentity MakeSelfSigned(const std::string& san);

struct RecordedRequest {
  std::string method;
  std::string target;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
  std::chrono::steady_clock::time_point at;  // when it had been read in full
};

struct ScriptedReply {
  unsigned status = 200;
  bool hang = false;  // never answer (the connection stays open until the server stops)
  std::vector<std::pair<std::string, std::string>> headers;
};

class HookServer {
 public:
  // `script(i)` answers the i-th request (from 0). With `tls`, the server speaks HTTPS.
  explicit HookServer(std::function<ScriptedReply(size_t)> script,
                      std::optional<TlsIdentity> tls = std::nullopt);
  ~HookServer();

  uint16_t port() const { return port_; }
  std::string Url(const std::string& path = "/hook") const;
  std::vector<RecordedRequest> Requests() const;
  size_t Count() const;
  // Waits until at least `n` requests have arrived; false after `timeout`.
  bool WaitForCount(size_t n, std::chrono::milliseconds timeout) const;

 private:
  struct State;
  std::shared_ptr<State> state_;
  uint16_t port_ = 0;
  std::thread acceptor_;
};

// A port on 127.0.0.1 that nothing listens on (it was bound, then closed).
uint16_t ClosedPort();

// Polls `done` every 5 ms until it holds or `timeout` passes.
bool Eventually(const std::function<bool()>& done, std::chrono::milliseconds timeout);

// A file in the temporary directory holding `text`, removed with the object.
class TempFile {
 public:
  explicit TempFile(const std::string& text);
  ~TempFile();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace warden::notify::testing
