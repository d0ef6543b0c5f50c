// Q4_K, Q5_K and Q6_K: llama.cpp's reference quantizers, row decoding, activation rounding, the
// portable dot-product kernels, and the table of kernels per ISA.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/dtype.h"
#include "cpu/quant_internal.h"
#include "cpu/quant_k_blocks.h"

namespace fornace::cpu {
namespace kquant {
namespace {

// Round to nearest, ties to even, as ggml's nearest_int (valid for |value| < 2^22).
inline int nearest_int(float value) {
  const float biased = value + 12582912.f;  // 1.5 * 2^23: the integer lands in the mantissa.
  return static_cast<int>(std::bit_cast<uint32_t>(biased) & 0x007fffff) - 0x00400000;
}

// ggml's GROUP_MAX_EPS: groups below it are all zeros.
constexpr float kGroupMaxEps = 1e-15f;

// make_qkx2_quants: levels L in [0, levels_max] with x ~ scale * L - min_out for one group,
// searching the scale over nstep + 1 candidates by weighted squared error. Returns the scale;
// *min_out is the (non-negative) min. Float operations in ggml's order, so the bytes match.
float fit_scale_and_min(int count, int levels_max, const float* x, const float* weights,
                        uint8_t* levels, float* min_out, float rmin, float rdelta, int nstep) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < count; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(levels, levels + count, uint8_t{0});
    *min_out = -min;
    return 0.f;
  }
  float inverse_scale = levels_max / (max - min);
  float scale = 1 / inverse_scale;
  float best_error = 0;
  for (int i = 0; i < count; ++i) {
    const int level = nearest_int(inverse_scale * (x[i] - min));
    levels[i] = static_cast<uint8_t>(std::max(0, std::min(levels_max, level)));
    const float difference = scale * levels[i] + min - x[i];
    best_error += weights[i] * (difference * difference);
  }
  uint8_t candidate[32];
  for (int step = 0; step <= nstep; ++step) {
    inverse_scale = (rmin + rdelta * step + levels_max) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < count; ++i) {
      int level = nearest_int(inverse_scale * (x[i] - min));
      level = std::max(0, std::min(levels_max, level));
      candidate[i] = static_cast<uint8_t>(level);
      const float w = weights[i];
      sum_l += w * level;
      sum_l2 += w * level * level;
      sum_xl += w * level * x[i];
    }
    const float determinant = sum_w * sum_l2 - sum_l * sum_l;
    if (determinant > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / determinant;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / determinant;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float error = 0;
      for (int i = 0; i < count; ++i) {
        const float difference = this_scale * candidate[i] + this_min - x[i];
        error += weights[i] * (difference * difference);
      }
      if (error < best_error) {
        std::copy(candidate, candidate + count, levels);
        best_error = error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *min_out = -min;
  return scale;
}

// make_qx_quants with rmse_type 1 (weights x^2): symmetric levels L - levels_half in
// [-levels_half, levels_half - 1], x ~ scale * (L - levels_half), trying 19 scales.
float fit_symmetric_scale(int count, int levels_half, const float* x, int8_t* levels) {
  float max = 0;
  float amax = 0;
  for (int i = 0; i < count; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(levels, levels + count, int8_t{0});
    return 0.f;
  }
  auto level_at = [&](float inverse_scale, int i) {
    return std::max(-levels_half, std::min(levels_half - 1, nearest_int(inverse_scale * x[i])));
  };
  float inverse_scale = -levels_half / max;
  float sum_lx = 0;
  float sum_l2 = 0;
  for (int i = 0; i < count; ++i) {
    const int level = level_at(inverse_scale, i);
    levels[i] = static_cast<int8_t>(level + levels_half);
    const float w = x[i] * x[i];
    sum_lx += w * x[i] * level;
    sum_l2 += w * level * level;
  }
  float scale = sum_l2 ? sum_lx / sum_l2 : 0.0f;
  float best = scale * sum_lx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    inverse_scale = -(levels_half + 0.1f * step) / max;
    sum_lx = sum_l2 = 0;
    for (int i = 0; i < count; ++i) {
      const int level = level_at(inverse_scale, i);
      const float w = x[i] * x[i];
      sum_lx += w * x[i] * level;
      sum_l2 += w * level * level;
    }
    if (sum_l2 > 0 && sum_lx * sum_lx > best * sum_l2) {
      for (int i = 0; i < count; ++i) {
        levels[i] = static_cast<int8_t>(level_at(inverse_scale, i) + levels_half);
      }
      scale = sum_lx / sum_l2;
      best = scale * sum_lx;
    }
  }
  return scale;
}

// The shared part of quantize_row_q4_K_ref and quantize_row_q5_K_ref for one block: fits the
// eight sub-blocks, packs their 6-bit scales and mins, stores d and dmin, and leaves the levels
// (at most levels_max) in `levels`.
template <typename Block>
void quantize_scaled_min_block(const float* x, Block& block, int levels_max, float rmin, int nstep,
                               uint8_t* levels) {
  float scales[8];
  float mins[8];
  float weights[32];
  float max_scale = 0;
  float max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* group = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += group[l] * group[l];
    const float average = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = average + std::fabs(group[l]);
    scales[j] = fit_scale_and_min(32, levels_max, group, weights, levels + 32 * j, &mins[j], rmin,
                                  0.1f, nstep);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inverse_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inverse_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < 8; ++j) {
    const uint8_t scale =
        std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inverse_scale * scales[j])));
    const uint8_t min =
        std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inverse_min * mins[j])));
    if (j < 4) {
      block.scales[j] = scale;
      block.scales[j + 4] = min;
    } else {
      block.scales[j + 4] = static_cast<uint8_t>((scale & 0xF) | ((min & 0xF) << 4));
      block.scales[j - 4] |= static_cast<uint8_t>((scale >> 4) << 6);
      block.scales[j] |= static_cast<uint8_t>((min >> 4) << 6);
    }
  }
  block.d = f32_to_f16(max_scale / 63.f);
  block.dmin = f32_to_f16(max_min / 63.f);

  // Requantize against the stored (rounded) scales and mins; a zero scale keeps the fit's levels.
  const ScalesAndMins packed = unpack_scales_and_mins(block.scales);
  for (int j = 0; j < 8; ++j) {
    const float d = f16_to_f32(block.d) * static_cast<uint8_t>(packed.scales >> (8 * j));
    if (!d) continue;
    const float dm = f16_to_f32(block.dmin) * static_cast<uint8_t>(packed.mins >> (8 * j));
    for (int i = 0; i < 32; ++i) {
      const int level = nearest_int((x[32 * j + i] + dm) / d);
      levels[32 * j + i] = static_cast<uint8_t>(std::max(0, std::min(levels_max, level)));
    }
  }
}

// Stores the low nibbles of 256 levels in Q4_K/Q5_K order (see BlockQ4K::qs).
void pack_low_nibbles(const uint8_t* levels, uint8_t* qs) {
  for (int g = 0; g < 4; ++g) {
    for (int l = 0; l < 32; ++l) {
      qs[32 * g + l] =
          static_cast<uint8_t>((levels[64 * g + l] & 0xF) | ((levels[64 * g + 32 + l] & 0xF) << 4));
    }
  }
}

void quantize_row_q4_k(const float* in, void* blocks, int64_t n) {
  auto* out = static_cast<BlockQ4K*>(blocks);
  uint8_t levels[kBlockElements];
  for (int64_t b = 0; b < n / kBlockElements; ++b) {
    quantize_scaled_min_block(in + b * kBlockElements, out[b], 15, -1.f, 20, levels);
    pack_low_nibbles(levels, out[b].qs);
  }
}

void quantize_row_q5_k(const float* in, void* blocks, int64_t n) {
  auto* out = static_cast<BlockQ5K*>(blocks);
  uint8_t levels[kBlockElements];
  for (int64_t b = 0; b < n / kBlockElements; ++b) {
    BlockQ5K& block = out[b];
    quantize_scaled_min_block(in + b * kBlockElements, block, 31, -0.5f, 15, levels);
    pack_low_nibbles(levels, block.qs);
    std::memset(block.qh, 0, sizeof(block.qh));
    for (int e = 0; e < kBlockElements; ++e) {
      const int bit = 2 * (e / 64) + (e % 64) / 32;
      block.qh[e % 32] |= static_cast<uint8_t>((levels[e] >> 4) << bit);
    }
  }
}

void quantize_row_q6_k(const float* in, void* blocks, int64_t n) {
  auto* out = static_cast<BlockQ6K*>(blocks);
  int8_t levels[kBlockElements];
  for (int64_t b = 0; b < n / kBlockElements; ++b) {
    const float* x = in + b * kBlockElements;
    BlockQ6K& block = out[b];
    float scales[16];
    float max_scale = 0;
    float max_abs_scale = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = fit_symmetric_scale(16, 32, x + 16 * j, levels + 16 * j);
      if (std::fabs(scales[j]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&block, 0, sizeof(block));
      continue;
    }
    const float inverse_scale = -128.f / max_scale;
    block.d = f32_to_f16(1 / inverse_scale);
    for (int j = 0; j < 16; ++j) {
      block.scales[j] = static_cast<int8_t>(std::min(127, nearest_int(inverse_scale * scales[j])));
    }
    for (int j = 0; j < 16; ++j) {
      const float d = f16_to_f32(block.d) * block.scales[j];
      if (!d) continue;
      for (int i = 0; i < 16; ++i) {
        const int level = nearest_int(x[16 * j + i] / d);
        levels[16 * j + i] = static_cast<int8_t>(std::max(-32, std::min(31, level)) + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {
      const int8_t* half = levels + 128 * h;
      for (int l = 0; l < 32; ++l) {
        block.ql[64 * h + l] = static_cast<uint8_t>((half[l] & 0xF) | ((half[l + 64] & 0xF) << 4));
        block.ql[64 * h + 32 + l] =
            static_cast<uint8_t>((half[l + 32] & 0xF) | ((half[l + 96] & 0xF) << 4));
        block.qh[32 * h + l] =
            static_cast<uint8_t>((half[l] >> 4) | ((half[l + 32] >> 4) << 2) |
                                 ((half[l + 64] >> 4) << 4) | ((half[l + 96] >> 4) << 6));
      }
    }
  }
}

// The unsigned levels of one block in element order (Q4_K 0..15, Q5_K 0..31, Q6_K 0..63).
void unpack_levels(const BlockQ4K& block, uint8_t* levels) {
  for (int e = 0; e < kBlockElements; ++e) {
    const uint8_t byte = block.qs[32 * (e / 64) + e % 32];
    levels[e] = (e % 64) < 32 ? byte & 0xF : byte >> 4;
  }
}
void unpack_levels(const BlockQ5K& block, uint8_t* levels) {
  for (int e = 0; e < kBlockElements; ++e) {
    const uint8_t byte = block.qs[32 * (e / 64) + e % 32];
    const int bit = 2 * (e / 64) + (e % 64) / 32;
    levels[e] = static_cast<uint8_t>(((e % 64) < 32 ? byte & 0xF : byte >> 4) |
                                     (((block.qh[e % 32] >> bit) & 1) << 4));
  }
}
void unpack_levels(const BlockQ6K& block, uint8_t* levels) {
  for (int e = 0; e < kBlockElements; ++e) {
    const int h = e / 128, p = (e % 128) / 32, l = e % 32;
    const uint8_t low = block.ql[64 * h + 32 * (p % 2) + l];
    const int high = (block.qh[32 * h + l] >> (2 * p)) & 3;
    levels[e] = static_cast<uint8_t>((p < 2 ? low & 0xF : low >> 4) | (high << 4));
  }
}

// One block widened to f32, in the same float operations as ggml's dequantize_row_*.
template <typename Block>
void dequantize_block(const Block& block, float* out) {
  uint8_t levels[kBlockElements];
  unpack_levels(block, levels);
  if constexpr (!has_mins<Block>) {
    const float d = f16_to_f32(block.d);
    for (int e = 0; e < kBlockElements; ++e) {
      out[e] = d * block.scales[e / 16] * static_cast<int8_t>(levels[e] - 32);
    }
  } else {
    const ScalesAndMins packed = unpack_scales_and_mins(block.scales);
    const float d = f16_to_f32(block.d);
    const float dmin = f16_to_f32(block.dmin);
    for (int j = 0; j < 8; ++j) {
      const float scale = d * static_cast<uint8_t>(packed.scales >> (8 * j));
      const float min = dmin * static_cast<uint8_t>(packed.mins >> (8 * j));
      for (int i = 32 * j; i < 32 * j + 32; ++i) out[i] = scale * levels[i] - min;
    }
  }
}

template <typename Block>
void dequantize_row(const void* blocks, float* out, int64_t n) {
  const auto* in = static_cast<const Block*>(blocks);
  for (int64_t b = 0; b < n / kBlockElements; ++b)
    dequantize_block(in[b], out + b * kBlockElements);
}

size_t activation_row_bytes(int64_t n) {
  return static_cast<size_t>(n / kBlockElements) * sizeof(ActivationBlock);
}

void dequantize_activations(const void* in, float* out, int64_t n) {
  const auto* blocks = static_cast<const ActivationBlock*>(in);
  for (int64_t b = 0; b < n / kBlockElements; ++b) {
    for (int i = 0; i < kBlockElements; ++i) {
      out[b * kBlockElements + i] = blocks[b].scale * static_cast<float>(blocks[b].q[i]);
    }
  }
}

void quantize_activations(const float* in, void* out, int64_t n) {
  auto* blocks = static_cast<ActivationBlock*>(out);
  for (int64_t b = 0; b < n / kBlockElements; ++b) {
    const float* x = in + b * kBlockElements;
    ActivationBlock& block = blocks[b];
    float amax = 0;
    for (int i = 0; i < kBlockElements; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float inverse = amax > 0 ? 127.f / amax : 0.f;
    block.scale = amax / 127.f;
    for (int i = 0; i < kBlockElements; ++i) {
      block.q[i] = static_cast<int8_t>(std::max(-127, std::min(127, nearest_int(x[i] * inverse))));
    }
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 16 * j; i < 16 * j + 16; ++i) sum += block.q[i];
      block.sums16[j] = static_cast<int16_t>(sum);
    }
    for (int j = 0; j < 8; ++j) {
      block.sums32[j] = static_cast<int16_t>(block.sums16[2 * j] + block.sums16[2 * j + 1]);
    }
    std::memset(block.padding, 0, sizeof(block.padding));
  }
}

// One weight block against one activation block, in integers: d * sum(scale * q * a) minus
// dmin * sum(min * a) (Q6_K: d * sum(scale * (q - 32) * a)), times the activation scale.
template <typename Block>
float block_dot(const Block& block, const uint8_t* levels, const ActivationBlock& a) {
  if constexpr (!has_mins<Block>) {
    int32_t sum = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t dot = 0;
      for (int i = 16 * j; i < 16 * j + 16; ++i) dot += levels[i] * a.q[i];
      sum += block.scales[j] * (dot - 32 * a.sums16[j]);
    }
    return f16_to_f32(block.d) * a.scale * static_cast<float>(sum);
  } else {
    const ScalesAndMins packed = unpack_scales_and_mins(block.scales);
    int32_t sum = 0;
    int32_t min_sum = 0;
    for (int j = 0; j < 8; ++j) {
      int32_t dot = 0;
      for (int i = 32 * j; i < 32 * j + 32; ++i) dot += levels[i] * a.q[i];
      sum += static_cast<uint8_t>(packed.scales >> (8 * j)) * dot;
      min_sum += static_cast<uint8_t>(packed.mins >> (8 * j)) * a.sums32[j];
    }
    return a.scale * (f16_to_f32(block.d) * static_cast<float>(sum) -
                      f16_to_f32(block.dmin) * static_cast<float>(min_sum));
  }
}

}  // namespace

template <BlockType Type>
void dot_rows_portable(const void* weights, size_t weight_row_bytes, int64_t rows,
                       const void* activations, size_t activation_row_bytes, int64_t columns,
                       int64_t n, float* out, int64_t out_stride) {
  using Block = BlockOf<Type>;
  const int64_t blocks = n / kBlockElements;
  uint8_t levels[kBlockElements];
  for (int64_t r = 0; r < rows; ++r) {
    const auto* row =
        reinterpret_cast<const Block*>(static_cast<const char*>(weights) + r * weight_row_bytes);
    float sums[kQuantMaxColumns] = {};
    for (int64_t b = 0; b < blocks; ++b) {
      unpack_levels(row[b], levels);
      for (int64_t c = 0; c < columns; ++c) {
        const auto* a = reinterpret_cast<const ActivationBlock*>(
            static_cast<const char*>(activations) + c * activation_row_bytes);
        sums[c] += block_dot(row[b], levels, a[b]);
      }
    }
    for (int64_t c = 0; c < columns; ++c) out[c * out_stride + r] = sums[c];
  }
}

template <BlockType Type>
void dot_rows_f32_portable(const void* weights, size_t weight_row_bytes, int64_t rows,
                           const float* activations, int64_t activation_stride, int64_t columns,
                           int64_t n, float* out, int64_t out_stride) {
  using Block = BlockOf<Type>;
  constexpr int kLanes = 8;
  const int64_t blocks = n / kBlockElements;
  float values[kBlockElements];
  for (int64_t r = 0; r < rows; ++r) {
    const auto* row =
        reinterpret_cast<const Block*>(static_cast<const char*>(weights) + r * weight_row_bytes);
    float partial[kQuantMaxColumns][kLanes] = {};
    for (int64_t b = 0; b < blocks; ++b) {
      dequantize_block(row[b], values);
      for (int64_t c = 0; c < columns; ++c) {
        const float* a = activations + c * activation_stride + b * kBlockElements;
        for (int i = 0; i < kBlockElements; i += kLanes) {
          for (int lane = 0; lane < kLanes; ++lane)
            partial[c][lane] += values[i + lane] * a[i + lane];
        }
      }
    }
    for (int64_t c = 0; c < columns; ++c) {
      float sum = 0;
      for (float lane : partial[c]) sum += lane;
      out[c * out_stride + r] = sum;
    }
  }
}

#define FORNACE_KQUANT_PORTABLE(TYPE)                                                            \
  template void dot_rows_portable<TYPE>(const void*, size_t, int64_t, const void*, size_t,       \
                                        int64_t, int64_t, float*, int64_t);                      \
  template void dot_rows_f32_portable<TYPE>(const void*, size_t, int64_t, const float*, int64_t, \
                                            int64_t, int64_t, float*, int64_t);
FORNACE_KQUANT_PORTABLE(BlockType::q4_k)
FORNACE_KQUANT_PORTABLE(BlockType::q5_k)
FORNACE_KQUANT_PORTABLE(BlockType::q6_k)
#undef FORNACE_KQUANT_PORTABLE

namespace {

template <BlockType Type>
constexpr BlockKernels kernels_for(Isa isa) {
  BlockKernels kernels;
  kernels.dequantize_row = dequantize_row<BlockOf<Type>>;
  kernels.quantize_row = Type == BlockType::q4_k   ? quantize_row_q4_k
                         : Type == BlockType::q5_k ? quantize_row_q5_k
                                                   : quantize_row_q6_k;
  kernels.activation_row_bytes = activation_row_bytes;
  kernels.quantize_activations = quantize_activations;
  kernels.dequantize_activations = dequantize_activations;
  switch (isa) {
    case Isa::avx512:
      kernels.quantize_activations = quantize_activations_avx2;
      kernels.dot_rows = dot_rows_avx512<Type>;
      kernels.dot_rows_f32 = dot_rows_f32_avx512<Type>;
      kernels.widen_row_bf16 = widen_row_bf16_avx512<Type>;
      kernels.widen_row_f32 = widen_row_f32_avx512<Type>;
      break;
    case Isa::avx2:
      kernels.quantize_activations = quantize_activations_avx2;
      kernels.dot_rows = dot_rows_avx2<Type>;
      kernels.dot_rows_f32 = dot_rows_f32_avx2<Type>;
      kernels.widen_row_f32 = widen_row_f32_avx2<Type>;
      break;
    default:
      kernels.dot_rows = dot_rows_portable<Type>;
      kernels.dot_rows_f32 = dot_rows_f32_portable<Type>;
      break;
  }
  return kernels;
}

template <BlockType Type>
constexpr std::array<BlockKernels, 3> kTables = {
    kernels_for<Type>(Isa::portable), kernels_for<Type>(Isa::avx2), kernels_for<Type>(Isa::avx512)};

}  // namespace
}  // namespace kquant

const BlockKernels* k_block_kernels(BlockType type, Isa isa) {
  const auto level = static_cast<size_t>(isa);
  switch (type) {
    case BlockType::q4_k:
      return &kquant::kTables<BlockType::q4_k>[level];
    case BlockType::q5_k:
      return &kquant::kTables<BlockType::q5_k>[level];
    case BlockType::q6_k:
      return &kquant::kTables<BlockType::q6_k>[level];
    default:
      return nullptr;
  }
}

}  // namespace fornace::cpu
