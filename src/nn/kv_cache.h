// KV cache kinds behind one interface: cat (Candle's Qwen2), cat-contiguous and prealloc.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace fornace {

enum class KvCacheKind { prealloc, cat, cat_contiguous };

const char* kv_cache_kind_name(KvCacheKind kind);
// Parses "prealloc", "cat" or "cat-contiguous"; throws Error listing them otherwise.
KvCacheKind parse_kv_cache_kind(std::string_view name);
std::vector<KvCacheKind> all_kv_cache_kinds();

struct KvCacheShape {
  int64_t batch = 1;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_length = 0;  // Positions a prealloc cache holds.
  DType dtype = DType::f32;
};

// One layer's keys and values, [batch, kv_heads, positions, head_dim].
class KvCache {
 public:
  virtual ~KvCache() = default;
  // Adds the new positions and returns the whole cache. The returned tensors may be views in any
  // layout; attention reads them as they are.
  virtual std::pair<Tensor, Tensor> append(const Tensor& key, const Tensor& value) = 0;
  // The cache as append last returned it (undefined tensors when empty).
  virtual std::pair<Tensor, Tensor> contents() const = 0;
  virtual int64_t length() const = 0;
  virtual void clear() = 0;
};

std::unique_ptr<KvCache> make_kv_cache(KvCacheKind kind, const KvCacheShape& shape);

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
  // Bytes a prealloc cache of this shape holds for all layers (keys and values).
  static int64_t prealloc_bytes(int64_t num_layers, const KvCacheShape& shape);

 private:
  KvCacheKind kind_;
  KvCacheShape shape_;
  std::vector<std::unique_ptr<KvCache>> layers_;
};

}  // namespace fornace
