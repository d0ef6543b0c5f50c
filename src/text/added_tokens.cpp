// The added-token search: a scan for bytes that can start a token, then a walk down a byte trie
// that remembers the longest token passed.
#include "text/added_tokens.h"

#include <algorithm>
#include <numeric>

namespace fornace::text {

void AddedTokenMatcher::assign(std::vector<Token> tokens) {
  tokens_ = std::move(tokens);
  nodes_.assign(1, Node{});
  edges_.clear();
  is_first_byte_.fill(false);
  std::vector<uint32_t> order(tokens_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t left, uint32_t right) {
    return tokens_[left].content < tokens_[right].content;
  });
  // Each work item: a node and the sorted tokens that share its prefix of `depth` bytes. Built
  // with a stack rather than recursion, since a token may be very long.
  struct Work {
    uint32_t node;
    size_t begin, end, depth;
  };
  std::vector<Work> stack;
  stack.push_back({0, 0, order.size(), 0});
  while (!stack.empty()) {
    Work work = stack.back();
    stack.pop_back();
    size_t index = work.begin;
    const auto content = [&](size_t at) -> const std::string& {
      return tokens_[order[at]].content;
    };
    if (index < work.end && content(index).size() == work.depth) {
      if (work.depth > 0) nodes_[work.node].token = order[index];
      while (index < work.end && content(index).size() == work.depth) ++index;
    }
    nodes_[work.node].first_edge = static_cast<uint32_t>(edges_.size());
    while (index < work.end) {
      uint8_t byte = static_cast<uint8_t>(content(index)[work.depth]);
      size_t group_end = index;
      while (group_end < work.end && static_cast<uint8_t>(content(group_end)[work.depth]) == byte)
        ++group_end;
      uint32_t child = static_cast<uint32_t>(nodes_.size());
      nodes_.push_back(Node{});
      edges_.push_back({byte, child});
      ++nodes_[work.node].edge_count;
      stack.push_back({child, index, group_end, work.depth + 1});
      index = group_end;
    }
  }
  for (const Edge* edge = edges_.data(); edge != edges_.data() + nodes_[0].edge_count; ++edge)
    is_first_byte_[edge->byte] = true;
}

uint32_t AddedTokenMatcher::child(const Node& node, uint8_t byte) const {
  const Edge* first = edges_.data() + node.first_edge;
  const Edge* last = first + node.edge_count;
  const Edge* found = std::lower_bound(
      first, last, byte, [](const Edge& edge, uint8_t value) { return edge.byte < value; });
  return found != last && found->byte == byte ? found->child : no_token;
}

std::optional<AddedTokenMatcher::Match> AddedTokenMatcher::find(std::string_view text, size_t from,
                                                                bool include_special) const {
  for (size_t position = from; position < text.size(); ++position) {
    if (!is_first_byte_[static_cast<uint8_t>(text[position])]) continue;
    std::optional<Match> longest;
    uint32_t node = 0;
    for (size_t end = position; end < text.size(); ++end) {
      node = child(nodes_[node], static_cast<uint8_t>(text[end]));
      if (node == no_token) break;
      uint32_t token = nodes_[node].token;
      if (token != no_token && (include_special || !tokens_[token].special))
        longest = Match{position, end + 1 - position, tokens_[token].id};
    }
    if (longest) return longest;
  }
  return std::nullopt;
}

}  // namespace fornace::text
