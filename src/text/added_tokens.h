// Finds added tokens ("<|im_start|>", ...) in text: the leftmost match, longest at that place.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fornace::text {

class AddedTokenMatcher {
 public:
  struct Token {
    std::string content;
    uint32_t id;
    bool special;
  };
  struct Match {
    size_t start;
    size_t length;
    uint32_t id;
  };

  // Makes `tokens` the ones to find (empty contents are never found; of two equal contents, the
  // first listed wins).
  void assign(std::vector<Token> tokens);
  bool empty() const { return tokens_.empty(); }

  // The first added token at or after `from`. Special tokens count only when
  // `include_special` is set; the others always do (as with Hugging Face's
  // split_special_tokens).
  std::optional<Match> find(std::string_view text, size_t from, bool include_special) const;

 private:
  static constexpr uint32_t no_token = UINT32_MAX;
  // A byte trie: a node's edges are contiguous in edges_, sorted by byte.
  struct Node {
    uint32_t first_edge = 0, edge_count = 0;
    uint32_t token = no_token;  // Index in tokens_ of the token that ends here.
  };
  struct Edge {
    uint8_t byte;
    uint32_t child;
  };
  // The child of `node` along `byte`, or no_token.
  uint32_t child(const Node& node, uint8_t byte) const;

  std::vector<Token> tokens_;
  std::vector<Node> nodes_;
  std::vector<Edge> edges_;
  std::array<bool, 256> is_first_byte_{};
};

}  // namespace fornace::text
