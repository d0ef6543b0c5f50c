// The BPE model: vocabulary, merge ranks keyed by id pairs, the merge loop and its piece cache.
#pragma once

#include <sys/mman.h>

#include <array>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/storage.h"

namespace fornace::text {

// Places tables of 2 MiB and more for 2 MiB pages, as core's tensor storage does: filling one
// takes a page fault per 2 MiB instead of per 4 KiB, and a random lookup no TLB miss.
template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <typename Other>
  HugePageAllocator(const HugePageAllocator<Other>&) {}

  T* allocate(size_t count) {
    size_t bytes = count * sizeof(T);
    bool huge = bytes >= kHugePageBytes && huge_pages_enabled();
    size_t alignment = huge ? kHugePageBytes : alignof(std::max_align_t);
    size_t rounded = (bytes + alignment - 1) / alignment * alignment;
    void* data = std::aligned_alloc(alignment, rounded);
    if (data == nullptr) throw std::bad_alloc();
    if (huge) ::madvise(data, rounded, MADV_HUGEPAGE);
    return static_cast<T*>(data);
  }
  void deallocate(T* data, size_t) { std::free(data); }
  template <typename Other>
  bool operator==(const HugePageAllocator<Other>&) const {
    return true;
  }
};

// Bytes in 2 MiB pages once large (the vocabulary's and the loader's text buffers).
using HugePageString = std::basic_string<char, std::char_traits<char>, HugePageAllocator<char>>;

// Token texts by id, and an open-addressing index from text to id.
class Vocabulary {
 public:
  // Records `text` for `id`; returns false when the id already has a text.
  bool add(std::string_view text, uint32_t id);
  // Builds the index after the last add. Returns the id of a text that two ids share, if any.
  std::optional<uint32_t> build_index();

  std::optional<uint32_t> find(std::string_view text) const;
  // The same with the text's hash_bytes() already computed.
  std::optional<uint32_t> find(std::string_view text, uint64_t hash) const;
  // Starts loading the index slot of `hash` into the cache, ahead of a find().
  void prefetch(uint64_t hash) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[hash & (slots_.size() - 1)]);
  }
  bool contains(uint32_t id) const { return id < spans_.size() && spans_[id].length != missing; }
  std::string_view text(uint32_t id) const {
    return {arena_.data() + spans_[id].offset, spans_[id].length};
  }
  size_t size() const { return spans_.size(); }  // Largest id + 1.
  size_t count() const { return count_; }        // Ids that have a text.

 private:
  static constexpr uint32_t missing = UINT32_MAX;
  struct Span {
    uint32_t offset = 0;
    uint32_t length = missing;  // `missing` for an id without a token.
  };
  struct Slot {
    uint32_t id = missing;  // `missing` for an empty slot.
    uint32_t tag = 0;       // High bits of the text's hash, to skip most comparisons.
    Span span;              // A copy of spans_[id], to save a cache miss per lookup.
  };
  HugePageString arena_;
  std::vector<Span, HugePageAllocator<Span>> spans_;
  std::vector<Slot, HugePageAllocator<Slot>> slots_;
  size_t count_ = 0;
};

// Merge ranks keyed by the (left id, right id) pair, in one open-addressing table.
class MergeTable {
 public:
  struct Merge {
    uint32_t rank;
    uint32_t merged_id;
  };

  void reserve(size_t merges);
  // A pair listed twice keeps its later rank, as the Hugging Face loader's map does.
  void insert(uint32_t left, uint32_t right, Merge merge);
  const Merge* find(uint32_t left, uint32_t right) const {
    uint64_t key = static_cast<uint64_t>(left) << 32 | right;
    for (size_t slot = slot_of(left, right);; slot = (slot + 1) & mask_) {
      const Slot& entry = slots_[slot];
      if (entry.key == key) return &entry.merge;
      if (entry.key == empty_key) return nullptr;
    }
  }
  size_t size() const { return size_; }
  // Every merge, by rank (a pair's later rank when it was inserted twice).
  struct RankedMerge {
    uint32_t rank, left, right, merged_id;
  };
  std::vector<RankedMerge> in_rank_order() const;
  // Starts loading the slot of a pair into the cache, ahead of an insert() or find().
  void prefetch(uint32_t left, uint32_t right) const {
    __builtin_prefetch(&slots_[slot_of(left, right)]);
  }

 private:
  static constexpr uint64_t empty_key = UINT64_MAX;
  struct Slot {
    uint64_t key = empty_key;
    Merge merge{};
  };
  size_t slot_of(uint32_t left, uint32_t right) const;
  std::vector<Slot, HugePageAllocator<Slot>> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

// The texts of merges in rank order, each merge's two sides back to back in one buffer so that the
// merged text is a substring of it too.
class MergeList {
 public:
  // Appends text to the merge being built; end_merge() closes it.
  void append(std::string_view text) { text_.append(text); }
  // Closes the merge appended since the last one; its first `left_length` bytes are the left side.
  void end_merge(size_t left_length) {
    entries_.push_back({merge_start_, static_cast<uint32_t>(left_length),
                        static_cast<uint32_t>(text_.size() - merge_start_ - left_length)});
    merge_start_ = static_cast<uint32_t>(text_.size());
  }
  void add(std::string_view left, std::string_view right) {
    append(left);
    append(right);
    end_merge(left.size());
  }
  size_t size() const { return entries_.size(); }
  // The left side, the right side and both together.
  std::array<std::string_view, 3> sides(size_t rank) const {
    const Entry& entry = entries_[rank];
    std::string_view both(text_.data() + entry.offset, entry.left_length + entry.right_length);
    return {both.substr(0, entry.left_length), both.substr(entry.left_length), both};
  }

 private:
  struct Entry {
    uint32_t offset, left_length, right_length;
  };
  HugePageString text_;
  std::vector<Entry, HugePageAllocator<Entry>> entries_;
  uint32_t merge_start_ = 0;
};

// Ids of pieces already encoded. One encode call at a time uses it, holding `mutex`; a call
// that finds it taken encodes without it rather than wait.
class PieceCache {
 public:
  static constexpr size_t max_piece_bytes = 256;
  static constexpr size_t max_entries = 1 << 16;  // Then it starts over, empty.

  // Appends the cached ids of `piece` to `ids`; false when it is not cached.
  bool find(std::string_view piece, std::vector<uint32_t>& ids) const;
  void insert(std::string_view piece, const uint32_t* ids, size_t count);

  std::mutex mutex;

 private:
  struct Entry {
    uint32_t tag = 0;                         // High bits of the piece's hash.
    uint32_t key_offset = 0, key_length = 0;  // In keys_; key_length 0 marks an empty slot.
    uint32_t ids_offset = 0, ids_count = 0;   // In ids_.
  };
  // Places an entry whose piece has `hash` in a free slot (the piece is known to be absent).
  void place(const Entry& entry, uint64_t hash);
  void resize(size_t slot_count);
  std::vector<Entry> slots_;
  std::string keys_;
  std::vector<uint32_t> ids_;
  size_t size_ = 0;
};

// BPE: each piece starts as a list of tokens, then the lowest-ranked adjacent pair merges until
// none is left. Byte-level BPE starts from one token per byte; SentencePiece-style BPE from one
// token per character, a character missing from the vocabulary taking its "<0xNN>" byte tokens
// (byte fallback) or the unknown token.
class BpeModel {
 public:
  static constexpr uint32_t no_token = UINT32_MAX;

  Vocabulary vocabulary;
  MergeTable merges;
  bool ignore_merges = false;  // Take a piece that is a whole token as it is.
  bool byte_level = true;
  std::array<uint32_t, 256> byte_ids{};  // Byte-level: the token of each single byte.
  // SentencePiece-style: the token of each ASCII character, then of each byte's "<0xNN>" (only
  // with byte fallback), `no_token` where the vocabulary has none.
  std::array<uint32_t, 128> ascii_ids{};
  std::array<uint32_t, 256> byte_fallback_ids{};
  uint32_t unknown_id = no_token;  // The unknown token, when the model names one.
  bool fuse_unknown = false;       // Consecutive unknown characters make one unknown token.

  // The piece cache for one encode call; it does not own the lock while another thread holds it.
  std::unique_lock<std::mutex> lock_cache() const {
    return std::unique_lock<std::mutex>(cache_.mutex, std::try_to_lock);
  }
  // Appends the ids of one pre-tokenized piece; `use_cache` only under lock_cache().
  void encode_piece(std::string_view piece, std::vector<uint32_t>& ids, bool use_cache) const;

  // The loaders' steps, once the vocabulary is indexed. Byte-level: finds the token of every byte
  // and returns a byte that has none, if any.
  std::optional<uint8_t> find_byte_tokens();
  // SentencePiece-style: finds the tokens of the ASCII characters and, with `byte_fallback`, the
  // "<0xNN>" tokens.
  void find_character_tokens(bool byte_fallback);
  // A text of a merge that is not in the vocabulary, and the merge's rank.
  struct MissingText {
    size_t rank;
    std::string_view text;
  };
  // Makes `merges` the merge table, ranked in their order; stops at a text that is no token.
  std::optional<MissingText> set_merges(const MergeList& merges);

 private:
  mutable PieceCache cache_;
  // Appends the tokens a piece starts as, before any merge.
  void append_initial_tokens(std::string_view piece, std::vector<uint32_t>& tokens) const;
  void merge_piece(std::string_view piece, std::vector<uint32_t>& ids) const;
};

// SentencePiece's merge rule: any two adjacent pieces whose texts together are a token merge, the
// token with the highest score first. Calls `on_split(left, right, merged)` for every such
// (left, right) pair of the vocabulary: every split of a token at a character boundary into two
// tokens, all three `mergeable`.
template <typename OnSplit>
void for_each_split(const Vocabulary& vocabulary, const std::vector<bool>& mergeable,
                    OnSplit&& on_split) {
  for (uint32_t merged = 0; merged < vocabulary.size(); ++merged) {
    if (!mergeable[merged]) continue;
    std::string_view text = vocabulary.text(merged);
    for (size_t split = 1; split < text.size(); ++split) {
      if ((static_cast<uint8_t>(text[split]) & 0xC0) == 0x80) continue;  // Inside a character.
      std::optional<uint32_t> left = vocabulary.find(text.substr(0, split));
      if (!left || !mergeable[*left]) continue;
      std::optional<uint32_t> right = vocabulary.find(text.substr(split));
      if (right && mergeable[*right]) on_split(*left, *right, merged);
    }
  }
}

// The merge rank that SentencePiece's order gives a token of `score` (not NaN): higher scores
// rank first, equal scores rank equal (the leftmost pair then merges first, as in SentencePiece).
inline uint32_t rank_of_score(float score) {
  uint32_t bits = std::bit_cast<uint32_t>(score == 0 ? 0.0f : score);  // -0 ranks as 0.
  uint32_t ascending = (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
  return ~ascending;
}

}  // namespace fornace::text
