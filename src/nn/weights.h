// Reads a model's tensors from its checkpoint or GGUF file: checked against the shapes its config
// implies and converted to the dtype the user asked for; quantized blocks are kept as stored.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/weight_source.h"
#include "nn/layers.h"
#include "nn/packed_weights.h"
#include "ops/math.h"

namespace fornace {

// The bytes of weights a decode step reads, by storage format ("bf16", "Q4_K", ...), and where
// the kernels read them (a packed copy's bytes, where there is one), each region kept alive by
// its owner (a weight a model converts further at load leaves its counted copy behind).
struct WeightTally {
  std::map<std::string, int64_t> bytes;
  std::vector<std::pair<const void*, size_t>> regions;
  std::vector<std::shared_ptr<const void>> owners;
  void add(const std::string& format, int64_t count, std::shared_ptr<const void> owner,
           const void* data, size_t region_bytes) {
    bytes[format] += count;
    owners.push_back(std::move(owner));
    regions.emplace_back(data, region_bytes);
  }
  int64_t total() const;
};

class WeightReader {
 public:
  // `dtype`: convert every weight to it (quantized ones are widened); none keeps them as stored.
  // `activation_rounding`: how quantized linear layers take their input.
  // `tally`, when given, counts what each layer's forward pass reads: every linear and norm
  // weight, and the embedding only when it is also the lm_head (otherwise decode reads a row).
  // `packed`: where linear() and the embeddings pack weights for the kernels (new buffers when
  // null).
  WeightReader(const WeightSource& source, std::optional<DType> dtype,
               ActivationRounding activation_rounding = ActivationRounding::int8,
               WeightTally* tally = nullptr, std::shared_ptr<PackedWeights> packed = nullptr)
      : source_(source),
        dtype_(dtype),
        activation_rounding_(activation_rounding),
        tally_(tally),
        packed_(packed ? std::move(packed) : std::make_shared<PackedWeights>()) {}

  // Throws Error naming the checkpoint and the tensor when it is missing, has another shape
  // than `shape`, or is not a float tensor. A quantized tensor is widened (to f32 by default).
  Tensor tensor(const std::string& name, const Dims& shape) const;
  bool contains(const std::string& name) const { return source_.contains(name); }
  // The dtype a weight computes in as stored: its own, or f32 for quantized blocks.
  DType stored_dtype(const std::string& name) const;
  // <name>.weight [outputs, inputs] and, with `bias`, <name>.bias [outputs], widened to f32 once
  // here rather than at every forward pass. Quantized weights stay quantized unless a dtype
  // was asked for.
  Linear linear(const std::string& name, int64_t outputs, int64_t inputs, bool bias) const;
  // A token embedding table [rows, width], quantized or float as linear() keeps weights.
  Embedding embedding(const std::string& name, int64_t rows, int64_t width) const;
  // The same weight as the lm_head (a tied embedding). A float table is packed for the kernels
  // as linear() packs weights, and `embedding` then reads its rows from the packed copy.
  Linear linear_of(Embedding& embedding) const;
  // <name> [size]: a norm's weight, counted as read per token.
  Tensor norm_weight(const std::string& name, int64_t size) const;
  // <name> [size] as an RMSNorm weight.
  RmsNorm rms_norm(const std::string& name, int64_t size, double eps) const;

 private:
  // The stored weight, its shape checked; quantized only when it stays so.
  StoredWeight checked(const std::string& name, const Dims& shape) const;
  // `packed`: the copy the kernels read instead of the tensor.
  void count(const Tensor& tensor, const std::shared_ptr<const Storage>& packed = nullptr) const;
  void count(const QuantizedMatrix& matrix) const;

  const WeightSource& source_;
  std::optional<DType> dtype_;
  ActivationRounding activation_rounding_ = ActivationRounding::int8;
  WeightTally* tally_ = nullptr;
  std::shared_ptr<PackedWeights> packed_;
};

}  // namespace fornace
