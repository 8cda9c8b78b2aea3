// A TLS server on loopback in front of a plain one: each connection is accepted with OpenSSL
// under the given certificate and key, and its decrypted bytes are relayed both ways to
// 127.0.0.1:`backend_port` (an HttpOrigin), so that the origin's keep-alive and its record of
// request heads work over HTTPS too. For the credential tests of tunnels the proxy terminates.
#pragma once

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <poll.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "test_support.h"

namespace warden::egress::testing {

class TlsFront {
 public:
  TlsFront(const std::string& cert_pem, const std::string& key_pem, uint16_t backend_port)
      : backend_port_(backend_port), server_([this](int fd) { Serve(fd); }) {
    // OpenSSL writes with write(2): a client (the proxy) that cut the connection must not kill
    // the test with SIGPIPE.
    signal(SIGPIPE, SIG_IGN);
    ctx_.reset(SSL_CTX_new(TLS_server_method()));
    BIO* cb = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
    X509* cert = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
    BIO_free(cb);
    BIO* kb = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
    EVP_PKEY* key = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
    BIO_free(kb);
    if (ctx_ == nullptr || cert == nullptr || key == nullptr || SSL_CTX_use_certificate(ctx_.get(), cert) != 1 ||
        SSL_CTX_use_PrivateKey(ctx_.get(), key) != 1) {
      throw std::runtime_error("TlsFront: bad certificate or key");
    }
    X509_free(cert);
    EVP_PKEY_free(key);
  }
  ~TlsFront() { stopping_ = true; }  // then server_ joins its workers, then ctx_ goes
  TlsFront(const TlsFront&) = delete;
  TlsFront& operator=(const TlsFront&) = delete;

  uint16_t port() const { return server_.port(); }
  int handshakes() const { return handshakes_; }

 private:
  void Serve(int fd) {
    SSL* ssl = SSL_new(ctx_.get());
    SSL_set_fd(ssl, fd);
    if (SSL_accept(ssl) != 1) {
      ERR_clear_error();
      SSL_free(ssl);
      return;
    }
    handshakes_++;
    UniqueFd back = ConnectTcp(backend_port_);
    char buf[16384];
    while (back.valid() && !stopping_) {
      if (SSL_pending(ssl) == 0) {
        pollfd p[2] = {{fd, POLLIN, 0}, {back.get(), POLLIN, 0}};
        if (::poll(p, 2, 200) < 0) break;
        if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
          ssize_t n = ::recv(back.get(), buf, sizeof buf, 0);
          if (n <= 0) break;
          if (SSL_write(ssl, buf, static_cast<int>(n)) <= 0) break;
        }
        if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      }
      int n = SSL_read(ssl, buf, sizeof buf);
      if (n <= 0) break;
      if (!SendAll(back.get(), std::string_view(buf, static_cast<size_t>(n)))) break;
    }
    SSL_shutdown(ssl);
    ERR_clear_error();
    SSL_free(ssl);
  }

  struct CtxFree {
    void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
  };
  std::unique_ptr<SSL_CTX, CtxFree> ctx_;
  uint16_t backend_port_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> handshakes_{0};
  TestServer server_;  // last: its workers use everything above
};

}  // namespace warden::egress::testing
