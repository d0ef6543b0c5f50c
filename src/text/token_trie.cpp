// The token trie: built from the sorted token byte strings, walked against a grammar matcher.
#include "text/token_trie.h"

#include <algorithm>

#include "core/error.h"

namespace fornace::text {

TokenTrie TokenTrie::from_tokenizer(const Tokenizer& tokenizer) {
  std::vector<std::pair<uint32_t, std::string>> tokens;
  const size_t vocab_size = tokenizer.vocab_size();
  tokens.reserve(vocab_size);
  for (uint32_t id = 0; id < vocab_size; ++id) {
    if (tokenizer.is_special(id)) continue;
    std::string bytes = tokenizer.token_bytes(id);
    if (!bytes.empty()) tokens.emplace_back(id, std::move(bytes));
  }
  return TokenTrie(tokens, vocab_size);
}

TokenTrie::TokenTrie(const std::vector<std::pair<uint32_t, std::string>>& tokens, size_t vocab_size)
    : token_bytes_(vocab_size) {
  std::vector<size_t> order(tokens.size());
  for (size_t index = 0; index < order.size(); ++index) {
    const auto& [id, bytes] = tokens[index];
    if (id >= vocab_size) fail("token trie: id ", id, " is out of the vocabulary of ", vocab_size);
    if (bytes.size() > UINT16_MAX) fail("token trie: token ", id, " is too long");
    token_bytes_[id] = bytes;
    order[index] = index;
  }
  std::sort(order.begin(), order.end(), [&](size_t left, size_t right) {
    return tokens[left].second < tokens[right].second ||
           (tokens[left].second == tokens[right].second &&
            tokens[left].first < tokens[right].first);
  });
  // The path from the root to the last node added; a token shares its prefix with the previous
  // one in sorted order, and the nodes past that prefix are new.
  std::vector<int32_t> path;
  std::string_view previous;
  auto close_nodes_down_to = [&](size_t depth) {
    while (path.size() > depth) {
      subtree_ends_[path.back()] = static_cast<int32_t>(bytes_.size());
      path.pop_back();
    }
  };
  for (size_t index : order) {
    const auto& [id, bytes] = tokens[index];
    if (bytes.empty()) continue;
    size_t common = 0;
    while (common < previous.size() && common < bytes.size() && previous[common] == bytes[common]) {
      ++common;
    }
    close_nodes_down_to(common);
    for (size_t depth = common; depth < bytes.size(); ++depth) {
      path.push_back(static_cast<int32_t>(bytes_.size()));
      bytes_.push_back(static_cast<uint8_t>(bytes[depth]));
      depths_.push_back(static_cast<uint16_t>(depth + 1));
      subtree_ends_.push_back(0);
      tokens_begin_.push_back(static_cast<int32_t>(token_ids_.size()));
      tokens_end_.push_back(static_cast<int32_t>(token_ids_.size()));
    }
    // Equal byte strings are neighbours in the order, so a node's tokens are one run.
    token_ids_.push_back(id);
    tokens_end_[path.back()] = static_cast<int32_t>(token_ids_.size());
    max_depth_ = std::max(max_depth_, bytes.size());
    previous = bytes;
  }
  close_nodes_down_to(0);
}

int64_t TokenTrie::allowed(GrammarMatcher& matcher, int32_t state, int64_t max_completion,
                           std::vector<uint64_t>& mask) const {
  mask.assign((vocab_size() + 63) / 64, 0);
  int64_t largest = -1;
  // The state after each depth of the current path; [0] is the state before the token.
  std::vector<int32_t> states(max_depth_ + 1);
  states[0] = state;
  const size_t count = bytes_.size();
  for (size_t node = 0; node < count;) {
    const uint16_t depth = depths_[node];
    const int32_t next = matcher.next(states[depth - 1], bytes_[node]);
    if (next == GrammarMatcher::kDead) {
      node = static_cast<size_t>(subtree_ends_[node]);
      continue;
    }
    states[depth] = next;
    if (tokens_begin_[node] != tokens_end_[node]) {
      const int64_t completion = matcher.min_completion(next);
      if (completion <= max_completion) {
        largest = std::max(largest, completion);
        for (int32_t index = tokens_begin_[node]; index < tokens_end_[node]; ++index) {
          const uint32_t id = token_ids_[index];
          mask[id >> 6] |= uint64_t{1} << (id & 63);
        }
      }
    }
    ++node;
  }
  return largest;
}

}  // namespace fornace::text
