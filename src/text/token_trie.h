// The vocabulary's token byte strings as a trie in preorder, and the allowed-token mask of a
// grammar state computed by walking it: a byte the grammar refuses skips the node's whole subtree.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/grammar.h"
#include "text/tokenizer.h"

namespace fornace::text {

class TokenTrie {
 public:
  // Every token of `tokenizer` but the special ones and those of no bytes.
  static TokenTrie from_tokenizer(const Tokenizer& tokenizer);
  // Tokens given as (id, bytes); ids below `vocab_size`.
  TokenTrie(const std::vector<std::pair<uint32_t, std::string>>& tokens, size_t vocab_size);

  size_t vocab_size() const { return token_bytes_.size(); }
  size_t node_count() const { return bytes_.size(); }
  // The bytes of `id` (empty for the tokens left out).
  const std::string& token_bytes(uint32_t id) const { return token_bytes_.at(id); }

  // A mask over the vocabulary, one bit per id: the tokens whose bytes `matcher` reads from
  // `state` without dying, and whose following state can still be completed in at most
  // `max_completion` bytes. Returns the largest min_completion among the allowed tokens' states.
  int64_t allowed(GrammarMatcher& matcher, int32_t state, int64_t max_completion,
                  std::vector<uint64_t>& mask) const;

 private:
  // Nodes in preorder (the root left out): each node's byte, depth (1 for the root's children),
  // the index past its subtree, and its tokens as a run of token_ids_.
  std::vector<uint8_t> bytes_;
  std::vector<uint16_t> depths_;
  std::vector<int32_t> subtree_ends_;
  std::vector<int32_t> tokens_begin_;
  std::vector<int32_t> tokens_end_;
  std::vector<uint32_t> token_ids_;
  std::vector<std::string> token_bytes_;
  size_t max_depth_ = 0;
};

}  // namespace fornace::text
