// Building blocks of a decoder: embedding, linear, RMSNorm and the rotary embedding tables.
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>
#include <utility>

#include <vector>

#include "core/quantized_matrix.h"
#include "core/tensor.h"
#include "io/config.h"
#include "ops/math.h"

namespace fornace {

class PackedWeights;

class Embedding {
 public:
  Embedding() = default;
  explicit Embedding(Tensor table) : table_(std::move(table)) {}
  // A block-quantized table: rows are widened to f32 as they are looked up.
  explicit Embedding(QuantizedMatrix table) : quantized_(std::move(table)) {}
  // ids [B, S] (u32) -> [B, S, hidden] in `dtype`.
  Tensor forward(const Tensor& ids, DType dtype) const;
  // The same into `output` [B, S, hidden], converted to its dtype (f32 for a quantized table).
  void forward_into(const Tensor& output, const Tensor& ids) const;
  const Tensor& table() const { return table_; }
  const std::optional<QuantizedMatrix>& quantized_table() const { return quantized_; }
  // Rows are read from `packed` (PackedWeights::pack of the table, as a tied lm_head packs it)
  // from now on; null keeps the table.
  void read_rows_from(std::shared_ptr<const Storage> packed) { packed_ = std::move(packed); }
  // A quantized table's rows come from `table` (the same rows, interleaved for a tied head).
  void read_rows_from(QuantizedMatrix table) { quantized_ = std::move(table); }

 private:
  Tensor table_;
  std::optional<QuantizedMatrix> quantized_;
  std::shared_ptr<const Storage> packed_;
};

class Linear {
 public:
  Linear() = default;
  Linear(Tensor weight, std::optional<Tensor> bias) : weight_(std::move(weight)), bias_(std::move(bias)) {}
  // Block-quantized weights, used as stored; `activation_rounding`: how the input meets them (8-bit
  // blocks for integer dot products, or f32; see ops/quantized.h).
  Linear(QuantizedMatrix weight, std::optional<Tensor> bias, ActivationRounding activation_rounding)
      : quantized_(std::move(weight)),
        bias_(std::move(bias)),
        activation_rounding_(activation_rounding) {}
  Tensor forward(const Tensor& input) const;
  void forward_into(const Tensor& output, const Tensor& input) const;
  // Packs a float weight for the CPU kernels once (into `packed`), where they take it; forward
  // then reads the packed copy, and the stored weight's mapped pages are released.
  void pack_weight(PackedWeights& packed);
  // The packed copy, or null.
  const std::shared_ptr<const Storage>& packed_weight() const { return packed_; }
  int64_t outputs() const { return quantized_ ? quantized_->rows : weight_.dim(0); }
  // The float weight [out, in]; undefined when the weights are quantized.
  const Tensor& weight() const { return weight_; }
  const std::optional<QuantizedMatrix>& quantized_weight() const { return quantized_; }
  ActivationRounding activation_rounding() const { return activation_rounding_; }
  const std::optional<Tensor>& bias() const { return bias_; }
  // The input dtype the layer's kernels take as it is for `rows` input rows (ops
  // linear_input_dtype, quantized_linear_input_dtype): bf16 where they would round an f32 input
  // to bf16 anyway, so the layer before can write bf16. Any float input works.
  DType input_dtype(int64_t rows) const;

 private:
  Tensor weight_;  // [out, in]
  std::shared_ptr<const Storage> packed_;
  std::optional<QuantizedMatrix> quantized_;
  std::optional<Tensor> bias_;
  ActivationRounding activation_rounding_ = ActivationRounding::int8;
};

// Runs Linear layers that share `input` at once, each into its output (Q, K and V; gate and up):
// the input is prepared once and the threads take one hand-off (ops linear_group_into, or
// quantized_linear_group_into when every layer is quantized alike).
void forward_together(const Tensor& input,
                      std::initializer_list<std::pair<const Linear*, const Tensor*>> layers);
// Gate and up over `input`, and activation(gate) * up into `gated`: in one pass where both are
// float layers (ops linear_gated_into) or quantized ones alike (ops quantized_linear_gated_into):
// gate_output and up_output are its scratch; else forward_together into them, then
// gated_activation_into.
void forward_gated(const Tensor& input, const Linear& gate, const Linear& up,
                   const Tensor& gate_output, const Tensor& up_output, const Tensor& gated,
                   GateActivation activation);

class RmsNorm {
 public:
  RmsNorm() = default;
  RmsNorm(Tensor weight, double eps) : weight_(std::move(weight)), eps_(eps) {}
  Tensor forward(const Tensor& input) const;
  void forward_into(const Tensor& output, const Tensor& input) const;
  // hidden += update, then the norm of hidden into `output`, in one pass (ops add_rms_norm_into).
  void add_then_forward_into(const Tensor& output, const Tensor& hidden,
                             const Tensor& update) const;

 private:
  Tensor weight_;
  double eps_ = 1e-6;
};

// The rotary frequencies theta^(-2i/D) for i < D/2, as `scaling` stretches them: llama3 divides
// the low frequencies by the factor and blends the band between (Llama 3.1/3.2), linear divides
// them all (Gemma 3's global layers).
std::vector<double> rope_inverse_frequencies(int64_t head_dim, double theta,
                                             const std::optional<RopeScaling>& scaling = {},
                                             const std::vector<double>& divisors = {});

// cos and sin of position * inverse frequency i for i < D/2, computed in double, stored as f32.
class RotaryEmbedding {
 public:
  RotaryEmbedding() = default;
  RotaryEmbedding(int64_t head_dim, int64_t max_positions, double theta);
  RotaryEmbedding(const std::vector<double>& inverse_frequencies, int64_t max_positions);
  // Rotates x [B, H, S, D] whose rows sit at positions start .. start + S - 1.
  Tensor apply(const Tensor& input, int64_t start) const;
  void apply_into(const Tensor& output, const Tensor& input, int64_t start) const;
  int64_t max_positions() const { return cos_.defined() ? cos_.dim(0) : 0; }

 private:
  Tensor cos_;  // [max_positions, D/2]
  Tensor sin_;
};

}  // namespace fornace
