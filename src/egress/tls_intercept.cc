#include "egress/tls_intercept.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

#include "egress/host_name.h"

namespace warden::egress {

namespace {

struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertFree {
  void operator()(X509* c) const { X509_free(c); }
};
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;
using Cert = std::unique_ptr<X509, CertFree>;
using Bio = std::unique_ptr<BIO, BioFree>;

std::string OpenSslError(const std::string& what) {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return what;
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return what + ": " + buf;
}

bool AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return false;
  const int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return ok == 1;
}

// A certificate with a random 127-bit serial, valid from a few minutes ago (clock skew) for
// `lifetime`, with subject CN = `cn`, for `key`.
Result<Cert> NewCert(const std::string& cn, EVP_PKEY* key, std::chrono::seconds lifetime) {
  Cert cert(X509_new());
  if (!cert) return Status::Error(OpenSslError("X509_new"));
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) return Status::Error(OpenSslError("RAND_bytes"));
  serial[0] &= 0x7f;  // positive
  serial[0] |= 0x01;  // and not shortened
  struct BnFree {
    void operator()(BIGNUM* b) const { BN_free(b); }
  };
  std::unique_ptr<BIGNUM, BnFree> bn(BN_bin2bn(serial, sizeof serial, nullptr));
  if (!bn || BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert.get())) == nullptr)
    return Status::Error(OpenSslError("serial number"));
  X509_set_version(cert.get(), 2);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -300);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(lifetime.count()));
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                 0) != 1)
    return Status::Error(OpenSslError("subject name " + cn));
  return cert;
}

std::string Pem(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return "";
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string Pem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
    return "";
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

}  // namespace

Result<InterceptAuthority> MakeInterceptAuthority(const std::vector<InterceptTarget>& targets,
                                                  std::chrono::seconds lifetime) {
  if (targets.empty()) return Status::Error("no host to intercept");
  std::vector<std::string> names;
  for (const InterceptTarget& t : targets) {
    auto host = ParseHost(t.host);
    if (!host) return host.status().Wrap("TLS credential host");
    if (host->address) {
      return Status::Error("TLS credential host " + t.host +
                           ": an address; certificates are issued for host names only");
    }
    if (host->name != t.host) {
      return Status::Error("TLS credential host " + t.host + ": not normalised (" + host->name + ")");
    }
    bool seen = false;
    for (const auto& n : names) seen |= n == host->name;
    if (!seen) names.push_back(host->name);
  }

  Key ca_key(EVP_EC_gen("P-256"));
  if (!ca_key) return Status::Error(OpenSslError("CA key"));
  unsigned char tag[6];
  if (RAND_bytes(tag, sizeof tag) != 1) return Status::Error(OpenSslError("RAND_bytes"));
  std::string cn = "warden sandbox egress CA ";
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char b : tag) {
    cn += kHex[b >> 4];
    cn += kHex[b & 15];
  }
  auto ca = NewCert(cn, ca_key.get(), lifetime);
  if (!ca) return ca.status();
  X509* ca_cert = ca->get();
  X509_set_issuer_name(ca_cert, X509_get_subject_name(ca_cert));
  // Permitted: the granted names (and, as name constraints go, names below them; no leaf for
  // those exists). Excluded: every IPv4 and IPv6 address, so that a certificate for an address
  // could not chain to it either.
  std::string constraints = "critical";
  for (const auto& n : names) constraints += ",permitted;DNS:" + n;
  constraints += ",excluded;IP:0.0.0.0/0.0.0.0,excluded;IP:::/::";
  if (!AddExtension(ca_cert, ca_cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
      !AddExtension(ca_cert, ca_cert, NID_key_usage, "critical,keyCertSign,cRLSign") ||
      !AddExtension(ca_cert, ca_cert, NID_subject_key_identifier, "hash") ||
      !AddExtension(ca_cert, ca_cert, NID_name_constraints, constraints)) {
    return Status::Error(OpenSslError("CA certificate extensions"));
  }
  if (X509_sign(ca_cert, ca_key.get(), EVP_sha256()) == 0)
    return Status::Error(OpenSslError("signing the CA certificate"));

  InterceptAuthority out;
  out.ca_pem = Pem(ca_cert);
  if (out.ca_pem.empty()) return Status::Error(OpenSslError("CA certificate PEM"));
  for (const InterceptTarget& t : targets) {
    Key key(EVP_EC_gen("P-256"));
    if (!key) return Status::Error(OpenSslError("key for " + t.host));
    auto leaf = NewCert(t.host, key.get(), lifetime);
    if (!leaf) return leaf.status();
    X509* cert = leaf->get();
    X509_set_issuer_name(cert, X509_get_subject_name(ca_cert));
    if (!AddExtension(cert, ca_cert, NID_basic_constraints, "critical,CA:FALSE") ||
        !AddExtension(cert, ca_cert, NID_key_usage, "critical,digitalSignature") ||
        !AddExtension(cert, ca_cert, NID_ext_key_usage, "serverAuth") ||
        !AddExtension(cert, ca_cert, NID_subject_alt_name, "DNS:" + t.host) ||
        !AddExtension(cert, ca_cert, NID_authority_key_identifier, "keyid:always")) {
      return Status::Error(OpenSslError("certificate extensions for " + t.host));
    }
    if (X509_sign(cert, ca_key.get(), EVP_sha256()) == 0)
      return Status::Error(OpenSslError("signing the certificate for " + t.host));
    TlsIntercept i;
    i.host = t.host;
    i.port = t.port;
    i.cert_pem = Pem(cert) + out.ca_pem;
    i.key_pem = Pem(key.get());
    if (i.key_pem.empty()) return Status::Error(OpenSslError("key PEM for " + t.host));
    out.intercepts.push_back(std::move(i));
  }
  return out;  // ca_key is freed here: no further certificate can be made under this CA
}

std::string TrustBundle(const std::string& system_bundle, const std::string& ca_pem) {
  std::string out = system_bundle;
  if (!out.empty() && out.back() != '\n') out += '\n';
  return out + ca_pem;
}

}  // namespace warden::egress
