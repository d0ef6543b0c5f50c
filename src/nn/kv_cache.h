// KV cache kinds behind one interface: prealloc, and cat and cat-contiguous (Candle's Qwen2
// cache, in nn/candle_path.h).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/block_type.h"
#include "core/tensor.h"

namespace fornace {

enum class KvCacheKind { prealloc, cat, cat_contiguous };

const char* kv_cache_kind_name(KvCacheKind kind);
// Parses "prealloc", "cat" or "cat-contiguous"; throws Error listing them otherwise.
KvCacheKind parse_kv_cache_kind(std::string_view name);
std::vector<KvCacheKind> all_kv_cache_kinds();

// The types a KV cache can store (`--cache-type`, llama.cpp's -ctk/-ctv): the floats f32, f16,
// bf16, and the GGUF blocks q8_0 and q4_0 (32 values of a row of head_dim each).
std::vector<BlockType> all_kv_cache_types();
// "f32", "f16", "bf16", "q8_0", "q4_0".
const char* kv_cache_type_name(BlockType type);
// Parses those names (any case); throws Error listing them otherwise.
BlockType parse_kv_cache_type(std::string_view name);

struct KvCacheShape {
  int64_t batch = 1;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_length = 0;  // Positions a prealloc cache holds.
  // The dtype K and V arrive in, and that a float cache stores.
  DType dtype = DType::f32;
  // A quantized cache (q8_0, q4_0; prealloc only) rounds each arriving row of head_dim values to
  // these blocks and holds them as u32 words (ops/quantized.h: quantize_rows).
  std::optional<BlockType> blocks;
  // Sliding-window layers (Gemma 3's local layers) keep only the last `window` positions.
  int64_t window = 0;
  std::vector<bool> sliding_layers;

  bool is_sliding(int64_t layer) const {
    return window > 0 && layer < static_cast<int64_t>(sliding_layers.size()) &&
           sliding_layers[layer];
  }
  // Positions one layer's cache holds at most.
  int64_t positions_held(int64_t layer, int64_t position) const;
  // What the cache stores: the float dtype, or the block type.
  BlockType type() const;
  // A stored row of head_dim values: its elements (values, or u32 words of blocks) and dtype.
  int64_t stored_row_width() const;
  DType stored_dtype() const;
  // Bytes of K and V one layer stores per position (all kv heads).
  int64_t bytes_per_position() const;
};

// One layer's keys and values, [batch, kv_heads, positions, head_dim].
class KvCache {
 public:
  virtual ~KvCache() = default;
  // Adds the new positions and returns the keys and values that they attend to: the whole cache,
  // or for a sliding-window cache the positions still in the window of the first new one, in
  // order (for one new position, possibly in rotated order: attention does not depend on it).
  // The returned tensors may be views in any layout; attention reads them as they are.
  virtual std::pair<Tensor, Tensor> append(const Tensor& key, const Tensor& value) = 0;
  // The positions the cache holds now (undefined tensors when empty).
  virtual std::pair<Tensor, Tensor> contents() const = 0;
  // Positions appended since the last clear.
  virtual int64_t length() const = 0;
  virtual void clear() = 0;
  // Whether the cache can drop the positions from `length` on and then hold what appending the
  // first `length` positions alone would have left (not so for a sliding window that has
  // already dropped positions that it would hold again).
  virtual bool can_truncate(int64_t length) const = 0;
  virtual void truncate(int64_t length) = 0;
};

// A cache of `kind`; with `window` > 0 it keeps only the last `window` positions. Throws Error
// for a quantized shape with the cat kinds (Candle's caches hold float tensors).
std::unique_ptr<KvCache> make_kv_cache(KvCacheKind kind, const KvCacheShape& shape,
                                       int64_t window = 0);

// The caches of all layers of one sequence.
class KvCacheSet {
 public:
  KvCacheSet(KvCacheKind kind, int64_t num_layers, const KvCacheShape& shape);
  KvCache& layer(int64_t index) { return *layers_[index]; }
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }
  int64_t length() const { return layers_.empty() ? 0 : layers_[0]->length(); }
  int64_t max_length() const { return shape_.max_length; }
  KvCacheKind kind() const { return kind_; }
  void clear();
  // Keeps the first `length` positions of every layer, or clears the set when a layer cannot
  // (KvCache::can_truncate). Returns the positions kept.
  int64_t keep_prefix(int64_t length);
  // Bytes a prealloc cache of this shape holds for all layers (keys and values).
  static int64_t prealloc_bytes(int64_t num_layers, const KvCacheShape& shape);
  // Bytes of keys and values that attention reads over all layers at `position` (as stored).
  static int64_t bytes_read(int64_t num_layers, const KvCacheShape& shape, int64_t position);

 private:
  KvCacheKind kind_;
  KvCacheShape shape_;
  std::vector<std::unique_ptr<KvCache>> layers_;
};

}  // namespace fornace
