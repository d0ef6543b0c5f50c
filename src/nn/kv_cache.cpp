// The three KV cache kinds. The cat kinds grow by concatenation as Candle's Qwen2 does; prealloc
// writes into a buffer sized for the whole context.
#include "nn/kv_cache.h"

#include "core/error.h"
#include "ops/copy.h"

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

namespace {

// Keeps the whole cache as one tensor per side and concatenates each new step along the
// position dim. With `make_contiguous` false the new K/V go in as they arrive: V is a
// transposed view, so cat takes its strided path and the cache stays non-contiguous.
class ConcatenatingCache : public KvCache {
 public:
  explicit ConcatenatingCache(bool make_contiguous) : make_contiguous_(make_contiguous) {}

  std::pair<Tensor, Tensor> append(const Tensor& key, const Tensor& value) override {
    memory::OpScope scope("kv_cache");
    Tensor new_key = make_contiguous_ ? contiguous(key) : key;
    Tensor new_value = make_contiguous_ ? contiguous(value) : value;
    if (!keys_.defined()) {
      keys_ = new_key;
      values_ = new_value;
    } else {
      keys_ = cat({keys_, new_key}, 2);
      values_ = cat({values_, new_value}, 2);
    }
    return {keys_, values_};
  }

  std::pair<Tensor, Tensor> contents() const override { return {keys_, values_}; }
  int64_t length() const override { return keys_.defined() ? keys_.dim(2) : 0; }
  void clear() override {
    keys_ = Tensor();
    values_ = Tensor();
  }

 private:
  bool make_contiguous_;
  Tensor keys_;
  Tensor values_;
};

// A buffer for max_length positions, filled by slice_set; returns narrowed views of it.
class PreallocatedCache : public KvCache {
 public:
  explicit PreallocatedCache(const KvCacheShape& shape) : shape_(shape) {}

  std::pair<Tensor, Tensor> append(const Tensor& key, const Tensor& value) override {
    memory::OpScope scope("kv_cache");
    int64_t added = key.dim(2);
    if (length_ + added > shape_.max_length) {
      fail("kv_cache: ", length_ + added, " positions exceed the preallocated ",
           shape_.max_length);
    }
    if (!keys_.defined()) {
      Dims dims{shape_.batch, shape_.kv_heads, shape_.max_length, shape_.head_dim};
      keys_ = Tensor::empty(dims, shape_.dtype);
      values_ = Tensor::empty(dims, shape_.dtype);
    }
    slice_set(keys_, contiguous(key), 2, length_);
    slice_set(values_, contiguous(value), 2, length_);
    length_ += added;
    return contents();
  }

  std::pair<Tensor, Tensor> contents() const override {
    if (length_ == 0) return {};
    return {keys_.narrow(2, 0, length_), values_.narrow(2, 0, length_)};
  }
  int64_t length() const override { return length_; }
  void clear() override { length_ = 0; }

 private:
  KvCacheShape shape_;
  Tensor keys_;
  Tensor values_;
  int64_t length_ = 0;
};

}  // namespace

std::unique_ptr<KvCache> make_kv_cache(KvCacheKind kind, const KvCacheShape& shape) {
  switch (kind) {
    case KvCacheKind::prealloc:
      return std::make_unique<PreallocatedCache>(shape);
    case KvCacheKind::cat:
      return std::make_unique<ConcatenatingCache>(false);
    case KvCacheKind::cat_contiguous:
      return std::make_unique<ConcatenatingCache>(true);
  }
  fail("unknown KV cache kind");
}

KvCacheSet::KvCacheSet(KvCacheKind kind, int64_t num_layers, const KvCacheShape& shape)
    : kind_(kind), shape_(shape) {
  for (int64_t i = 0; i < num_layers; ++i) layers_.push_back(make_kv_cache(kind, shape));
}

void KvCacheSet::clear() {
  for (auto& layer : layers_) layer->clear();
}

int64_t KvCacheSet::prealloc_bytes(int64_t num_layers, const KvCacheShape& shape) {
  return 2 * num_layers * shape.batch * shape.kv_heads * shape.max_length * shape.head_dim *
         static_cast<int64_t>(dtype_size(shape.dtype));
}

}  // namespace fornace
