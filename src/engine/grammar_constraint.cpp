// The grammar constraint and its progress: masks from the token trie, cached per grammar state, the
// length budget and the end-of-sequence ids.
#include "engine/grammar_constraint.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace fornace {
namespace {

// Masks kept per request, and the matcher's size past which it restarts.
constexpr size_t kMaxCachedMasks = 64;
constexpr size_t kMaxMatcherStates = 200000;
constexpr size_t kMaxMatcherNodes = 2000000;

}  // namespace

GrammarConstraint::GrammarConstraint(std::shared_ptr<const text::Grammar> grammar,
                                     std::shared_ptr<const text::TokenTrie> trie,
                                     std::vector<uint32_t> eos_ids, int64_t max_tokens)
    : grammar_(std::move(grammar)),
      trie_(std::move(trie)),
      eos_ids_(std::move(eos_ids)),
      max_tokens_(max_tokens) {
  if (eos_ids_.empty()) fail("a grammar constraint needs an end-of-sequence id");
}

std::unique_ptr<GrammarProgress> GrammarConstraint::start_progress() const {
  return std::make_unique<GrammarProgress>(grammar_, trie_, eos_ids_, max_tokens_);
}

GrammarProgress::GrammarProgress(std::shared_ptr<const text::Grammar> grammar,
                                 std::shared_ptr<const text::TokenTrie> trie,
                                 std::vector<uint32_t> eos_ids, int64_t max_tokens)
    : grammar_(std::move(grammar)),
      trie_(std::move(trie)),
      eos_ids_(std::move(eos_ids)),
      max_tokens_(max_tokens) {
  matcher_.emplace(*grammar_);
  state_ = matcher_->initial_state();
}

bool GrammarProgress::complete() const {
  return state_ != text::GrammarMatcher::kDead && matcher_->accepting(state_);
}

void GrammarProgress::restart_matcher() {
  cache_.clear();
  matcher_.emplace(*grammar_);
  state_ = matcher_->next(matcher_->initial_state(), text_);
}

const std::vector<uint64_t>& GrammarProgress::allowed() {
  const size_t words = (trie_->vocab_size() + 63) / 64;
  eos_allowed_ = ended_ || state_ == text::GrammarMatcher::kDead || complete();
  if (eos_allowed_ && (ended_ || state_ == text::GrammarMatcher::kDead)) {
    current_.assign(words, 0);
  } else {
    if (matcher_->state_count() > kMaxMatcherStates ||
        matcher_->stack_node_count() > kMaxMatcherNodes) {
      restart_matcher();
    }
    auto found = cache_.find(state_);
    if (found == cache_.end()) {
      if (cache_.size() >= kMaxCachedMasks) cache_.clear();
      CachedMask computed;
      computed.largest_completion =
          trie_->allowed(*matcher_, state_, text::Grammar::kUnbounded, computed.bits);
      found = cache_.emplace(state_, std::move(computed)).first;
    }
    // The tokens after this one; each may be a single byte.
    const int64_t left = std::max<int64_t>(max_tokens_ - accepted_ - 1, 0);
    if (found->second.largest_completion <= left) {
      current_ = found->second.bits;
    } else {
      trie_->allowed(*matcher_, state_, left, current_);
      // None fits (the shortest sentence is longer than max_tokens): the text runs to the limit.
      if (!eos_allowed_ &&
          std::none_of(current_.begin(), current_.end(), [](uint64_t word) { return word != 0; })) {
        current_ = found->second.bits;
      }
    }
  }
  if (eos_allowed_) {
    for (uint32_t id : eos_ids_) {
      if (id < trie_->vocab_size()) current_[id >> 6] |= uint64_t{1} << (id & 63);
    }
  }
  return current_;
}

void GrammarProgress::mask(std::span<float> logits) {
  const std::vector<uint64_t>& bits = allowed();
  constexpr float kRefused = -std::numeric_limits<float>::infinity();
  const size_t in_vocabulary = std::min(logits.size(), trie_->vocab_size());
  for (size_t word = 0; word * 64 < in_vocabulary; ++word) {
    const uint64_t allowed_bits = bits[word];
    if (allowed_bits == ~uint64_t{0}) continue;
    const size_t end = std::min(in_vocabulary, word * 64 + 64);
    for (size_t id = word * 64; id < end; ++id) {
      if (!((allowed_bits >> (id & 63)) & 1)) logits[id] = kRefused;
    }
  }
  for (size_t id = in_vocabulary; id < logits.size(); ++id) {
    const bool eos = std::find(eos_ids_.begin(), eos_ids_.end(), id) != eos_ids_.end();
    if (!(eos && eos_allowed_)) logits[id] = kRefused;
  }
}

void GrammarProgress::accept(uint32_t id) {
  ++accepted_;
  if (ended_) return;
  if (std::find(eos_ids_.begin(), eos_ids_.end(), id) != eos_ids_.end()) {
    ended_ = true;
    return;
  }
  const std::string empty;
  const std::string& bytes = id < trie_->vocab_size() ? trie_->token_bytes(id) : empty;
  const int32_t next = bytes.empty() ? text::GrammarMatcher::kDead : matcher_->next(state_, bytes);
  if (next == text::GrammarMatcher::kDead) {
    ended_ = true;  // Only reached when a caller ignores the mask.
    return;
  }
  state_ = next;
  text_ += bytes;
}

}  // namespace fornace
