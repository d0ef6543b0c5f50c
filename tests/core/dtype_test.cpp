// bf16 and f16 conversions against hand-derived bit patterns and an independent
// nearest-representable search in double precision.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/copy.h"
#include "ops/creation.h"

namespace fornace {
namespace {

uint32_t bits_of(float value) { return std::bit_cast<uint32_t>(value); }

// Independent decoders: the value of a bit pattern computed from its fields with ldexp.
double decode_f16(uint16_t bits) {
  int exponent = (bits >> 10) & 0x1f;
  int mantissa = bits & 0x3ff;
  double sign = (bits & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0x1f) return mantissa ? NAN : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

double decode_bf16(uint16_t bits) {
  int exponent = (bits >> 7) & 0xff;
  int mantissa = bits & 0x7f;
  double sign = (bits & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0xff) return mantissa ? NAN : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(mantissa, -133);
  return sign * std::ldexp(128 + mantissa, exponent - 134);
}

// The round-to-nearest-even encoding of a finite `value`, by searching the positive patterns
// (ordered like their values) for the two neighbours. The infinity pattern stands for the value
// one step past the largest finite one (2^16 for f16, 2^128 for bf16), which is how IEEE
// rounding decides overflow.
uint16_t nearest_even(double value, uint16_t infinity_bits, double (*decode)(uint16_t),
                      double overflow_value) {
  uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  double magnitude = std::abs(value);
  auto value_of = [&](uint16_t bits) { return bits == infinity_bits ? overflow_value : decode(bits); };
  if (magnitude >= overflow_value) return sign | infinity_bits;
  uint16_t low = 0, high = infinity_bits;  // value_of(low) <= magnitude < value_of(high)
  while (high - low > 1) {
    uint16_t middle = static_cast<uint16_t>((low + high) / 2);
    (value_of(middle) <= magnitude ? low : high) = middle;
  }
  double below = magnitude - value_of(low);
  double above = value_of(high) - magnitude;
  uint16_t chosen = below < above ? low : above < below ? high : (low % 2 == 0 ? low : high);
  return sign | chosen;
}

uint16_t expected_f16(float value) { return nearest_even(value, 0x7c00, decode_f16, 65536.0); }
uint16_t expected_bf16(float value) {
  return nearest_even(value, 0x7f80, decode_bf16, std::ldexp(1.0, 128));
}

// Finite test values: ties, neighbours of ties, subnormals of both formats, edges of range.
std::vector<float> interesting_values() {
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.0f, 0.1f, 3.14159265f, 65504.0f, 65519.0f,
                               65520.0f, 65536.0f, 1e-8f, 5.96e-8f, 6.1e-5f, 1e30f, -1e30f,
                               std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::min(),
                               std::numeric_limits<float>::denorm_min()};
  for (int exponent = -30; exponent <= 20; ++exponent) {
    for (double step : {1.0, 1.5, 1.25, 1.0 + 1.0 / 1024, 1.0 + 1.0 / 2048, 1.0 + 3.0 / 2048,
                        1.0 + 1.0 / 256, 1.0 + 3.0 / 256, 1.0 + 1.0 / 128 + 1.0 / 65536}) {
      values.push_back(static_cast<float>(std::ldexp(step, exponent)));
      values.push_back(-static_cast<float>(std::ldexp(step, exponent)));
    }
  }
  for (int exponent = -140; exponent <= -120; ++exponent) {
    values.push_back(static_cast<float>(std::ldexp(1.5, exponent)));  // f32/bf16 subnormals
  }
  std::mt19937 generator(7);
  for (int i = 0; i < 4000; ++i) {
    uint32_t bits = generator();
    float value = std::bit_cast<float>(bits);
    if (std::isfinite(value)) values.push_back(value);
  }
  return values;
}

TEST(Bf16, HandDerivedPatterns) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xc000);
  // 1 + 2^-8 lies halfway between 0x3f80 and 0x3f81: ties go to the even 0x3f80.
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  // 1 + 3 * 2^-8 lies halfway between 0x3f81 and 0x3f82: the even one is 0x3f82.
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  // Just above the tie rounds up.
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  // The largest float rounds past the largest bf16 (0x7f7f) to infinity.
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  // An f32 subnormal keeps its top bits: 2^-130 is 8 units of bf16's 2^-133.
  EXPECT_EQ(f32_to_bf16(0x1p-130f), 0x0008);
  uint16_t nan = f32_to_bf16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
  // A signalling NaN whose payload sits in the dropped bits must not become infinity.
  uint16_t signalling = f32_to_bf16(std::bit_cast<float>(0x7f800001u));
  EXPECT_EQ(signalling & 0x7f80, 0x7f80);
  EXPECT_NE(signalling & 0x007f, 0);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_TRUE(std::isnan(bf16_to_f32(0x7fc0)));
}

TEST(Bf16, MatchesTheNearestEvenSearchForManyValues) {
  for (float value : interesting_values()) {
    ASSERT_EQ(f32_to_bf16(value), expected_bf16(value))
        << value << " (bits 0x" << std::hex << bits_of(value) << ")";
    // Decoding is exact: the pattern's value as a double.
    uint16_t bits = f32_to_bf16(value);
    if (!std::isinf(decode_bf16(bits))) ASSERT_EQ(double(bf16_to_f32(bits)), decode_bf16(bits));
  }
}

TEST(F16, HandDerivedPatterns) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3c00);      // tie, even stays
  EXPECT_EQ(f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie, rounds up to even
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);             // largest finite
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);             // below the halfway point
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);             // halfway to 2^16: ties to even = Inf
  EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-1e6f), 0xfc00);
  EXPECT_EQ(f32_to_f16(0x1p-14f), 0x0400);            // smallest normal
  EXPECT_EQ(f32_to_f16(0x1p-24f), 0x0001);            // smallest subnormal
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);            // half of it: tie to even zero
  EXPECT_EQ(f32_to_f16(0x1.8p-25f), 0x0001);          // above the tie
  EXPECT_EQ(f32_to_f16(3 * 0x1p-25f), 0x0002);        // tie between 1 and 2: even 2
  EXPECT_EQ(f32_to_f16(0x1.ff8p-15f), 0x03ff);        // 1023 units of 2^-24: largest subnormal
  EXPECT_EQ(f32_to_f16(0x1.ffcp-15f), 0x0400);        // 1023.5 units: tie, up into the normals
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::infinity()), 0x7c00);
  uint16_t nan = f32_to_f16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_EQ(f16_to_f32(0x0001), 0x1p-24f);
  EXPECT_EQ(f16_to_f32(0x8001), -0x1p-24f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
}

TEST(F16, MatchesTheNearestEvenSearchForManyValues) {
  for (float value : interesting_values()) {
    ASSERT_EQ(f32_to_f16(value), expected_f16(value))
        << value << " (bits 0x" << std::hex << bits_of(value) << ")";
  }
}

TEST(F16, EveryPatternDecodesExactlyAndRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    double expected = decode_f16(static_cast<uint16_t>(bits));
    float decoded = f16_to_f32(static_cast<uint16_t>(bits));
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(decoded)) << bits;
      continue;
    }
    ASSERT_EQ(double(decoded), expected) << bits;
    ASSERT_EQ(f32_to_f16(decoded), bits) << bits;
  }
}

TEST(Conversions, ToDtypeRoundsLikeTheScalarConversionsAndKeepsSpecials) {
  // The strided copy kernel path (to_dtype) against the independent expectations.
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> values = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 65520.0f, 0x1p-25f,
                               3 * 0x1p-25f,   inf,                -inf,     1e-40f};
  Tensor source = from_vector(values, {static_cast<int64_t>(values.size())});
  Tensor as_bf16 = to_dtype(source, DType::bf16);
  Tensor as_f16 = to_dtype(source, DType::f16);
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(as_bf16.data<uint16_t>()[i], expected_bf16(values[i])) << values[i];
    EXPECT_EQ(as_f16.data<uint16_t>()[i], expected_f16(values[i])) << values[i];
  }
  Tensor nan = to_dtype(from_vector({std::numeric_limits<float>::quiet_NaN()}, {1}), DType::f16);
  EXPECT_TRUE(std::isnan(to_f32_vector(nan)[0]));
  // Back to f32 is exact.
  std::vector<float> back = to_f32_vector(to_dtype(as_f16, DType::f32));
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(double(back[i]), decode_f16(expected_f16(values[i])));
  }
}

TEST(DType, NamesParseAndRejectUnknownOnes) {
  EXPECT_EQ(parse_dtype("BF16"), DType::bf16);
  EXPECT_STREQ(dtype_name(DType::u32), "u32");
  EXPECT_EQ(dtype_size(DType::f16), 2u);
  try {
    parse_dtype("f8");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("unknown dtype 'f8'"), std::string::npos);
  }
}

}  // namespace
}  // namespace fornace
