// A byte-level context-free grammar (rules of alternatives, each a sequence of byte sets and rule
// references) and its matcher: states are sets of stacks of grammar positions, interned, so that
// a state is one id and each of its byte transitions is computed once.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace fornace::text {

using ByteSet = std::bitset<256>;

// One element of a sequence: a byte from a set, or a sentence of a rule.
struct GrammarElement {
  enum class Kind : uint8_t { bytes, rule, end };
  Kind kind = Kind::end;
  int32_t index = 0;  // Into the byte sets, or the rule id.
};

using GrammarSequence = std::vector<GrammarElement>;

class Grammar {
 public:
  // Lengths at or above this are unbounded (no finite sentence, or too long to count).
  static constexpr int64_t kUnbounded = int64_t{1} << 60;

  int32_t add_rule();
  void add_alternative(int32_t rule, const GrammarSequence& sequence);
  // Elements for building sequences.
  GrammarElement byte_set(const ByteSet& bytes);
  GrammarElement byte(uint8_t value);
  static GrammarElement rule(int32_t rule_id) { return {GrammarElement::Kind::rule, rule_id}; }
  // Appends one element per byte of `text`.
  void append_text(GrammarSequence& sequence, std::string_view text);

  // Sets the start rule, drops the alternatives that cannot finish, and checks the rest: throws
  // Error when the start rule has no sentence of bounded length, or when a rule can reach itself
  // without reading a byte (the matcher would never stop expanding it).
  void finish(int32_t start);

  int32_t start() const { return start_; }

 private:
  friend class GrammarMatcher;
  std::vector<GrammarElement> elements_;            // Every sequence, each ended by an `end`.
  std::vector<std::vector<int32_t>> alternatives_;  // Per rule: where its sequences start.
  std::vector<ByteSet> byte_sets_;
  std::unordered_map<std::string, int32_t> byte_set_ids_;  // Interning of the byte sets.
  std::vector<int64_t> min_length_;                        // Per rule.
  std::vector<int64_t> rest_length_;  // Per element: the fewest bytes from it to its sequence end.
  int32_t start_ = -1;
};

// Reads bytes against a finished grammar. A stack is a chain of frames (a position in a
// sequence, and the frame to return to), hash-consed so that equal stacks have equal ids; a
// state is a sorted set of stacks whose top positions are byte sets (or the empty stack, when
// the input so far is a whole sentence). Transitions are computed on first use and kept.
class GrammarMatcher {
 public:
  static constexpr int32_t kDead = -1;

  explicit GrammarMatcher(const Grammar& grammar);

  int32_t initial_state() const { return initial_; }
  // The state after `byte`, or kDead.
  int32_t next(int32_t state, uint8_t byte) {
    const size_t index = static_cast<size_t>(state) * 256 + byte;
    int32_t found = transitions_[index];
    if (found == kUnknown) {
      found = compute_next(state, byte);
      transitions_[index] = found;
    }
    return found;
  }
  // The state after `bytes` (kDead once any byte is refused).
  int32_t next(int32_t state, std::string_view bytes);
  // The input so far is a whole sentence.
  bool accepting(int32_t state) const { return states_[state].accepting; }
  // The fewest bytes that complete a sentence from `state`.
  int64_t min_completion(int32_t state) const { return states_[state].min_completion; }
  size_t state_count() const { return states_.size(); }
  size_t stack_node_count() const { return nodes_.size(); }

 private:
  static constexpr int32_t kUnknown = -2;
  static constexpr int32_t kEmptyStack = 0;
  struct Node {
    int32_t position;  // An element index.
    int32_t parent;    // A node id; kEmptyStack at the bottom.
    int64_t min_completion;
  };
  struct State {
    size_t stacks_begin;  // In stack_ids_.
    size_t stacks_end;
    bool accepting;
    int64_t min_completion;
  };

  int32_t intern_node(int32_t position, int32_t parent);
  // Appends to `stacks` the stacks whose tops are byte sets that continue from `position` in the
  // frame whose parent is `parent`, expanding rules and returning from finished frames.
  void expand(int32_t position, int32_t parent, std::vector<int32_t>& stacks, int depth);
  int32_t intern_state(std::vector<int32_t>& stacks);
  int32_t compute_next(int32_t state, uint8_t byte);

  const Grammar& grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_ids_;
  std::vector<int32_t> stack_ids_;  // The states' stacks, one run per state.
  std::vector<State> states_;
  std::unordered_map<std::string, int32_t> state_ids_;
  std::vector<int32_t> transitions_;  // 256 per state.
  std::vector<int32_t> scratch_;
  std::unordered_set<uint64_t> expanded_;  // (position, parent) pairs expanded by one step.
  int32_t initial_ = kDead;
};

}  // namespace fornace::text
