// The BPE model's tables and merge loop.
#include "text/bpe.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "text/byte_level.h"
#include "text/hashing.h"

namespace fornace::text {
namespace {

// A power of two with the table at most two-thirds full.
size_t table_size_for(size_t entries) {
  return std::bit_ceil(std::max<size_t>(16, entries + entries / 2));
}

}  // namespace

bool Vocabulary::add(std::string_view text, uint32_t id) {
  if (id >= spans_.size())
    spans_.resize(std::max<size_t>(id + 1, spans_.size() + spans_.size() / 2));
  if (spans_[id].length != missing) return false;
  spans_[id] = {static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(text.size())};
  arena_.append(text);
  ++count_;
  return true;
}

std::optional<uint32_t> Vocabulary::build_index() {
  // Trim the over-allocation of add() so that size() is the largest id + 1.
  size_t size = spans_.size();
  while (size > 0 && spans_[size - 1].length == missing) --size;
  spans_.resize(size);
  slots_.assign(table_size_for(count_), Slot{});
  size_t mask = slots_.size() - 1;
  std::vector<uint64_t> hashes(size);
  for (uint32_t id = 0; id < size; ++id) {
    if (spans_[id].length != missing) hashes[id] = hash_bytes(text(id));
  }
  constexpr uint32_t prefetch_distance = 16;  // Slots are random writes: start loading them early.
  for (uint32_t id = 0; id < size; ++id) {
    if (id + prefetch_distance < size)
      __builtin_prefetch(&slots_[hashes[id + prefetch_distance] & mask]);
    if (spans_[id].length == missing) continue;
    uint32_t tag = static_cast<uint32_t>(hashes[id] >> 32);
    for (size_t slot = hashes[id] & mask;; slot = (slot + 1) & mask) {
      if (slots_[slot].id == missing) {
        slots_[slot] = {id, tag, spans_[id]};
        break;
      }
      if (slots_[slot].tag == tag && text(slots_[slot].id) == text(id)) return id;
    }
  }
  return std::nullopt;
}

std::optional<uint32_t> Vocabulary::find(std::string_view key) const {
  return find(key, hash_bytes(key));
}

std::optional<uint32_t> Vocabulary::find(std::string_view key, uint64_t hash) const {
  if (slots_.empty()) return std::nullopt;
  size_t mask = slots_.size() - 1;
  uint32_t tag = static_cast<uint32_t>(hash >> 32);
  for (size_t slot = hash & mask;; slot = (slot + 1) & mask) {
    const Slot& entry = slots_[slot];
    if (entry.id == missing) return std::nullopt;
    if (entry.tag == tag && entry.span.length == key.size() &&
        std::memcmp(arena_.data() + entry.span.offset, key.data(), key.size()) == 0) {
      return entry.id;
    }
  }
}

void MergeTable::reserve(size_t merges) {
  slots_.assign(table_size_for(merges), Slot{});
  mask_ = slots_.size() - 1;
  size_ = 0;
}

size_t MergeTable::slot_of(uint32_t left, uint32_t right) const {
  return hash_pair(left, right) & mask_;
}

void MergeTable::insert(uint32_t left, uint32_t right, Merge merge) {
  if ((size_ + 1) * 3 > slots_.size() * 2) {
    auto old = std::move(slots_);
    reserve(std::max<size_t>(old.size(), 16));
    for (const Slot& entry : old) {
      if (entry.key != empty_key) {
        insert(static_cast<uint32_t>(entry.key >> 32), static_cast<uint32_t>(entry.key),
               entry.merge);
      }
    }
  }
  uint64_t key = static_cast<uint64_t>(left) << 32 | right;
  for (size_t slot = slot_of(left, right);; slot = (slot + 1) & mask_) {
    Slot& entry = slots_[slot];
    if (entry.key == key) {
      entry.merge = merge;
      return;
    }
    if (entry.key == empty_key) {
      entry = Slot{key, merge};
      ++size_;
      return;
    }
  }
}

std::vector<MergeTable::RankedMerge> MergeTable::in_rank_order() const {
  std::vector<RankedMerge> merges;
  merges.reserve(size_);
  for (const Slot& entry : slots_) {
    if (entry.key == empty_key) continue;
    merges.push_back({entry.merge.rank, static_cast<uint32_t>(entry.key >> 32),
                      static_cast<uint32_t>(entry.key), entry.merge.merged_id});
  }
  std::sort(merges.begin(), merges.end(),
            [](const RankedMerge& a, const RankedMerge& b) { return a.rank < b.rank; });
  return merges;
}

bool PieceCache::find(std::string_view piece, std::vector<uint32_t>& ids) const {
  if (slots_.empty()) return false;
  uint64_t hash = hash_bytes(piece);
  uint32_t tag = static_cast<uint32_t>(hash >> 32);
  size_t mask = slots_.size() - 1;
  for (size_t slot = hash & mask;; slot = (slot + 1) & mask) {
    const Entry& entry = slots_[slot];
    if (entry.key_length == 0) return false;
    if (entry.tag == tag && entry.key_length == piece.size() &&
        std::memcmp(keys_.data() + entry.key_offset, piece.data(), piece.size()) == 0) {
      ids.insert(ids.end(), ids_.begin() + entry.ids_offset,
                 ids_.begin() + entry.ids_offset + entry.ids_count);
      return true;
    }
  }
}

void PieceCache::place(const Entry& entry, uint64_t hash) {
  size_t mask = slots_.size() - 1;
  size_t slot = hash & mask;
  while (slots_[slot].key_length != 0) slot = (slot + 1) & mask;
  slots_[slot] = entry;
}

void PieceCache::resize(size_t slot_count) {
  std::vector<Entry> old = std::move(slots_);
  slots_.assign(slot_count, Entry{});
  for (const Entry& entry : old) {
    if (entry.key_length != 0) {
      place(entry, hash_bytes(std::string_view(keys_.data() + entry.key_offset, entry.key_length)));
    }
  }
}

void PieceCache::insert(std::string_view piece, const uint32_t* ids, size_t count) {
  if (piece.empty() || piece.size() > max_piece_bytes) return;
  if (size_ >= max_entries) {  // Start over rather than grow without bound.
    slots_.clear();
    keys_.clear();
    ids_.clear();
    size_ = 0;
  }
  // The table starts small and doubles, at most half full, so that lookups stay in cache.
  if ((size_ + 1) * 2 > slots_.size()) resize(std::max<size_t>(1024, slots_.size() * 2));
  uint64_t hash = hash_bytes(piece);
  place(Entry{static_cast<uint32_t>(hash >> 32), static_cast<uint32_t>(keys_.size()),
              static_cast<uint32_t>(piece.size()), static_cast<uint32_t>(ids_.size()),
              static_cast<uint32_t>(count)},
        hash);
  keys_.append(piece);
  ids_.insert(ids_.end(), ids, ids + count);
  ++size_;
}

void BpeModel::encode_piece(std::string_view piece, std::vector<uint32_t>& ids,
                            bool use_cache) const {
  if (piece.empty()) return;
  if (byte_level && piece.size() == 1) {
    ids.push_back(byte_ids[static_cast<uint8_t>(piece[0])]);
    return;
  }
  use_cache = use_cache && piece.size() <= PieceCache::max_piece_bytes;
  if (use_cache && cache_.find(piece, ids)) return;
  size_t first = ids.size();
  std::optional<uint32_t> whole;
  if (ignore_merges)
    whole = byte_level ? vocabulary.find(to_byte_level(piece)) : vocabulary.find(piece);
  if (whole) {
    ids.push_back(*whole);
  } else {
    merge_piece(piece, ids);
  }
  if (use_cache) cache_.insert(piece, ids.data() + first, ids.size() - first);
}

std::optional<uint8_t> BpeModel::find_byte_tokens() {
  for (int byte = 0; byte < 256; ++byte) {
    std::optional<uint32_t> id =
        vocabulary.find(to_byte_level(std::string(1, static_cast<char>(byte))));
    if (!id) return static_cast<uint8_t>(byte);
    byte_ids[byte] = *id;
  }
  return std::nullopt;
}

void BpeModel::find_character_tokens(bool byte_fallback) {
  byte_level = false;
  ascii_ids.fill(no_token);
  byte_fallback_ids.fill(no_token);
  for (int code = 0; code < 128; ++code) {
    const char character = static_cast<char>(code);
    if (std::optional<uint32_t> id = vocabulary.find(std::string_view(&character, 1)))
      ascii_ids[code] = *id;
  }
  if (!byte_fallback) return;
  static constexpr char digits[] = "0123456789ABCDEF";
  for (int byte = 0; byte < 256; ++byte) {
    const char name[] = {'<', '0', 'x', digits[byte >> 4], digits[byte & 15], '>'};
    if (std::optional<uint32_t> id = vocabulary.find(std::string_view(name, 6)))
      byte_fallback_ids[byte] = *id;
  }
}

// Lookups are the bulk of the load time, so: the merged token is first guessed as the id after
// the previous merge's (true of vocabularies that list merge results in rank order, as Qwen's) or
// as that id itself (Gemma 3 lists the merges that make one token together), and checked; the
// index slots are prefetched a few merges ahead.
std::optional<BpeModel::MissingText> BpeModel::set_merges(const MergeList& list) {
  const size_t count = list.size();
  merges.reserve(count);
  // A pipeline over the ranks, `distance` apart from one stage to the next, so that no large
  // array is filled in between: a merge's sides are hashed and their index slots prefetched,
  // later looked up (and the table slot of the pair prefetched), later inserted. Each step runs
  // the last stage first, since a stage reuses the ring slot that the next one has just read.
  constexpr size_t distance = 16;
  struct Hashed {
    uint64_t left, right;
  };
  struct Resolved {
    uint32_t left, right, merged;
  };
  std::array<Hashed, distance> hashed;
  std::array<Resolved, distance> resolved;
  uint32_t previous = UINT32_MAX;  // The merged id of the merge before (none: -1 + 1 is 0).
  for (size_t step = 0; step < count + 2 * distance; ++step) {
    if (step >= 2 * distance) {
      size_t rank = step - 2 * distance;
      const Resolved& merge = resolved[rank % distance];
      merges.insert(merge.left, merge.right, {static_cast<uint32_t>(rank), merge.merged});
    }
    if (step >= distance && step - distance < count) {
      size_t rank = step - distance;
      auto [left, right, both] = list.sides(rank);
      std::optional<uint32_t> left_id = vocabulary.find(left, hashed[rank % distance].left);
      std::optional<uint32_t> right_id = vocabulary.find(right, hashed[rank % distance].right);
      std::optional<uint32_t> merged_id;
      for (uint32_t guess : {previous + 1, previous}) {
        if (vocabulary.contains(guess) && vocabulary.text(guess) == both) {
          merged_id = guess;
          break;
        }
      }
      if (!merged_id) merged_id = vocabulary.find(both);
      for (auto [text, id] :
           {std::pair{left, left_id}, std::pair{right, right_id}, std::pair{both, merged_id}}) {
        if (!id) return MissingText{rank, text};
      }
      resolved[rank % distance] = {*left_id, *right_id, *merged_id};
      merges.prefetch(*left_id, *right_id);
      previous = *merged_id;
    }
    if (step < count) {
      auto [left, right, both] = list.sides(step);
      hashed[step % distance] = {hash_bytes(left), hash_bytes(right)};
      vocabulary.prefetch(hashed[step % distance].left);
      vocabulary.prefetch(hashed[step % distance].right);
    }
  }
  return std::nullopt;
}

void BpeModel::append_initial_tokens(std::string_view piece, std::vector<uint32_t>& tokens) const {
  if (byte_level) {
    for (char byte : piece) tokens.push_back(byte_ids[static_cast<uint8_t>(byte)]);
    return;
  }
  // As the Hugging Face BPE builds a word: a pending unknown token goes out before the next known
  // character's token, but byte fallback tokens do not flush it.
  bool unknown_pending = false;
  size_t position = 0;
  while (position < piece.size()) {
    uint8_t lead = static_cast<uint8_t>(piece[position]);
    size_t length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;  // Valid UTF-8.
    std::string_view character = piece.substr(position, length);
    position += length;
    uint32_t id = no_token;
    if (length == 1) {
      id = ascii_ids[lead];
    } else if (std::optional<uint32_t> found = vocabulary.find(character)) {
      id = *found;
    }
    if (id != no_token) {
      if (unknown_pending) tokens.push_back(unknown_id);
      unknown_pending = false;
      tokens.push_back(id);
      continue;
    }
    bool all_bytes = std::all_of(character.begin(), character.end(), [&](char byte) {
      return byte_fallback_ids[static_cast<uint8_t>(byte)] != no_token;
    });
    if (all_bytes) {
      for (char byte : character) tokens.push_back(byte_fallback_ids[static_cast<uint8_t>(byte)]);
      continue;
    }
    if (unknown_id == no_token) continue;  // Without an unknown token the character is dropped.
    if (unknown_pending && !fuse_unknown) tokens.push_back(unknown_id);
    unknown_pending = true;
  }
  if (unknown_pending) tokens.push_back(unknown_id);
}

void BpeModel::merge_piece(std::string_view piece, std::vector<uint32_t>& ids) const {
  struct Symbol {
    uint32_t id;
    int32_t previous, next;  // Neighbours in the list of live symbols; -1 at the ends.
  };
  // A pair that may merge: the lowest rank goes first, then the leftmost.
  struct Candidate {
    uint32_t rank;
    int32_t left;
    uint32_t left_id, right_id, merged_id;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : left > other.left;
    }
  };
  static constexpr uint32_t dead = UINT32_MAX;
  thread_local std::vector<uint32_t> initial;
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap;
  initial.clear();
  symbols.clear();
  heap.clear();
  append_initial_tokens(piece, initial);
  const int32_t count = static_cast<int32_t>(initial.size());
  if (count == 0) return;
  for (int32_t index = 0; index < count; ++index)
    symbols.push_back({initial[index], index - 1, index + 1 < count ? index + 1 : -1});
  const auto push_pair = [&](int32_t left) {
    if (left < 0) return;
    int32_t right = symbols[left].next;
    if (right < 0) return;
    const MergeTable::Merge* merge = merges.find(symbols[left].id, symbols[right].id);
    if (merge == nullptr) return;
    heap.push_back({merge->rank, left, symbols[left].id, symbols[right].id, merge->merged_id});
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  for (int32_t index = 0; index + 1 < count; ++index) push_pair(index);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    Candidate candidate = heap.back();
    heap.pop_back();
    Symbol& left = symbols[candidate.left];
    if (left.id != candidate.left_id || left.next < 0) continue;  // Stale: the pair changed.
    Symbol& right = symbols[left.next];
    if (right.id != candidate.right_id) continue;
    left.id = candidate.merged_id;
    right.id = dead;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].previous = candidate.left;
    push_pair(left.previous);
    push_pair(candidate.left);
  }
  for (int32_t index = 0; index >= 0; index = symbols[index].next) ids.push_back(symbols[index].id);
}

}  // namespace fornace::text
