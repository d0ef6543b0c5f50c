// A TokenConstraint from a byte-level grammar: the ids whose bytes the grammar reads next (found
// by walking the token trie, and kept per grammar state), the end-of-sequence ids once the text
// is a whole sentence, and nothing that the tokens left could not complete.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/token_constraint.h"
#include "text/grammar.h"
#include "text/token_trie.h"

namespace fornace {

// One sequence under a grammar.
class GrammarProgress : public ConstrainedSequence {
 public:
  // See GrammarConstraint.
  GrammarProgress(std::shared_ptr<const text::Grammar> grammar,
                  std::shared_ptr<const text::TokenTrie> trie, std::vector<uint32_t> eos_ids,
                  int64_t max_tokens);

  void mask(std::span<float> logits) override;
  void accept(uint32_t id) override;

  // The ids allowed next, a bit per id of the trie's vocabulary (end-of-sequence ids past it
  // count in eos_allowed_).
  const std::vector<uint64_t>& allowed();
  // The text so far is a whole sentence.
  bool complete() const;

 private:
  struct CachedMask {
    std::vector<uint64_t> bits;
    int64_t largest_completion;  // The largest min_completion among the allowed ids' states.
  };
  // A fresh matcher that has read the text so far (its tables only grow; this bounds them).
  void restart_matcher();

  std::shared_ptr<const text::Grammar> grammar_;
  std::shared_ptr<const text::TokenTrie> trie_;
  std::vector<uint32_t> eos_ids_;
  int64_t max_tokens_;
  std::optional<text::GrammarMatcher> matcher_;
  int32_t state_;
  int64_t accepted_ = 0;  // Ids accepted so far.
  bool ended_ = false;    // An end-of-sequence id (or an id the grammar refuses) was accepted.
  std::string text_;      // The bytes read so far.
  std::unordered_map<int32_t, CachedMask> cache_;
  std::vector<uint64_t> current_;
  bool eos_allowed_ = false;
};

class GrammarConstraint : public TokenConstraint {
 public:
  // `max_tokens`: the completion's length limit. An id is allowed only when the text after it
  // can still become a sentence within the tokens left (a token per byte at worst: every
  // byte-level vocabulary has one for each byte), so that a sentence whose shortest form fits
  // in max_tokens is always finished. `eos_ids` must not be empty.
  GrammarConstraint(std::shared_ptr<const text::Grammar> grammar,
                    std::shared_ptr<const text::TokenTrie> trie, std::vector<uint32_t> eos_ids,
                    int64_t max_tokens);

  std::unique_ptr<ConstrainedSequence> start() const override { return start_progress(); }
  std::unique_ptr<GrammarProgress> start_progress() const;

 private:
  std::shared_ptr<const text::Grammar> grammar_;
  std::shared_ptr<const text::TokenTrie> trie_;
  std::vector<uint32_t> eos_ids_;
  int64_t max_tokens_;
};

}  // namespace fornace
