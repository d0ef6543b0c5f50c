// The byte-level grammar: building, the checks and lengths of finish(), and the matcher's
// interned stacks and states.
#include "text/grammar.h"

#include <algorithm>
#include <deque>

#include "core/error.h"

namespace fornace::text {
namespace {

int64_t saturating_add(int64_t left, int64_t right) {
  return left >= Grammar::kUnbounded - right ? Grammar::kUnbounded : left + right;
}

// The matcher's expansion depth past which a grammar is taken to be broken (finish() rules out
// cycles, so only a grammar of this many nested empty rules reaches it).
constexpr int kMaxExpansionDepth = 100000;

}  // namespace

int32_t Grammar::add_rule() {
  alternatives_.emplace_back();
  return static_cast<int32_t>(alternatives_.size() - 1);
}

void Grammar::add_alternative(int32_t rule_id, const GrammarSequence& sequence) {
  alternatives_.at(rule_id).push_back(static_cast<int32_t>(elements_.size()));
  for (const GrammarElement& element : sequence) {
    if (element.kind == GrammarElement::Kind::end) fail("grammar: an `end` inside a sequence");
    elements_.push_back(element);
  }
  elements_.push_back(GrammarElement{});
}

GrammarElement Grammar::byte_set(const ByteSet& bytes) {
  std::string key = bytes.to_string();
  auto [found, inserted] = byte_set_ids_.try_emplace(key, static_cast<int32_t>(byte_sets_.size()));
  if (inserted) byte_sets_.push_back(bytes);
  return {GrammarElement::Kind::bytes, found->second};
}

GrammarElement Grammar::byte(uint8_t value) {
  ByteSet bytes;
  bytes.set(value);
  return byte_set(bytes);
}

void Grammar::append_text(GrammarSequence& sequence, std::string_view text) {
  for (char each : text) sequence.push_back(byte(static_cast<uint8_t>(each)));
}

void Grammar::finish(int32_t start) {
  if (start < 0 || static_cast<size_t>(start) >= alternatives_.size()) {
    fail("grammar: no start rule ", start);
  }
  start_ = start;
  const size_t rules = alternatives_.size();
  // The rules whose sequences name each rule, for the worklist below.
  std::vector<std::vector<int32_t>> users(rules);
  for (size_t rule_id = 0; rule_id < rules; ++rule_id) {
    for (int32_t position : alternatives_[rule_id]) {
      for (; elements_[position].kind != GrammarElement::Kind::end; ++position) {
        if (elements_[position].kind == GrammarElement::Kind::rule) {
          users[elements_[position].index].push_back(static_cast<int32_t>(rule_id));
        }
      }
    }
  }
  auto sequence_length = [&](int32_t position) {
    int64_t length = 0;
    for (; elements_[position].kind != GrammarElement::Kind::end; ++position) {
      const GrammarElement& element = elements_[position];
      length = saturating_add(
          length, element.kind == GrammarElement::Kind::bytes ? 1 : min_length_[element.index]);
    }
    return length;
  };
  // Shortest sentences: lengths only fall, and a rule is revisited when one it names fell.
  min_length_.assign(rules, kUnbounded);
  std::deque<int32_t> pending;
  std::vector<char> queued(rules, 1);
  for (size_t rule_id = 0; rule_id < rules; ++rule_id) pending.push_back(rule_id);
  while (!pending.empty()) {
    const int32_t rule_id = pending.front();
    pending.pop_front();
    queued[rule_id] = 0;
    int64_t shortest = kUnbounded;
    for (int32_t position : alternatives_[rule_id]) {
      shortest = std::min(shortest, sequence_length(position));
    }
    if (shortest >= min_length_[rule_id]) continue;
    min_length_[rule_id] = shortest;
    for (int32_t user : users[rule_id]) {
      if (!queued[user]) {
        queued[user] = 1;
        pending.push_back(user);
      }
    }
  }
  if (min_length_[start] >= kUnbounded) fail("grammar: the start rule has no finite sentence");
  // Alternatives that cannot finish would let the matcher start what it can never end.
  for (std::vector<int32_t>& starts : alternatives_) {
    std::erase_if(starts,
                  [&](int32_t position) { return sequence_length(position) >= kUnbounded; });
  }
  // Rules that can reach themselves before any byte: Kahn's algorithm over the edges "names at a
  // position that only empty sentences precede" finds such a cycle when it cannot order them.
  std::vector<std::vector<int32_t>> leading(rules);
  std::vector<int32_t> incoming(rules, 0);
  for (size_t rule_id = 0; rule_id < rules; ++rule_id) {
    for (int32_t position : alternatives_[rule_id]) {
      for (; elements_[position].kind == GrammarElement::Kind::rule; ++position) {
        const int32_t named = elements_[position].index;
        leading[rule_id].push_back(named);
        ++incoming[named];
        if (min_length_[named] != 0) break;
      }
    }
  }
  std::vector<int32_t> ready;
  for (size_t rule_id = 0; rule_id < rules; ++rule_id) {
    if (incoming[rule_id] == 0) ready.push_back(static_cast<int32_t>(rule_id));
  }
  size_t ordered = 0;
  while (!ready.empty()) {
    const int32_t rule_id = ready.back();
    ready.pop_back();
    ++ordered;
    for (int32_t named : leading[rule_id]) {
      if (--incoming[named] == 0) ready.push_back(named);
    }
  }
  if (ordered != rules) fail("grammar: a rule reaches itself without reading a byte");
  rest_length_.assign(elements_.size(), 0);
  for (size_t position = elements_.size(); position-- > 0;) {
    const GrammarElement& element = elements_[position];
    if (element.kind == GrammarElement::Kind::end) continue;
    const int64_t own =
        element.kind == GrammarElement::Kind::bytes ? 1 : min_length_[element.index];
    rest_length_[position] = saturating_add(own, rest_length_[position + 1]);
  }
}

// --- GrammarMatcher ---------------------------------------------------------------------------

GrammarMatcher::GrammarMatcher(const Grammar& grammar) : grammar_(grammar) {
  if (grammar.start_ < 0) fail("grammar: the matcher needs a finished grammar");
  nodes_.push_back(Node{-1, -1, 0});  // The empty stack.
  std::vector<int32_t> stacks;
  expanded_.clear();
  for (int32_t position : grammar.alternatives_[grammar.start_]) {
    expand(position, kEmptyStack, stacks, 0);
  }
  initial_ = intern_state(stacks);
}

int32_t GrammarMatcher::next(int32_t state, std::string_view bytes) {
  for (char each : bytes) {
    if (state == kDead) return kDead;
    state = next(state, static_cast<uint8_t>(each));
  }
  return state;
}

int32_t GrammarMatcher::intern_node(int32_t position, int32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(position)) << 32) |
                       static_cast<uint32_t>(parent);
  auto [found, inserted] = node_ids_.try_emplace(key, static_cast<int32_t>(nodes_.size()));
  if (inserted) {
    const int64_t below = nodes_[parent].min_completion;
    nodes_.push_back(
        Node{position, parent, saturating_add(grammar_.rest_length_[position], below)});
  }
  return found->second;
}

void GrammarMatcher::expand(int32_t position, int32_t parent, std::vector<int32_t>& stacks,
                            int depth) {
  if (depth > kMaxExpansionDepth) fail("grammar: expansion deeper than ", kMaxExpansionDepth);
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(position)) << 32) |
                       static_cast<uint32_t>(parent);
  if (!expanded_.insert(key).second) return;
  const GrammarElement element = grammar_.elements_[position];
  switch (element.kind) {
    case GrammarElement::Kind::end: {
      if (parent == kEmptyStack) {
        stacks.push_back(kEmptyStack);
        return;
      }
      const Node frame = nodes_[parent];
      expand(frame.position, frame.parent, stacks, depth + 1);
      return;
    }
    case GrammarElement::Kind::bytes:
      stacks.push_back(intern_node(position, parent));
      return;
    case GrammarElement::Kind::rule: {
      // A rule named last in its sequence returns straight to this frame's parent.
      const bool last = grammar_.elements_[position + 1].kind == GrammarElement::Kind::end;
      const int32_t return_to = last ? parent : intern_node(position + 1, parent);
      for (int32_t start : grammar_.alternatives_[element.index]) {
        expand(start, return_to, stacks, depth + 1);
      }
      return;
    }
  }
}

int32_t GrammarMatcher::intern_state(std::vector<int32_t>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.empty()) return kDead;
  std::string key(reinterpret_cast<const char*>(stacks.data()), stacks.size() * sizeof(int32_t));
  auto [found, inserted] =
      state_ids_.try_emplace(std::move(key), static_cast<int32_t>(states_.size()));
  if (!inserted) return found->second;
  State state{stack_ids_.size(), stack_ids_.size() + stacks.size(), stacks.front() == kEmptyStack,
              Grammar::kUnbounded};
  for (int32_t stack : stacks) {
    state.min_completion = std::min(state.min_completion, nodes_[stack].min_completion);
  }
  stack_ids_.insert(stack_ids_.end(), stacks.begin(), stacks.end());
  states_.push_back(state);
  transitions_.resize(transitions_.size() + 256, kUnknown);
  return found->second;
}

int32_t GrammarMatcher::compute_next(int32_t state, uint8_t byte) {
  scratch_.clear();
  expanded_.clear();
  const State from = states_[state];
  for (size_t index = from.stacks_begin; index < from.stacks_end; ++index) {
    const int32_t stack = stack_ids_[index];
    if (stack == kEmptyStack) continue;
    const Node top = nodes_[stack];
    const GrammarElement element = grammar_.elements_[top.position];
    if (!grammar_.byte_sets_[element.index][byte]) continue;
    expand(top.position + 1, top.parent, scratch_, 0);
  }
  return intern_state(scratch_);
}

}  // namespace fornace::text
