// The audit tree against RFC 6962: the published test vectors (the certificate-transparency
// project's eight leaves, their roots and proofs), then every proof of every small tree verified,
// and every altered proof refused.
#include "audit/merkle.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace warden::audit {
namespace {

std::string Unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::vector<Digest> VectorLeaves() {
  std::vector<Digest> leaves;
  for (const char* hex : {"", "00", "10", "2021", "3031", "40414243", "5051525354555657",
                          "606162636465666768696a6b6c6d6e6f"}) {
    leaves.push_back(LeafHash(Unhex(hex)));
  }
  return leaves;
}

std::vector<std::string> Hexes(const std::vector<Digest>& ds) {
  std::vector<std::string> out;
  for (const Digest& d : ds) out.push_back(ToHex(d));
  return out;
}

std::vector<Digest> Leaves(size_t n) {
  std::vector<Digest> leaves;
  for (size_t i = 0; i < n; ++i) leaves.push_back(LeafHash("entry " + std::to_string(i)));
  return leaves;
}

TEST(Merkle, RootsAreTheRfc6962TestVectors) {
  const std::vector<std::string> roots = {
      "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
      "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
      "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
      "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
      "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
      "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
      "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
      "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"};
  auto leaves = VectorLeaves();
  for (size_t n = 1; n <= 8; ++n) {
    EXPECT_EQ(ToHex(MerkleRoot(std::span<const Digest>(leaves).first(n))), roots[n - 1]) << n;
  }
  EXPECT_EQ(ToHex(MerkleRoot({})), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Merkle, ProofsAreTheRfc6962TestVectors) {
  auto leaves = VectorLeaves();
  EXPECT_EQ(Hexes(InclusionProof(leaves, 0)),
            (std::vector<std::string>{"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                                      "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                                      "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}));
  EXPECT_EQ(Hexes(InclusionProof(leaves, 5)),
            (std::vector<std::string>{"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
                                      "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
                                      "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}));
  EXPECT_EQ(Hexes(ConsistencyProof(leaves, 6)),
            (std::vector<std::string>{"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
                                      "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
                                      "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}));
  EXPECT_TRUE(InclusionProof(std::span<const Digest>(leaves).first(1), 0).empty());
  EXPECT_TRUE(ConsistencyProof(leaves, 8).empty());
}

TEST(Merkle, EveryInclusionProofOfEverySmallTreeVerifiesAndNoAlteredOneDoes) {
  auto all = Leaves(70);
  for (size_t n = 1; n <= all.size(); ++n) {
    std::span<const Digest> leaves(all.data(), n);
    const Digest root = MerkleRoot(leaves);
    for (size_t i = 0; i < n; ++i) {
      auto proof = InclusionProof(leaves, i);
      ASSERT_TRUE(VerifyInclusion(i, n, leaves[i], proof, root)) << i << " of " << n;
      // Another leaf, another index, another size, another root: refused.
      if (n > 1) {
        EXPECT_FALSE(VerifyInclusion(i, n, leaves[(i + 1) % n], proof, root)) << i << " of " << n;
        EXPECT_FALSE(VerifyInclusion((i + 1) % n, n, leaves[i], proof, root)) << i << " of " << n;
      }
      EXPECT_FALSE(VerifyInclusion(i, n, leaves[i], proof, LeafHash("other")));
      for (size_t k = 0; k < proof.size(); ++k) {
        auto bad = proof;
        bad[k][0] ^= 1;
        EXPECT_FALSE(VerifyInclusion(i, n, leaves[i], bad, root)) << k;
      }
      if (!proof.empty()) {
        auto shorter = proof;
        shorter.pop_back();
        EXPECT_FALSE(VerifyInclusion(i, n, leaves[i], shorter, root));
      }
      auto longer = proof;
      longer.push_back(root);
      EXPECT_FALSE(VerifyInclusion(i, n, leaves[i], longer, root));
    }
    EXPECT_FALSE(VerifyInclusion(n, n, leaves[0], {}, root));
  }
}

TEST(Merkle, EveryConsistencyProofOfEverySmallTreeVerifiesAndNoAlteredOneDoes) {
  auto all = Leaves(50);
  for (size_t n = 1; n <= all.size(); ++n) {
    std::span<const Digest> leaves(all.data(), n);
    const Digest new_root = MerkleRoot(leaves);
    for (size_t m = 1; m <= n; ++m) {
      const Digest old_root = MerkleRoot(leaves.first(m));
      auto proof = ConsistencyProof(leaves, m);
      ASSERT_TRUE(VerifyConsistency(m, n, old_root, new_root, proof)) << m << " -> " << n;
      // A rewritten history: the old root of a tree whose first leaf differs.
      auto rewritten = std::vector<Digest>(leaves.begin(), leaves.begin() + m);
      rewritten[0] = LeafHash("rewritten");
      EXPECT_FALSE(VerifyConsistency(m, n, MerkleRoot(rewritten), new_root, proof)) << m << " -> " << n;
      EXPECT_FALSE(VerifyConsistency(m, n, old_root, LeafHash("other"), proof));
      for (size_t k = 0; k < proof.size(); ++k) {
        auto bad = proof;
        bad[k][31] ^= 0x80;
        EXPECT_FALSE(VerifyConsistency(m, n, old_root, new_root, bad)) << m << " -> " << n << " at " << k;
      }
      if (m < n) {
        EXPECT_FALSE(VerifyConsistency(m, n, old_root, new_root, {}));
        EXPECT_FALSE(VerifyConsistency(n, m, new_root, old_root, proof));
      }
    }
  }
  EXPECT_TRUE(VerifyConsistency(0, 5, Digest{}, MerkleRoot(Leaves(5)), {}));
}

TEST(Merkle, EntryLeavesAreTheEntryHashAsBytes) {
  const std::string hex = "fc7e672974cbcb4c6378725e1a240af352322cf04c4548ecfca316780e14b96e";
  auto leaf = EntryLeafHash(hex);
  ASSERT_TRUE(leaf.ok());
  EXPECT_EQ(*leaf, LeafHash(Unhex(hex)));
  EXPECT_FALSE(EntryLeafHash(hex.substr(1)).ok());
  EXPECT_FALSE(EntryLeafHash("FC" + hex.substr(2)).ok());
  EXPECT_FALSE(EntryLeafHash("zz" + hex.substr(2)).ok());
}

}  // namespace
}  // namespace warden::audit
