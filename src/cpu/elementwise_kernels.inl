// The f32 run and row kernels, compiled once per ISA: elementwise.cpp (portable),
// elementwise_avx2.cpp and elementwise_avx512.cpp define FORNACE_KERNEL_NAMESPACE and include
// this file.

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "cpu/elementwise.h"
#include "cpu/simd.h"

namespace fornace::cpu::FORNACE_KERNEL_NAMESPACE {
namespace {

using simd::Vec;

void binary_run(BinaryOp op, const float* left, const float* right, float* out, int64_t count) {
  if (op == BinaryOp::add) {
    simd::transform(left, right, out, count, [](Vec a, Vec b) { return simd::add(a, b); });
  } else {
    simd::transform(left, right, out, count, [](Vec a, Vec b) { return simd::multiply(a, b); });
  }
}

// x / (1 + e^-x). With AVX-512: e^-x by exp_normal_range (-x clamped to [-87, 87]) and the
// division by a reciprocal estimate refined by one Newton step (a divide is the dearest
// instruction here, and the gated GEMM's epilogue runs one a vector); below x = -87 the result
// is 0, as the formula's is to within 1e-35.
inline Vec silu(Vec x) {
#if defined(__AVX512F__)
  const __m512 one = _mm512_set1_ps(1.0f);
  __mmask16 kept = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_NLT_UQ);
  __m512 minus_x = _mm512_sub_ps(_mm512_setzero_ps(), x);
  minus_x = _mm512_min_ps(_mm512_max_ps(minus_x, _mm512_set1_ps(-87.0f)),
                          _mm512_set1_ps(87.0f));
  __m512 denominator = _mm512_add_ps(one, simd::exp_normal_range(minus_x));
  __m512 estimate = _mm512_rcp14_ps(denominator);
  __m512 reciprocal = _mm512_fmadd_ps(
      estimate, _mm512_fnmadd_ps(denominator, estimate, one), estimate);
  return _mm512_maskz_mul_ps(kept, x, reciprocal);
#else
  return simd::divide(
      x, simd::add(simd::broadcast(1.0f), simd::exp(simd::subtract(simd::broadcast(0.0f), x))));
#endif
}

// x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3).
inline Vec gelu_tanh(Vec x) {
  const Vec minus_two_c = simd::broadcast(-2.0f * 0.7978845608028654f);  // -2 sqrt(2/pi)
  Vec inner =
      simd::multiply_add(simd::multiply(simd::broadcast(0.044715f), x), simd::multiply(x, x), x);
  return simd::divide(
      x, simd::add(simd::broadcast(1.0f), simd::exp(simd::multiply(minus_two_c, inner))));
}

void silu_run(const float* input, float* out, int64_t count) {
  simd::transform(input, out, count, [](Vec x) { return silu(x); });
}

void gelu_tanh_run(const float* input, float* out, int64_t count) {
  simd::transform(input, out, count, [](Vec x) { return gelu_tanh(x); });
}

void soft_cap_run(const float* input, float cap, float* out, int64_t count) {
  const Vec one = simd::broadcast(1.0f);
  const Vec two = simd::broadcast(2.0f);
  const Vec minus_two_over_cap = simd::broadcast(-2.0f / cap);
  const Vec scale = simd::broadcast(cap);
  simd::transform(input, out, count, [&](Vec x) {
    // tanh(y) = 2 / (1 + e^(-2y)) - 1
    Vec ratio = simd::divide(two, simd::add(one, simd::exp(simd::multiply(minus_two_over_cap, x))));
    return simd::multiply(scale, simd::subtract(ratio, one));
  });
}

void scale_run(const float* input, float factor, float* out, int64_t count) {
  const Vec scale = simd::broadcast(factor);
  simd::transform(input, out, count, [&](Vec x) { return simd::multiply(x, scale); });
}

void softmax_row(const float* input, float* out, int64_t count) {
  float maximum = simd::max_value(input, count);
  if (maximum == -INFINITY) maximum = 0.0f;  // An all -inf row gives NaN (0/0), as in PyTorch.
  const Vec shift = simd::broadcast(maximum);
  simd::transform(input, out, count, [&](Vec x) { return simd::exp(simd::subtract(x, shift)); });
  scale_run(out, 1.0f / simd::sum(out, count), out, count);
}

void rms_norm_row(const float* input, const float* weight, float epsilon, float* out,
                  int64_t count) {
  float mean_square = simd::dot(input, input, count) / static_cast<float>(count);
  const Vec inverse = simd::broadcast(1.0f / std::sqrt(mean_square + epsilon));
  simd::transform(input, weight, out, count,
                  [&](Vec x, Vec w) { return simd::multiply(simd::multiply(x, inverse), w); });
}

int64_t argmax_row(const float* input, int64_t count) {
  const int64_t first = simd::first_index_of(input, count, simd::max_value(input, count));
  return first < count ? first : 0;
}

// Four vectors of columns at a time, so each weight broadcast feeds four multiply-adds.
template <typename Element, typename Load, typename Widen>
void weighted_row_sum_typed(const float* weights, const Element* rows, int64_t row_stride,
                            int64_t count, int64_t width, float* out, Load load_vector,
                            Widen widen) {
  constexpr int64_t kBlock = 4 * simd::kWidth;
  int64_t column = 0;
  for (; column + kBlock <= width; column += kBlock) {
    Vec sums[4] = {simd::broadcast(0.0f), simd::broadcast(0.0f), simd::broadcast(0.0f),
                   simd::broadcast(0.0f)};
    for (int64_t row = 0; row < count; ++row) {
      const Vec weight = simd::broadcast(weights[row]);
      const Element* values = rows + row * row_stride + column;
      for (int part = 0; part < 4; ++part) {
        sums[part] = simd::multiply_add(weight, load_vector(values + part * simd::kWidth),
                                        sums[part]);
      }
    }
    for (int part = 0; part < 4; ++part) simd::store(out + column + part * simd::kWidth, sums[part]);
  }
  for (; column < width; ++column) {
    float sum = 0.0f;
    for (int64_t row = 0; row < count; ++row) {
      sum += weights[row] * widen(rows[row * row_stride + column]);
    }
    out[column] = sum;
  }
}

void weighted_row_sum(const float* weights, const void* rows, bool rows_are_bf16,
                      int64_t row_stride, int64_t count, int64_t width, float* out) {
  if (rows_are_bf16) {
    weighted_row_sum_typed(weights, static_cast<const uint16_t*>(rows), row_stride, count, width,
                           out, simd::load_bf16, bf16_to_f32);
  } else {
    weighted_row_sum_typed(weights, static_cast<const float*>(rows), row_stride, count, width,
                           out, simd::load, [](float value) { return value; });
  }
}

#if defined(__AVX512BF16__)
// Whether any lane is NaN or subnormal: there vcvtneps2bf16 differs from f32_to_bf16. One
// vfpclassps: quiet NaN (0x01), subnormal (0x20), signalling NaN (0x80).
inline bool has_special_lanes(__m512 values) {
  return _mm512_fpclass_ps_mask(values, 0x01 | 0x20 | 0x80) != 0;
}

// f32_to_bf16 of the 16 lanes of `values` into out[0, 16).
inline void store_bf16(__m512 values, uint16_t* out) {
  if (!has_special_lanes(values)) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), (__m256i)_mm512_cvtneps_pbh(values));
    return;
  }
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, values);
  for (int lane = 0; lane < 16; ++lane) out[lane] = f32_to_bf16(lanes[lane]);
}
#endif

// f32_to_bf16 on every element, in a loop the compiler vectorizes for the ISA. With
// AVX512_BF16, runs of 32 normal values (zero, normal or infinite: no subnormal, no NaN, where
// the instruction differs from f32_to_bf16) take vcvtne2ps2bf16.
void round_to_bf16_run(const float* input, uint16_t* out, int64_t count) {
  int64_t i = 0;
#if defined(__AVX512BF16__)
  for (; i + 32 <= count; i += 32) {
    __m512 low = _mm512_loadu_ps(input + i);
    __m512 high = _mm512_loadu_ps(input + i + 16);
    if (has_special_lanes(low) || has_special_lanes(high)) {
      for (int64_t j = i; j < i + 32; ++j) out[j] = f32_to_bf16(input[j]);
      continue;
    }
    _mm512_storeu_si512(out + i, (__m512i)_mm512_cvtne2ps_pbh(high, low));
  }
#endif
  for (; i < count; ++i) out[i] = f32_to_bf16(input[i]);
}

// f16_to_f32 on every element; with F16C, 8 at a time (vcvtph2ps is exact, as f16_to_f32).
void widen_f16_run(const uint16_t* input, float* out, int64_t count) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= count; i += 8) {
    _mm256_storeu_ps(out + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(input + i))));
  }
#endif
  for (; i < count; ++i) out[i] = f16_to_f32(input[i]);
}

// values[0, count) (count <= kWidth) to out[at, at + count), f32 or bf16 (`out_is_bf16`,
// rounded as round_to_bf16_run).
inline void store_run(Vec values, int64_t count, void* out, int64_t at, bool out_is_bf16) {
  if (count == simd::kWidth && !out_is_bf16) {
    simd::store(static_cast<float*>(out) + at, values);
    return;
  }
#if defined(__AVX512BF16__)
  if (count == simd::kWidth) {
    store_bf16(values, static_cast<uint16_t*>(out) + at);
    return;
  }
#endif
  alignas(64) float lanes[simd::kWidth];
  simd::store(lanes, values);
  if (out_is_bf16) {
    round_to_bf16_run(lanes, static_cast<uint16_t*>(out) + at, count);
  } else {
    std::memcpy(static_cast<float*>(out) + at, lanes, count * sizeof(float));
  }
}

// Rotates input row r (2 * half values, rows input_stride apart) by cos/sin row r (rows
// table_stride apart) into out row r (rows 2 * half apart, f32 or bf16).
void rope_rows(const float* input, int64_t input_stride, const float* cos, const float* sin,
               int64_t table_stride, int64_t rows, int64_t half, void* out, bool out_is_bf16) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* first = input + r * input_stride;
    const float* second = first + half;
    const float* cos_row = cos + r * table_stride;
    const float* sin_row = sin + r * table_stride;
    for (int64_t i = 0; i < half; i += simd::kWidth) {
      const int64_t count = std::min<int64_t>(simd::kWidth, half - i);
      auto load = [&](const float* source) {
        if (count == simd::kWidth) return simd::load(source + i);
        alignas(64) float lanes[simd::kWidth] = {};  // The row's last values, zero-padded.
        std::memcpy(lanes, source + i, count * sizeof(float));
        return simd::load(lanes);
      };
      const Vec x1 = load(first), x2 = load(second), c = load(cos_row), s = load(sin_row);
      const int64_t at = r * 2 * half + i;
      store_run(simd::subtract(simd::multiply(x1, c), simd::multiply(x2, s)), count, out, at,
                out_is_bf16);
      store_run(simd::add(simd::multiply(x2, c), simd::multiply(x1, s)), count, out, at + half,
                out_is_bf16);
    }
  }
}

template <typename Activation>
void gated_rows(Activation activation, const float* gate, int64_t gate_stride, const float* up,
                int64_t up_stride, int64_t rows, int64_t count, void* out, bool out_is_bf16,
                int64_t out_stride) {
  constexpr int64_t kPiece = 256;
  alignas(64) float piece[kPiece + simd::kWidth];
  for (int64_t row = 0; row < rows; ++row) {
    const float* gate_row = gate + row * gate_stride;
    const float* up_row = up + row * up_stride;
    for (int64_t done = 0; done < count; done += kPiece) {
      const int64_t length = count - done < kPiece ? count - done : kPiece;
      const int64_t out_offset = row * out_stride + done;
      float* product = out_is_bf16 ? piece : static_cast<float*>(out) + out_offset;
      int64_t i = 0;
#if defined(__AVX512BF16__)
      // Whole vectors go to bf16 from the registers.
      for (; out_is_bf16 && i + simd::kWidth <= length; i += simd::kWidth) {
        store_bf16(simd::multiply(activation(simd::load(gate_row + done + i)),
                                  simd::load(up_row + done + i)),
                   static_cast<uint16_t*>(out) + out_offset + i);
      }
#endif
      const int64_t rounded_from = i;
      for (; i + simd::kWidth <= length; i += simd::kWidth) {
        simd::store(product + i, simd::multiply(activation(simd::load(gate_row + done + i)),
                                                simd::load(up_row + done + i)));
      }
      if (i < length) {  // The last values through zero-padded lanes.
        alignas(64) float gate_tail[simd::kWidth] = {};
        alignas(64) float up_tail[simd::kWidth] = {};
        std::memcpy(gate_tail, gate_row + done + i, (length - i) * sizeof(float));
        std::memcpy(up_tail, up_row + done + i, (length - i) * sizeof(float));
        simd::store(gate_tail,
                    simd::multiply(activation(simd::load(gate_tail)), simd::load(up_tail)));
        std::memcpy(product + i, gate_tail, (length - i) * sizeof(float));
      }
      if (out_is_bf16 && rounded_from < length) {
        // Qualified: the portable instance also sees cpu::round_to_bf16_run.
        fornace::cpu::FORNACE_KERNEL_NAMESPACE::round_to_bf16_run(
            product + rounded_from, static_cast<uint16_t*>(out) + out_offset + rounded_from,
            length - rounded_from);
      }
    }
  }
}

void gated_product_rows(GateActivation activation, const float* gate, int64_t gate_stride,
                        const float* up, int64_t up_stride, int64_t rows, int64_t count, void* out,
                        bool out_is_bf16, int64_t out_stride) {
  if (activation == GateActivation::silu) {
    gated_rows([](Vec x) { return silu(x); }, gate, gate_stride, up, up_stride, rows, count, out,
               out_is_bf16, out_stride);
  } else {
    gated_rows([](Vec x) { return gelu_tanh(x); }, gate, gate_stride, up, up_stride, rows, count,
               out, out_is_bf16, out_stride);
  }
}

}  // namespace

const ElementwiseKernels elementwise_kernels{
    binary_run, silu_run,         gelu_tanh_run,     soft_cap_run,
    scale_run,  softmax_row,      rms_norm_row,      rope_rows,
    argmax_row, weighted_row_sum, round_to_bf16_run, gated_product_rows, widen_f16_run};

}  // namespace fornace::cpu::FORNACE_KERNEL_NAMESPACE
