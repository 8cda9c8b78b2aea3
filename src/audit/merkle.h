// The audit log as an RFC 6962 (RFC 9162 section 2.1) Merkle tree: its root, inclusion proofs
// and consistency proofs, and their verification. Pure functions over leaf hashes; the leaves
// of the audit tree are the entries in id order (EntryLeafHash). docs/audit.md, "The Merkle tree".
//
//   std::vector<Digest> leaves = ...;                 // EntryLeafHash(entry.hash) for id 1..n
//   Digest root = MerkleRoot(leaves);
//   auto path = InclusionProof(leaves, 41);            // entry 42
//   bool ok = VerifyInclusion(41, leaves.size(), leaves[41], path, root);
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace warden::audit {

using Digest = std::array<uint8_t, 32>;

// SHA-256(0x00 || data): a leaf.
Digest LeafHash(std::string_view data);
// SHA-256(0x01 || left || right): an interior node.
Digest NodeHash(const Digest& left, const Digest& right);
// The leaf of an audit entry: LeafHash of its `hash` as 32 raw bytes. An error when `hex` is not
// 64 lower-case hex characters.
Result<Digest> EntryLeafHash(std::string_view hex);

// MTH(D[n]); the root of no leaves is SHA-256 of nothing.
Digest MerkleRoot(std::span<const Digest> leaves);
// PATH(index, D[n]): the audit path of leaf `index` (0-based) in the tree of all `leaves`,
// leaf side first. Requires index < leaves.size().
std::vector<Digest> InclusionProof(std::span<const Digest> leaves, uint64_t index);
// PROOF(m, D[n]) for the tree of all `leaves`. Requires 0 < m <= leaves.size(); empty for m == n.
std::vector<Digest> ConsistencyProof(std::span<const Digest> leaves, uint64_t m);

// The root that `proof` takes `leaf` at `index` to, in a tree of `size` leaves (RFC 9162
// 2.1.3.2 before its last comparison); nullopt when the proof cannot be one for that position.
std::optional<Digest> RootFromInclusion(uint64_t index, uint64_t size, const Digest& leaf,
                                        std::span<const Digest> proof);
// RFC 9162 2.1.3.2: does `proof` take `leaf` at `index` to `root` in a tree of `size` leaves?
bool VerifyInclusion(uint64_t index, uint64_t size, const Digest& leaf,
                     std::span<const Digest> proof, const Digest& root);
// RFC 9162 2.1.4.2: is the tree of `new_size` leaves with `new_root` an extension of the one of
// `old_size` leaves with `old_root`? (old_size == new_size: the roots are equal and the proof
// empty; old_size == 0: always, with an empty proof.)
bool VerifyConsistency(uint64_t old_size, uint64_t new_size, const Digest& old_root,
                       const Digest& new_root, std::span<const Digest> proof);

std::string ToHex(const Digest& d);
Result<Digest> DigestFromHex(std::string_view hex);

}  // namespace warden::audit
