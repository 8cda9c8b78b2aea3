#include "audit/merkle.h"

#include <openssl/evp.h>

#include <stdexcept>

namespace warden::audit {
namespace {

Digest Sha256Of(std::initializer_list<std::span<const uint8_t>> parts) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  Digest out{};
  unsigned int len = 0;
  bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1;
  for (auto part : parts) ok = ok && EVP_DigestUpdate(ctx, part.data(), part.size()) == 1;
  ok = ok && EVP_DigestFinal_ex(ctx, out.data(), &len) == 1;
  EVP_MD_CTX_free(ctx);
  // Only an allocation failure gets here; an audit tree with a wrong hash must not exist.
  if (!ok || len != out.size()) throw std::runtime_error("SHA-256 failed");
  return out;
}

constexpr uint8_t kLeafPrefix[1] = {0x00};
constexpr uint8_t kNodePrefix[1] = {0x01};

// The largest power of two smaller than n (n >= 2).
uint64_t SplitPoint(uint64_t n) {
  uint64_t k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

void Path(std::span<const Digest> d, uint64_t m, std::vector<Digest>* out) {
  if (d.size() <= 1) return;
  const uint64_t k = SplitPoint(d.size());
  if (m < k) {
    Path(d.first(k), m, out);
    out->push_back(MerkleRoot(d.subspan(k)));
  } else {
    Path(d.subspan(k), m - k, out);
    out->push_back(MerkleRoot(d.first(k)));
  }
}

void SubProof(std::span<const Digest> d, uint64_t m, bool complete, std::vector<Digest>* out) {
  const uint64_t n = d.size();
  if (m == n) {
    if (!complete) out->push_back(MerkleRoot(d));
    return;
  }
  const uint64_t k = SplitPoint(n);
  if (m <= k) {
    SubProof(d.first(k), m, complete, out);
    out->push_back(MerkleRoot(d.subspan(k)));
  } else {
    SubProof(d.subspan(k), m - k, false, out);
    out->push_back(MerkleRoot(d.first(k)));
  }
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

Digest LeafHash(std::string_view data) {
  return Sha256Of({kLeafPrefix, {reinterpret_cast<const uint8_t*>(data.data()), data.size()}});
}

Digest NodeHash(const Digest& left, const Digest& right) {
  return Sha256Of({kNodePrefix, left, right});
}

Result<Digest> DigestFromHex(std::string_view hex) {
  Digest d{};
  if (hex.size() != 64) return Status::Error("expected 64 lower-case hex characters");
  for (size_t i = 0; i < 32; ++i) {
    const int hi = HexValue(hex[2 * i]), lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return Status::Error("expected 64 lower-case hex characters");
    d[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return d;
}

std::string ToHex(const Digest& d) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(64, '0');
  for (size_t i = 0; i < 32; ++i) {
    out[2 * i] = kDigits[d[i] >> 4];
    out[2 * i + 1] = kDigits[d[i] & 15];
  }
  return out;
}

Result<Digest> EntryLeafHash(std::string_view hex) {
  auto raw = DigestFromHex(hex);
  if (!raw) return raw.status().Wrap("entry hash");
  return LeafHash({reinterpret_cast<const char*>(raw->data()), raw->size()});
}

Digest MerkleRoot(std::span<const Digest> leaves) {
  if (leaves.empty()) return Sha256Of({});
  if (leaves.size() == 1) return leaves[0];
  // Bottom-up, pairing left to right and carrying an odd last node up unchanged: the same
  // tree as RFC 6962's recursive split at the largest power of two below n.
  std::vector<Digest> level(leaves.begin(), leaves.end());
  while (level.size() > 1) {
    size_t out = 0;
    for (size_t i = 0; i + 1 < level.size(); i += 2) level[out++] = NodeHash(level[i], level[i + 1]);
    if (level.size() % 2 == 1) level[out++] = level.back();
    level.resize(out);
  }
  return level[0];
}

std::vector<Digest> InclusionProof(std::span<const Digest> leaves, uint64_t index) {
  std::vector<Digest> out;
  if (index < leaves.size()) Path(leaves, index, &out);
  return out;
}

std::vector<Digest> ConsistencyProof(std::span<const Digest> leaves, uint64_t m) {
  std::vector<Digest> out;
  if (m > 0 && m < leaves.size()) SubProof(leaves, m, true, &out);
  return out;
}

std::optional<Digest> RootFromInclusion(uint64_t index, uint64_t size, const Digest& leaf,
                                        std::span<const Digest> proof) {
  if (index >= size) return std::nullopt;
  uint64_t fn = index, sn = size - 1;
  Digest r = leaf;
  for (const Digest& p : proof) {
    if (sn == 0) return std::nullopt;
    if ((fn & 1) != 0 || fn == sn) {
      r = NodeHash(p, r);
      while ((fn & 1) == 0 && fn != 0) fn >>= 1, sn >>= 1;
    } else {
      r = NodeHash(r, p);
    }
    fn >>= 1, sn >>= 1;
  }
  if (sn != 0) return std::nullopt;
  return r;
}

bool VerifyInclusion(uint64_t index, uint64_t size, const Digest& leaf,
                     std::span<const Digest> proof, const Digest& root) {
  const std::optional<Digest> r = RootFromInclusion(index, size, leaf, proof);
  return r.has_value() && *r == root;
}

bool VerifyConsistency(uint64_t old_size, uint64_t new_size, const Digest& old_root,
                       const Digest& new_root, std::span<const Digest> proof) {
  if (old_size > new_size) return false;
  if (old_size == new_size) return proof.empty() && old_root == new_root;
  if (old_size == 0) return proof.empty();
  if (proof.empty()) return false;
  std::vector<Digest> path;
  if ((old_size & (old_size - 1)) == 0) path.push_back(old_root);  // a complete subtree
  path.insert(path.end(), proof.begin(), proof.end());
  uint64_t fn = old_size - 1, sn = new_size - 1;
  while ((fn & 1) != 0) fn >>= 1, sn >>= 1;
  Digest fr = path[0], sr = path[0];
  for (size_t i = 1; i < path.size(); ++i) {
    if (sn == 0) return false;
    if ((fn & 1) != 0 || fn == sn) {
      fr = NodeHash(path[i], fr);
      sr = NodeHash(path[i], sr);
      while ((fn & 1) == 0 && fn != 0) fn >>= 1, sn >>= 1;
    } else {
      sr = NodeHash(sr, path[i]);
    }
    fn >>= 1, sn >>= 1;
  }
  return sn == 0 && fr == old_root && sr == new_root;
}

}  // namespace warden::audit
