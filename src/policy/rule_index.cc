#include "policy/rule_index.h"

namespace warden::policy {

RuleIndex::RuleIndex(const std::vector<Rule>& rules)
    : nodes_(1), rule_count_(static_cast<uint32_t>(rules.size())) {
  for (uint32_t r = 0; r < rules.size(); ++r) {
    const Glob& glob = rules[r].match.tool;
    std::string_view literal = glob.literal_prefix();
    uint32_t node = 0;
    for (char c : literal) {
      uint32_t next = Child(node, c);
      if (next == 0) {
        next = static_cast<uint32_t>(nodes_.size());
        nodes_[node].children.emplace_back(c, next);
        nodes_.emplace_back();
      }
      node = next;
    }
    // Rules are added in order, so every list stays sorted.
    if (glob.is_literal()) {
      nodes_[node].exact.push_back(r);
    } else {
      nodes_[node].prefixed.push_back(r);
    }
  }
}

uint32_t RuleIndex::Child(uint32_t node, char c) const {
  for (const auto& [ch, next] : nodes_[node].children) {
    if (ch == c) return next;
  }
  return 0;  // the root is never a child
}

}  // namespace warden::policy
