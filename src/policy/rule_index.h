// Finds the rules that may match a tool name without scanning them all: rules are filed under the
// literal part of their tool pattern (an exact name, or the characters before the first wildcard)
// in a character trie. A lookup walks the name once and merges the few lists it meets, in rule
// order, without allocating.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/model.h"

namespace warden::policy {

class RuleIndex {
 public:
  explicit RuleIndex(const std::vector<Rule>& rules);

  // Calls visit(i) for every rule i whose tool pattern may match `tool`, in increasing i, until
  // visit returns false. Rules whose pattern cannot match are skipped; the others still need
  // their full match checked.
  template <typename Visit>
  void ForEachCandidate(std::string_view tool, Visit&& visit) const;

 private:
  struct Node {
    std::vector<std::pair<char, uint32_t>> children;
    std::vector<uint32_t> prefixed;  // patterns whose literal prefix ends here (then a wildcard)
    std::vector<uint32_t> exact;     // exact names that end here
  };
  static constexpr int kMaxLists = 64;

  uint32_t Child(uint32_t node, char c) const;

  std::vector<Node> nodes_;
  uint32_t rule_count_ = 0;
};

template <typename Visit>
void RuleIndex::ForEachCandidate(std::string_view tool, Visit&& visit) const {
  struct Span {
    const uint32_t* next;
    const uint32_t* end;
  };
  Span spans[kMaxLists];
  int count = 0;
  bool overflow = false;
  auto add = [&](const std::vector<uint32_t>& list) {
    if (list.empty()) return;
    if (count == kMaxLists) {
      overflow = true;
      return;
    }
    spans[count++] = {list.data(), list.data() + list.size()};
  };
  uint32_t node = 0;
  add(nodes_[0].prefixed);
  size_t i = 0;
  for (; i < tool.size(); ++i) {
    node = Child(node, tool[i]);
    if (node == 0) break;
    add(nodes_[node].prefixed);
  }
  if (i == tool.size() && node != 0) add(nodes_[node].exact);
  if (tool.empty()) add(nodes_[0].exact);
  if (overflow) {  // pathological nesting of prefixes: fall back to every rule, in order
    for (uint32_t r = 0; r < rule_count_; ++r) {
      if (!visit(r)) return;
    }
    return;
  }
  while (true) {
    int best = -1;
    for (int s = 0; s < count; ++s) {
      if (spans[s].next != spans[s].end && (best < 0 || *spans[s].next < *spans[best].next))
        best = s;
    }
    if (best < 0) return;
    if (!visit(*spans[best].next++)) return;
  }
}

}  // namespace warden::policy
