// The interface every architecture implements, and the registry that picks one by model_type.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/config.h"
#include "io/gguf.h"
#include "io/model_files.h"
#include "nn/candle_path.h"
#include "nn/kv_cache.h"
#include "nn/packed_weights.h"
#include "nn/weights.h"

namespace fornace {

// What one load_model call mapped and packed, and what it did with the packed-weights cache.
struct LoadReport {
  // The weights' mappings (and the packed cache's) as they were set up: resident bytes, those in
  // 2 MiB pages, how they came by them (1 << HugePagePath of each, io/file_mapping.h), the bytes
  // re-read from disk and copied to anonymous 2 MiB pages, and the milliseconds each took.
  int64_t mapped_bytes = 0;
  int64_t huge_page_bytes = 0;
  int huge_page_paths = 0;
  double mapping_ms = 0;
  int64_t reread_bytes = 0;
  double reread_ms = 0;
  int64_t copied_bytes = 0;
  double copy_ms = 0;
  // Weights packed for the kernels (nn/packed_weights.h), those of them mapped from the packed
  // cache, and the milliseconds packing took.
  int64_t packed_bytes = 0;
  int64_t packed_from_cache_bytes = 0;
  double pack_ms = 0;
  // The packed cache's file (empty: no cache), the bytes written to it and how long that took,
  // or why it was not used.
  std::string packed_cache;
  int64_t packed_cache_written_bytes = 0;
  double packed_cache_write_ms = 0;
  std::string packed_cache_problem;
  // The whole load.
  double load_ms = 0;

  // The share of the mapped bytes in 2 MiB pages, in percent.
  double huge_page_percent() const {
    return mapped_bytes ? 100.0 * static_cast<double>(huge_page_bytes) / mapped_bytes : 0.0;
  }
};

struct ModelOptions;

// Which positions' logits a forward pass computes.
enum class Logits { all, last, none };

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  // The dtype the weights are held in.
  virtual DType weight_dtype() const = 0;
  // The dtype of the KV cache: the weights' dtype, as Candle keeps it (bf16 for a bf16
  // checkpoint), so K and V take half the memory and bandwidth of f32.
  virtual DType kv_dtype() const = 0;
  // The blocks of a quantized KV cache (ModelOptions::kv_blocks), or none.
  virtual std::optional<BlockType> kv_blocks() const = 0;
  // The weight bytes a decode step reads, by storage format.
  virtual const WeightTally& weights_read_per_token() const = 0;
  // Runs `ids` [1, S] (u32) at the positions after what `cache` holds, appends their keys and
  // values to it, and returns f32 logits: [S, vocab] for Logits::all, [1, vocab] of the last
  // position for Logits::last, and an undefined tensor for Logits::none (a prompt chunk that is
  // not the last one skips the lm_head).
  virtual Tensor forward(const Tensor& ids, KvCacheSet& cache, Logits logits = Logits::last) = 0;
  // One decode step of B sequences together: ids[b] is the next token of the sequence in
  // caches[b], at the position after what that cache holds. The projections and the MLP run
  // over the B rows at once (each weight read once per step); attention runs per sequence over
  // its own cache. Returns f32 logits [B, vocab].
  virtual Tensor forward_batch(const std::vector<uint32_t>& ids,
                               std::span<KvCacheSet* const> caches) = 0;
  // The shape a KV cache for this model needs, holding up to `max_length` positions.
  KvCacheShape kv_cache_shape(int64_t max_length) const;
  // The files the weights are mapped from, which the model keeps open and mapped while it lives
  // (null for a model built without load_model).
  const std::shared_ptr<const ModelFiles>& files() const { return files_; }
  // What load_model did.
  const LoadReport& load_report() const { return load_report_; }

 private:
  friend std::unique_ptr<Model> load_model(std::shared_ptr<const ModelFiles> files,
                                           const ModelOptions& options);
  std::shared_ptr<const ModelFiles> files_;
  LoadReport load_report_;
};

struct ModelOptions {
  std::optional<DType> dtype;  // Weights in this dtype (converted at load); default: as stored.
  AttentionPath attention = AttentionPath::fused;
  // Quantized weights: how activations meet them (8-bit blocks for integer dot products, their
  // residual rounded again with int8x2, or f32 against weights widened in registers).
  ActivationRounding activation_rounding = ActivationRounding::int8;
  // The KV cache's dtype; default: the weights' float dtype (bf16 for quantized weights).
  std::optional<DType> kv_dtype;
  // A quantized KV cache (q8_0, q4_0): K and V computed in kv_dtype (default f32), then rounded
  // to these blocks as they are appended. Needs a head_dim that is a multiple of 32 and the
  // fused attention path.
  std::optional<BlockType> kv_blocks;
  // Sets kv_dtype (f32, f16, bf16) or kv_blocks (q8_0, q4_0) from a KV cache type.
  void set_kv_cache_type(BlockType type);
  // Where this load's weights are packed for the kernels, and what it packed: load_model sets it
  // to hand out the forms an earlier load stored and to store this one's (null: packed anew).
  std::shared_ptr<PackedWeights> packed_weights;
  // The packed-weights cache's directory (EngineSettings::packed_cache_directory); none: no cache.
  std::optional<std::string> packed_cache_directory;
};

// Loads the model of `files`: a checkpoint (the architecture from config.json's model_type), or
// a GGUF file (the architecture from general.architecture). The model keeps `files`.
std::unique_ptr<Model> load_model(std::shared_ptr<const ModelFiles> files,
                                  const ModelOptions& options = {});
// The same for files opened here (for a model whose tokenizer is not needed).
std::unique_ptr<Model> load_model(const std::string& path, const ModelOptions& options = {});
// The config of the model: config.json of a directory, or a GGUF file's metadata.
ModelConfig model_config_at(const ModelFiles& files);
ModelConfig model_config_at(const std::string& path);
std::vector<std::string> supported_model_types();

}  // namespace fornace
