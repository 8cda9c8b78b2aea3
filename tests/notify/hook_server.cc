// Blocking Asio and Beast, one thread per connection: simple, and the tests are small.
#include "hook_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace warden::notify::testing {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(size));
}

void AddExtension(X509* cert, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) throw std::runtime_error("X509V3_EXT_conf_nid " + value);
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

}  // namespace

TlsIdentity MakeSelfSigned(const std::string& san) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  if (key == nullptr || cert == nullptr) throw std::runtime_error("cannot make a key");
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), static_cast<long>(getpid()) + 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 24 * 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("warden notify test"), -1, -1,
                             0);
  X509_set_issuer_name(cert, name);
  AddExtension(cert, NID_basic_constraints, "critical,CA:TRUE");
  AddExtension(cert, NID_subject_alt_name, san);
  if (X509_sign(cert, key, EVP_sha256()) == 0) throw std::runtime_error("X509_sign");
  TlsIdentity out;
  BIO* cert_bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(cert_bio, cert);
  out.cert_pem = BioText(cert_bio);
  BIO_free(cert_bio);
  BIO* key_bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(key_bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  out.key_pem = BioText(key_bio);
  BIO_free(key_bio);
  X509_free(cert);
  EVP_PKEY_free(key);
  return out;
}

struct HookServer::State {
  std::function<ScriptedReply(size_t)> script;
  std::optional<asio::ssl::context> tls;
  asio::io_context ioc;  // owns the sockets; every operation on them is blocking
  tcp::acceptor acceptor{ioc};

  mutable std::mutex mu;
  mutable std::condition_variable changed;  // a request recorded, or stopping
  bool stopping = false;
  std::vector<RecordedRequest> requests;
  std::vector<int> open_fds;  // shut down on stop; removed before their socket closes
  std::vector<std::thread> connections;

  void Accept();
  void Serve(tcp::socket socket);
  template <class Stream>
  void Exchange(Stream& stream);
};

void HookServer::State::Accept() {
  for (;;) {
    tcp::socket socket(ioc);
    beast::error_code ec;
    acceptor.accept(socket, ec);
    std::lock_guard<std::mutex> lock(mu);
    if (stopping) return;
    if (ec) continue;
    open_fds.push_back(socket.native_handle());
    connections.emplace_back([this, s = std::move(socket)]() mutable { Serve(std::move(s)); });
  }
}

void HookServer::State::Serve(tcp::socket socket) {
  const int fd = socket.native_handle();
  if (tls) {
    asio::ssl::stream<tcp::socket> secure(std::move(socket), *tls);
    beast::error_code ec;
    secure.handshake(asio::ssl::stream_base::server, ec);
    if (!ec) Exchange(secure);
    std::lock_guard<std::mutex> lock(mu);
    std::erase(open_fds, fd);
    return;  // the socket closes after the fd left the list
  }
  Exchange(socket);
  std::lock_guard<std::mutex> lock(mu);
  std::erase(open_fds, fd);
}

template <class Stream>
void HookServer::State::Exchange(Stream& stream) {
  beast::flat_buffer buffer;
  http::request<http::string_body> req;
  beast::error_code ec;
  http::read(stream, buffer, req, ec);
  if (ec) return;
  RecordedRequest recorded;
  recorded.method = std::string(req.method_string());
  recorded.target = std::string(req.target());
  for (const auto& field : req)
    recorded.headers[Lower(std::string(field.name_string()))] = std::string(field.value());
  recorded.body = req.body();
  recorded.at = std::chrono::steady_clock::now();
  size_t index = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    index = requests.size();
    requests.push_back(std::move(recorded));
  }
  changed.notify_all();
  const ScriptedReply reply = script(index);
  if (reply.hang) {
    std::unique_lock<std::mutex> lock(mu);
    changed.wait(lock, [this] { return stopping; });
    return;
  }
  http::response<http::string_body> res{static_cast<http::status>(reply.status), 11};
  for (const auto& [name, value] : reply.headers) res.set(name, value);
  res.set(http::field::content_type, "text/plain");
  if (reply.status != 204 && reply.status != 304) res.body() = "recorded\n";
  res.keep_alive(false);
  res.prepare_payload();
  http::write(stream, res, ec);
}

HookServer::HookServer(std::function<ScriptedReply(size_t)> script, std::optional<TlsIdentity> tls)
    : state_(std::make_shared<State>()) {
  state_->script = std::move(script);
  if (tls) {
    auto& ctx = state_->tls.emplace(asio::ssl::context::tls_server);
    ctx.use_certificate_chain(asio::buffer(tls->cert_pem));
    ctx.use_private_key(asio::buffer(tls->key_pem), asio::ssl::context::pem);
  }
  const tcp::endpoint loopback(asio::ip::make_address("127.0.0.1"), 0);
  state_->acceptor.open(loopback.protocol());
  state_->acceptor.bind(loopback);
  state_->acceptor.listen();
  port_ = state_->acceptor.local_endpoint().port();
  acceptor_ = std::thread([state = state_] { state->Accept(); });
}

HookServer::~HookServer() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stopping = true;
    for (int fd : state_->open_fds) ::shutdown(fd, SHUT_RDWR);
  }
  state_->changed.notify_all();
  {
    // Wakes the blocking accept(); it sees `stopping` and returns.
    asio::io_context ioc;
    tcp::socket wake(ioc);
    beast::error_code ec;
    wake.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_), ec);
    acceptor_.join();
  }
  for (auto& t : state_->connections) t.join();
}

std::string HookServer::Url(const std::string& path) const {
  return std::string(state_->tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_) +
         path;
}

std::vector<RecordedRequest> HookServer::Requests() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->requests;
}

size_t HookServer::Count() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->requests.size();
}

bool HookServer::WaitForCount(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(state_->mu);
  return state_->changed.wait_for(lock, timeout, [&] { return state_->requests.size() >= n; });
}

uint16_t ClosedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw std::runtime_error("cannot bind a loopback port");
  ::close(fd);
  return ntohs(addr.sin_port);
}

bool Eventually(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

TempFile::TempFile(const std::string& text) {
  std::string pattern = (std::filesystem::temp_directory_path() / "warden-notify-XXXXXX").string();
  const int fd = ::mkstemp(pattern.data());
  if (fd < 0) throw std::runtime_error("mkstemp");
  ::close(fd);
  path_ = pattern;
  std::ofstream(path_, std::ios::binary) << text;
}

TempFile::~TempFile() { std::filesystem::remove(path_); }

}  // namespace warden::notify::testing
