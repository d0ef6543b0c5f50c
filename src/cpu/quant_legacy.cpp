// Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0: reference quantizers, row widening, the portable kernels, and
// the table that picks each ISA's kernels.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "cpu/quant_internal.h"
#include "cpu/quant_legacy_kernels.h"

namespace fornace::cpu {
namespace legacy {
namespace {

constexpr int kHalf = kBlockElements / 2;

float block_scale(const uint8_t* block) { return f16_to_f32(load_u16(block)); }

template <const BlockLayout& Layout>
float block_min(const uint8_t* block) {
  if constexpr (has_min(Layout)) return f16_to_f32(load_u16(block + Layout.min_at));
  return 0.0f;
}

// The block's q - offset: each element is scale * value + min.
template <const BlockLayout& Layout>
void decode_values(const uint8_t* block, int8_t* values) {
  const uint8_t* packed = block + Layout.values_at;
  if constexpr (Layout.bits == 8) {
    std::memcpy(values, packed, kBlockElements);
    return;
  }
  uint32_t high_bits = 0;
  if constexpr (Layout.bits == 5) high_bits = load_u32(block + Layout.high_bits_at);
  for (int j = 0; j < kHalf; ++j) {
    int low = packed[j] & 0x0f;
    int high = packed[j] >> 4;
    if constexpr (Layout.bits == 5) {
      low |= ((high_bits >> j) & 1) << 4;
      high |= ((high_bits >> (j + kHalf)) & 1) << 4;
    }
    values[j] = static_cast<int8_t>(low - Layout.offset);
    values[j + kHalf] = static_cast<int8_t>(high - Layout.offset);
  }
}

template <const BlockLayout& Layout>
void dequantize_row(const void* blocks, float* out, int64_t n) {
  const auto* block = static_cast<const uint8_t*>(blocks);
  for (int64_t index = 0; index < block_count(n); ++index, block += Layout.bytes) {
    int8_t values[kBlockElements];
    decode_values<Layout>(block, values);
    const float scale = block_scale(block);
    const float min = block_min<Layout>(block);
    for (int j = 0; j < kBlockElements; ++j) {
      float scaled = static_cast<float>(values[j]) * scale;
      out[index * kBlockElements + j] = has_min(Layout) ? scaled + min : scaled;
    }
  }
}

// Writes unsigned q (< 2^bits) into the block's nibbles, fifth bits or int8 values.
template <const BlockLayout& Layout>
void encode_values(const int* q, uint8_t* block) {
  uint8_t* packed = block + Layout.values_at;
  if constexpr (Layout.bits == 8) {
    for (int j = 0; j < kBlockElements; ++j) packed[j] = static_cast<uint8_t>(q[j]);
    return;
  }
  uint32_t high_bits = 0;
  for (int j = 0; j < kHalf; ++j) {
    packed[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + kHalf] & 0x0f) << 4));
    high_bits |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    high_bits |= static_cast<uint32_t>((q[j + kHalf] >> 4) & 1) << (j + kHalf);
  }
  if constexpr (Layout.bits == 5) std::memcpy(block + Layout.high_bits_at, &high_bits, 4);
}

void store_f16(uint8_t* destination, float value) {
  const uint16_t bits = f32_to_f16(value);
  std::memcpy(destination, &bits, sizeof bits);
}

// llama.cpp's reference rounding, operation for operation (each a separate f32 step, so the
// bytes match): Q4_0/Q5_0 scale by the signed value of largest magnitude (d = max / -2^(bits-1))
// and truncate x / d + offset + 0.5, capped at 2^bits - 1; Q4_1/Q5_1 span [min, max] with
// d = (max - min) / (2^bits - 1) and truncate (x - min) / d + 0.5; Q8_0 takes d = max|x| / 127
// and rounds x / d half away from zero. 1 / d is 0 when d is 0.
template <const BlockLayout& Layout>
void quantize_row(const float* in, void* blocks, int64_t n) {
  auto* block = static_cast<uint8_t*>(blocks);
  constexpr int kLevels = 1 << Layout.bits;
  for (int64_t index = 0; index < block_count(n); ++index, block += Layout.bytes) {
    const float* x = in + index * kBlockElements;
    int q[kBlockElements];
    if constexpr (Layout.bits == 8) {
      float max_magnitude = 0.0f;
      for (int j = 0; j < kBlockElements; ++j) max_magnitude = std::max(max_magnitude, std::fabs(x[j]));
      const float scale = max_magnitude / 127;
      const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
      store_f16(block, scale);
      for (int j = 0; j < kBlockElements; ++j) {
        const float scaled = x[j] * inverse;
        q[j] = static_cast<int>(std::round(scaled)) & 0xff;
      }
    } else if constexpr (has_min(Layout)) {
      float min = FLT_MAX;
      float max = -FLT_MAX;
      for (int j = 0; j < kBlockElements; ++j) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
      }
      const float scale = (max - min) / (kLevels - 1);
      const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
      store_f16(block, scale);
      store_f16(block + Layout.min_at, min);
      for (int j = 0; j < kBlockElements; ++j) {
        const float scaled = (x[j] - min) * inverse;
        const float shifted = scaled + 0.5f;
        q[j] = std::min(kLevels - 1, static_cast<int>(shifted));
      }
    } else {
      float max_magnitude = 0.0f;
      float max = 0.0f;
      for (int j = 0; j < kBlockElements; ++j) {
        if (max_magnitude < std::fabs(x[j])) {
          max_magnitude = std::fabs(x[j]);
          max = x[j];
        }
      }
      const float scale = max / static_cast<float>(-Layout.offset);
      const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
      store_f16(block, scale);
      for (int j = 0; j < kBlockElements; ++j) {
        const float scaled = x[j] * inverse;
        const float shifted = scaled + (static_cast<float>(Layout.offset) + 0.5f);
        q[j] = std::min(kLevels - 1, static_cast<int>(shifted));
      }
    }
    encode_values<Layout>(q, block);
  }
}

template <const BlockLayout& Layout>
void quantize_activations(const float* in, void* out, int64_t n) {
  auto* quads = static_cast<ActivationQuad*>(out);
  for (int64_t block = 0; block < block_count(n); ++block) {
    const float* x = in + block * kBlockElements;
    float max_magnitude = 0.0f;
    for (int j = 0; j < kBlockElements; ++j) max_magnitude = std::max(max_magnitude, std::fabs(x[j]));
    const float scale = activation_scale(max_magnitude);
    const float inverse = activation_inverse_scale(scale);
    ActivationOutput destination = ActivationOutput::of(quads, block);
    int32_t sum = 0;
    for (int j = 0; j < kBlockElements; ++j) {
      const auto q = static_cast<int8_t>(std::nearbyint(x[j] * inverse));
      (j < kHalf ? destination.low[j] : destination.high[j - kHalf]) = q;
      sum += q;
    }
    store_activation_lanes<Layout>(destination, scale, sum);
  }
  finish_activation_row(quads, block_count(n));
}

void dequantize_activations(const void* in, float* out, int64_t n) {
  for (int64_t block = 0; block < block_count(n); ++block) {
    const ActivationBlock source = activation_block(in, block);
    float* x = out + block * kBlockElements;
    for (int j = 0; j < kHalf; ++j) {
      x[j] = source.scale[0] * static_cast<float>(source.low[j]);
      x[j + kHalf] = source.scale[0] * static_cast<float>(source.high[j]);
    }
  }
}

// out[c * out_stride + r] = sum over blocks of block_dot(weight block, block index, column c),
// columns up to kQuantMaxColumns at a time, each weight block decoded once for them.
template <const BlockLayout& Layout, typename BlockDot>
void scalar_dot_rows(const void* weights, size_t weight_row_bytes, int64_t rows, int64_t columns,
                     int64_t n, float* out, int64_t out_stride, BlockDot block_dot) {
  for (int64_t first = 0; first < columns; first += kQuantMaxColumns) {
    const int64_t count = std::min(kQuantMaxColumns, columns - first);
    for (int64_t row = 0; row < rows; ++row) {
      const auto* block = static_cast<const uint8_t*>(weights) + row * weight_row_bytes;
      float sums[kQuantMaxColumns] = {};
      for (int64_t index = 0; index < block_count(n); ++index, block += Layout.bytes) {
        block_dot(block, index, first, count, sums);
      }
      for (int64_t column = 0; column < count; ++column) {
        out[(first + column) * out_stride + row] = sums[column];
      }
    }
  }
}

// Scalar integer dot products: the definition the vector kernels reproduce.
template <const BlockLayout& Layout>
void dot_rows(const void* weights, size_t weight_row_bytes, int64_t rows, const void* activations,
              size_t activation_row_bytes, int64_t columns, int64_t n, float* out,
              int64_t out_stride) {
  auto block_dot = [&](const uint8_t* block, int64_t index, int64_t first, int64_t count,
                       float* sums) {
    int8_t values[kBlockElements];
    decode_values<Layout>(block, values);
    const float scale = block_scale(block);
    for (int64_t column = 0; column < count; ++column) {
      ActivationBlock activation = activation_block(
          static_cast<const uint8_t*>(activations) + (first + column) * activation_row_bytes, index);
      int32_t products = 0;
      int32_t activation_sum = 0;
      for (int j = 0; j < kBlockElements; ++j) {
        const int q = j < kHalf ? activation.low[j] : activation.high[j - kHalf];
        products += values[j] * q;
        activation_sum += q;
      }
      sums[column] += scale * activation.scale[0] * static_cast<float>(products);
      if constexpr (has_min(Layout)) {
        sums[column] += block_min<Layout>(block) * activation.scale[0] *
                        static_cast<float>(activation_sum);
      }
    }
  };
  scalar_dot_rows<Layout>(weights, weight_row_bytes, rows, columns, n, out, out_stride, block_dot);
}

template <const BlockLayout& Layout>
void dot_rows_f32(const void* weights, size_t weight_row_bytes, int64_t rows,
                  const float* activations, int64_t activation_stride, int64_t columns, int64_t n,
                  float* out, int64_t out_stride) {
  auto block_dot = [&](const uint8_t* block, int64_t index, int64_t first, int64_t count,
                       float* sums) {
    float widened[kBlockElements];
    dequantize_row<Layout>(block, widened, kBlockElements);
    for (int64_t column = 0; column < count; ++column) {
      const float* x = activations + (first + column) * activation_stride + index * kBlockElements;
      float sum = 0.0f;
      for (int j = 0; j < kBlockElements; ++j) sum += widened[j] * x[j];
      sums[column] += sum;
    }
  };
  scalar_dot_rows<Layout>(weights, weight_row_bytes, rows, columns, n, out, out_stride, block_dot);
}

template <const BlockLayout& Layout>
constexpr BlockKernels kernels_of() {
  BlockKernels kernels;
  kernels.dequantize_row = dequantize_row<Layout>;
  kernels.quantize_row = quantize_row<Layout>;
  kernels.activation_row_bytes = legacy::activation_row_bytes;
  kernels.quantize_activations = quantize_activations<Layout>;
  kernels.dequantize_activations = dequantize_activations;
  kernels.dot_rows = dot_rows<Layout>;
  kernels.dot_rows_f32 = dot_rows_f32<Layout>;
  return kernels;
}

constexpr BlockKernels kTable[5] = {kernels_of<kQ4_0>(), kernels_of<kQ4_1>(), kernels_of<kQ5_0>(),
                                     kernels_of<kQ5_1>(), kernels_of<kQ8_0>()};

}  // namespace

namespace portable {
const BlockKernels* kernels(BlockType type) { return pick(type, kTable); }
}  // namespace portable

void interleave_quads(BlockType type, const uint8_t* blocks, uint8_t* out, int64_t quads) {
  auto rearrange = [&]<const BlockLayout& Layout>() {
    for (int64_t quad = 0; quad < quads; ++quad) {
      interleave_quad<Layout>(blocks + quad * 4 * Layout.bytes, out + quad * 4 * Layout.bytes);
    }
  };
  switch (type) {
    case BlockType::q4_0:
      return rearrange.template operator()<kQ4_0>();
    case BlockType::q4_1:
      return rearrange.template operator()<kQ4_1>();
    case BlockType::q5_0:
      return rearrange.template operator()<kQ5_0>();
    case BlockType::q5_1:
      return rearrange.template operator()<kQ5_1>();
    case BlockType::q8_0:
      return rearrange.template operator()<kQ8_0>();
    default:
      fail("interleave_quads: ", block_format(type).name, " has no interleaved quads");
  }
}

}  // namespace legacy

const BlockKernels* legacy_block_kernels(BlockType type, Isa isa) {
  switch (isa) {
    case Isa::avx512:
      return legacy::avx512::kernels(type);
    case Isa::avx2:
      return legacy::avx2::kernels(type);
    default:
      return legacy::portable::kernels(type);
  }
}

}  // namespace fornace::cpu
