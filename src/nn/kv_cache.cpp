// The three KV cache kinds. prealloc writes into a buffer sized for the whole context; the cat
// kinds grow by concatenation as Candle's Qwen2 does (nn/candle_path.cpp).
#include "nn/kv_cache.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <utility>

#include "core/error.h"
#include "nn/candle_path.h"
#include "ops/copy.h"
#include "ops/quantized.h"

namespace fornace {

const char* kv_cache_kind_name(KvCacheKind kind) {
  switch (kind) {
    case KvCacheKind::prealloc:
      return "prealloc";
    case KvCacheKind::cat:
      return "cat";
    case KvCacheKind::cat_contiguous:
      return "cat-contiguous";
  }
  return "?";
}

std::vector<KvCacheKind> all_kv_cache_kinds() {
  return {KvCacheKind::prealloc, KvCacheKind::cat, KvCacheKind::cat_contiguous};
}

KvCacheKind parse_kv_cache_kind(std::string_view name) {
  for (KvCacheKind kind : all_kv_cache_kinds()) {
    if (name == kv_cache_kind_name(kind)) return kind;
  }
  fail("unknown KV cache kind '", name, "' (expected prealloc, cat or cat-contiguous)");
}

std::vector<BlockType> all_kv_cache_types() {
  return {BlockType::f32, BlockType::f16, BlockType::bf16, BlockType::q8_0, BlockType::q4_0};
}

const char* kv_cache_type_name(BlockType type) {
  switch (type) {
    case BlockType::f32:
      return "f32";
    case BlockType::f16:
      return "f16";
    case BlockType::bf16:
      return "bf16";
    case BlockType::q8_0:
      return "q8_0";
    case BlockType::q4_0:
      return "q4_0";
    default:
      return block_format(type).name;
  }
}

BlockType parse_kv_cache_type(std::string_view name) {
  std::string lower(name);
  for (char& character : lower) character = static_cast<char>(std::tolower(character));
  for (BlockType type : all_kv_cache_types()) {
    if (lower == kv_cache_type_name(type)) return type;
  }
  fail("unknown KV cache type '", name, "' (expected f32, f16, bf16, q8_0 or q4_0)");
}

namespace {

// Rows [B, H, S, D] as a cache of `shape` stores them: contiguous in its dtype, or rounded to
// its blocks.
Tensor stored_rows(const Tensor& rows, const KvCacheShape& shape) {
  return shape.blocks ? quantize_rows(rows, *shape.blocks) : contiguous(rows);
}

// The buffers of a set's prealloc caches, cut from one allocation made at the first append. A
// set's K and V come to megabytes, so they sit in 2 MiB pages; a layer's buffer alone is often
// under 2 MiB and would fault in 4 KiB at a time as positions are written (finding 0008).
class KvArena {
 public:
  KvArena(int64_t elements, DType dtype) : elements_(elements), dtype_(dtype) {}

  Tensor take(const Dims& dims) {
    if (!buffer_.defined()) buffer_ = Tensor::empty({elements_}, dtype_);
    const int64_t count = dims.product();
    if (next_ + count > elements_) fail("kv_cache: the arena holds ", elements_, " elements");
    Tensor buffer = buffer_.narrow(0, next_, count).view(dims);
    next_ += count;
    return buffer;
  }

 private:
  int64_t elements_;
  DType dtype_;
  Tensor buffer_;
  int64_t next_ = 0;
};

// A new buffer: from the set's arena, or allocated alone for a cache outside a set.
Tensor new_buffer(const std::shared_ptr<KvArena>& arena, const Dims& dims, DType dtype) {
  return arena ? arena->take(dims) : Tensor::empty(dims, dtype);
}

// A buffer for max_length positions, filled by slice_set; returns narrowed views of it.
class PreallocatedCache : public KvCache {
 public:
  PreallocatedCache(const KvCacheShape& shape, std::shared_ptr<KvArena> arena)
      : shape_(shape), arena_(std::move(arena)) {}

  std::pair<Tensor, Tensor> append(const Tensor& key, const Tensor& value) override {
    memory::OpScope scope("kv_cache");
    int64_t added = key.dim(2);
    if (length_ + added > shape_.max_length) {
      fail("kv_cache: ", length_ + added, " positions exceed the preallocated ",
           shape_.max_length);
    }
    if (!keys_.defined()) {
      Dims dims{shape_.batch, shape_.kv_heads, shape_.max_length, shape_.stored_row_width()};
      keys_ = new_buffer(arena_, dims, shape_.stored_dtype());
      values_ = new_buffer(arena_, dims, shape_.stored_dtype());
    }
    slice_set(keys_, stored_rows(key, shape_), 2, length_);
    slice_set(values_, stored_rows(value, shape_), 2, length_);
    length_ += added;
    return contents();
  }

  std::pair<Tensor, Tensor> contents() const override {
    if (length_ == 0) return {};
    return {keys_.narrow(2, 0, length_), values_.narrow(2, 0, length_)};
  }
  int64_t length() const override { return length_; }
  void clear() override { length_ = 0; }
  bool can_truncate(int64_t length) const override { return length <= length_; }
  void truncate(int64_t length) override { length_ = length; }

 private:
  KvCacheShape shape_;
  std::shared_ptr<KvArena> arena_;
  Tensor keys_;
  Tensor values_;
  int64_t length_ = 0;
};

// prealloc for a sliding-window layer: a buffer of `window` positions written in turn, position
// p at slot p % window. A decode step attends to the buffer as it is (rotated order); a prompt
// chunk attends to the window before it, in order, joined with the chunk.
class RingCache : public KvCache {
 public:
  RingCache(const KvCacheShape& shape, int64_t window, std::shared_ptr<KvArena> arena)
      : shape_(shape), window_(window), arena_(std::move(arena)) {}

  std::pair<Tensor, Tensor> append(const Tensor& key, const Tensor& value) override {
    memory::OpScope scope("kv_cache");
    if (!keys_.defined()) {
      Dims dims{shape_.batch, shape_.kv_heads, window_, shape_.stored_row_width()};
      keys_ = new_buffer(arena_, dims, shape_.stored_dtype());
      values_ = new_buffer(arena_, dims, shape_.stored_dtype());
    }
    int64_t added = key.dim(2);
    const Tensor keys = stored_rows(key, shape_);
    const Tensor values = stored_rows(value, shape_);
    std::pair<Tensor, Tensor> attended;
    if (added == 1) {
      write(keys, values, 0, length_ % window_);
      length_ += 1;
      attended = contents();
    } else {
      auto [held_keys, held_values] = in_order(std::min(length_, window_ - 1));
      attended = held_keys.defined()
                     ? std::pair{cat({held_keys, keys}, 2), cat({held_values, values}, 2)}
                     : std::pair{keys, values};
      // Only the chunk's last `window` positions stay.
      for (int64_t first = std::max<int64_t>(0, added - window_); first < added; ++first) {
        write(keys, values, first, (length_ + first) % window_);
      }
      length_ += added;
    }
    return attended;
  }

  std::pair<Tensor, Tensor> contents() const override {
    if (length_ == 0) return {};
    int64_t held = std::min(length_, window_);
    return {keys_.narrow(2, 0, held), values_.narrow(2, 0, held)};
  }
  int64_t length() const override { return length_; }
  void clear() override { length_ = 0; }
  // Positions p sit at slot p % window: only a ring that has not wrapped yet keeps them all.
  bool can_truncate(int64_t length) const override {
    return length == length_ || (length < length_ && length_ <= window_);
  }
  void truncate(int64_t length) override { length_ = length; }

 private:
  // Copies position `index` of the new keys and values (as stored) into ring slot `slot`.
  void write(const Tensor& keys, const Tensor& values, int64_t index, int64_t slot) {
    slice_set(keys_, contiguous(keys.narrow(2, index, 1)), 2, slot);
    slice_set(values_, contiguous(values.narrow(2, index, 1)), 2, slot);
  }

  // The last `count` positions held, oldest first (undefined when count is 0).
  std::pair<Tensor, Tensor> in_order(int64_t count) const {
    if (count == 0) return {};
    int64_t first_slot = (length_ - count) % window_;
    int64_t before_wrap = std::min(count, window_ - first_slot);
    Tensor keys = keys_.narrow(2, first_slot, before_wrap);
    Tensor values = values_.narrow(2, first_slot, before_wrap);
    if (before_wrap < count) {
      keys = cat({keys, keys_.narrow(2, 0, count - before_wrap)}, 2);
      values = cat({values, values_.narrow(2, 0, count - before_wrap)}, 2);
    }
    return {keys, values};
  }

  KvCacheShape shape_;
  int64_t window_;
  std::shared_ptr<KvArena> arena_;
  Tensor keys_;
  Tensor values_;
  int64_t length_ = 0;
};

// A cache of `kind`; prealloc buffers come from `arena` when there is one.
std::unique_ptr<KvCache> make_layer_cache(KvCacheKind kind, const KvCacheShape& shape,
                                          int64_t window, std::shared_ptr<KvArena> arena) {
  if (shape.blocks && kind != KvCacheKind::prealloc) {
    fail("a ", kv_cache_type_name(*shape.blocks), " KV cache needs the prealloc kind (",
         kv_cache_kind_name(kind), " is Candle's cache of float tensors)");
  }
  switch (kind) {
    case KvCacheKind::prealloc:
      if (window > 0) return std::make_unique<RingCache>(shape, window, std::move(arena));
      return std::make_unique<PreallocatedCache>(shape, std::move(arena));
    case KvCacheKind::cat:
      return make_candle_cat_cache(false, window);
    case KvCacheKind::cat_contiguous:
      return make_candle_cat_cache(true, window);
  }
  fail("unknown KV cache kind");
}

}  // namespace

std::unique_ptr<KvCache> make_kv_cache(KvCacheKind kind, const KvCacheShape& shape,
                                       int64_t window) {
  return make_layer_cache(kind, shape, window, nullptr);
}

int64_t KvCacheShape::positions_held(int64_t layer, int64_t position) const {
  return is_sliding(layer) ? std::min(position, window) : position;
}

BlockType KvCacheShape::type() const {
  if (blocks) return *blocks;
  switch (dtype) {
    case DType::f16:
      return BlockType::f16;
    case DType::bf16:
      return BlockType::bf16;
    default:
      return BlockType::f32;
  }
}

int64_t KvCacheShape::stored_row_width() const {
  return blocks ? block_row_words(*blocks, head_dim) : head_dim;
}

DType KvCacheShape::stored_dtype() const { return blocks ? DType::u32 : dtype; }

int64_t KvCacheShape::bytes_per_position() const {
  return 2 * batch * kv_heads * stored_row_width() *
         static_cast<int64_t>(dtype_size(stored_dtype()));
}

KvCacheSet::KvCacheSet(KvCacheKind kind, int64_t num_layers, const KvCacheShape& shape)
    : kind_(kind), shape_(shape) {
  std::shared_ptr<KvArena> arena;
  if (kind == KvCacheKind::prealloc) {
    // K and V of every layer: max_length positions, or a sliding layer's window.
    int64_t positions = 0;
    for (int64_t i = 0; i < num_layers; ++i) {
      positions += shape.is_sliding(i) ? shape.window : shape.max_length;
    }
    arena = std::make_shared<KvArena>(
        2 * shape.batch * shape.kv_heads * shape.stored_row_width() * positions,
        shape.stored_dtype());
  }
  for (int64_t i = 0; i < num_layers; ++i) {
    layers_.push_back(
        make_layer_cache(kind, shape, shape.is_sliding(i) ? shape.window : 0, arena));
  }
}

int64_t KvCacheSet::bytes_read(int64_t num_layers, const KvCacheShape& shape, int64_t position) {
  int64_t positions = 0;
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    positions += shape.positions_held(layer, position);
  }
  return positions * shape.bytes_per_position();
}

void KvCacheSet::clear() {
  for (auto& layer : layers_) layer->clear();
}

int64_t KvCacheSet::keep_prefix(int64_t length) {
  const bool possible = length > 0 && std::all_of(layers_.begin(), layers_.end(), [&](auto& layer) {
                          return layer->can_truncate(length);
                        });
  if (!possible) {
    clear();
    return 0;
  }
  for (auto& layer : layers_) layer->truncate(length);
  return length;
}

int64_t KvCacheSet::prealloc_bytes(int64_t num_layers, const KvCacheShape& shape) {
  return bytes_read(num_layers, shape, shape.max_length);
}

}  // namespace fornace
