// Q4_K, Q5_K and Q6_K kernels on every ISA this CPU has, against decoders written here from the
// format definitions, hashes of llama.cpp's reference quantizer output, and double-precision dots.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/block_type.h"
#include "core/dtype.h"
#include "cpu/cpu_features.h"
#include "cpu/quant.h"
#include "cpu/quant_k_blocks.h"

namespace fornace {
namespace {

using cpu::Isa;
using cpu::kquant::ActivationBlock;

constexpr BlockType kTypes[] = {BlockType::q4_k, BlockType::q5_k, BlockType::q6_k};
constexpr int64_t kBlock = 256;

std::vector<Isa> supported_isas() {
  std::vector<Isa> isas{Isa::portable};
  if (cpu::detected_isa() >= Isa::avx2) isas.push_back(Isa::avx2);
  if (cpu::detected_isa() >= Isa::avx512) isas.push_back(Isa::avx512);
  return isas;
}

std::string label(BlockType type, Isa isa) {
  return std::string(block_format(type).name) + " on " + cpu::isa_name(isa);
}

// ---- Decoding, written from ggml's format definitions ------------------------------------------

// One element as its two terms: value = scale_term - min_term.
struct Element {
  double scale_term;
  double min_term;
  double value() const { return scale_term - min_term; }
  double magnitude() const { return std::fabs(scale_term) + std::fabs(min_term); }
};

double half_at(const uint8_t* bytes) {
  uint16_t bits;
  std::memcpy(&bits, bytes, 2);
  return f16_to_f32(bits);
}

// get_scale_min_k4: sub-blocks 0-3 in the low 6 bits of bytes j (scale) and j + 4 (min);
// sub-blocks 4-7 take 4 bits from byte j + 4 and their top 2 bits from bytes j - 4 and j.
void scale_and_min(const uint8_t* packed, int j, int& scale, int& min) {
  if (j < 4) {
    scale = packed[j] & 63;
    min = packed[j + 4] & 63;
  } else {
    scale = (packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4);
    min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

// Q4_K: d, dmin, scales[12], qs[128]; Q5_K inserts qh[32] before qs.
Element decode_scaled_min(const uint8_t* block, bool five_bits, int e) {
  const uint8_t* scales = block + 4;
  const uint8_t* qh = block + 16;
  const uint8_t* qs = block + (five_bits ? 48 : 16);
  const int group = e / 64, within = e % 64;
  const uint8_t byte = qs[32 * group + within % 32];
  int level = within < 32 ? (byte & 0xF) : (byte >> 4);
  if (five_bits && ((qh[within % 32] >> (2 * group + within / 32)) & 1)) level += 16;
  int scale, min;
  scale_and_min(scales, e / 32, scale, min);
  return {half_at(block) * scale * level, half_at(block + 2) * min};
}

// Q6_K: ql[128], qh[64], int8 scales[16], d.
Element decode_q6(const uint8_t* block, int e) {
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  const auto* scales = reinterpret_cast<const int8_t*>(block + 192);
  const int half = e / 128, quarter = (e % 128) / 32, l = e % 32;
  const uint8_t low_byte = ql[64 * half + 32 * (quarter % 2) + l];
  const int low = quarter < 2 ? (low_byte & 0xF) : (low_byte >> 4);
  const int high = (qh[32 * half + l] >> (2 * quarter)) & 3;
  const double scale = half_at(block + 208) * scales[e / 16];
  return {scale * ((low | (high << 4)) - 32), 0.0};
}

std::vector<Element> decode_row(BlockType type, const void* row, int64_t n) {
  const size_t block_bytes = block_format(type).block_bytes;
  std::vector<Element> elements(n);
  for (int64_t i = 0; i < n; ++i) {
    const auto* block = static_cast<const uint8_t*>(row) + (i / kBlock) * block_bytes;
    const int e = static_cast<int>(i % kBlock);
    elements[i] = type == BlockType::q6_k ? decode_q6(block, e)
                                          : decode_scaled_min(block, type == BlockType::q5_k, e);
  }
  return elements;
}

// ---- Inputs ----------------------------------------------------------------------------------

// Random bytes with sane f16 d and dmin: every bit pattern of scales, mins and levels.
std::vector<uint8_t> random_blocks(BlockType type, int64_t rows, int64_t n, uint32_t seed) {
  const size_t block_bytes = block_format(type).block_bytes;
  std::vector<uint8_t> bytes(rows * block_row_bytes(type, n));
  std::mt19937 generator(seed);
  for (uint8_t& byte : bytes) byte = static_cast<uint8_t>(generator());
  std::uniform_real_distribution<float> magnitude(0.0005f, 0.02f);
  for (size_t offset = 0; offset < bytes.size(); offset += block_bytes) {
    const uint16_t d = f32_to_f16(magnitude(generator));
    const uint16_t dmin = f32_to_f16(magnitude(generator));
    if (type == BlockType::q6_k) {
      std::memcpy(&bytes[offset + 208], &d, 2);
    } else {
      std::memcpy(&bytes[offset], &d, 2);
      std::memcpy(&bytes[offset + 2], &dmin, 2);
    }
  }
  return bytes;
}

// Normal values whose spread changes from block to block, one block of zeros.
std::vector<float> random_activations(int64_t count, uint32_t seed) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> values(count);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t block = i / kBlock;
    values[i] =
        block == 2 ? 0.f : normal(generator) * std::ldexp(1.f, static_cast<int>(block % 5) - 2);
  }
  return values;
}

// Deterministic rows with negative-only, wide, zero sub-blocks and outliers (exact floats, so
// llama.cpp's quantize_row_*_ref hashed the same input).
std::vector<float> golden_row(int64_t n, uint32_t seed) {
  std::vector<float> row(n);
  uint32_t state = seed;
  for (int64_t i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    const int32_t centered = static_cast<int32_t>(state >> 8) - (1 << 23);
    float value = static_cast<float>(centered) * 0x1p-26f;
    const int64_t sub_block = i / 32;
    if (sub_block % 5 == 1) value = value < 0 ? value : -value;
    if (sub_block % 7 == 3) value *= 16.f;
    if (sub_block % 11 == 5) value = 0.f;
    if (i % 211 == 17) value = 1.5f;
    row[i] = value;
  }
  return row;
}

uint64_t fnv1a(const std::vector<uint8_t>& bytes) {
  uint64_t hash = 1469598103934665603ull;
  for (uint8_t byte : bytes) hash = (hash ^ byte) * 1099511628211ull;
  return hash;
}

// ---- dequantize_row --------------------------------------------------------------------------

// Packs 6-bit scale/min of sub-block j the way the format defines (independent of the code).
void pack_scale_and_min(uint8_t* packed, int j, int scale, int min) {
  if (j < 4) {
    packed[j] = static_cast<uint8_t>((packed[j] & 0xC0) | scale);
    packed[j + 4] = static_cast<uint8_t>((packed[j + 4] & 0xC0) | min);
  } else {
    packed[j + 4] = static_cast<uint8_t>((scale & 0xF) | ((min & 0xF) << 4));
    packed[j - 4] = static_cast<uint8_t>((packed[j - 4] & 0x3F) | ((scale >> 4) << 6));
    packed[j] = static_cast<uint8_t>((packed[j] & 0x3F) | ((min >> 4) << 6));
  }
}

// A Q4_K/Q5_K block whose only non-zero scale and min are sub-block `only`'s, both with their top
// bits set, and level(e) = e % levels; checks every element against d*scale*level - dmin*min.
void check_single_sub_block(BlockType type, Isa isa, int only) {
  const bool five_bits = type == BlockType::q5_k;
  const int levels = five_bits ? 32 : 16;
  std::vector<uint8_t> block(block_format(type).block_bytes, 0);
  const uint16_t d = f32_to_f16(0.25f), dmin = f32_to_f16(0.5f);
  std::memcpy(&block[0], &d, 2);
  std::memcpy(&block[2], &dmin, 2);
  const int scale = 53, min = 46;  // 0b110101, 0b101110
  pack_scale_and_min(&block[4], only, scale, min);
  uint8_t* qh = &block[16];
  uint8_t* qs = &block[five_bits ? 48 : 16];
  for (int e = 0; e < kBlock; ++e) {
    const int level = (e * 7 + 3) % levels;
    const int group = e / 64, within = e % 64;
    qs[32 * group + within % 32] |= static_cast<uint8_t>((level & 0xF) << (within < 32 ? 0 : 4));
    if (level >= 16) qh[within % 32] |= static_cast<uint8_t>(1 << (2 * group + within / 32));
  }
  std::vector<float> out(kBlock);
  cpu::block_kernels(type, isa).dequantize_row(block.data(), out.data(), kBlock);
  for (int e = 0; e < kBlock; ++e) {
    const int level = (e * 7 + 3) % levels;
    const float expected = e / 32 == only ? 0.25f * scale * level - 0.5f * min : 0.f;
    ASSERT_EQ(out[e], expected) << label(type, isa) << " sub-block " << only << " element " << e;
  }
}

TEST(KQuantDequantize, EachScaleAndMinOfQ4KAndQ5KLandsInItsSubBlock) {
  for (Isa isa : supported_isas()) {
    for (BlockType type : {BlockType::q4_k, BlockType::q5_k}) {
      for (int only = 0; only < 8; ++only) check_single_sub_block(type, isa, only);
    }
  }
}

TEST(KQuantDequantize, Q6KScalesOffsetAndBitPlanes) {
  std::vector<uint8_t> block(210, 0);
  int levels[kBlock];
  for (int e = 0; e < kBlock; ++e) levels[e] = (e * 37 + 11) % 64;
  for (int e = 0; e < kBlock; ++e) {
    const int half = e / 128, quarter = (e % 128) / 32, l = e % 32;
    block[64 * half + 32 * (quarter % 2) + l] |=
        static_cast<uint8_t>((levels[e] & 0xF) << (quarter < 2 ? 0 : 4));
    block[128 + 32 * half + l] |= static_cast<uint8_t>((levels[e] >> 4) << (2 * quarter));
  }
  const int8_t scales[16] = {1, -2, 3, -4, 127, -128, 7, 8, -9, 10, 11, -12, 13, 0, -15, 16};
  std::memcpy(&block[192], scales, 16);
  const uint16_t d = f32_to_f16(0.125f);
  std::memcpy(&block[208], &d, 2);
  for (Isa isa : supported_isas()) {
    std::vector<float> out(kBlock);
    cpu::block_kernels(BlockType::q6_k, isa).dequantize_row(block.data(), out.data(), kBlock);
    for (int e = 0; e < kBlock; ++e) {
      ASSERT_EQ(out[e], 0.125f * scales[e / 16] * (levels[e] - 32))
          << cpu::isa_name(isa) << " " << e;
    }
  }
}

TEST(KQuantDequantize, RandomBlocksMatchTheFormatDefinition) {
  for (Isa isa : supported_isas()) {
    for (BlockType type : kTypes) {
      const int64_t n = 19 * kBlock;
      const std::vector<uint8_t> row = random_blocks(type, 1, n, 7);
      const std::vector<Element> expected = decode_row(type, row.data(), n);
      std::vector<float> out(n);
      cpu::block_kernels(type, isa).dequantize_row(row.data(), out.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_NEAR(out[i], expected[i].value(), 1e-6 * expected[i].magnitude())
            << label(type, isa) << " element " << i;
      }
    }
  }
}

// ---- quantize_row ----------------------------------------------------------------------------

TEST(KQuantQuantize, BytesMatchLlamaCppReferenceQuantizer) {
  // FNV-1a of quantize_row_q{4,5,6}_K_ref's output (llama.cpp's libggml-base) for golden_row().
  struct Golden {
    BlockType type;
    uint32_t seed;
    uint64_t hash;
  };
  const Golden goldens[] = {
      {BlockType::q4_k, 1, 0xbc35fddddf0f38d4ull}, {BlockType::q4_k, 2, 0x36680ff169e9e2caull},
      {BlockType::q5_k, 1, 0x0c9a1cf5153b55c9ull}, {BlockType::q5_k, 2, 0x7966411a516c2ad8ull},
      {BlockType::q6_k, 1, 0x91722ece8e2e4bffull}, {BlockType::q6_k, 2, 0x327c239397cfc976ull},
  };
  const int64_t n = 19 * kBlock;
  for (Isa isa : supported_isas()) {
    for (const Golden& golden : goldens) {
      const std::vector<float> row = golden_row(n, golden.seed);
      std::vector<uint8_t> bytes(block_row_bytes(golden.type, n));
      cpu::block_kernels(golden.type, isa).quantize_row(row.data(), bytes.data(), n);
      EXPECT_EQ(fnv1a(bytes), golden.hash) << label(golden.type, isa) << " seed " << golden.seed;
    }
  }
}

// The worst error the reference quantizer leaves per element: one step of the block's range for
// Q4_K/Q5_K (zero included, as the min is never above 0); for Q6_K two steps of its largest
// magnitude (its x^2-weighted fit may clip a sub-block's largest value of the other sign).
double error_bound(BlockType type, const float* block) {
  double low = 0, high = 0, magnitude = 0;
  for (int i = 0; i < kBlock; ++i) {
    low = std::min<double>(low, block[i]);
    high = std::max<double>(high, block[i]);
    magnitude = std::max<double>(magnitude, std::fabs(block[i]));
  }
  switch (type) {
    case BlockType::q4_k:
      return (high - low) / 15;
    case BlockType::q5_k:
      return (high - low) / 31;
    default:
      return magnitude / 16;
  }
}

void check_round_trip(BlockType type, const std::vector<float>& row, const std::string& what) {
  const int64_t n = static_cast<int64_t>(row.size());
  std::vector<uint8_t> reference;
  for (Isa isa : supported_isas()) {
    const cpu::BlockKernels& kernels = cpu::block_kernels(type, isa);
    std::vector<uint8_t> bytes(block_row_bytes(type, n));
    kernels.quantize_row(row.data(), bytes.data(), n);
    if (reference.empty()) reference = bytes;
    EXPECT_EQ(bytes, reference) << label(type, isa) << " " << what << ": bytes differ across ISAs";
    const std::vector<Element> decoded = decode_row(type, bytes.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double bound = error_bound(type, row.data() + (i / kBlock) * kBlock) * 1.0001;
      ASSERT_LE(std::fabs(decoded[i].value() - row[i]), bound)
          << label(type, isa) << " " << what << " element " << i << " of " << row[i];
    }
  }
}

TEST(KQuantQuantize, RoundTripWithinTheFormatsStepOnEveryIsa) {
  std::mt19937 generator(3);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (BlockType type : kTypes) {
    for (int64_t n : {kBlock, 2 * kBlock, 19 * kBlock}) {
      std::vector<float> gaussian(n), outlier(n, 0.f), negative(n), shifted(n);
      for (int64_t i = 0; i < n; ++i) {
        gaussian[i] = normal(generator) * 0.02f;
        outlier[i] = normal(generator) * 0.001f;
        negative[i] = -std::fabs(normal(generator)) - 0.5f;
        shifted[i] = normal(generator) + 3.f;
      }
      outlier[n / 3] = 2.5f;
      check_round_trip(type, gaussian, "gaussian");
      check_round_trip(type, outlier, "one outlier");
      check_round_trip(type, negative, "negative only");
      check_round_trip(type, shifted, "positive offset");
      check_round_trip(type, std::vector<float>(n, 0.37f), "constant");
      check_round_trip(type, std::vector<float>(n, -1.25f), "negative constant");
      check_round_trip(type, golden_row(n, 9), "mixed sub-blocks");
    }
  }
}

TEST(KQuantQuantize, ZerosStayExactlyZero) {
  for (Isa isa : supported_isas()) {
    for (BlockType type : kTypes) {
      const int64_t n = 2 * kBlock;
      const std::vector<float> zeros(n, 0.f);
      std::vector<uint8_t> bytes(block_row_bytes(type, n), 0xAB);
      const cpu::BlockKernels& kernels = cpu::block_kernels(type, isa);
      kernels.quantize_row(zeros.data(), bytes.data(), n);
      std::vector<float> out(n, 1.f);
      kernels.dequantize_row(bytes.data(), out.data(), n);
      for (float value : out) ASSERT_EQ(value, 0.f) << label(type, isa);
    }
  }
}

// ---- Activations -----------------------------------------------------------------------------

TEST(KQuantActivations, RoundedToInt8WithinHalfAStepAndSummed) {
  const int64_t n = 19 * kBlock;
  const std::vector<float> values = random_activations(n, 11);
  for (Isa isa : supported_isas()) {
    const cpu::BlockKernels& kernels = cpu::block_kernels(BlockType::q4_k, isa);
    ASSERT_EQ(kernels.activation_row_bytes(n), 19 * sizeof(ActivationBlock));
    std::vector<ActivationBlock> blocks(19);
    kernels.quantize_activations(values.data(), blocks.data(), n);
    for (int64_t b = 0; b < 19; ++b) {
      const ActivationBlock& block = blocks[b];
      float amax = 0;
      for (int i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(values[b * kBlock + i]));
      EXPECT_FLOAT_EQ(block.scale, amax / 127) << b;
      for (int j = 0; j < 16; ++j) {
        int sum16 = 0;
        for (int i = 16 * j; i < 16 * j + 16; ++i) {
          ASSERT_LE(std::abs(block.q[i]), 127);
          ASSERT_LE(std::fabs(block.scale * block.q[i] - values[b * kBlock + i]),
                    block.scale * 0.5001f)
              << "block " << b << " element " << i;
          sum16 += block.q[i];
        }
        EXPECT_EQ(block.sums16[j], sum16);
        if (j % 2 == 1) EXPECT_EQ(block.sums32[j / 2], block.sums16[j - 1] + block.sums16[j]);
      }
    }
  }
}

// Every ISA's rounding gives the portable bytes, and ties go to even (std::nearbyint): a block
// whose largest magnitude is 127 (scale 1) holds k + 0.5 for k in [-64, 63].
TEST(KQuantActivations, EveryIsaRoundsTiesToEvenAsThePortableCode) {
  const int64_t n = 7 * kBlock;
  std::vector<float> values = random_activations(n, 23);
  float* ties = values.data() + 3 * kBlock;
  ties[0] = 127.f;
  for (int i = 1; i < kBlock; ++i) ties[i] = static_cast<float>(i % 128 - 64) + 0.5f;
  const cpu::BlockKernels& portable = cpu::block_kernels(BlockType::q4_k, Isa::portable);
  std::vector<ActivationBlock> expected(7);
  portable.quantize_activations(values.data(), expected.data(), n);
  for (int i = 0; i < kBlock; ++i) {
    ASSERT_EQ(expected[3].q[i], static_cast<int>(std::nearbyint(ties[i]))) << i;
  }
  for (Isa isa : supported_isas()) {
    for (BlockType type : kTypes) {
      std::vector<ActivationBlock> blocks(7);
      cpu::block_kernels(type, isa).quantize_activations(values.data(), blocks.data(), n);
      for (int64_t b = 0; b < 7; ++b) {
        EXPECT_EQ(std::memcmp(&blocks[b], &expected[b], sizeof(ActivationBlock)), 0)
            << cpu::isa_name(isa) << " " << block_format(type).name << " block " << b;
      }
    }
  }
}

// ---- dot_rows and dot_rows_f32 ---------------------------------------------------------------

struct DotCase {
  BlockType type;
  int64_t n;
  int64_t rows;
  int64_t columns;
};

// Both dot kernels against double-precision sums over the decoded weights. dot_rows_f32 within
// 2e-6 of sum |terms| (f32 accumulation); dot_rows within the same of the decoded activations,
// and from the f32 activations within the bound int8 rounding allows: per block,
// (activation scale / 2) * sum |w| (+ the f32 accumulation).
void check_dots(const DotCase& test, Isa isa) {
  const int64_t n = test.n, rows = test.rows, columns = test.columns;
  const std::string what = label(test.type, isa) + " n=" + std::to_string(n) +
                           " rows=" + std::to_string(rows) + " columns=" + std::to_string(columns);
  const cpu::BlockKernels& kernels = cpu::block_kernels(test.type, isa);
  const size_t weight_row_bytes = block_row_bytes(test.type, n);
  const std::vector<uint8_t> weights = random_blocks(test.type, rows, n, 100 + rows);
  std::vector<std::vector<Element>> decoded;
  for (int64_t r = 0; r < rows; ++r) {
    decoded.push_back(decode_row(test.type, weights.data() + r * weight_row_bytes, n));
  }
  const int64_t activation_stride = n + 16;  // Rows apart by more than their length.
  const std::vector<float> activations =
      random_activations(columns * activation_stride, 40 + columns);
  const size_t activation_row_bytes = kernels.activation_row_bytes(n) + sizeof(ActivationBlock);
  std::vector<uint8_t> rounded(columns * activation_row_bytes);
  for (int64_t c = 0; c < columns; ++c) {
    kernels.quantize_activations(activations.data() + c * activation_stride,
                                 rounded.data() + c * activation_row_bytes, n);
  }
  const int64_t out_stride = rows + 3;
  const float kUntouched = -12345.f;
  std::vector<float> out(columns * out_stride, kUntouched),
      out_f32(columns * out_stride, kUntouched);
  kernels.dot_rows(weights.data(), weight_row_bytes, rows, rounded.data(), activation_row_bytes,
                   columns, n, out.data(), out_stride);
  kernels.dot_rows_f32(weights.data(), weight_row_bytes, rows, activations.data(),
                       activation_stride, columns, n, out_f32.data(), out_stride);
  for (int64_t c = 0; c < columns; ++c) {
    const auto* blocks =
        reinterpret_cast<const ActivationBlock*>(rounded.data() + c * activation_row_bytes);
    const float* a = activations.data() + c * activation_stride;
    for (int64_t r = 0; r < rows; ++r) {
      double exact = 0, exact_rounded = 0, magnitude = 0, magnitude_rounded = 0, rounding_bound = 0;
      for (int64_t b = 0; b < n / kBlock; ++b) {
        double block_weight_sum = 0;
        for (int64_t i = b * kBlock; i < (b + 1) * kBlock; ++i) {
          const Element& w = decoded[r][i];
          const double a_rounded = double(blocks[b].scale) * blocks[b].q[i % kBlock];
          exact += w.value() * a[i];
          exact_rounded += w.value() * a_rounded;
          magnitude += w.magnitude() * std::fabs(a[i]);
          magnitude_rounded += w.magnitude() * std::fabs(a_rounded);
          block_weight_sum += std::fabs(w.value());
        }
        rounding_bound += 0.5 * blocks[b].scale * block_weight_sum;
      }
      const float got = out[c * out_stride + r], got_f32 = out_f32[c * out_stride + r];
      EXPECT_NEAR(got_f32, exact, 2e-6 * magnitude) << what << " f32 row " << r << " column " << c;
      EXPECT_NEAR(got, exact_rounded, 2e-6 * magnitude_rounded)
          << what << " int8 row " << r << " column " << c;
      EXPECT_NEAR(got, exact, rounding_bound * 1.0001 + 2e-6 * magnitude)
          << what << " int8 vs f32 activations, row " << r << " column " << c;
    }
    for (int64_t r = rows; r < out_stride; ++r) {
      EXPECT_EQ(out[c * out_stride + r], kUntouched) << what;
      EXPECT_EQ(out_f32[c * out_stride + r], kUntouched) << what;
    }
  }
}

TEST(KQuantDot, MatchesDoublePrecisionOnEveryIsaShapeAndColumnCount) {
  for (Isa isa : supported_isas()) {
    for (BlockType type : kTypes) {
      for (int64_t n : {kBlock, 2 * kBlock, 19 * kBlock}) {
        for (int64_t columns = 1; columns <= cpu::kQuantMaxColumns; ++columns) {
          // From 32 rows of one column, decode on Intel (and on Zen 4 with AVX2) reads 4 rows a
          // pass, a quarter of the rows apart (streams_rows).
          for (int64_t rows : {1, 2, 3, 5, 8, 11, 32, 35})
            check_dots({type, n, rows, columns}, isa);
        }
      }
    }
  }
}

TEST(KQuantDot, QuantizedWeightsAgreeAcrossIsas) {
  // Weights from the reference quantizer (realistic scales) and one activation row with a zero
  // block: every ISA gives the portable result up to f32 rounding.
  const int64_t n = 19 * kBlock, rows = 7;
  for (BlockType type : kTypes) {
    const size_t row_bytes = block_row_bytes(type, n);
    std::vector<uint8_t> weights(rows * row_bytes);
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<float> values = golden_row(n, 20 + static_cast<uint32_t>(r));
      cpu::block_kernels(type).quantize_row(values.data(), weights.data() + r * row_bytes, n);
    }
    const std::vector<float> activations = random_activations(n, 5);
    const cpu::BlockKernels& portable = cpu::block_kernels(type, Isa::portable);
    std::vector<uint8_t> rounded(portable.activation_row_bytes(n));
    portable.quantize_activations(activations.data(), rounded.data(), n);
    std::vector<float> expected(rows);
    portable.dot_rows(weights.data(), row_bytes, rows, rounded.data(), rounded.size(), 1, n,
                      expected.data(), rows);
    double scale = 0;
    for (float value : expected) scale = std::max(scale, std::fabs(double(value)));
    for (Isa isa : supported_isas()) {
      std::vector<float> out(rows);
      cpu::block_kernels(type, isa).dot_rows(weights.data(), row_bytes, rows, rounded.data(),
                                             rounded.size(), 1, n, out.data(), rows);
      for (int64_t r = 0; r < rows; ++r) {
        EXPECT_NEAR(out[r], expected[r], 1e-5 * scale) << label(type, isa) << " row " << r;
      }
    }
  }
}

}  // namespace
}  // namespace fornace
