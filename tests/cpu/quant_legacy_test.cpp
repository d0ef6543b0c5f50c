// Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 on every ISA: decoding against the ggml format definition,
// llama.cpp's reference rounding, and both dot products against double-precision loops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/block_type.h"
#include "cpu/quant.h"
#include "cpu/quant_legacy_kernels.h"
#include "cpu/quant_test_support.h"

namespace fornace {
namespace {

using quant_test::f16_value;
using quant_test::supported_isas;

constexpr BlockType kLegacyTypes[] = {BlockType::q4_0, BlockType::q4_1, BlockType::q5_0,
                                      BlockType::q5_1, BlockType::q8_0};

std::string label(BlockType type, cpu::Isa isa) {
  return std::string(block_format(type).name) + " on " + cpu::isa_name(isa);
}

uint16_t read_u16(const uint8_t* bytes) { return static_cast<uint16_t>(bytes[0] | bytes[1] << 8); }
uint32_t read_u32(const uint8_t* bytes) {
  return static_cast<uint32_t>(bytes[0]) | static_cast<uint32_t>(bytes[1]) << 8 |
         static_cast<uint32_t>(bytes[2]) << 16 | static_cast<uint32_t>(bytes[3]) << 24;
}

// Straight from ggml-common.h's structs:
//   q4_0 {f16 d; u8 qs[16]}                   value (q - 8) * d
//   q4_1 {f16 d; f16 m; u8 qs[16]}            value q * d + m
//   q5_0 {f16 d; u8 qh[4]; u8 qs[16]}         value (q - 16) * d
//   q5_1 {f16 d; f16 m; u8 qh[4]; u8 qs[16]}  value q * d + m
//   q8_0 {f16 d; i8 qs[32]}                   value qs[j] * d
// where q of element j is the low half of qs[j] for j < 16, the high half of qs[j - 16]
// otherwise, and for q5 bit j of qh (little-endian) is its fifth bit.
bool has_min(BlockType type) { return type == BlockType::q4_1 || type == BlockType::q5_1; }
int bits_of(BlockType type) {
  if (type == BlockType::q8_0) return 8;
  return type == BlockType::q5_0 || type == BlockType::q5_1 ? 5 : 4;
}

int stored_q(BlockType type, const uint8_t* block, int j) {
  auto nibble = [&](const uint8_t* qs) { return j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4; };
  switch (type) {
    case BlockType::q4_0:
      return nibble(block + 2);
    case BlockType::q4_1:
      return nibble(block + 4);
    case BlockType::q5_0:
      return nibble(block + 6) | ((read_u32(block + 2) >> j) & 1) << 4;
    case BlockType::q5_1:
      return nibble(block + 8) | ((read_u32(block + 4) >> j) & 1) << 4;
    default:
      return static_cast<int8_t>(block[2 + j]);
  }
}

double element(BlockType type, const uint8_t* block, int j) {
  const double d = f16_value(read_u16(block));
  const int q = stored_q(type, block, j);
  switch (type) {
    case BlockType::q4_0:
      return (q - 8) * d;
    case BlockType::q5_0:
      return (q - 16) * d;
    case BlockType::q4_1:
    case BlockType::q5_1:
      return q * d + f16_value(read_u16(block + 2));
    default:
      return q * d;
  }
}

std::vector<double> naive_dequantize(BlockType type, const uint8_t* blocks, int64_t n) {
  const BlockFormat& format = block_format(type);
  std::vector<double> values(n);
  for (int64_t k = 0; k < n; ++k) {
    values[k] = element(type, blocks + k / 32 * format.block_bytes, static_cast<int>(k % 32));
  }
  return values;
}

// Random payloads (every nibble, bit and int8 value occurs) with f16 scales and mins from
// `fields`, in turn.
std::vector<uint8_t> blocks_with_fields(BlockType type, int64_t blocks,
                                        const std::vector<uint16_t>& fields, uint64_t seed) {
  const BlockFormat& format = block_format(type);
  std::vector<uint8_t> bytes = quant_test::random_bytes(blocks * format.block_bytes, seed);
  for (int64_t block = 0; block < blocks; ++block) {
    uint8_t* start = bytes.data() + block * format.block_bytes;
    uint16_t scale = fields[block % fields.size()];
    std::memcpy(start, &scale, 2);
    if (has_min(type)) {
      uint16_t min = fields[(block + 3) % fields.size()];
      std::memcpy(start + 2, &min, 2);
    }
  }
  return bytes;
}

// Scales in a range that keeps the dot products far from overflow.
const std::vector<uint16_t> kOrdinaryScales = {0x2e66 /* 0.1 */,   0xa8cd /* -0.0375 */,
                                               0x3000 /* 0.125 */, 0x1f00 /* 0.0069 */,
                                               0xb266 /* -0.2 */,  0x0000};

TEST(LegacyQuant, DequantizeRowFollowsTheFormatDefinition) {
  // Positive, negative, zero, negative zero, subnormal (smallest, largest, negative), the largest
  // finite and a plain value.
  const std::vector<uint16_t> fields = {0x3c00, 0xbc00, 0x0000, 0x8000, 0x0001,
                                        0x03ff, 0x8201, 0x7bff, 0x3555};
  for (BlockType type : kLegacyTypes) {
    constexpr int64_t kBlocks = 45;
    const int64_t n = kBlocks * 32;
    std::vector<uint8_t> blocks = blocks_with_fields(type, kBlocks, fields, 11);
    std::vector<double> expected = naive_dequantize(type, blocks.data(), n);
    for (cpu::Isa isa : supported_isas()) {
      std::vector<float> out(n);
      cpu::block_kernels(type, isa).dequantize_row(blocks.data(), out.data(), n);
      for (int64_t k = 0; k < n; ++k) {
        // Every value is exact in f32 (an f16 times a small integer, plus an f16 min rounded once).
        ASSERT_EQ(out[k], static_cast<float>(expected[k])) << label(type, isa) << " element " << k;
      }
    }
  }
}

struct HandBlock {
  BlockType type;
  std::vector<float> input;
  std::vector<uint8_t> bytes;
};

std::vector<float> ramp(float start, float step) {
  std::vector<float> values(32);
  for (int j = 0; j < 32; ++j) values[j] = start + step * static_cast<float>(j);
  return values;
}

std::vector<uint8_t> join(std::vector<uint8_t> head, const std::vector<uint8_t>& tail) {
  for (uint8_t byte : tail) head.push_back(byte);
  return head;
}

// Worked by hand from the rules in quantize_row_*_ref.
std::vector<HandBlock> hand_blocks() {
  std::vector<HandBlock> blocks;
  // x = j - 16: max magnitude 16 at x = -16, d = -16 / -8 = 2 (0x4000), x / d + 8.5 = j / 2 + 0.5
  // truncates to q = (j + 1) / 2, capped at 15; byte j = q[j] | q[j + 16] << 4.
  const std::vector<uint8_t> half_ramp = {0x80, 0x91, 0x91, 0xa2, 0xa2, 0xb3, 0xb3, 0xc4,
                                          0xc4, 0xd5, 0xd5, 0xe6, 0xe6, 0xf7, 0xf7, 0xf8};
  std::vector<uint8_t> bytes = join({0x00, 0x40}, half_ramp);
  blocks.push_back({BlockType::q4_0, ramp(-16, 1), bytes});
  // x = 16 - j: the largest magnitude is +16, so d = -2 (0xc000) and x / d = (j - 16) / 2: the
  // same nibbles.
  bytes[1] = 0xc0;
  blocks.push_back({BlockType::q4_0, ramp(16, -1), bytes});
  // +4 then -4: the first largest magnitude sets d = 4 / -8 = -0.5 (0xb800); q = 0, then
  // 8 + 8.5 -> 16 capped at 15, then 8 for the zeros.
  std::vector<float> tie(32, 0.0f);
  tie[0] = 4;
  tie[1] = -4;
  bytes = {0x00, 0xb8, 0x80, 0x8f};
  bytes.resize(18, 0x88);
  blocks.push_back({BlockType::q4_0, tie, bytes});
  // x = 2 + j / 2, with x[31] = 17: min 2, max 17, d = 15 / 15 = 1 (0x3c00), m = 2 (0x4000),
  // (x - 2) + 0.5 truncates to (j + 1) / 2, and 15 for the last two.
  std::vector<float> shifted = ramp(2, 0.5f);
  shifted[31] = 17;
  bytes = join({0x00, 0x3c, 0x00, 0x40}, half_ramp);
  blocks.push_back({BlockType::q4_1, shifted, bytes});
  // x = j - 16: d = -16 / -16 = 1, x + 16.5 truncates to q = j; byte j = j | j << 4 and the
  // fifth bits are set for j >= 16 (qh = 0xffff0000).
  std::vector<uint8_t> identity_nibbles;
  for (int j = 0; j < 16; ++j) identity_nibbles.push_back(static_cast<uint8_t>(j | j << 4));
  bytes = join({0x00, 0x3c, 0x00, 0x00, 0xff, 0xff}, identity_nibbles);
  blocks.push_back({BlockType::q5_0, ramp(-16, 1), bytes});
  // x = j: min 0, max 31, d = 1, m = 0, q = j.
  bytes = join({0x00, 0x3c, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff}, identity_nibbles);
  blocks.push_back({BlockType::q5_1, ramp(0, 1), bytes});
  // max |x| = 127: d = 1 (0x3c00); roundf rounds halves away from zero: 126.6 -> 127,
  // -0.5 -> -1, 0.5 -> 1, 1.5 -> 2, -2.5 -> -3, 3.49 -> 3; then x = j - 16 for j >= 8.
  std::vector<float> q8 = ramp(-16, 1);
  const float heads[] = {-127, 126.6f, 0.4f, -0.5f, 0.5f, 1.5f, -2.5f, 3.49f};
  std::copy(std::begin(heads), std::end(heads), q8.begin());
  bytes = {0x00, 0x3c, 0x81, 0x7f, 0x00, 0xff, 0x01, 0x02, 0xfd, 0x03};
  for (int j = 8; j < 32; ++j) bytes.push_back(static_cast<uint8_t>(j - 16));
  blocks.push_back({BlockType::q8_0, q8, bytes});
  return blocks;
}

TEST(LegacyQuant, QuantizeRowMatchesHandWorkedBlocks) {
  for (const HandBlock& hand : hand_blocks()) {
    for (cpu::Isa isa : supported_isas()) {
      std::vector<uint8_t> out(hand.bytes.size(), 0xaa);
      cpu::block_kernels(hand.type, isa).quantize_row(hand.input.data(), out.data(), 32);
      EXPECT_EQ(out, hand.bytes) << label(hand.type, isa);
    }
  }
}

// Rows of several shapes: ordinary, all equal, all zero, mostly negative, tiny and large.
std::vector<float> quantizer_input(int64_t blocks) {
  std::vector<float> x = quant_test::uniform(blocks * 32, -1.0f, 1.0f, 5);
  for (int64_t block = 0; block < blocks; ++block) {
    float* values = x.data() + block * 32;
    switch (block % 6) {
      case 1:
        std::fill(values, values + 32, 0.75f);
        break;
      case 2:
        std::fill(values, values + 32, 0.0f);
        break;
      case 3:
        for (int j = 0; j < 32; ++j) values[j] = values[j] * 0.3f - 2.0f;
        break;
      case 4:
        for (int j = 0; j < 32; ++j) values[j] *= 1e-3f;
        break;
      case 5:
        for (int j = 0; j < 32; ++j) values[j] *= 300.0f;
        break;
      default:
        break;
    }
  }
  return x;
}

// Round trip: each element within half a step (|d|/2) of its input, plus what rounding d and m
// to f16 moves (2^-11 relative or 2^-25 absolute, times |q| <= 2^bits); an element truncated at the
// top level (q = 2^bits - 1: Q4_0 and Q5_0 map -max / d to 2^bits, and cap it) is within one step.
TEST(LegacyQuant, QuantizeRowRoundTripsWithinHalfAStep) {
  constexpr int64_t kBlocks = 60;
  const std::vector<float> x = quantizer_input(kBlocks);
  for (BlockType type : kLegacyTypes) {
    const BlockFormat& format = block_format(type);
    const cpu::BlockKernels& kernels = cpu::block_kernels(type, cpu::Isa::portable);
    std::vector<uint8_t> blocks(kBlocks * format.block_bytes);
    kernels.quantize_row(x.data(), blocks.data(), kBlocks * 32);
    std::vector<double> decoded = naive_dequantize(type, blocks.data(), kBlocks * 32);
    const int bits = bits_of(type);
    for (int64_t block = 0; block < kBlocks; ++block) {
      const uint8_t* start = blocks.data() + block * format.block_bytes;
      const double step = std::fabs(f16_value(read_u16(start)));
      const double min = has_min(type) ? std::fabs(f16_value(read_u16(start + 2))) : 0.0;
      // f16 rounding: 2^-11 relative, or 2^-25 absolute where the value is subnormal.
      auto f16_error = [](double value) {
        return std::max(std::ldexp(value, -11), std::ldexp(1.0, -25));
      };
      const double f16_slack =
          std::ldexp(f16_error(step), bits) + (has_min(type) ? f16_error(min) : 0.0);
      for (int j = 0; j < 32; ++j) {
        const int64_t k = block * 32 + j;
        const bool capped =
            !has_min(type) && bits < 8 && stored_q(type, start, j) == (1 << bits) - 1;
        const double allowed =
            (capped ? 1.0 : 0.5) * step * (1 + 1e-6) + f16_slack + 1e-7 * std::fabs(x[k]);
        ASSERT_LE(std::fabs(decoded[k] - x[k]), allowed)
            << format.name << " block " << block << " element " << j << ": " << x[k] << " -> "
            << decoded[k];
      }
    }
  }
}

TEST(LegacyQuant, QuantizeGivesTheSameBytesOnEveryIsa) {
  constexpr int64_t kBlocks = 37;
  const std::vector<float> x = quantizer_input(kBlocks);
  for (BlockType type : kLegacyTypes) {
    std::vector<std::vector<uint8_t>> weights;
    std::vector<std::vector<uint8_t>> activations;
    for (cpu::Isa isa : supported_isas()) {
      const cpu::BlockKernels& kernels = cpu::block_kernels(type, isa);
      weights.emplace_back(block_row_bytes(type, kBlocks * 32));
      kernels.quantize_row(x.data(), weights.back().data(), kBlocks * 32);
      activations.emplace_back(kernels.activation_row_bytes(kBlocks * 32), 0xaa);
      kernels.quantize_activations(x.data(), activations.back().data(), kBlocks * 32);
    }
    for (size_t index = 1; index < weights.size(); ++index) {
      EXPECT_EQ(weights[index], weights[0]) << label(type, supported_isas()[index]);
      EXPECT_EQ(activations[index], activations[0]) << label(type, supported_isas()[index]);
    }
  }
}

// The activation values the integer kernels multiply: q x the block's scale, read from the
// documented layout (cpu/quant_legacy_kernels.h).
std::vector<double> activation_values(const void* row, int64_t n) {
  std::vector<double> values(n);
  for (int64_t k = 0; k < n; ++k) {
    cpu::legacy::ActivationBlock block = cpu::legacy::activation_block(row, k / 32);
    const int j = static_cast<int>(k % 32);
    values[k] = static_cast<double>(j < 16 ? block.low[j] : block.high[j - 16]) * block.scale[0];
  }
  return values;
}

struct DotShape {
  int64_t rows;
  int64_t columns;
  int64_t n;
};
// From 32 rows of one column, decode on Intel (and on Zen 4 with AVX2) reads 4 rows a pass, a
// quarter of the rows apart (streams_rows), and the rest one by one.
constexpr DotShape kDotShapes[] = {{1, 1, 32},  {3, 2, 64},   {4, 4, 96},   {5, 3, 896},
                                   {9, 4, 160}, {2, 1, 4864}, {7, 4, 1024}, {4, 1, 32},
                                   {3, 1, 416}, {32, 1, 64},  {35, 1, 896}, {131, 1, 32}};

// out[c * stride + r] for each shape; positions between the rows stay untouched (NaN).
TEST(LegacyQuant, DotRowsMatchDoubleLoops) {
  for (BlockType type : kLegacyTypes) {
    const BlockFormat& format = block_format(type);
    for (const DotShape& shape : kDotShapes) {
      const size_t row_bytes = block_row_bytes(type, shape.n) + 6;  // rows need not be packed
      std::vector<uint8_t> weights = blocks_with_fields(type, shape.rows * shape.n / 32,
                                                        kOrdinaryScales, shape.n + shape.rows);
      std::vector<uint8_t> strided(row_bytes * shape.rows);
      for (int64_t row = 0; row < shape.rows; ++row) {
        std::memcpy(strided.data() + row * row_bytes,
                    weights.data() + row * block_row_bytes(type, shape.n),
                    block_row_bytes(type, shape.n));
      }
      const int64_t x_stride = shape.n + 16;
      std::vector<float> x = quant_test::uniform(shape.columns * x_stride, -2.0f, 2.0f, shape.n);
      for (cpu::Isa isa : supported_isas()) {
        const cpu::BlockKernels& kernels = cpu::block_kernels(type, isa);
        const size_t activation_bytes = kernels.activation_row_bytes(shape.n);
        std::vector<uint8_t> activations(shape.columns * activation_bytes);
        for (int64_t column = 0; column < shape.columns; ++column) {
          kernels.quantize_activations(x.data() + column * x_stride,
                                       activations.data() + column * activation_bytes, shape.n);
        }
        const int64_t out_stride = shape.rows + 3;
        std::vector<float> out(shape.columns * out_stride, NAN);
        std::vector<float> out_f32(shape.columns * out_stride, NAN);
        kernels.dot_rows(strided.data(), row_bytes, shape.rows, activations.data(),
                         activation_bytes, shape.columns, shape.n, out.data(), out_stride);
        kernels.dot_rows_f32(strided.data(), row_bytes, shape.rows, x.data(), x_stride,
                             shape.columns, shape.n, out_f32.data(), out_stride);
        for (int64_t row = 0; row < shape.rows; ++row) {
          std::vector<double> w = naive_dequantize(type, strided.data() + row * row_bytes, shape.n);
          for (int64_t column = 0; column < shape.columns; ++column) {
            const float* x_row = x.data() + column * x_stride;
            std::vector<double> a =
                activation_values(activations.data() + column * activation_bytes, shape.n);
            double exact_rounded = 0, exact = 0, magnitude_rounded = 0, magnitude = 0;
            for (int64_t k = 0; k < shape.n; ++k) {
              exact_rounded += w[k] * a[k];
              magnitude_rounded += std::fabs(w[k] * a[k]);
              exact += w[k] * x_row[k];
              magnitude += std::fabs(w[k] * x_row[k]);
            }
            const std::string where = label(type, isa) + ", " + std::to_string(shape.rows) + "x" +
                                      std::to_string(shape.n) + ", row " + std::to_string(row) +
                                      ", column " + std::to_string(column);
            const float got = out[column * out_stride + row];
            const float got_f32 = out_f32[column * out_stride + row];
            // f32 accumulation of exactly representable products: relative to sum |w a|.
            EXPECT_NEAR(got, exact_rounded, 2e-6 * magnitude_rounded + 1e-30) << where;
            EXPECT_NEAR(got_f32, exact, 2e-6 * magnitude + 1e-30) << where;
            // What 8-bit activations add against f32 ones.
            EXPECT_LE(std::fabs(got - exact), quant_test::activation_rounding_bound(
                                                  w.data(), x_row, shape.n, format.block_elements) +
                                                  2e-6 * magnitude_rounded)
                << where;
          }
        }
        for (int64_t column = 0; column < shape.columns; ++column) {
          for (int64_t gap = shape.rows; gap < out_stride; ++gap) {
            EXPECT_TRUE(std::isnan(out[column * out_stride + gap])) << label(type, isa);
            EXPECT_TRUE(std::isnan(out_f32[column * out_stride + gap])) << label(type, isa);
          }
        }
      }
    }
  }
}

// Quads interleaved for decode (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): dot_rows on them gives
// exactly what the stored blocks give, for every column count and rows one by one or four at a
// time; dequantize_row and the bf16 widening give the stored rows' values.
TEST(LegacyQuant, InterleavedKernelsGiveExactlyWhatTheStoredBlocksGive) {
  if (!cpu::has_interleaved_kernels(BlockType::q5_0, 128, cpu::detected_isa())) {
    GTEST_SKIP() << "no interleaved kernels on " << cpu::isa_name(cpu::detected_isa());
  }
  EXPECT_FALSE(cpu::has_interleaved_kernels(BlockType::q4_k, 256, cpu::Isa::avx512));
  EXPECT_FALSE(cpu::has_interleaved_kernels(BlockType::q4_0, 128, cpu::Isa::portable));
  // One arrangement serves every ISA that has interleaved kernels (AVX-512 and AVX2).
  for (cpu::Isa isa : supported_isas()) {
    if (!cpu::has_interleaved_kernels(BlockType::q5_0, 128, isa)) continue;
    for (BlockType type : kLegacyTypes) {
      const cpu::BlockKernels& stored_kernels = cpu::block_kernels(type, isa);
      const cpu::BlockKernels& kernels = cpu::interleaved_block_kernels(type, isa);
      EXPECT_EQ(kernels.dot_rows_f32, nullptr);
      for (const DotShape& shape :
           {DotShape{1, 1, 128}, DotShape{5, 3, 896}, DotShape{2, 6, 4864}, DotShape{9, 4, 256},
            DotShape{4, 2, 384}, DotShape{37, 1, 256}}) {
        const size_t row_bytes = block_row_bytes(type, shape.n);
        std::vector<uint8_t> weights = blocks_with_fields(type, shape.rows * shape.n / 32,
                                                          kOrdinaryScales, shape.n + shape.rows);
        std::vector<uint8_t> interleaved(weights.size());
        cpu::interleave_rows(type, weights.data(), interleaved.data(), shape.rows, shape.n);
        const std::vector<float> x =
            quant_test::uniform(shape.columns * shape.n, -2.0f, 2.0f, shape.n);
        const size_t activation_bytes = kernels.activation_row_bytes(shape.n);
        std::vector<uint8_t> activations(shape.columns * activation_bytes);
        for (int64_t column = 0; column < shape.columns; ++column) {
          kernels.quantize_activations(x.data() + column * shape.n,
                                       activations.data() + column * activation_bytes, shape.n);
        }
        std::vector<float> expected(shape.columns * shape.rows);
        std::vector<float> got(shape.columns * shape.rows);
        stored_kernels.dot_rows(weights.data(), row_bytes, shape.rows, activations.data(),
                                activation_bytes, shape.columns, shape.n, expected.data(),
                                shape.rows);
        kernels.dot_rows(interleaved.data(), row_bytes, shape.rows, activations.data(),
                         activation_bytes, shape.columns, shape.n, got.data(), shape.rows);
        const std::string where = label(type, isa) + ", " + std::to_string(shape.rows) + "x" +
                                  std::to_string(shape.n) + ", " + std::to_string(shape.columns) +
                                  " columns";
        EXPECT_EQ(0, std::memcmp(got.data(), expected.data(), got.size() * sizeof(float))) << where;
        for (int64_t row = 0; row < shape.rows; ++row) {
          std::vector<float> stored_values(shape.n), values(shape.n);
          stored_kernels.dequantize_row(weights.data() + row * row_bytes, stored_values.data(),
                                        shape.n);
          kernels.dequantize_row(interleaved.data() + row * row_bytes, values.data(), shape.n);
          EXPECT_EQ(values, stored_values) << where << ", row " << row;
          ASSERT_EQ(kernels.widen_row_bf16 == nullptr, stored_kernels.widen_row_bf16 == nullptr);
          if (kernels.widen_row_bf16 == nullptr) continue;
          std::vector<uint16_t> stored_bf16(shape.n), bf16(shape.n);
          stored_kernels.widen_row_bf16(weights.data() + row * row_bytes, stored_bf16.data(),
                                        shape.n);
          kernels.widen_row_bf16(interleaved.data() + row * row_bytes, bf16.data(), shape.n);
          EXPECT_EQ(bf16, stored_bf16) << where << ", row " << row;
        }
      }
    }
  }
}

// Activation rounding: q = x / scale to nearest even, scale = max|x| / 127 per block, and the
// correction lane follows the layout's definition; blocks padding the last quad are zero.
TEST(LegacyQuant, QuantizeActivationsFollowsTheLayout) {
  constexpr int64_t kBlocks = 5;
  std::vector<float> x = quant_test::uniform(kBlocks * 32, -3.0f, 3.0f, 21);
  x[40] = 5.0f;                               // block 1's largest magnitude
  for (int j = 64; j < 96; ++j) x[j] = 0.0f;  // block 2: all zero
  for (BlockType type : kLegacyTypes) {
    for (cpu::Isa isa : supported_isas()) {
      const cpu::BlockKernels& kernels = cpu::block_kernels(type, isa);
      ASSERT_EQ(kernels.activation_row_bytes(kBlocks * 32),
                2 * sizeof(cpu::legacy::ActivationQuad));
      std::vector<uint8_t> row(kernels.activation_row_bytes(kBlocks * 32), 0xaa);
      kernels.quantize_activations(x.data(), row.data(), kBlocks * 32);
      for (int64_t block = 0; block < 8; ++block) {
        cpu::legacy::ActivationBlock got = cpu::legacy::activation_block(row.data(), block);
        float max_magnitude = 0;
        int sum = 0;
        for (int j = 0; j < 32 && block < kBlocks; ++j) {
          max_magnitude = std::max(max_magnitude, std::fabs(x[block * 32 + j]));
        }
        const float scale = max_magnitude / 127.0f;
        for (int j = 0; j < 32; ++j) {
          const int expected =
              block < kBlocks && scale > 0
                  ? static_cast<int>(std::nearbyint(x[block * 32 + j] * (1.0f / scale)))
                  : 0;
          ASSERT_EQ(j < 16 ? got.low[j] : got.high[j - 16], expected)
              << label(type, isa) << " block " << block;
          sum += expected;
        }
        for (int lane = 0; lane < 4; ++lane) EXPECT_EQ(got.scale[lane], scale);
        for (int lane = 1; lane < 4; ++lane) EXPECT_EQ(got.correction[lane], 0);
        if (has_min(type)) {
          float share;
          std::memcpy(&share, got.correction, sizeof share);
          EXPECT_EQ(share, scale * static_cast<float>(sum)) << label(type, isa);
        } else {
          const int offset = type == BlockType::q4_0 ? 8 : type == BlockType::q5_0 ? 16 : 128;
          EXPECT_EQ(got.correction[0], -offset * sum) << label(type, isa);
        }
      }
    }
  }
}

}  // namespace
}  // namespace fornace
